//! `--state-dir`: the collector's state on disk, so that scores and the
//! exactly-once marks survive a restart.
//!
//! The files hold the records of [`crate::saved`], by generation:
//! `checkpoint-G.bin` (everything, as of when it was begun) and
//! `journal-G.bin` (what changed since, appended by every save). A save
//! appends only what changed and syncs it ([`Files::append`]); now and then
//! (when the journal has grown as large as its checkpoint) a new
//! checkpoint is written beside the old one, synced, and renamed into
//! place ([`Files::checkpoint`]), and the generation before the previous
//! one is removed. So the directory holds two generations: the newest, and
//! the previous good one.
//!
//! Reading back ([`load`]) takes the newest checkpoint that is whole (its
//! every record checksummed, its end record there), then every journal
//! from its generation on, each up to its first damaged record (the tail a
//! crash left half-written). A damaged checkpoint is renamed
//! `*.damaged`, kept for a look, and the previous one is used with its
//! journal and the newer one: nothing that a save had on disk is lost.
//!
//! One collector per directory: it holds a lock on `DIR/lock` while it
//! runs ([`prepare`]), so that a second one (two replicas on one volume, a
//! new pod started before the old one let go) refuses to start instead of
//! overwriting the first one's saves with its own.

use std::fs::File;
use std::io::{BufReader, BufWriter, Seek, Write};
use std::path::{Path, PathBuf};

use crate::saved::{Apply, CheckpointEnd, Damage, Encoded, Record, RecordReader, encode, header};

/// The file whose lock says a collector uses the directory.
pub const LOCK_NAME: &str = "lock";
/// A state file of the first format (one JSON copy), no longer read.
pub const OLD_FILE_NAME: &str = "state.json";
/// The smallest journal that makes a new checkpoint worth writing.
pub const MIN_JOURNAL_BYTES: u64 = 16 << 20;

/// Why a state directory could not be used, read or written.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// The directory or a file could not be created, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        #[source]
        /// The cause.
        source: std::io::Error,
    },
    /// Another collector holds the directory's lock.
    #[error(
        "{path} is locked: another collector uses this state directory, and two would overwrite each other's saves"
    )]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// An append failed earlier: the journal's end is unknown, so nothing
    /// more is appended to it before a new checkpoint.
    #[error("the journal's last append failed: a new checkpoint must come first")]
    CheckpointFirst,
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
    _file: File,
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

/// The two kinds of file of a generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Checkpoint,
    Journal,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Kind::Checkpoint => "checkpoint-",
            Kind::Journal => "journal-",
        }
    }
}

/// The path of generation `generation`'s file of `kind`.
fn path_of(dir: &Path, kind: Kind, generation: u64) -> PathBuf {
    dir.join(format!("{}{generation:010}.bin", kind.prefix()))
}

/// The generations of `kind` in `dir`, oldest first.
fn generations(dir: &Path, kind: Kind) -> Result<Vec<u64>, PersistError> {
    let mut found: Vec<u64> = std::fs::read_dir(dir)
        .map_err(io_error(dir))?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name();
            let name = name.to_str()?;
            name.strip_prefix(kind.prefix())?
                .strip_suffix(".bin")?
                .parse()
                .ok()
        })
        .collect();
    found.sort_unstable();
    Ok(found)
}

/// Generation `generation`'s checkpoint file in `dir`.
pub fn checkpoint_file(dir: &Path, generation: u64) -> PathBuf {
    path_of(dir, Kind::Checkpoint, generation)
}

/// The generations of the checkpoints in `dir`, oldest first.
pub fn checkpoints(dir: &Path) -> Result<Vec<u64>, PersistError> {
    generations(dir, Kind::Checkpoint)
}

/// What [`load`] found.
#[derive(Debug)]
pub struct Loaded<T> {
    /// The state rebuilt, if a whole checkpoint was there.
    pub restored: Option<T>,
    /// The generation of the checkpoint it was rebuilt from.
    pub generation: u64,
    /// The newest generation of any file: appends go on in its journal.
    pub newest: u64,
    /// Where the good part of the newest journal ends (0: no such file),
    /// and the size of the checkpoint read.
    chain_end: Option<(u64, u64)>,
    /// What was wrong, each said for the log.
    pub problems: Vec<String>,
}

/// Reads the saved state in `dir` into what `fresh` makes: the newest
/// whole checkpoint and every journal from its generation on.
pub fn load<T: Apply>(dir: &Path, fresh: impl Fn() -> T) -> Result<Loaded<T>, PersistError> {
    let checkpoints = generations(dir, Kind::Checkpoint)?;
    let journals = generations(dir, Kind::Journal)?;
    let newest = checkpoints
        .iter()
        .chain(&journals)
        .copied()
        .max()
        .unwrap_or(0);
    let mut problems = Vec::new();
    let old = dir.join(OLD_FILE_NAME);
    if old.exists() {
        let aside = dir.join(format!("{OLD_FILE_NAME}.damaged"));
        std::fs::rename(&old, &aside).map_err(io_error(&old))?;
        problems.push(format!(
            "{} is of an older format, not read (kept as {})",
            old.display(),
            aside.display()
        ));
    }
    for &generation in checkpoints.iter().rev() {
        let mut restored = fresh();
        let path = path_of(dir, Kind::Checkpoint, generation);
        if let Err(damage) = read_checkpoint(&path, &mut restored) {
            let aside = path.with_extension("bin.damaged");
            std::fs::rename(&path, &aside).map_err(io_error(&path))?;
            problems.push(format!(
                "{}: {damage} (kept as {}); trying the previous one",
                path.display(),
                aside.display()
            ));
            continue;
        }
        let mut journal_end = 0;
        for &journal in journals.iter().filter(|&&j| j >= generation) {
            let path = path_of(dir, Kind::Journal, journal);
            let (end, problem) = read_journal(&path, &mut restored);
            problems.extend(problem);
            if journal == newest {
                journal_end = end;
            }
        }
        let checkpoint_bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        return Ok(Loaded {
            restored: Some(restored),
            generation,
            newest,
            chain_end: Some((journal_end, checkpoint_bytes)),
            problems,
        });
    }
    if !journals.is_empty() {
        problems.push("no whole checkpoint: the journals alone are not restored".into());
    }
    Ok(Loaded {
        restored: None,
        generation: 0,
        newest,
        chain_end: None,
        problems,
    })
}

/// Applies a checkpoint's records, unless it is not whole: then says why
/// (what was applied of it is then thrown away with `into`).
fn read_checkpoint(path: &Path, into: &mut impl Apply) -> Result<(), Damage> {
    let file = File::open(path).map_err(|e| Damage::Io(e.to_string()))?;
    let mut reader = RecordReader::new(BufReader::new(file))?;
    for (before_end, record) in (0u64..).zip(reader.by_ref()) {
        match record? {
            Record::End(end) if end.records == before_end => return Ok(()),
            Record::End(end) => {
                return Err(Damage::Header(format!(
                    "its end says {} records, {before_end} came before it",
                    end.records,
                )));
            }
            record => into.apply(&record),
        }
    }
    Err(Damage::CutShort {
        record: reader.records(),
        offset: reader.offset(),
    })
}

/// Applies a journal's good records: where the good part ends, and a
/// problem to log, if any.
fn read_journal(path: &Path, into: &mut impl Apply) -> (u64, Option<String>) {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(err) => return (0, Some(format!("{}: {err}", path.display()))),
    };
    let mut reader = match RecordReader::new(BufReader::new(file)) {
        Ok(reader) => reader,
        // Created but its header never synced: nothing was in it.
        Err(Damage::Header(_)) if std::fs::metadata(path).is_ok_and(|m| m.len() < 12) => {
            return (0, None);
        }
        Err(damage) => return (0, Some(format!("{}: {damage}", path.display()))),
    };
    let mut problem = None;
    for (restored, record) in reader.by_ref().enumerate() {
        match record {
            Ok(record) => into.apply(&record),
            Err(damage) => {
                problem = Some(format!(
                    "{}: {damage}; the {restored} records before it restored",
                    path.display(),
                ));
            }
        }
    }
    (reader.offset(), problem)
}

/// The state directory's files as the saver writes them.
#[derive(Debug)]
pub struct Files {
    dir: PathBuf,
    /// The generation that appends go to.
    generation: u64,
    /// The previous whole checkpoint's generation, kept on the next one.
    previous: Option<u64>,
    journal: Option<File>,
    journal_bytes: u64,
    checkpoint_bytes: u64,
    /// False after a failed append, until a checkpoint.
    journal_whole: bool,
}

impl Files {
    /// The files of `dir` after [`load`]: when a state was restored,
    /// appends go on at the good end of the newest journal (so that the
    /// previous checkpoint and its journals still hold everything should
    /// the next checkpoint be damaged); otherwise they wait for a first
    /// checkpoint.
    pub fn open<T>(dir: &Path, loaded: &Loaded<T>) -> Result<Self, PersistError> {
        let mut files = Self {
            dir: dir.to_owned(),
            generation: loaded.newest,
            previous: loaded.restored.as_ref().map(|_| loaded.generation),
            journal: None,
            journal_bytes: 0,
            checkpoint_bytes: 0,
            journal_whole: false,
        };
        let Some((journal_end, checkpoint_bytes)) = loaded.chain_end else {
            return Ok(files);
        };
        let path = path_of(dir, Kind::Journal, loaded.newest);
        let mut journal = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_error(&path))?;
        let header = header();
        let end = if journal_end < header.len() as u64 {
            journal.set_len(0).map_err(io_error(&path))?;
            journal.write_all(&header).map_err(io_error(&path))?;
            header.len() as u64
        } else {
            // A tail a crash left half-written goes: appends follow the
            // last good record.
            journal.set_len(journal_end).map_err(io_error(&path))?;
            journal_end
        };
        journal
            .seek(std::io::SeekFrom::Start(end))
            .and_then(|_| journal.sync_all())
            .map_err(io_error(&path))?;
        files.sync_dir()?;
        files.journal = Some(journal);
        files.journal_bytes = end;
        files.checkpoint_bytes = checkpoint_bytes;
        files.journal_whole = true;
        Ok(files)
    }

    /// No saved state: appends wait for a first checkpoint, generation
    /// `newest + 1`.
    #[cfg(test)]
    fn new(dir: &Path, newest: u64) -> Self {
        Self {
            dir: dir.to_owned(),
            generation: newest,
            previous: None,
            journal: None,
            journal_bytes: 0,
            checkpoint_bytes: 0,
            journal_whole: false,
        }
    }

    /// Whether the journal has grown enough for a new checkpoint to pay,
    /// or appends wait for one.
    pub fn wants_checkpoint(&self) -> bool {
        !self.journal_whole || self.journal_bytes >= self.checkpoint_bytes.max(MIN_JOURNAL_BYTES)
    }

    /// Bytes in the current journal.
    pub fn journal_bytes(&self) -> u64 {
        self.journal_bytes
    }

    /// Appends `records` to the journal and syncs them; the bytes written.
    pub fn append(&mut self, records: &Encoded) -> Result<u64, PersistError> {
        if !self.journal_whole {
            return Err(PersistError::CheckpointFirst);
        }
        if records.is_empty() {
            return Ok(0);
        }
        let path = path_of(&self.dir, Kind::Journal, self.generation);
        let file = self.journal.as_mut().expect("a whole journal is open");
        let written = records
            .chunks()
            .try_for_each(|chunk| file.write_all(chunk))
            .and_then(|()| file.sync_data())
            .map_err(io_error(&path));
        match written {
            Ok(()) => {
                let bytes = records.len() as u64;
                self.journal_bytes += bytes;
                Ok(bytes)
            }
            Err(err) => {
                // What part of it reached the disk is unknown: cut it off
                // if the disk lets us, and append no more either way.
                let _ = file.set_len(self.journal_bytes);
                self.journal_whole = false;
                Err(err)
            }
        }
    }

    /// Begins the next generation's checkpoint.
    pub fn checkpoint(&mut self) -> Result<Checkpoint<'_>, PersistError> {
        let generation = self.generation + 1;
        let path = path_of(&self.dir, Kind::Checkpoint, generation);
        let temporary = path.with_extension("bin.tmp");
        let file = File::create(&temporary).map_err(io_error(&temporary))?;
        let mut checkpoint = Checkpoint {
            files: self,
            out: Some(BufWriter::with_capacity(1 << 20, file)),
            buffer: Vec::new(),
            generation,
            temporary,
            bytes: 0,
            records: 0,
        };
        checkpoint.write_bytes(&header())?;
        Ok(checkpoint)
    }

    fn sync_dir(&self) -> Result<(), PersistError> {
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io_error(&self.dir))
    }

    /// Removes every generation before `previous`, and every checkpoint
    /// between it and `newest`: what is left is the previous checkpoint
    /// with every journal since, and the newest.
    fn remove_old(&self, previous: Option<u64>, newest: u64) -> Result<(), PersistError> {
        let first_kept = previous.unwrap_or(newest);
        for kind in [Kind::Checkpoint, Kind::Journal] {
            for generation in generations(&self.dir, kind)? {
                let between = kind == Kind::Checkpoint && generation > first_kept;
                if generation < first_kept || (between && generation < newest) {
                    let path = path_of(&self.dir, kind, generation);
                    std::fs::remove_file(&path).map_err(io_error(&path))?;
                }
            }
        }
        Ok(())
    }
}

/// A checkpoint being written: records, then [`finish`](Self::finish).
#[derive(Debug)]
pub struct Checkpoint<'a> {
    files: &'a mut Files,
    /// Taken by [`finish`](Self::finish).
    out: Option<BufWriter<File>>,
    buffer: Vec<u8>,
    generation: u64,
    temporary: PathBuf,
    bytes: u64,
    records: u64,
}

impl Checkpoint<'_> {
    fn write_bytes(&mut self, bytes: &[u8]) -> Result<(), PersistError> {
        let out = self.out.as_mut().expect("not finished");
        out.write_all(bytes).map_err(io_error(&self.temporary))?;
        self.bytes += bytes.len() as u64;
        Ok(())
    }

    /// Writes one record.
    pub fn write(&mut self, record: &Record) -> Result<(), PersistError> {
        let mut buffer = std::mem::take(&mut self.buffer);
        buffer.clear();
        encode(record, &mut buffer);
        let written = self.write_bytes(&buffer);
        self.buffer = buffer;
        self.records += 1;
        written
    }

    /// Ends the checkpoint (begun at `begun_at`), syncs it and puts it in
    /// place with an empty journal after it; the older generations but the
    /// previous one go. The bytes written.
    pub fn finish(mut self, begun_at: netaware_core::UnixMillis) -> Result<u64, PersistError> {
        let end = Record::End(CheckpointEnd {
            records: self.records,
            begun_at,
        });
        self.write(&end)?;
        let temporary = self.temporary.clone();
        let out = self.out.take().expect("not finished");
        let file = out.into_inner().map_err(|e| PersistError::Io {
            path: temporary.clone(),
            source: e.into_error(),
        })?;
        file.sync_all().map_err(io_error(&temporary))?;
        let generation = self.generation;
        let bytes = self.bytes;
        let files = &mut *self.files;
        let path = path_of(&files.dir, Kind::Checkpoint, generation);
        std::fs::rename(&temporary, &path).map_err(io_error(&path))?;
        let journal_path = path_of(&files.dir, Kind::Journal, generation);
        let mut journal = File::create(&journal_path).map_err(io_error(&journal_path))?;
        journal
            .write_all(&header())
            .and_then(|()| journal.sync_all())
            .map_err(io_error(&journal_path))?;
        files.sync_dir()?;
        // In place: appends go to its journal from now on.
        let previous = files.previous.replace(generation);
        files.generation = generation;
        files.journal = Some(journal);
        files.journal_bytes = header().len() as u64;
        files.checkpoint_bytes = bytes;
        files.journal_whole = true;
        files.remove_old(previous, generation)?;
        Ok(bytes)
    }
}

impl Drop for Checkpoint<'_> {
    /// A checkpoint not finished leaves no file behind (on success the
    /// temporary was renamed, and this finds nothing).
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.temporary);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::saved::{AcceptedWindow, SavedNode, WindowTaken};

    /// Records applied, in order.
    #[derive(Debug, Default)]
    struct Seen(Vec<Record>);

    impl Apply for Seen {
        fn apply(&mut self, record: &Record) {
            self.0.push(record.clone());
        }
    }

    fn node(name: &str) -> Record {
        Record::Node(SavedNode {
            name: name.into(),
            instance: 1,
            hello: Vec::new(),
            last_seq: 0,
            last_seen: 0,
            accepted: Some(0),
        })
    }

    fn window(seq: u64) -> Record {
        Record::Taken(WindowTaken {
            accepted: AcceptedWindow {
                node: "a".into(),
                instance: 1,
                seq,
                at: seq,
            },
            end: seq,
            networks: Vec::new(),
        })
    }

    fn journal(records: &[Record]) -> Encoded {
        let mut encoded = Encoded::default();
        for record in records {
            encoded.push(record);
        }
        encoded
    }

    fn checkpoint(files: &mut Files, records: &[Record]) {
        let mut checkpoint = files.checkpoint().unwrap();
        for record in records {
            checkpoint.write(record).unwrap();
        }
        checkpoint.finish(1).unwrap();
    }

    fn load_seen(dir: &Path) -> Loaded<Seen> {
        load(dir, Seen::default).unwrap()
    }

    #[test]
    fn appends_after_a_checkpoint_come_back_in_order_and_two_generations_stay() {
        let dir = tempfile::tempdir().unwrap();
        let mut files = Files::new(dir.path(), 0);
        assert!(matches!(
            files.append(&journal(&[window(1)])),
            Err(PersistError::CheckpointFirst)
        ));
        checkpoint(&mut files, &[node("a")]);
        files.append(&journal(&[window(1), window(2)])).unwrap();
        files.append(&journal(&[window(3)])).unwrap();
        let loaded = load_seen(dir.path());
        assert_eq!(loaded.problems, Vec::<String>::new());
        assert_eq!(loaded.generation, 1);
        assert_eq!(
            loaded.restored.unwrap().0,
            [node("a"), window(1), window(2), window(3)]
        );
        // Two more checkpoints: the oldest generation goes.
        checkpoint(&mut files, &[node("a"), node("b")]);
        files.append(&journal(&[window(4)])).unwrap();
        checkpoint(&mut files, &[node("a"), node("b"), node("c")]);
        assert_eq!(generations(dir.path(), Kind::Checkpoint).unwrap(), [2, 3]);
        assert_eq!(generations(dir.path(), Kind::Journal).unwrap(), [2, 3]);
        assert_eq!(load_seen(dir.path()).restored.unwrap().0.len(), 3);
    }

    #[test]
    fn a_damaged_newest_checkpoint_falls_back_to_the_previous_with_both_journals() {
        let dir = tempfile::tempdir().unwrap();
        let mut files = Files::new(dir.path(), 0);
        checkpoint(&mut files, &[node("a")]);
        files.append(&journal(&[window(1)])).unwrap();
        checkpoint(&mut files, &[node("a"), node("b")]);
        files.append(&journal(&[window(2)])).unwrap();
        // A bit flipped in the middle of the newest checkpoint.
        let newest = path_of(dir.path(), Kind::Checkpoint, 2);
        let mut bytes = std::fs::read(&newest).unwrap();
        bytes[20] ^= 1;
        std::fs::write(&newest, bytes).unwrap();
        let loaded = load_seen(dir.path());
        assert_eq!(loaded.generation, 1);
        assert_eq!(loaded.newest, 2);
        assert_eq!(
            loaded.restored.as_ref().unwrap().0,
            [node("a"), window(1), window(2)],
            "the previous checkpoint, its journal and the newer one"
        );
        assert!(
            loaded.problems[0].contains("damaged"),
            "{:?}",
            loaded.problems
        );
        assert!(
            newest.with_extension("bin.damaged").exists(),
            "kept for a look"
        );
        // The next checkpoint is a new generation after both.
        let mut files = Files::open(dir.path(), &loaded).unwrap();
        checkpoint(&mut files, &[node("c")]);
        assert_eq!(generations(dir.path(), Kind::Checkpoint).unwrap(), [1, 3]);
        assert_eq!(generations(dir.path(), Kind::Journal).unwrap(), [1, 2, 3]);
    }

    /// A checkpoint of node a and a journal of windows 1 and 2, the second
    /// cut short as a crash in the middle of its append leaves it.
    fn a_torn_journal(dir: &Path) {
        let mut files = Files::new(dir, 0);
        checkpoint(&mut files, &[node("a")]);
        files.append(&journal(&[window(1)])).unwrap();
        let good = files.journal_bytes();
        files.append(&journal(&[window(2)])).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(path_of(dir, Kind::Journal, 1))
            .unwrap()
            .set_len(good + 3)
            .unwrap();
    }

    #[test]
    fn after_a_restart_appends_go_on_in_the_restored_journal_past_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        a_torn_journal(dir.path());
        // The restarted collector appends after window 1, where the good
        // part ends, and its first checkpoint is generation 2.
        let loaded = load_seen(dir.path());
        let mut files = Files::open(dir.path(), &loaded).unwrap();
        assert!(!files.wants_checkpoint(), "the journal is small");
        files.append(&journal(&[window(3)])).unwrap();
        checkpoint(&mut files, &[node("a"), node("b")]);
        // Were the new checkpoint damaged, the previous one and its
        // journal would still hold everything saved.
        let newest = path_of(dir.path(), Kind::Checkpoint, 2);
        std::fs::write(&newest, b"damaged").unwrap();
        let loaded = load_seen(dir.path());
        assert_eq!(loaded.generation, 1);
        assert_eq!(
            loaded.restored.unwrap().0,
            [node("a"), window(1), window(3)]
        );
    }

    #[test]
    fn a_journal_cut_short_by_a_crash_gives_what_came_before_the_cut() {
        let dir = tempfile::tempdir().unwrap();
        a_torn_journal(dir.path());
        let loaded = load_seen(dir.path());
        assert_eq!(loaded.restored.unwrap().0, [node("a"), window(1)]);
        assert!(
            loaded.problems[0].contains("cut short"),
            "{:?}",
            loaded.problems
        );
    }

    #[test]
    fn a_checkpoint_without_its_end_is_not_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut files = Files::new(dir.path(), 0);
        checkpoint(&mut files, &[node("a")]);
        {
            // Written but never finished, then renamed in by hand.
            let mut unfinished = files.checkpoint().unwrap();
            unfinished.write(&node("b")).unwrap();
            unfinished.out.as_mut().unwrap().flush().unwrap();
            std::fs::copy(
                &unfinished.temporary,
                path_of(dir.path(), Kind::Checkpoint, 2),
            )
            .unwrap();
        }
        assert!(
            !path_of(dir.path(), Kind::Checkpoint, 2)
                .with_extension("bin.tmp")
                .exists(),
            "an unfinished checkpoint leaves no temporary file"
        );
        let loaded = load_seen(dir.path());
        assert_eq!(loaded.generation, 1);
        assert_eq!(loaded.restored.unwrap().0, [node("a")]);
        // No checkpoint at all: nothing restored, nothing lost in the try.
        let empty = tempfile::tempdir().unwrap();
        assert!(load_seen(empty.path()).restored.is_none());
    }
}
