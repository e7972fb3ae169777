//! `netaware`: the command line of netaware, one file per command in
//! `netaware::commands`. See docs/cli.md for every command and the JSON
//! contracts of `-o json`.

use netaware::Cli;
use netaware::commands::Command;

/// The services' allocator (see the workspace manifest for why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    // A process on every node stays in small pages (the allocator would
    // take huge ones; the collector keeps them), from before the command
    // line is parsed: parsing it is the first large allocation.
    let first = std::env::args_os().nth(1);
    if first
        .as_deref()
        .is_some_and(|c| c == "agent" || c == "reflect")
    {
        netaware_agent::huge_pages::turn_off();
    }
    let cli = Cli::from_invocation();
    let command = cli.command;
    // The services log what they do; the tools only warn.
    let level = if command.is_service() { "info" } else { "warn" };
    netaware_runtime::init_logging(level, cli.log_format);
    // The agent is light (a probe loop and a session): one thread, as its
    // own binary had; everything else on a thread per core.
    let runtime = match command {
        Command::Agent(_) => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    }
    .enable_all()
    .build()?;
    runtime.block_on(command.run())
}
