//! The crash checker of durable state: clients increment a counter, each
//! answer reading the count after the increment (the binary's `/count`),
//! while a driver `kill -9`s the servers at random moments and starts them
//! again; every answer is kept in a history, and the history must show
//! that
//!
//! - every increment answered 200 is in the final count (each answered
//!   value is at most the final count);
//! - no value is answered twice;
//! - no read goes backwards: an increment sent after another was answered
//!   `v` answers more than `v`.
//!
//! An increment whose answer never came (the server died holding it), or
//! came as 503, may or may not have happened: the history counts it as
//! unknown, which the checks allow.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::integrity::Rng;

/// Where the servers listen now (none while they are down), and what the
/// clients saw.
#[derive(Default)]
pub struct History {
    addrs: Mutex<Vec<SocketAddr>>,
    moved: Condvar,
    stop: AtomicBool,
    /// The highest value an increment was answered with.
    max_acked: AtomicU64,
    acked: Mutex<Vec<u64>>,
    /// When each was answered.
    acked_at: Mutex<Vec<Instant>>,
    /// Reads that went backwards, as said.
    backwards: Mutex<Vec<String>>,
    unknown: AtomicU64,
}

/// What a run found.
#[derive(Debug)]
pub struct Verdict {
    pub acked: usize,
    pub unknown: u64,
    pub final_count: u64,
}

impl History {
    pub fn new() -> Arc<History> {
        Arc::default()
    }

    /// The servers are up at `addrs` (empty: down).
    pub fn serve_at(&self, addrs: Vec<SocketAddr>) {
        *self.addrs.lock().unwrap() = addrs;
        self.moved.notify_all();
    }

    /// How many increments were answered 200 so far.
    pub fn answers(&self) -> usize {
        self.acked.lock().unwrap().len()
    }

    /// When the first increment answered 200 after `since` was answered.
    pub fn first_answer_after(&self, since: Instant) -> Option<Instant> {
        let at = self.acked_at.lock().unwrap();
        at.iter().copied().filter(|&t| t > since).min()
    }

    /// Stops the clients.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.moved.notify_all();
    }

    /// One client: until stopped, increments (`POST path`) on a
    /// keep-alive connection to one of the servers, making a new one when
    /// it fails.
    pub fn client(self: &Arc<Self>, id: u64, path: &str) {
        let mut rng = Rng::new(id.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        while !self.stop.load(Ordering::SeqCst) {
            let Some(addr) = self.addr(&mut rng) else {
                continue;
            };
            let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else {
                // Dying or not yet up: the driver says when it is.
                self.wait_for_change(addr);
                continue;
            };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let _ = stream.set_nodelay(true);
            while !self.stop.load(Ordering::SeqCst) {
                let floor = self.max_acked.load(Ordering::SeqCst);
                let request = format!("POST {path} HTTP/1.1\r\nHost: a\r\n\r\n");
                let answered = stream
                    .write_all(request.as_bytes())
                    .ok()
                    .and_then(|()| read_answer(&mut stream));
                match answered {
                    Some((200, value)) => {
                        if value <= floor {
                            self.backwards.lock().unwrap().push(format!(
                                "an increment answered {value} after another was answered {floor}"
                            ));
                        }
                        self.acked.lock().unwrap().push(value);
                        self.acked_at.lock().unwrap().push(Instant::now());
                        self.max_acked.fetch_max(value, Ordering::SeqCst);
                    }
                    Some(_) => {
                        self.unknown.fetch_add(1, Ordering::SeqCst);
                    }
                    None => {
                        self.unknown.fetch_add(1, Ordering::SeqCst);
                        break;
                    }
                }
            }
        }
    }

    /// A server to use, or none after waiting for the driver to bring one.
    fn addr(&self, rng: &mut Rng) -> Option<SocketAddr> {
        let addrs = self.addrs.lock().unwrap();
        if addrs.is_empty() {
            let _ = self
                .moved
                .wait_timeout(addrs, Duration::from_millis(100))
                .unwrap();
            return None;
        }
        Some(addrs[rng.below(addrs.len() as u64) as usize])
    }

    /// Waits until the servers' addresses change from what has `addr`.
    fn wait_for_change(&self, addr: SocketAddr) {
        let addrs = self.addrs.lock().unwrap();
        if addrs.contains(&addr) && !self.stop.load(Ordering::SeqCst) {
            // The server may be coming up behind the same address: the
            // wait is bounded, and the client tries again.
            let _ = self
                .moved
                .wait_timeout(addrs, Duration::from_millis(50))
                .unwrap();
        }
    }

    /// Checks the history against `final_count`, what the counter reads
    /// once everything has stopped; panics naming what went wrong.
    pub fn check(&self, final_count: u64, what: &str) -> Verdict {
        let acked = self.acked.lock().unwrap();
        let mut seen = HashSet::new();
        for &value in acked.iter() {
            assert!(seen.insert(value), "{what}: {value} was answered twice");
            assert!(
                value <= final_count,
                "{what}: an increment answered {value} is lost: the count is {final_count}"
            );
        }
        let backwards = self.backwards.lock().unwrap();
        assert!(backwards.is_empty(), "{what}: {backwards:?}");
        Verdict {
            acked: acked.len(),
            unknown: self.unknown.load(Ordering::SeqCst),
            final_count,
        }
    }
}

/// The status and the number in the body of one response, or none if the
/// connection failed first.
fn read_answer(stream: &mut TcpStream) -> Option<(u16, u64)> {
    let mut pending = Vec::new();
    let mut buf = [0u8; 1024];
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(end) = find(&pending, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&pending[..end]).to_string();
            let length: usize = head
                .lines()
                .find_map(|line| line.strip_prefix("Content-Length: "))
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(0);
            if pending.len() >= end + 4 + length {
                let status = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
                let body = String::from_utf8_lossy(&pending[end + 4..end + 4 + length]);
                let value = body.trim().parse().unwrap_or(0);
                return Some((status, value));
            }
        }
        if Instant::now() > deadline {
            return None;
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
