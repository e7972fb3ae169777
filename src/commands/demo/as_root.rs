//! Getting root for the lab demo without `sudo cargo`: where Rust came
//! from rustup, cargo lives in `~/.cargo/bin`, which sudo's secure path
//! leaves out, so `sudo cargo run` fails before netaware starts. The demo
//! is started as the user instead (`cargo run --release -- demo`), and asks
//! sudo to run *this binary*, by its absolute path, with the same
//! arguments. Where it cannot ask (no sudo, no terminal for a password),
//! it says in one line why and what command runs the lab, and goes on
//! with the loopback demo.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the demo does, not being root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WithoutRoot {
    /// Ask sudo (it may prompt for a password) and run the lab as root.
    AskSudo(PathBuf),
    /// Run on loopback, after saying why and what would run the lab.
    Loopback {
        /// Why not the lab, for people.
        reason: String,
        /// The command that runs the lab demo.
        command: String,
    },
}

/// The command that runs the lab demo: this binary, by its absolute path,
/// as root, with the same arguments.
pub fn lab_command(exe: &Path, args: &[String]) -> String {
    let mut words = vec!["sudo".to_owned(), exe.display().to_string()];
    words.extend(args.iter().cloned());
    words.join(" ")
}

/// Where sudo is on `path` (a PATH value), if anywhere.
pub fn find_sudo(path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .map(|dir| dir.join("sudo"))
        .find(|candidate| candidate.is_file())
}

/// What to do without root, from what this process has: sudo on its PATH,
/// and a terminal to ask a password on.
pub fn decide(sudo: Option<PathBuf>, terminal: bool, exe: &Path, args: &[String]) -> WithoutRoot {
    let command = lab_command(exe, args);
    match (sudo, terminal) {
        (Some(sudo), true) => WithoutRoot::AskSudo(sudo),
        (None, _) => WithoutRoot::Loopback {
            reason: "the lab needs root (network namespaces, TUN devices) and there is no sudo here"
                .into(),
            command,
        },
        (Some(_), false) => WithoutRoot::Loopback {
            reason: "the lab needs root (network namespaces, TUN devices), and without a terminal sudo cannot ask for a password".into(),
            command,
        },
    }
}

/// What this process would do without root.
pub fn decide_here() -> anyhow::Result<WithoutRoot> {
    let exe = std::env::current_exe()?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    Ok(decide(
        find_sudo(std::env::var_os("PATH").as_deref()),
        std::io::stdin().is_terminal(),
        &exe,
        &args,
    ))
}

/// Runs this binary with the same arguments under `sudo`, and waits for
/// it (Ctrl-C reaches both; the one under sudo removes the lab). Whether
/// sudo ran it to a successful end.
pub fn run_under_sudo(sudo: &Path) -> anyhow::Result<bool> {
    let exe = std::env::current_exe()?;
    let status = Command::new(sudo)
        .arg("--")
        .arg(&exe)
        .args(std::env::args_os().skip(1))
        .status()?;
    Ok(status.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sudo_is_asked_only_where_it_can_ask() {
        let exe = Path::new("/home/me/netaware/target/release/netaware");
        let args = vec!["demo".to_owned(), "--duration".to_owned(), "30s".to_owned()];
        let sudo = PathBuf::from("/usr/bin/sudo");
        assert_eq!(
            decide(Some(sudo.clone()), true, exe, &args),
            WithoutRoot::AskSudo(sudo.clone())
        );
        for (sudo, terminal) in [(None, true), (Some(sudo), false)] {
            let WithoutRoot::Loopback { command, .. } = decide(sudo, terminal, exe, &args) else {
                panic!("asked sudo without a way to");
            };
            // The binary by its absolute path: no cargo under sudo.
            assert_eq!(
                command,
                "sudo /home/me/netaware/target/release/netaware demo --duration 30s"
            );
        }
    }

    #[test]
    fn sudo_is_found_on_the_path_given() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("sudo"), "").unwrap();
        let path = std::env::join_paths([Path::new("/nonexistent"), dir.path()]).unwrap();
        assert_eq!(find_sudo(Some(&path)), Some(dir.path().join("sudo")));
        assert_eq!(find_sudo(Some(std::ffi::OsStr::new("/nonexistent"))), None);
        assert_eq!(find_sudo(None), None);
    }
}
