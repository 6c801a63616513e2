//! The blocking handlers' pool is elastic, in both dispatch modes: it
//! grows past the threads it keeps while requests find none idle (sixteen
//! requests that each wait for all the others are all answered), and the
//! threads it added end once idle for its keep-alive; it stops at its
//! maximum, and keeps what it added for as long as its keep-alive says.

mod common;

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use common::{config, start_with, Client, IO_TIMEOUT};
use uppercut_mio_server::{Dispatch, Method, Routes};

/// Sixteen meet here: each waits until all have come, or gives up.
#[derive(Default)]
struct Meeting {
    came: Mutex<usize>,
    all: Condvar,
}

impl Meeting {
    /// True when all sixteen came while this one waited.
    fn meet(&self) -> bool {
        let mut came = self.came.lock().unwrap();
        *came += 1;
        self.all.notify_all();
        let deadline = Instant::now() + IO_TIMEOUT;
        while *came < 16 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            came = self.all.wait_timeout(came, left).unwrap().0;
        }
        true
    }
}

/// The threads of this process whose name starts with `prefix`.
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

fn the_pool_grows_while_requests_wait_and_shrinks_when_idle(dispatch: Dispatch) {
    let meeting = Arc::new(Meeting::default());
    let at = Arc::clone(&meeting);
    let routes = Routes::new()
        .blocking_threads(2)
        .blocking_keep_alive(Duration::from_millis(200))
        .blocking_handler(&[Method::Get], "/meet", move |_, response| {
            response.body(if at.meet() { b"together" } else { b"alone" });
        })
        .reply_timeout(Duration::from_secs(60));
    let server = start_with(&config(dispatch), routes);
    let addr = server.local_addr();
    let clients: Vec<_> = (0..16)
        .map(|_| {
            std::thread::spawn(move || {
                let mut client = Client::connect(addr);
                client.send(b"GET /meet HTTP/1.1\r\nHost: t\r\n\r\n");
                common::text(&client.response(false))
            })
        })
        .collect();
    for client in clients {
        let response = client.join().unwrap();
        assert!(response.ends_with("\r\n\r\ntogether"), "{response}");
    }
    // The pool keeps two; the fourteen it added end once idle.
    let deadline = Instant::now() + IO_TIMEOUT;
    while threads_named("blocking-han") > 2 {
        assert!(
            Instant::now() < deadline,
            "{} threads",
            threads_named("blocking-han")
        );
        // A polling interval, not a wait standing in for the condition.
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(threads_named("blocking-han"), 2);
    drop(server);
}

/// A gate the handlers wait at until the test opens it.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
    /// The threads that served, in order.
    served_on: Mutex<Vec<std::thread::ThreadId>>,
}

impl Gate {
    fn pass(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
        drop(open);
        self.served_on
            .lock()
            .unwrap()
            .push(std::thread::current().id());
    }

    fn set(&self, to: bool) {
        *self.open.lock().unwrap() = to;
        self.opened.notify_all();
    }
}

/// `blocking_max_threads` caps the pool: eight requests held at a gate
/// find four threads, no more, and the other four wait their turn. With a
/// keep-alive of an hour the threads it added stay: a second burst is
/// served on the same four threads.
fn the_pool_stops_at_its_maximum_and_keeps_threads_for_its_keep_alive(dispatch: Dispatch) {
    let gate = Arc::new(Gate::default());
    let at = Arc::clone(&gate);
    let routes = Routes::new()
        .blocking_threads(2)
        .blocking_max_threads(4)
        .blocking_keep_alive(Duration::from_secs(3600))
        .blocking_handler(&[Method::Get], "/gate", move |_, response| {
            at.pass();
            response.body(b"through");
        })
        .reply_timeout(Duration::from_secs(60));
    let server = start_with(&config(dispatch), routes);
    let addr = server.local_addr();
    let burst = |count: usize| -> Vec<std::thread::JoinHandle<String>> {
        (0..count)
            .map(|_| {
                std::thread::spawn(move || {
                    let mut client = Client::connect(addr);
                    client.send(b"GET /gate HTTP/1.1\r\nHost: t\r\n\r\n");
                    common::text(&client.response(false))
                })
            })
            .collect()
    };
    let first = burst(8);
    // Four threads, each held at the gate with a request.
    let deadline = Instant::now() + IO_TIMEOUT;
    while threads_named("blocking-han") < 4 {
        assert!(
            Instant::now() < deadline,
            "{} threads",
            threads_named("blocking-han")
        );
        // A polling interval, not a wait standing in for the condition.
        std::thread::sleep(Duration::from_millis(5));
    }
    gate.set(true);
    for client in first {
        assert!(client.join().unwrap().ends_with("\r\n\r\nthrough"));
    }
    assert_eq!(threads_named("blocking-han"), 4);
    let first_threads: std::collections::HashSet<_> =
        gate.served_on.lock().unwrap().drain(..).collect();
    assert_eq!(first_threads.len(), 4);
    for client in burst(8) {
        assert!(client.join().unwrap().ends_with("\r\n\r\nthrough"));
    }
    let second_threads: std::collections::HashSet<_> =
        gate.served_on.lock().unwrap().drain(..).collect();
    assert!(
        second_threads.is_subset(&first_threads),
        "new threads served the second burst"
    );
    drop(server);
}

/// One mode after the other: the threads of this process are counted,
/// and the two servers' pools would count together.
#[test]
fn the_pool_grows_while_requests_wait_and_shrinks_when_idle_in_both_modes() {
    for dispatch in [Dispatch::Local, Dispatch::System] {
        the_pool_grows_while_requests_wait_and_shrinks_when_idle(dispatch);
        the_pool_stops_at_its_maximum_and_keeps_threads_for_its_keep_alive(dispatch);
    }
}
