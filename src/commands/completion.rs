//! `netaware completion SHELL`: the shell completion script of every
//! command and flag, for bash, zsh, fish, elvish or PowerShell, as kubectl
//! users know it (`source <(netaware completion bash)`).

use clap::CommandFactory;

/// The flags of `completion`.
#[derive(Debug, clap::Args)]
pub struct CompletionArgs {
    /// The shell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Prints the script.
pub fn print(args: &CompletionArgs) -> anyhow::Result<()> {
    let mut command = crate::Cli::command();
    let name = command.get_name().to_owned();
    clap_complete::generate(args.shell, &mut command, name, &mut std::io::stdout());
    Ok(())
}
