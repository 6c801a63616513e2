//! A static directory being served: its current table of responses, which a
//! reload (SIGHUP in the binary) replaces without stopping any connection.
//!
//! The request path takes no lock and allocates nothing in the steady state.
//! Each thread keeps the table it last used, with the load's generation; a
//! request compares that with the site's generation, one atomic load, and
//! only when a reload has published a newer one does the thread take the
//! mutex, once, to pick the new table up. A reload builds the whole table
//! first, off the request path, so a failed one changes nothing.
//!
//! A response is written from the table that routed its request: requests
//! already routed when a reload lands finish with the old responses, which
//! stay alive until the last thread holding them moves on.

use std::cell::RefCell;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::http::error_body::ErrorHook;
use crate::http::head::ResponseOut;
use crate::http::request::RequestHead;
use crate::http::status::ErrorStatus;
use crate::static_files::load::{self, StaticFilesError, StaticLimits};
use crate::static_files::table::{StaticReply, StaticTable};

/// Tells sites apart in the per-thread cache (a process may serve several).
static NEXT_SITE_ID: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The table this thread last used, and the site it belongs to.
    static CACHED: RefCell<Option<(u64, Arc<StaticTable>)>> = const { RefCell::new(None) };
}

/// What a load or reload of a static directory found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadSummary {
    /// Files served (an `index.html` counts once).
    pub files: usize,
    /// Their bytes, in all.
    pub bytes: u64,
    /// Dotfiles and dot-directories left out.
    pub skipped_dotfiles: usize,
}

/// A directory served as static files, reloadable.
pub struct StaticSite {
    id: u64,
    dir: PathBuf,
    limits: StaticLimits,
    dotfiles: bool,
    /// The generation of the table in `table`, published after the swap.
    generation: AtomicU64,
    table: Mutex<Arc<StaticTable>>,
}

impl fmt::Debug for StaticSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticSite")
            .field("dir", &self.dir)
            .field("generation", &self.generation.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl StaticSite {
    /// Loads every regular file under `dir` within `limits`, dotfiles too
    /// when `dotfiles` is set; see the crate documentation.
    pub fn load(
        dir: &Path,
        limits: StaticLimits,
        dotfiles: bool,
    ) -> Result<StaticSite, StaticFilesError> {
        let table = StaticTable::new(load::load(dir, limits, dotfiles)?, 0);
        Ok(StaticSite {
            id: NEXT_SITE_ID.fetch_add(1, Ordering::Relaxed),
            dir: dir.to_path_buf(),
            limits,
            dotfiles,
            generation: AtomicU64::new(0),
            table: Mutex::new(Arc::new(table)),
        })
    }

    /// The directory served.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What the current table holds.
    pub fn summary(&self) -> LoadSummary {
        summary(&self.current())
    }

    /// Reads the directory again and, if that works, serves the new files
    /// from the next request on. On an error (a file over a limit, the
    /// directory gone) the current files stay and the error says why.
    pub fn reload(&self) -> Result<LoadSummary, StaticFilesError> {
        let loaded = load::load(&self.dir, self.limits, self.dotfiles)?;
        // Built before taking the lock: the hashing and formatting of a
        // whole directory must not hold up a thread picking up a table.
        let mut table = StaticTable::new(loaded, 0);
        let summary = summary(&table);
        let old = {
            let mut current = self.table.lock().unwrap_or_else(PoisonError::into_inner);
            table.generation = current.generation + 1;
            self.generation.store(table.generation, Ordering::Release);
            std::mem::replace(&mut *current, Arc::new(table))
        };
        // Freed here, outside the lock, unless a thread still holds it.
        drop(old);
        Ok(summary)
    }

    fn current(&self) -> Arc<StaticTable> {
        Arc::clone(&self.table.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The answer to `head`, or `None` when its path names nothing here.
    pub(crate) fn answer(
        &self,
        head: &RequestHead,
        raw_head: &[u8],
    ) -> Option<Result<StaticReply, ErrorStatus>> {
        let latest = self.generation.load(Ordering::Acquire);
        self.with_table(latest, false, |table| table.answer(head, raw_head))
            .flatten()
    }

    /// Writes `reply`'s response; `false` when the table that routed it has
    /// been replaced since and no thread-held copy is at hand (a request
    /// whose body was still arriving across a reload). A 416's body is the
    /// application's if it chose error bodies (`errors`).
    pub(crate) fn write(
        &self,
        reply: StaticReply,
        raw_head: &[u8],
        to: &mut ResponseOut<'_>,
        errors: Option<&ErrorHook>,
    ) -> bool {
        self.with_table(reply.generation, true, |table| {
            table.write(reply, raw_head, to, errors)
        })
        .is_some()
    }

    /// Runs `f` on this thread's table of generation `wanted`, fetching the
    /// current table first when the thread holds another. With `exact`
    /// unset, whatever is current will do (it can only be newer).
    fn with_table<R>(
        &self,
        wanted: u64,
        exact: bool,
        f: impl FnOnce(&StaticTable) -> R,
    ) -> Option<R> {
        let mut f = Some(f);
        let cached = CACHED.try_with(|cell| {
            let mut cached = cell.borrow_mut();
            let held = matches!(&*cached,
                Some((site, table)) if *site == self.id && table.generation == wanted);
            if !held {
                *cached = Some((self.id, self.current()));
            }
            match (&*cached, f.take()) {
                (Some((_, table)), Some(f)) if !exact || table.generation == wanted => {
                    Some(f(table))
                }
                _ => None,
            }
        });
        match (cached, f) {
            (Ok(result), _) => result,
            // The thread is exiting and its cache is gone: use the current
            // table directly.
            (Err(_), Some(f)) => {
                let table = self.current();
                (!exact || table.generation == wanted).then(|| f(&table))
            }
            (Err(_), None) => None,
        }
    }
}

fn summary(table: &StaticTable) -> LoadSummary {
    LoadSummary {
        files: table.file_count(),
        bytes: table.total,
        skipped_dotfiles: table.skipped_dotfiles,
    }
}
