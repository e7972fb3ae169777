//! `netaware`: the command line of netaware, one file per command in
//! `netaware::commands`. See docs/cli.md for every command and the JSON
//! contracts of `-o json`.

use netaware::Cli;
use netaware::commands::Command;

/// The services' allocator (see the workspace manifest for why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    // Every process of the binary stays in small pages (the allocator
    // would take huge ones), from before the command line is parsed:
    // parsing it is the first large allocation.
    netaware_agent::huge_pages::turn_off();
    let cli = Cli::from_invocation();
    let command = cli.command;
    // The services log what they do; the tools only warn.
    let level = if command.is_service() { "info" } else { "warn" };
    netaware_runtime::init_logging(level, cli.logs.log_format);
    // Everything but the agent on a thread per core.
    let runtime = match command {
        Command::Agent(_) => netaware_agent::runtime()?,
        _ => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?,
    };
    runtime.block_on(command.run())
}
