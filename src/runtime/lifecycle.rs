//! Where a server is in its life, and how many connections it holds: the
//! one state every poller and connection reads. It depends on nothing else
//! in the crate.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// Where the server is in its life; every poller and connection reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Running,
    /// Not accepting; connections finish the requests they have, then close.
    Draining,
    /// Everything closes now; the actor system is ending.
    Stopping,
}

/// What all pollers share: the phase, the count of open connections, and
/// how many the end of a shutdown cut short.
pub(crate) struct ServerState {
    phase: AtomicU8,
    open_connections: AtomicUsize,
    max_connections: usize,
    cut_short: AtomicUsize,
}

impl ServerState {
    pub(crate) fn new(max_connections: usize) -> ServerState {
        ServerState {
            phase: AtomicU8::new(Phase::Running as u8),
            open_connections: AtomicUsize::new(0),
            max_connections,
            cut_short: AtomicUsize::new(0),
        }
    }

    pub(crate) fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Relaxed) {
            0 => Phase::Running,
            1 => Phase::Draining,
            _ => Phase::Stopping,
        }
    }

    pub(crate) fn set_phase(&self, phase: Phase) {
        self.phase.fetch_max(phase as u8, Ordering::Relaxed);
    }

    /// Counts a new connection in, unless the server is full.
    pub(crate) fn admit(&self) -> bool {
        let open = self.open_connections.fetch_add(1, Ordering::Relaxed);
        if open >= self.max_connections {
            self.release(1);
            return false;
        }
        true
    }

    pub(crate) fn release(&self, connections: usize) {
        self.open_connections
            .fetch_sub(connections, Ordering::Relaxed);
    }

    /// A connection was closed by `Stopping` with a request unanswered or
    /// a response not all sent.
    pub(crate) fn note_cut_short(&self) {
        self.cut_short.fetch_add(1, Ordering::Relaxed);
    }

    /// Connections `Stopping` closed with work unfinished.
    pub(crate) fn cut_short(&self) -> usize {
        self.cut_short.load(Ordering::Relaxed)
    }
}
