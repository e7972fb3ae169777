//! Link settings for the binaries.
//!
//! Relative relocations packed (DT_RELR): a position-independent binary's
//! loader reads every relocation at start, and the agent's 30,000 in the
//! classic format were 700 KB of its resident memory for good; packed,
//! they are 9 KB. A binary so linked needs glibc 2.36 or newer to run
//! (the image's runtime, distroless cc-debian12, has 2.36), so they are
//! packed only where the build machine's glibc is that new and builds for
//! itself: elsewhere the binaries are linked as before.

use std::process::Command;

/// The first glibc whose loader reads packed relative relocations.
const RELR_GLIBC: (u32, u32) = (2, 36);

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let native = std::env::var("TARGET").ok() == std::env::var("HOST").ok();
    let gnu = std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if native && gnu && glibc_version().is_some_and(|version| version >= RELR_GLIBC) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// The build machine's glibc (`getconf GNU_LIBC_VERSION`: "glibc 2.36").
fn glibc_version() -> Option<(u32, u32)> {
    let output = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let (major, minor) = text.trim().strip_prefix("glibc ")?.split_once('.')?;
    let minor = minor.split('.').next()?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}
