//! `--state DIR`: durable actors' state in one embedded file,
//! `DIR/state.redb`, kept by [redb](https://crates.io/crates/redb) (ACID,
//! pure Rust, an fsync at each commit).
//!
//! One thread writes, and commits in groups, as databases do: every write
//! that arrives while a commit is under way waits for the next, which
//! takes them all in one transaction and one fsync, so a busy server pays
//! one fsync per round trip to the disk, not one per write. Reads run on
//! the caller's thread in a read transaction of their own, alongside the
//! writer (redb's readers see the last commit and never wait for a
//! writer). A write is done (its `done` called) only once its commit has
//! returned, so an answer that waits for it leaves after the fsync.
//!
//! Each key holds its revision (8 bytes, little-endian) and then the
//! state's bytes; a write whose expected revision is not the key's is
//! refused as stale, never written over.
//!
//! After an I/O error (a full disk), redb wants the file closed and opened
//! again: the writer does so before its next commit, so the store serves
//! again once the disk has room, without a restart.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bytes::Bytes;
use log::{error, info, warn};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use crate::log_limit::WarnLimiter;
use crate::state::metrics::StateMetrics;
use crate::state::{Done, Revision, StateStore, StoreError, Stored};

/// Every key's revision and bytes.
const STATE: TableDefinition<&str, &[u8]> = TableDefinition::new("state");

/// The file in `--state DIR`.
pub(crate) const FILE_NAME: &str = "state.redb";

/// A write waiting for the next commit.
struct Write {
    key: String,
    bytes: Bytes,
    expected: Revision,
    done: Done<Revision>,
}

#[derive(Default)]
struct Queue {
    writes: Vec<Write>,
    stopping: bool,
}

struct Inner {
    path: PathBuf,
    /// The open file; none between an I/O error and its reopening.
    db: Mutex<Option<Arc<Database>>>,
    queue: Mutex<Queue>,
    arrived: Condvar,
    metrics: Arc<StateMetrics>,
}

/// The embedded store, and its writer thread.
pub(crate) struct StateFile {
    inner: Arc<Inner>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl fmt::Debug for StateFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateFile")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl StateFile {
    /// Opens (or creates) `dir/state.redb` and starts its writer. An
    /// error names the file and what is wrong with it: held by another
    /// process, corrupt, not a store, unreadable.
    pub(crate) fn open(dir: &Path, metrics: Arc<StateMetrics>) -> io::Result<StateFile> {
        fs::create_dir_all(dir).map_err(|e| {
            io::Error::new(e.kind(), format!("state directory {}: {e}", dir.display()))
        })?;
        let path = dir.join(FILE_NAME);
        let db = open_file(&path).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("state file {}: {}", path.display(), from_redb(e)),
            )
        })?;
        let inner = Arc::new(Inner {
            path,
            db: Mutex::new(Some(Arc::new(db))),
            queue: Mutex::new(Queue::default()),
            arrived: Condvar::new(),
            metrics,
        });
        let writing = Arc::clone(&inner);
        let writer = thread::Builder::new()
            .name("state-writer".into())
            .spawn(move || writing.run())?;
        info!("state: {}", inner.path.display());
        Ok(StateFile {
            inner,
            writer: Mutex::new(Some(writer)),
        })
    }

    /// Every key and its state, in key order, as `f` takes them.
    pub(crate) fn each(&self, mut f: impl FnMut(&str, &Stored)) -> Result<(), StoreError> {
        let db = self.inner.db()?;
        let read = db.begin_read().map_err(from_redb)?;
        let table = match read.open_table(STATE) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
            Err(e) => return Err(from_redb(e)),
        };
        for entry in table.iter().map_err(from_redb)? {
            let (key, value) = entry.map_err(from_redb)?;
            let stored = decode(value.value())?;
            f(key.value(), &stored);
        }
        Ok(())
    }

    /// Stops the writer once what waits is committed.
    pub(crate) fn stop(&self) {
        lock(&self.inner.queue).stopping = true;
        self.inner.arrived.notify_all();
        let writer = lock(&self.writer).take();
        if let Some(writer) = writer {
            let _ = writer.join();
        }
    }
}

impl Drop for StateFile {
    fn drop(&mut self) {
        self.stop();
    }
}

impl StateStore for StateFile {
    fn kind(&self) -> &'static str {
        "embedded"
    }

    fn load(&self, key: &str, done: Done<Option<Stored>>) {
        done(self.inner.read(key));
    }

    fn reads_at_once(&self) -> bool {
        true
    }

    fn write(&self, key: &str, bytes: Bytes, expected: Revision, done: Done<Revision>) {
        let write = Write {
            key: key.to_string(),
            bytes,
            expected,
            done,
        };
        let mut queue = lock(&self.inner.queue);
        if queue.stopping {
            drop(queue);
            return (write.done)(Err(StoreError::Unavailable("the server stops".into())));
        }
        queue.writes.push(write);
        drop(queue);
        self.inner.arrived.notify_one();
    }
}

impl Inner {
    /// The open file, opening it again if an I/O error closed it.
    fn db(&self) -> Result<Arc<Database>, StoreError> {
        let mut db = lock(&self.db);
        if let Some(db) = &*db {
            return Ok(Arc::clone(db));
        }
        let opened = Arc::new(open_file(&self.path).map_err(from_redb)?);
        *db = Some(Arc::clone(&opened));
        info!("state: {} open again", self.path.display());
        Ok(opened)
    }

    fn read(&self, key: &str) -> Result<Option<Stored>, StoreError> {
        let db = self.db()?;
        let read = db.begin_read().map_err(from_redb)?;
        let table = match read.open_table(STATE) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(from_redb(e)),
        };
        match table.get(key).map_err(from_redb)? {
            Some(value) => decode(value.value()).map(Some),
            None => Ok(None),
        }
    }

    /// The writer: takes every write that waits, commits them together,
    /// and tells each how it went; until stopped with nothing waiting.
    fn run(&self) {
        loop {
            {
                let mut queue = lock(&self.queue);
                while queue.writes.is_empty() && !queue.stopping {
                    queue = self.arrived.wait(queue).unwrap_or_else(|e| e.into_inner());
                }
                if queue.writes.is_empty() {
                    return;
                }
            }
            #[cfg(feature = "fault-injection")]
            gate::wait(&self.path);
            let writes = std::mem::take(&mut lock(&self.queue).writes);
            self.commit(writes);
        }
    }

    /// One transaction for every write of `writes`, then their outcomes.
    fn commit(&self, writes: Vec<Write>) {
        let started = Instant::now();
        let outcomes = match self.try_commit(&writes) {
            Ok(outcomes) => {
                self.metrics.commit(started.elapsed());
                outcomes
            }
            Err(e) => {
                static FAILED: WarnLimiter = WarnLimiter::new();
                if FAILED.admit().is_some() {
                    error!(
                        "state: {} writes to {} not saved: {e}",
                        writes.len(),
                        self.path.display()
                    );
                }
                // redb wants the file opened again after an I/O error; a
                // full disk may have room by the next commit.
                if matches!(e, StoreError::Full(_) | StoreError::Failed(_)) {
                    self.close();
                }
                writes.iter().map(|_| Err(e.clone())).collect()
            }
        };
        for (write, outcome) in writes.into_iter().zip(outcomes) {
            self.metrics.write(match &outcome {
                Ok(_) => "ok",
                Err(e) => e.label(),
            });
            (write.done)(outcome);
        }
    }

    /// Writes each of `writes` whose expected revision holds, in one
    /// transaction; each write's outcome, once the commit returned.
    fn try_commit(
        &self,
        writes: &[Write],
    ) -> Result<Vec<Result<Revision, StoreError>>, StoreError> {
        let db = self.db()?;
        let transaction = db.begin_write().map_err(from_redb)?;
        let mut outcomes = Vec::with_capacity(writes.len());
        {
            let mut table = transaction.open_table(STATE).map_err(from_redb)?;
            let mut value = Vec::new();
            for write in writes {
                let current = match table.get(write.key.as_str()).map_err(from_redb)? {
                    Some(stored) => decode(stored.value())?.revision,
                    None => 0,
                };
                if current != write.expected {
                    outcomes.push(Err(StoreError::Stale {
                        expected: write.expected,
                    }));
                    continue;
                }
                let revision = current + 1;
                value.clear();
                value.extend_from_slice(&revision.to_le_bytes());
                value.extend_from_slice(&write.bytes);
                table
                    .insert(write.key.as_str(), value.as_slice())
                    .map_err(from_redb)?;
                outcomes.push(Ok(revision));
            }
        }
        transaction.commit().map_err(from_redb)?;
        Ok(outcomes)
    }

    /// Closes the file after an I/O error, for `db` to open again: once
    /// the readers that hold it let go (a read is short).
    fn close(&self) {
        let Some(mut db) = lock(&self.db).take() else {
            return;
        };
        let deadline = Instant::now() + Duration::from_secs(1);
        loop {
            match Arc::try_unwrap(db) {
                Ok(db) => return drop(db),
                Err(shared) if Instant::now() < deadline => {
                    db = shared;
                    thread::yield_now();
                }
                Err(shared) => {
                    warn!("state: readers still hold {} open", self.path.display());
                    *lock(&self.db) = Some(shared);
                    return;
                }
            }
        }
    }
}

/// Opens `path`, creating it if it is not there.
fn open_file(path: &Path) -> Result<Database, redb::Error> {
    Ok(Database::create(path)?)
}

/// A stored value: its revision, then its bytes.
fn decode(value: &[u8]) -> Result<Stored, StoreError> {
    let Some((revision, bytes)) = value.split_first_chunk::<8>() else {
        return Err(StoreError::Unusable(format!(
            "a value of {} bytes, too short for its revision",
            value.len()
        )));
    };
    Ok(Stored {
        bytes: Bytes::copy_from_slice(bytes),
        revision: u64::from_le_bytes(*revision),
    })
}

/// What `error` means for the actors whose state it concerns.
fn from_redb(error: impl Into<redb::Error>) -> StoreError {
    match error.into() {
        redb::Error::Io(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
            StoreError::Full(e.to_string())
        }
        redb::Error::Io(e) if e.kind() == io::ErrorKind::InvalidData => {
            StoreError::Unusable(format!("not a state file ({e})"))
        }
        redb::Error::DatabaseAlreadyOpen => StoreError::Unusable(
            "held by another process (another server with the same --state?)".into(),
        ),
        redb::Error::Corrupted(why) => StoreError::Unusable(format!("corrupt: {why}")),
        redb::Error::UpgradeRequired(version) => StoreError::Unusable(format!(
            "written by another version of redb (file format {version})"
        )),
        other => StoreError::Failed(other.to_string()),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Test builds only: commits held back while a test looks at what waits
/// for them (`uppercut_mio_server::fault::hold_state_commits`).
#[cfg(feature = "fault-injection")]
pub(crate) mod gate {
    use std::collections::HashSet;
    use std::path::{Path, PathBuf};
    use std::sync::{Condvar, Mutex};

    static HELD: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    static MOVED: Condvar = Condvar::new();

    /// Holds (or lets go) the commits of the state file in `dir`.
    pub(crate) fn hold(dir: &Path, hold: bool) {
        let file = dir.join(super::FILE_NAME);
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        let held = held.get_or_insert_with(HashSet::new);
        match hold {
            true => held.insert(file),
            false => held.remove(&file),
        };
        MOVED.notify_all();
    }

    /// Waits while the commits of `file` are held.
    pub(super) fn wait(file: &Path) {
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        while held.as_ref().is_some_and(|held| held.contains(file)) {
            held = MOVED.wait(held).unwrap_or_else(|e| e.into_inner());
        }
    }
}
