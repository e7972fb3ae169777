//! The process's limit on open files, raised to what it is allowed.
//!
//! Every connection is a file: a collector serving 20,000 agents needs more
//! than 20,000 descriptors, and shells and container runtimes often start
//! a process with a soft limit of 1,024 (or some other figure well under
//! the hard one, which the process may raise itself without privilege).
//! Go's runtime raises it at start; Rust's does not, so the servers here
//! call [`raise_to_hard_limit`] and say when what remains is too few for
//! the connections they are configured to accept.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// The limit on open files after [`raise_to_hard_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFiles {
    /// What the process may open now; `None` for no limit.
    pub soft: Option<u64>,
    /// What it could raise that to; `None` for no limit.
    pub hard: Option<u64>,
}

impl OpenFiles {
    /// Whether `needed` descriptors fit under the limit.
    pub fn allows(&self, needed: u64) -> bool {
        self.soft.is_none_or(|soft| soft >= needed)
    }
}

/// Raises the soft limit on open files to the hard one (a process may
/// always do that), and returns the limit it ends with; when raising
/// fails, the limit it had, and the error.
pub fn raise_to_hard_limit() -> (OpenFiles, Option<std::io::Error>) {
    let Rlimit { current, maximum } = getrlimit(Resource::Nofile);
    let before = OpenFiles {
        soft: current,
        hard: maximum,
    };
    if current == maximum {
        return (before, None);
    }
    let raised = Rlimit {
        current: maximum,
        maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => (
            OpenFiles {
                soft: maximum,
                hard: maximum,
            },
            None,
        ),
        Err(err) => (before, Some(err.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_ends_at_the_hard_one() {
        let (limit, error) = raise_to_hard_limit();
        assert!(error.is_none(), "{error:?}");
        assert_eq!(limit.soft, limit.hard);
        let Rlimit { current, .. } = getrlimit(Resource::Nofile);
        assert_eq!(current, limit.soft, "the process's own limit was raised");
    }

    #[test]
    fn a_limit_allows_what_fits_under_it() {
        let limit = OpenFiles {
            soft: Some(1024),
            hard: Some(4096),
        };
        assert!(limit.allows(1024));
        assert!(!limit.allows(1025));
        let unlimited = OpenFiles {
            soft: None,
            hard: None,
        };
        assert!(unlimited.allows(u64::MAX));
    }
}
