//! Counting every allocation in a test process, for the tests that prove the
//! request path allocates nothing. A test binary installs [`Counting`] as
//! its `#[global_allocator]` and keeps one test, so nothing else allocates
//! while it counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use super::Client;

/// How long the probe waits for the server.
const IO_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// The system allocator, counting allocations and reallocations.
pub struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Allocations anywhere in the process while `work` runs, and how many a
/// server may make meanwhile without allocating per request: a poller hands
/// its worker back to uppercut about once a second, and that message
/// allocates a few times, so the allowance grows with the time taken (a
/// loaded machine takes longer). A per-request allocation would show up
/// once per request, far above it.
pub fn during(work: impl FnOnce()) -> (usize, usize) {
    let start = Instant::now();
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    work();
    let counted = ALLOCATIONS.load(Ordering::Relaxed) - before;
    let allowed = 50 + 50 * start.elapsed().as_secs() as usize;
    (counted, allowed)
}

/// Allocations anywhere in the process while one request is answered on a
/// fresh connection to `addr`: the server's accept and connection state
/// allocate on its own threads (whatever the dispatch), and the client side
/// here allocates nothing, so a count above zero shows that the counter
/// sees the server's threads. (The round trips of `system` dispatch prove
/// nothing of the kind: when a connection finds the next batch before its
/// socket runs dry, no envelope, and no allocation, goes through uppercut.)
pub fn during_a_fresh_connection(addr: SocketAddr) -> usize {
    let mut chunk = [0u8; 4096];
    let (counted, _) = during(|| {
        let mut stream = TcpStream::connect(addr).unwrap();
        // A stalled server fails the test instead of hanging it.
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .unwrap();
        while stream.read(&mut chunk).expect("the answer, then the end") > 0 {}
    });
    counted
}

/// Allocations made anywhere in the process while one keep-alive connection
/// to `addr` does `requests` round trips of `pipelined`, after checking that
/// its responses start with `statuses` and a warm-up (thread-local scratch
/// buffers, the slab, lazily built statics), and the allowance of [`during`].
pub fn during_round_trips(
    addr: SocketAddr,
    pipelined: &[u8],
    statuses: &[&str],
    requests: usize,
) -> (usize, usize) {
    let mut client = Client::connect(addr);
    client.send(pipelined);
    let mut answer_len = 0;
    for status in statuses {
        let response = client.response(false);
        let status_line = format!("HTTP/1.1 {status} ");
        assert!(response.starts_with(status_line.as_bytes()), "not {status}");
        answer_len += response.len();
    }
    let mut stream: TcpStream = client.stream;
    let mut answer = vec![0u8; answer_len];
    let mut round_trip = |stream: &mut TcpStream| {
        stream.write_all(pipelined).unwrap();
        stream.read_exact(&mut answer).unwrap();
    };
    for _ in 0..1_000 {
        round_trip(&mut stream);
    }
    during(|| {
        for _ in 0..requests {
            round_trip(&mut stream);
        }
    })
}

/// Proves the counter sees what the server's threads allocate: a handler
/// route that allocates once per request, by design, must be counted at
/// least once per request, with the same client as the real measurement.
/// Without this, a counter that missed other threads would make every
/// "allocates nothing" check pass.
pub fn assert_counter_sees_server_threads(dispatch: uppercut_mio_server::Dispatch) {
    use uppercut_mio_server::{Method, Routes};
    const REQUESTS: usize = 1_000;
    let routes = Routes::new().handler(&[Method::Get], "/allocate", |_, response| {
        let allocated = std::hint::black_box(Box::new([1u8]));
        response.body(&allocated[..]);
    });
    let server = super::start_with(&super::config(dispatch), routes);
    let request = b"GET /allocate HTTP/1.1\r\nHost: t\r\n\r\n";
    let (counted, _) = during_round_trips(server.local_addr(), request, &["200"], REQUESTS);
    assert!(
        counted >= REQUESTS,
        "{counted} allocations counted for {REQUESTS} requests that each allocate"
    );
}
