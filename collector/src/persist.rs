//! `--state-dir`: the collector's state on disk, so that scores and the
//! exactly-once marks survive a restart.
//!
//! One file, `state.json` ([`crate::saved::SavedState`]), written every
//! `--state-interval` and once more on shutdown (the loop is
//! [`crate::tasks::persist`]), each time whole to a
//! temporary file that is synced and then renamed over the old one, so that
//! a crash leaves the old file or the new one, never half of one. Once a
//! save is on disk, acks say how far it reaches
//! ([`crate::saved_marks`]): agents keep every later window, so that a
//! collector killed between two saves loses nothing. A file
//! that cannot be read, parsed or checked is moved aside
//! (`state.json.damaged`) and the collector starts empty, saying why.
//!
//! One collector per directory: it holds a lock on `DIR/lock` while it
//! runs ([`prepare`]), so that a second one (two replicas on one volume, a
//! new pod started before the old one let go) refuses to start instead of
//! overwriting the first one's saves with its own.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::saved::SavedState;

/// The file in the state directory.
pub const FILE_NAME: &str = "state.json";
/// The file whose lock says a collector uses the directory.
pub const LOCK_NAME: &str = "lock";
/// The largest state file read back (a 2,000-node cluster's is tens of MB).
pub const MAX_STATE_BYTES: u64 = 1 << 30;

/// Why a state directory could not be used or read.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// The directory or file could not be created, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        #[source]
        /// The cause.
        source: std::io::Error,
    },
    /// The file is too big to be a state file.
    #[error("{path}: {size} bytes, more than the {MAX_STATE_BYTES} a state file may have")]
    TooBig {
        /// The file.
        path: PathBuf,
        /// Its size in bytes.
        size: u64,
    },
    /// Another collector holds the directory's lock.
    #[error(
        "{path} is locked: another collector uses this state directory, and two would overwrite each other's saves"
    )]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// The file is not a state file.
    #[error("{path}: not a netaware state file: {message}")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> PersistError + '_ {
    move |source| PersistError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The lock on a state directory, held while it lives (the kernel lets go
/// of it when the process ends, however it ends).
#[derive(Debug)]
pub struct DirLock {
    _file: std::fs::File,
}

/// Makes sure `dir` exists and is writable, and takes its lock (at start,
/// so that a bad `--state-dir`, or one another collector uses, stops the
/// collector at once rather than at its first save).
pub fn prepare(dir: &Path) -> Result<DirLock, PersistError> {
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    let path = dir.join(LOCK_NAME);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io_error(&path))?;
    match file.try_lock() {
        Ok(()) => Ok(DirLock { _file: file }),
        Err(std::fs::TryLockError::WouldBlock) => Err(PersistError::Locked { path }),
        Err(std::fs::TryLockError::Error(source)) => Err(PersistError::Io { path, source }),
    }
}

/// Reads the saved state in `dir`: `None` when there is none.
pub fn load(dir: &Path) -> Result<Option<SavedState>, PersistError> {
    let path = dir.join(FILE_NAME);
    let size = match std::fs::metadata(&path) {
        Ok(metadata) => metadata.len(),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(PersistError::Io { path, source }),
    };
    if size > MAX_STATE_BYTES {
        return Err(PersistError::TooBig { path, size });
    }
    let bytes = std::fs::read(&path).map_err(io_error(&path))?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|err| PersistError::Damaged {
            path,
            message: err.to_string(),
        })
}

/// Moves a state file that could not be used out of the way, keeping it
/// for a look; returns where it went.
pub fn set_aside(dir: &Path) -> Result<PathBuf, PersistError> {
    let from = dir.join(FILE_NAME);
    let to = dir.join(format!("{FILE_NAME}.damaged"));
    std::fs::rename(&from, &to).map_err(io_error(&from))?;
    Ok(to)
}

/// Writes `state` to `dir`, atomically.
pub fn write(dir: &Path, state: &SavedState) -> Result<(), PersistError> {
    let path = dir.join(FILE_NAME);
    let temporary = dir.join(format!("{FILE_NAME}.tmp"));
    let bytes = serde_json::to_vec(state).map_err(|err| PersistError::Damaged {
        path: path.clone(),
        message: err.to_string(),
    })?;
    let mut file = std::fs::File::create(&temporary).map_err(io_error(&temporary))?;
    file.write_all(&bytes).map_err(io_error(&temporary))?;
    file.sync_all().map_err(io_error(&temporary))?;
    std::fs::rename(&temporary, &path).map_err(io_error(&path))?;
    // The rename itself is durable once the directory is synced.
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_error(dir))
}
