//! No allocation per static-file request in `local` dispatch, for the
//! answers the request path builds per request: a 206, a 416, a 304 by
//! date, a range guarded by `If-Range`, a redirect keeping its query, and a
//! path with merged slashes, after a reload has swapped the table in (so
//! the pollers picked the new table up during the warm-up). Its own test
//! binary, with one test, so no other test allocates while it counts.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use common::{config, start_with};
use uppercut_mio_server::{Dispatch, Routes, StaticLimits, StaticSite};

#[global_allocator]
static COUNTING: common::alloc::Counting = common::alloc::Counting;

const REQUESTS: usize = 10_000;
const PIPELINED: &[u8] = b"GET /v1-user.json HTTP/1.1\r\nHost: t\r\nRange: bytes=10-99\r\n\r\n\
    GET //v1-user.json HTTP/1.1\r\nHost: t\r\nRange: bytes=-5\r\n\r\n\
    GET /v1%2Duser.json HTTP/1.1\r\nHost: t\r\nRange: bytes=5000-\r\n\r\n\
    GET /v1-user.json HTTP/1.1\r\nHost: t\r\n\
    If-Modified-Since: Fri, 01 Jan 2021 00:00:00 GMT\r\n\r\n\
    GET /v1-user.json HTTP/1.1\r\nHost: t\r\nRange: bytes=0-0\r\n\
    If-Range: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n\
    GET /sub?a=1&b=2 HTTP/1.1\r\nHost: t\r\n\r\n";
/// The status of each response to `PIPELINED`.
const STATUSES: [&str; 6] = ["206", "206", "416", "304", "206", "301"];

/// Allocations made anywhere in the process while one keep-alive connection
/// does `REQUESTS` round trips of `PIPELINED`, after a reload and a warm-up.
fn allocations_during_requests(dispatch: Dispatch, dir: &Path) -> (usize, usize) {
    let site = Arc::new(StaticSite::load(dir, StaticLimits::default(), false).expect("loads"));
    let routes = Routes::standard().with_static_site(site.clone());
    let server = start_with(&config(dispatch), routes);
    site.reload().expect("the reload works");
    common::alloc::during_round_trips(server.local_addr(), PIPELINED, &STATUSES, REQUESTS)
}

#[test]
fn static_answers_allocate_nothing_per_request() {
    let dir = std::env::temp_dir().join(format!("uppercut-alloc-static-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).expect("create the directory");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/v1-user.json");
    let copy = dir.join("v1-user.json");
    std::fs::copy(fixture, &copy).expect("copy the fixture");
    // Sun, 06 Nov 1994 08:49:37 GMT, which the If-Range date names.
    let mtime = UNIX_EPOCH + Duration::from_secs(784_111_777);
    let file = std::fs::File::options()
        .write(true)
        .open(&copy)
        .expect("open");
    file.set_modified(mtime).expect("set the mtime");
    let (local, allowed) = allocations_during_requests(Dispatch::Local, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    println!("allocations for {REQUESTS} round trips: local {local}");
    assert!(
        local < allowed,
        "local dispatch allocated {local} times in {REQUESTS} round trips"
    );
    common::alloc::assert_counter_sees_server_threads(Dispatch::Local);
}
