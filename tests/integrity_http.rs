//! Integrity of HTTP responses that wait: every byte and the order of
//! every response, pipelined many at a time behind readers that stall,
//! from each kind of actor route (a shared actor, one per poller, a
//! blocking actor, a blocking handler; each answering now or from another
//! thread, through the poller's reply queue) among canned and handler
//! responses, from static files larger than the socket buffer, and from
//! `/io`'s upstream; with bodies from one byte to past the output
//! high-water mark, on both pollers at once, in both dispatch modes, plain
//! and over TLS. The routes and the shapes of the pipelines are in
//! `common::integrity_http`.
//!
//! A short run here; `scripts/integrity.sh` runs the same tests for
//! minutes, over many seeds (`INTEGRITY_SEED`, `INTEGRITY_ROUNDS`).

mod common;
mod static_common;

use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use common::integrity::{message, rounds, seed, sizes, Pace, Rng, Transport};
use common::integrity_http::{
    any_canned, burst, head, json_message, pipeline, plan, rounds_of, routes, run_on_both_pollers,
    some_range, Body, Exchange, Kind, MAX,
};
use common::{start_with, wait_for_open};
use static_common::{etag_of, TempTree};
use uppercut_mio_server::{Config, Dispatch};

/// Each connection pipelines requests for bodies of the schedule's sizes
/// to every kind of actor route, the inline handler and the canned
/// routes, in an order the seed picks; then calls back to back.
fn actor_answers_arrive_intact(dispatch: Dispatch, tls: bool) {
    let seed = seed();
    let name = format!("actors-{}-{tls}", dispatch.name());
    let transport = Transport::new(tls, &name);
    let server = start_with(&transport.config(dispatch), routes());
    let pipelines = |stream: u32| {
        let any_route = |rng: &mut Rng, seq, len| match rng.below(6) {
            0 => Kind::Inline.exchange(stream, seq, len),
            1 => any_canned(rng),
            _ => Kind::any_call(rng).exchange(stream, seq, len),
        };
        let call = |rng: &mut Rng, seq, len| vec![Kind::any_call(rng).exchange(stream, seq, len)];
        rounds_of(
            &mut Rng::new(seed ^ u64::from(stream) << 32),
            any_route,
            call,
        )
    };
    run_on_both_pollers(&server, &transport, pipelines, &name, seed);
}

fn actor_answers_arrive_intact_plain(dispatch: Dispatch) {
    actor_answers_arrive_intact(dispatch, false);
}

fn actor_answers_arrive_intact_over_tls(dispatch: Dispatch) {
    actor_answers_arrive_intact(dispatch, true);
}

in_both_modes!(
    actor_answers_arrive_intact_plain,
    actor_answers_arrive_intact_over_tls
);

/// Static files: file K holds message K of stream 200.
const STATIC_STREAM: u32 = 200;

/// A static directory: one file per size of a schedule.
struct Files {
    tree: TempTree,
    /// Each file's length, and the fields of its response but the length.
    files: Vec<(usize, String)>,
}

impl Files {
    fn new(name: &str, rng: &mut Rng) -> Files {
        let tree = TempTree::new(name);
        let files = sizes(rng, 16 * rounds(), MAX)
            .into_iter()
            .enumerate()
            .map(|(k, len)| {
                let content = message(STATIC_STREAM, k as u32, len);
                tree.file(&format!("www/f{k}.bin"), &content);
                let fields = format!(
                    "Content-Type: application/octet-stream\r\n\
                     Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
                     ETag: {}\r\nAccept-Ranges: bytes\r\n",
                    etag_of(&content)
                );
                (len, fields)
            })
            .collect();
        Files { tree, files }
    }

    /// `GET` file `k` whole.
    fn whole(&self, k: usize) -> Exchange {
        let (len, fields) = &self.files[k];
        let body = Body::Message {
            stream: STATIC_STREAM,
            seq: k as u32,
            len: *len,
        };
        Exchange::get(&format!("/f{k}.bin"), fields, body)
    }

    /// `GET` a range of file `k` that `rng` picks, at most `most` bytes.
    fn part(&self, k: usize, rng: &mut Rng, most: usize) -> Exchange {
        let (len, fields) = &self.files[k];
        let mut range = some_range(rng, *len);
        range.end = range.end.min(range.start.saturating_add(most));
        let (first, last) = (range.start, range.end - 1);
        Exchange {
            request: format!(
                "GET /f{k}.bin HTTP/1.1\r\nHost: t\r\nRange: bytes={first}-{last}\r\n\r\n"
            ),
            head: head(
                "206 Partial Content",
                &format!("{fields}Content-Range: bytes {first}-{last}/{len}\r\n"),
                range.len(),
            ),
            body: Body::Part {
                stream: STATIC_STREAM,
                seq: k as u32,
                len: *len,
                range,
            },
        }
    }

    fn any(&self, rng: &mut Rng) -> usize {
        rng.below(self.files.len() as u64) as usize
    }
}

/// Files of the schedule's sizes, larger ones many times the socket
/// buffer, asked for whole and in ranges, pipelined with a blocking
/// handler's answers among them; then calls back to back, each after a
/// small range of a file.
fn static_files_arrive_intact(dispatch: Dispatch, tls: bool) {
    let seed = seed();
    let name = format!("static-{}-{tls}", dispatch.name());
    let transport = Transport::new(tls, &name);
    let files = Files::new(&name, &mut Rng::new(seed));
    let config = Config {
        static_dir: Some(files.tree.root.join("www")),
        ..transport.config(dispatch)
    };
    let server = start_with(&config, routes());
    let pipelines = |stream: u32| {
        let any_file = |rng: &mut Rng, seq, len| match rng.below(6) {
            0 => Kind::BlockingHandler.exchange(stream, seq, len),
            1 => files.part(files.any(rng), rng, usize::MAX),
            _ => files.whole(files.any(rng)),
        };
        let part_then_call = |rng: &mut Rng, seq, len| {
            let part = files.part(files.any(rng), rng, 16 * 1024);
            vec![part, Kind::BlockingHandler.exchange(stream, seq, len)]
        };
        let rng = &mut Rng::new(seed ^ u64::from(stream) << 32);
        rounds_of(rng, any_file, part_then_call)
    };
    run_on_both_pollers(&server, &transport, pipelines, &name, seed);
}

fn static_files_arrive_intact_plain(dispatch: Dispatch) {
    static_files_arrive_intact(dispatch, false);
}

fn static_files_arrive_intact_over_tls(dispatch: Dispatch) {
    static_files_arrive_intact(dispatch, true);
}

in_both_modes!(
    static_files_arrive_intact_plain,
    static_files_arrive_intact_over_tls
);

/// An upstream for `/io` that answers the requests on its Nth connection
/// with stream N's messages in order, as JSON of `sizes`: every other
/// one chunked.
fn upstream(sizes: Vec<usize>) -> common::upstream::Upstream {
    let streams: Mutex<HashMap<SocketAddr, (u32, usize)>> = Mutex::default();
    common::upstream::spawn(move |socket: &mut TcpStream| {
        let Ok(peer) = socket.peer_addr() else {
            return false;
        };
        let (stream, seq) = {
            let mut streams = streams.lock().unwrap();
            let count = streams.len() as u32;
            let entry = streams.entry(peer).or_insert((count, 0));
            entry.1 += 1;
            (entry.0, entry.1 - 1)
        };
        let Some(&len) = sizes.get(seq) else {
            return false;
        };
        let body = json_message(stream, seq as u32, len);
        let mut answer = b"HTTP/1.1 200 OK\r\n".to_vec();
        if seq % 2 == 0 {
            answer.extend(format!("Content-Length: {len}\r\n\r\n").as_bytes());
            answer.extend(&body);
        } else {
            answer.extend(b"Transfer-Encoding: chunked\r\n\r\n");
            let (a, b) = body.split_at(len / 2);
            for chunk in [a, b].into_iter().filter(|c| !c.is_empty()) {
                answer.extend(format!("{:x}\r\n", chunk.len()).as_bytes());
                answer.extend(chunk);
                answer.extend(b"\r\n");
            }
            answer.extend(b"0\r\n\r\n");
        }
        socket.write_all(&answer).is_ok()
    })
}

/// `/io` passes on upstream bodies of the schedule's sizes, pipelined
/// with canned responses among them, to a slow reader on each poller;
/// then `/io` back to back. A connection's `/io` requests go one at a
/// time over its poller's one upstream connection, so the first
/// connection's poller gets the upstream's stream 0 (asked before the
/// second connection opens), the other stream 1, each in the same sizes.
fn upstream_bodies_arrive_intact(dispatch: Dispatch, tls: bool) {
    let seed = seed();
    let name = format!("io-{}-{tls}", dispatch.name());
    let transport = Transport::new(tls, &name);
    let plan = plan(&mut Rng::new(seed));
    let sizes: Vec<usize> = plan.iter().map(|&(len, _)| len).collect();
    let upstream = upstream(sizes.clone());
    let config = Config {
        upstream: common::upstream::with_upstream(dispatch, upstream.addr).upstream,
        ..transport.config(dispatch)
    };
    let server = start_with(&config, routes());
    let io = |stream: u32, seq: usize| {
        let json = "Content-Type: application/json\r\n";
        let (seq, len) = (seq as u32, sizes[seq]);
        Exchange::get("/io", json, Body::Json { stream, seq, len })
    };
    let mut first = transport.connect(&server, Pace::SLOW);
    pipeline(&mut first, &[io(0, 0)], &name, seed);
    let second = transport.connect(&server, Pace::SLOW);
    wait_for_open(&server, 2);
    assert_eq!(server.connections_per_poller(), vec![1, 1], "both pollers");
    std::thread::scope(|scope| {
        let runs: Vec<_> = [(0, first, 1), (1, second, 0)]
            .into_iter()
            .map(|(stream, mut reader, from)| {
                let mut rng = Rng::new(seed ^ u64::from(stream) << 32);
                let mut exchanges = burst();
                for (seq, &(_, back_to_back)) in plan.iter().enumerate().skip(from) {
                    // Canned bodies among the schedule's, none among the
                    // calls back to back.
                    if !back_to_back && rng.below(4) == 0 {
                        exchanges.push(any_canned(&mut rng));
                    }
                    exchanges.push(io(stream, seq));
                }
                let name = format!("{name}, connection {stream}");
                scope.spawn(move || pipeline(&mut reader, &exchanges, &name, seed))
            })
            .collect();
        for run in runs {
            if let Err(panic) = run.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
    assert_eq!(upstream.accepted.load(Ordering::Relaxed), 2);
}

fn upstream_bodies_arrive_intact_plain(dispatch: Dispatch) {
    upstream_bodies_arrive_intact(dispatch, false);
}

fn upstream_bodies_arrive_intact_over_tls(dispatch: Dispatch) {
    upstream_bodies_arrive_intact(dispatch, true);
}

in_both_modes!(
    upstream_bodies_arrive_intact_plain,
    upstream_bodies_arrive_intact_over_tls
);
