//! `--access-log`: a line per request in the combined log format,
//!
//! ```text
//! 127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] "GET /a HTTP/1.1" 200 2326 "referer" "user-agent"
//! ```
//!
//! written without a lock or an allocation on the request path (the line
//! itself is formatted in `access_line`). Each thread
//! that serves requests appends whole lines to a ring of its own (one writer,
//! so a plain atomic index publishes them); one flusher thread drains every
//! ring into the file at least once a second, as soon as a ring holds
//! `FLUSH_SIZE`, and a last time when the server stops.
//!
//! SIGUSR1 reopens the file, as for nginx, so that logrotate can move it
//! away and have the next lines go to a new file at the same path. The
//! flusher does it between two drains: everything recorded until then is
//! written to the file it had open, then the path is opened afresh
//! (created if missing). So once the new file exists, every line recorded
//! from then on is in it; a file that cannot be opened leaves the old one
//! in use, with a warning.

use std::cell::{RefCell, UnsafeCell};
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle, Thread};
use std::time::Duration;

use log::{info, warn};

use crate::config::AccessLogTarget;

/// Bytes in a thread's ring: room for the lines written while the flusher,
/// woken at `FLUSH_SIZE`, catches up.
const RING_SIZE: usize = 512 * 1024;
/// A ring holding this much wakes the flusher.
const FLUSH_SIZE: usize = 64 * 1024;
/// The longest a line waits in a ring.
const FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// An open access log and its flusher thread.
pub(crate) struct AccessLog {
    shared: Arc<LogShared>,
    flusher: Mutex<Option<JoinHandle<()>>>,
}

pub(crate) struct LogShared {
    /// Tells a thread's ring which log it belongs to.
    id: u64,
    rings: Mutex<Vec<Arc<Ring>>>,
    flusher: Thread,
    /// The flusher has been woken and has not drained yet.
    woken: AtomicBool,
    stop: AtomicBool,
    /// The file is to be reopened (SIGUSR1).
    reopen: AtomicBool,
}

static NEXT_LOG_ID: AtomicU64 = AtomicU64::new(1);

impl AccessLog {
    pub(crate) fn open(target: &AccessLogTarget) -> io::Result<Arc<AccessLog>> {
        let output = open_output(target)?;
        let target = target.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Arc<LogShared>>();
        let handle = thread::Builder::new()
            .name("access-log".into())
            .spawn(move || {
                if let Ok(shared) = ready_rx.recv() {
                    flush_loop(&shared, &target, output);
                }
            })?;
        let shared = Arc::new(LogShared {
            id: NEXT_LOG_ID.fetch_add(1, Ordering::Relaxed),
            rings: Mutex::new(Vec::new()),
            flusher: handle.thread().clone(),
            woken: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            reopen: AtomicBool::new(false),
        });
        // The thread cannot fail to receive: it waits for exactly this.
        let _ = ready_tx.send(Arc::clone(&shared));
        Ok(Arc::new(AccessLog {
            shared,
            flusher: Mutex::new(Some(handle)),
        }))
    }

    /// What a connection's recorder writes into.
    pub(crate) fn shared(&self) -> Arc<LogShared> {
        Arc::clone(&self.shared)
    }

    /// Has the flusher write out what it holds and reopen the file (SIGUSR1);
    /// it logs whether that worked.
    pub(crate) fn reopen(&self) {
        self.shared.reopen.store(true, Ordering::Release);
        self.shared.flusher.unpark();
    }

    /// Writes out every line recorded so far and stops the flusher. Call it
    /// once nothing records any more; later calls do nothing.
    pub(crate) fn close(&self) {
        let handle = self
            .flusher
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            self.shared.stop.store(true, Ordering::Release);
            self.shared.flusher.unpark();
            let _ = handle.join();
        }
    }
}

impl Drop for AccessLog {
    fn drop(&mut self) {
        self.close();
    }
}

/// Where the lines go: standard output, or the file, opened to append.
fn open_output(target: &AccessLogTarget) -> io::Result<Box<dyn Write + Send>> {
    Ok(match target {
        AccessLogTarget::Stdout => Box::new(io::stdout()),
        AccessLogTarget::File(path) => {
            let file = OpenOptions::new().create(true).append(true).open(path);
            let file = file.map_err(|e| {
                io::Error::new(e.kind(), format!("access log {}: {e}", path.display()))
            })?;
            Box::new(file)
        }
    })
}

fn flush_loop(shared: &LogShared, target: &AccessLogTarget, mut output: Box<dyn Write + Send>) {
    let mut batch = Vec::with_capacity(FLUSH_SIZE);
    loop {
        thread::park_timeout(FLUSH_INTERVAL);
        shared.woken.store(false, Ordering::Relaxed);
        // Read before draining: every line recorded before `close` is then
        // in a ring when it is drained for the last time.
        let stop = shared.stop.load(Ordering::Acquire);
        // Read before draining too: the lines drained now go to the file
        // open when the reopen was asked for.
        let reopen = shared.reopen.swap(false, Ordering::Acquire);
        let mut dropped = 0;
        for ring in shared
            .rings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            ring.drain_into(&mut batch);
            dropped += ring.dropped.swap(0, Ordering::Relaxed);
        }
        if !batch.is_empty() {
            if let Err(e) = output.write_all(&batch).and_then(|()| output.flush()) {
                warn!("access log: {e}");
            }
            batch.clear();
        }
        if dropped > 0 {
            warn!("access log: {dropped} lines dropped: the log could not keep up");
        }
        if stop {
            return;
        }
        if reopen {
            output = reopened(target, output);
        }
    }
}

/// The output after a reopen: the file at the target's path opened afresh,
/// or the old output when that fails (or for standard output).
fn reopened(target: &AccessLogTarget, old: Box<dyn Write + Send>) -> Box<dyn Write + Send> {
    let AccessLogTarget::File(path) = target else {
        info!("SIGUSR1: the access log goes to stdout, nothing to reopen");
        return old;
    };
    match open_output(target) {
        Ok(new) => {
            info!("SIGUSR1: reopened the access log {}", path.display());
            new
        }
        Err(e) => {
            warn!("SIGUSR1: cannot reopen the {e}; still writing to the file open before");
            old
        }
    }
}

/// A byte ring with one writer (the thread that owns it) and one reader (the
/// flusher). Indexes only grow; a position is taken modulo the size.
struct Ring {
    bytes: Box<[UnsafeCell<u8>]>,
    /// Bytes published by the writer.
    written: AtomicUsize,
    /// Bytes the reader is done with.
    read: AtomicUsize,
    dropped: AtomicU64,
}

// SAFETY: the writer only writes bytes in [written, read + size), and the
// reader only reads bytes in [read, written); each publishes its index with
// Release after its copies, and reads the other's with Acquire first, so no
// byte is written and read at once.
unsafe impl Sync for Ring {}

impl Ring {
    fn new() -> Ring {
        Ring {
            bytes: (0..RING_SIZE).map(|_| UnsafeCell::new(0)).collect(),
            written: AtomicUsize::new(0),
            read: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    fn base(&self) -> *mut u8 {
        UnsafeCell::raw_get(self.bytes.as_ptr())
    }

    /// Appends `parts` as one line; returns the bytes now waiting, or None
    /// when the ring is full and the line was dropped. Only the owning
    /// thread calls this.
    fn push(&self, parts: &[&[u8]]) -> Option<usize> {
        let len: usize = parts.iter().map(|part| part.len()).sum();
        let written = self.written.load(Ordering::Relaxed);
        let read = self.read.load(Ordering::Acquire);
        if written - read + len > RING_SIZE {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let mut at = written;
        for part in parts {
            let start = at % RING_SIZE;
            let first = part.len().min(RING_SIZE - start);
            // SAFETY: [at, at + len) lies in the free part of the ring (checked
            // above), which the reader does not touch until `written` moves.
            unsafe {
                std::ptr::copy_nonoverlapping(part.as_ptr(), self.base().add(start), first);
                std::ptr::copy_nonoverlapping(
                    part[first..].as_ptr(),
                    self.base(),
                    part.len() - first,
                );
            }
            at += part.len();
        }
        self.written.store(at, Ordering::Release);
        Some(at - read)
    }

    /// Moves the published bytes to `out`. Only the flusher calls this.
    fn drain_into(&self, out: &mut Vec<u8>) {
        let read = self.read.load(Ordering::Relaxed);
        let written = self.written.load(Ordering::Acquire);
        let start = read % RING_SIZE;
        let len = written - read;
        let first = len.min(RING_SIZE - start);
        // SAFETY: [read, written) was published by the writer, which does not
        // touch it again until `read` moves past it.
        unsafe {
            let base = self.base();
            out.extend_from_slice(std::slice::from_raw_parts(base.add(start), first));
            out.extend_from_slice(std::slice::from_raw_parts(base, len - first));
        }
        self.read.store(written, Ordering::Release);
    }
}

thread_local! {
    /// This thread's ring, and the log it belongs to.
    static RING: RefCell<Option<(u64, Arc<Ring>)>> = const { RefCell::new(None) };
}

/// Appends a line to this thread's ring for `log`, creating and registering
/// the ring on the thread's first line. A thread that is exiting (a
/// connection dropped with its thread's locals) has no ring any more: its
/// line goes to a ring of its own.
pub(crate) fn record(log: &LogShared, parts: &[&[u8]]) {
    let new_ring = || {
        let ring = Arc::new(Ring::new());
        log.rings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::clone(&ring));
        ring
    };
    let waiting = RING
        .try_with(|slot| {
            let mut slot = slot.borrow_mut();
            if slot.as_ref().is_none_or(|(id, _)| *id != log.id) {
                *slot = Some((log.id, new_ring()));
            }
            slot.as_ref().and_then(|(_, ring)| ring.push(parts))
        })
        .unwrap_or_else(|_| new_ring().push(parts));
    if waiting.is_some_and(|bytes| bytes >= FLUSH_SIZE) && !log.woken.swap(true, Ordering::Relaxed)
    {
        log.flusher.unpark();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_keeps_lines_whole_across_its_end() {
        let ring = Ring::new();
        // Every byte differs from its neighbours and from round to round,
        // so a line copied out of order, or half from the previous round,
        // shows.
        let line = |round: usize, len: usize| -> Vec<u8> {
            (0..len).map(|i| b'a' + ((i + round) % 26) as u8).collect()
        };
        let mut out = Vec::new();
        for round in 0..2000 {
            let part = line(round, round % 1000);
            assert!(ring.push(&[&part, b"\n"]).is_some());
            ring.drain_into(&mut out);
            let mut expected = part;
            expected.push(b'\n');
            assert_eq!(out, expected, "round {round}");
            out.clear();
        }
        // Two lines in one drain come out in the order pushed.
        assert!(ring.push(&[b"first", b"\n"]).is_some());
        assert!(ring.push(&[b"second\n"]).is_some());
        ring.drain_into(&mut out);
        assert_eq!(out, b"first\nsecond\n");
        out.clear();
        let full = line(7, RING_SIZE - 1);
        assert_eq!(ring.push(&[&full, b"\n"]), Some(RING_SIZE));
        assert_eq!(ring.push(&[b"z"]), None);
        assert_eq!(ring.dropped.load(Ordering::Relaxed), 1);
        ring.drain_into(&mut out);
        assert_eq!(out[..RING_SIZE - 1], full[..]);
        assert_eq!(out[RING_SIZE - 1..], *b"\n");
    }
}
