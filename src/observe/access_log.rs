//! `--access-log`: a line per request in the combined log format, and a
//! field naming the server that wrote it,
//!
//! ```text
//! 127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] "GET /a HTTP/1.1" 200 2326 "referer" "user-agent" server=web-1
//! ```
//!
//! written without a lock or an allocation on the request path (the line
//! itself is formatted in `access_line`). Each thread
//! that serves requests appends whole lines to a ring of its own (one writer,
//! so a plain atomic index publishes them); one flusher thread drains every
//! ring into the file at least once a second, as soon as a ring holds
//! `FLUSH_SIZE`, and a last time when the server stops.
//!
//! **In time order.** A line's time is when it was recorded (its response
//! sent, as nginx's `$time_local`), taken as it enters its ring, and the
//! flusher writes the time itself: it merges what it drained from every
//! ring by that time, so lines from every poller reach the file in the
//! order their responses went out. Lines recorded in the last `HOLD` wait
//! for the next round, since a thread may have taken its time and not yet
//! published its line; each thread's own lines keep their order.
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
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use log::{info, warn};

use crate::config::AccessLogTarget;
use crate::http::date::format_imf_fixdate;

/// Bytes in a thread's ring: room for the lines written while the flusher,
/// woken at `FLUSH_SIZE`, catches up.
const RING_SIZE: usize = 512 * 1024;
/// A ring holding this much wakes the flusher.
const FLUSH_SIZE: usize = 64 * 1024;
/// The longest a line waits in a ring.
const FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// Lines recorded this recently wait for the flusher's next round: another
/// thread may have taken an earlier time and not yet published its line.
const HOLD: Duration = Duration::from_millis(100);
/// Each line in a ring: its time (ns since the epoch), its length, and
/// where in it the time goes, then the line without its time or newline.
const HEADER_LEN: usize = 16;

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
    /// The log at `target`, each line ending ` server=NAME` with `name`.
    pub(crate) fn open(target: &AccessLogTarget, name: &str) -> io::Result<Arc<AccessLog>> {
        let output = open_output(target)?;
        let target = target.clone();
        let suffix = format!(" server={name}\n").into_bytes();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Arc<LogShared>>();
        let handle = thread::Builder::new()
            .name("access-log".into())
            .spawn(move || {
                if let Ok(shared) = ready_rx.recv() {
                    flush_loop(&shared, &target, output, &suffix);
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

fn flush_loop(
    shared: &LogShared,
    target: &AccessLogTarget,
    mut output: Box<dyn Write + Send>,
    suffix: &[u8],
) {
    let mut merge = Merge::new(suffix);
    loop {
        thread::park_timeout(FLUSH_INTERVAL);
        shared.woken.store(false, Ordering::Relaxed);
        // Read before draining: every line recorded before `close` is then
        // in a ring when it is drained for the last time.
        let stop = shared.stop.load(Ordering::Acquire);
        // Read before draining too: the lines drained now go to the file
        // open when the reopen was asked for.
        let reopen = shared.reopen.swap(false, Ordering::Acquire);
        // Read before draining as well: a line published after its ring was
        // drained was timed after this, less `HOLD` unless its thread
        // stalled that long between the two.
        let cutoff = match stop || reopen {
            true => u64::MAX,
            false => now_ns().saturating_sub(HOLD.as_nanos() as u64),
        };
        let mut dropped = 0;
        merge.begin_round();
        for ring in shared
            .rings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            merge.drain(ring);
            dropped += ring.dropped.swap(0, Ordering::Relaxed);
        }
        let lines = merge.lines_until(cutoff);
        if !lines.is_empty() {
            if let Err(e) = output.write_all(lines).and_then(|()| output.flush()) {
                warn!("access log: {e}");
            }
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

/// The flusher's work: the lines drained from the rings (and those held
/// back from the round before), put in time order and formatted.
struct Merge<'a> {
    /// Lines as the rings hold them (header, then the line), one after
    /// another: those held back first, then this round's.
    drained: Vec<u8>,
    /// Each line's time and where it starts in `drained`.
    order: Vec<(u64, usize)>,
    /// The formatted lines of a round.
    out: Vec<u8>,
    /// Lines held back, as the rings held them.
    held: Vec<u8>,
    /// What ends each line.
    suffix: &'a [u8],
    /// The last second formatted, and its text.
    second: Option<(u64, [u8; LOG_TIME_LEN])>,
}

impl<'a> Merge<'a> {
    fn new(suffix: &'a [u8]) -> Merge<'a> {
        Merge {
            drained: Vec::with_capacity(FLUSH_SIZE),
            order: Vec::new(),
            out: Vec::with_capacity(FLUSH_SIZE),
            held: Vec::new(),
            suffix,
            second: None,
        }
    }

    /// A round begins with the lines held back from the last one.
    fn begin_round(&mut self) {
        self.drained.clear();
        std::mem::swap(&mut self.drained, &mut self.held);
    }

    /// Takes what `ring` holds.
    fn drain(&mut self, ring: &Ring) {
        ring.drain_into(&mut self.drained);
    }

    /// The lines timed at or before `cutoff`, in time order, formatted;
    /// the rest are held for the next round.
    fn lines_until(&mut self, cutoff: u64) -> &[u8] {
        self.order.clear();
        let mut at = 0;
        while let Some((time, len)) = header(&self.drained[at..]) {
            self.order.push((time, at));
            at += HEADER_LEN + len;
        }
        // Stable: one thread's lines at the same time keep their order.
        self.order.sort_by_key(|&(time, _)| time);
        self.out.clear();
        for &(time, at) in &self.order {
            let Some((_, len)) = header(&self.drained[at..]) else {
                continue;
            };
            let record = &self.drained[at..at + HEADER_LEN + len];
            if time > cutoff {
                self.held.extend_from_slice(record);
                continue;
            }
            let time_at = u32::from_le_bytes([record[12], record[13], record[14], record[15]]);
            let line = &record[HEADER_LEN..];
            let (before, after) = line.split_at((time_at as usize).min(line.len()));
            let second = time / 1_000_000_000;
            let text = match self.second {
                Some((cached, text)) if cached == second => text,
                _ => {
                    let text = log_time(second);
                    self.second = Some((second, text));
                    text
                }
            };
            self.out.extend_from_slice(before);
            self.out.extend_from_slice(&text);
            self.out.extend_from_slice(after);
            self.out.extend_from_slice(self.suffix);
        }
        self.drained.clear();
        &self.out
    }
}

/// The time and length of the line whose record starts `bytes`, if a whole
/// one does.
fn header(bytes: &[u8]) -> Option<(u64, usize)> {
    let header: &[u8; HEADER_LEN] = bytes.get(..HEADER_LEN)?.try_into().ok()?;
    let [t0, t1, t2, t3, t4, t5, t6, t7, l0, l1, l2, l3, ..] = *header;
    let time = u64::from_le_bytes([t0, t1, t2, t3, t4, t5, t6, t7]);
    let len = u32::from_le_bytes([l0, l1, l2, l3]) as usize;
    (bytes.len() >= HEADER_LEN + len).then_some((time, len))
}

/// Nanoseconds since the epoch, now; a clock before it reads 0.
fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Length of the combined format's time, `10/Oct/2000:13:55:36 +0000`.
const LOG_TIME_LEN: usize = 26;

/// The combined format's time of `unix_seconds`, in UTC: the fields of the
/// IMF-fixdate `Tue, 10 Oct 2000 13:55:36 GMT` reordered.
fn log_time(unix_seconds: u64) -> [u8; LOG_TIME_LEN] {
    let date = format_imf_fixdate(unix_seconds);
    let mut out = [0u8; LOG_TIME_LEN];
    let parts: [&[u8]; 8] = [
        &date[5..7],
        b"/",
        &date[8..11],
        b"/",
        &date[12..16],
        b":",
        &date[17..25],
        b" +0000",
    ];
    let mut at = 0;
    for part in parts {
        out[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    out
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

    /// Appends a line: its header, timed now, and `parts`, its time to go
    /// `time_at` bytes in; returns the bytes now waiting, or None when the
    /// ring is full and the line was dropped. Only the owning thread calls
    /// this.
    fn push(&self, time_at: usize, parts: &[&[u8]]) -> Option<usize> {
        let line_len: usize = parts.iter().map(|part| part.len()).sum();
        let len = HEADER_LEN + line_len;
        let written = self.written.load(Ordering::Relaxed);
        let read = self.read.load(Ordering::Acquire);
        if written - read + len > RING_SIZE {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        // Timed as late as can be: the flusher holds back what it may yet
        // see published out of order.
        let mut header = [0u8; HEADER_LEN];
        header[..8].copy_from_slice(&now_ns().to_le_bytes());
        header[8..12].copy_from_slice(&(line_len as u32).to_le_bytes());
        header[12..].copy_from_slice(&(time_at as u32).to_le_bytes());
        let mut at = written;
        for part in std::iter::once(&&header[..]).chain(parts) {
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

/// Appends a line, `parts` without its time (which goes `time_at` bytes in)
/// or its end, to this thread's ring for `log`, creating and registering
/// the ring on the thread's first line. A thread that is exiting (a
/// connection dropped with its thread's locals) has no ring any more: its
/// line goes to a ring of its own.
pub(crate) fn record(log: &LogShared, time_at: usize, parts: &[&[u8]]) {
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
            slot.as_ref()
                .and_then(|(_, ring)| ring.push(time_at, parts))
        })
        .unwrap_or_else(|_| new_ring().push(time_at, parts));
    if waiting.is_some_and(|bytes| bytes >= FLUSH_SIZE) && !log.woken.swap(true, Ordering::Relaxed)
    {
        log.flusher.unpark();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines of `drained` records, without their headers, each with
    /// its time and where its time goes.
    fn lines(drained: &[u8]) -> Vec<(u64, usize, Vec<u8>)> {
        let mut lines = Vec::new();
        let mut at = 0;
        while let Some((time, len)) = header(&drained[at..]) {
            let time_at = u32::from_le_bytes(drained[at + 12..at + 16].try_into().unwrap());
            let line = drained[at + HEADER_LEN..at + HEADER_LEN + len].to_vec();
            lines.push((time, time_at as usize, line));
            at += HEADER_LEN + len;
        }
        assert_eq!(at, drained.len(), "whole records only");
        lines
    }

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
        let mut last = 0;
        for round in 0..2000 {
            let part = line(round, round % 1000);
            assert!(ring.push(round % 7, &[&part, b"!"]).is_some());
            ring.drain_into(&mut out);
            let mut expected = part;
            expected.push(b'!');
            let drained = lines(&out);
            assert_eq!(drained.len(), 1, "round {round}");
            let (time, time_at, got) = &drained[0];
            assert_eq!((*time_at, got), (round % 7, &expected), "round {round}");
            assert!(*time >= last, "timed in order");
            last = *time;
            out.clear();
        }
        // Two lines in one drain come out in the order pushed.
        assert!(ring.push(0, &[b"first"]).is_some());
        assert!(ring.push(0, &[b"second"]).is_some());
        ring.drain_into(&mut out);
        let drained: Vec<Vec<u8>> = lines(&out).into_iter().map(|l| l.2).collect();
        assert_eq!(drained, [b"first".to_vec(), b"second".to_vec()]);
        out.clear();
        let full = line(7, RING_SIZE - HEADER_LEN - 1);
        assert_eq!(ring.push(0, &[&full, b"!"]), Some(RING_SIZE));
        assert_eq!(ring.push(0, &[b"z"]), None);
        assert_eq!(ring.dropped.load(Ordering::Relaxed), 1);
        ring.drain_into(&mut out);
        let (_, _, got) = &lines(&out)[0];
        assert_eq!(got[..full.len()], full[..]);
        assert_eq!(got[full.len()..], *b"!");
    }

    /// A record as a ring holds it, timed `time`.
    fn record_at(time: u64, time_at: usize, line: &str) -> Vec<u8> {
        let mut record = time.to_le_bytes().to_vec();
        record.extend_from_slice(&(line.len() as u32).to_le_bytes());
        record.extend_from_slice(&(time_at as u32).to_le_bytes());
        record.extend_from_slice(line.as_bytes());
        record
    }

    /// Lines drained from two rings come out in time order, each with its
    /// time written in and the server's field after it; lines past the
    /// cutoff wait for the next round and come out before later ones.
    #[test]
    fn the_flusher_merges_rings_by_time_and_holds_back_the_latest() {
        const S: u64 = 1_000_000_000;
        let second = 971_186_136;
        let mut merge = Merge::new(b" server=a\n");
        let first_ring = [
            record_at(second * S + 10, 3, "x [] \"GET /1\""),
            record_at((second + 1) * S, 3, "x [] \"GET /3\""),
            record_at((second + 2) * S + 5, 3, "x [] \"GET /6\""),
        ]
        .concat();
        let second_ring = [
            record_at(second * S + 20, 3, "y [] \"GET /2\""),
            record_at((second + 1) * S + 1, 3, "y [] \"GET /4\""),
        ]
        .concat();
        merge.begin_round();
        merge.drained.extend_from_slice(&first_ring);
        merge.drained.extend_from_slice(&second_ring);
        let out = merge.lines_until((second + 2) * S);
        assert_eq!(
            String::from_utf8_lossy(out),
            "x [10/Oct/2000:13:55:36 +0000] \"GET /1\" server=a\n\
             y [10/Oct/2000:13:55:36 +0000] \"GET /2\" server=a\n\
             x [10/Oct/2000:13:55:37 +0000] \"GET /3\" server=a\n\
             y [10/Oct/2000:13:55:37 +0000] \"GET /4\" server=a\n"
        );
        // Held: /6. Next round, a line timed before it was published late.
        merge.begin_round();
        merge
            .drained
            .extend_from_slice(&record_at((second + 2) * S + 1, 3, "y [] \"GET /5\""));
        let out = merge.lines_until(u64::MAX);
        assert_eq!(
            String::from_utf8_lossy(out),
            "y [10/Oct/2000:13:55:38 +0000] \"GET /5\" server=a\n\
             x [10/Oct/2000:13:55:38 +0000] \"GET /6\" server=a\n"
        );
        merge.begin_round();
        assert!(merge.lines_until(u64::MAX).is_empty());
    }
}
