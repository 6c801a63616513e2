//! Integrity of HTTP responses that wait: every byte and the order of
//! every response, pipelined many at a time behind readers that stall,
//! from each kind of actor route (a shared actor, one per poller, a
//! blocking actor, a blocking handler; each answering now or from another
//! thread, through the poller's reply queue) among canned and handler
//! responses, from static files larger than the socket buffer, and from
//! `/io`'s upstream; with bodies from one byte to past the output
//! high-water mark, on both pollers at once, in both dispatch modes, plain
//! and over TLS. The pipelines are `common::integrity_http`, what the
//! server answers with `common::integrity_serve`.
//!
//! A short run here; `scripts/integrity.sh` runs the same tests for
//! minutes, over many seeds (`INTEGRITY_SEED`, `INTEGRITY_ROUNDS`).

mod common;

use std::sync::atomic::Ordering;

use common::integrity::{seed, Pace, Rng, Transport};
use common::integrity_http::{
    actor_pipeline, any_canned, burst, json_message, pipeline, plan, run_at_once,
    run_on_both_pollers, Body, Exchange, Files, JSON,
};
use common::integrity_serve::{routes, static_dir, upstream};
use common::{start_with, wait_for_open};
use uppercut_mio_server::{Config, Dispatch};

/// Each connection pipelines requests for bodies of the schedule's sizes
/// to every kind of actor route, the inline handler and the canned
/// routes, in an order the seed picks; then calls back to back.
fn actor_answers_arrive_intact(dispatch: Dispatch, tls: bool) {
    let seed = seed();
    let name = format!("actors-{}-{tls}", dispatch.name());
    let transport = Transport::new(tls, &name);
    let server = start_with(&transport.config(dispatch), routes());
    let pipelines = |stream| actor_pipeline(seed, stream);
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

/// Files of the schedule's sizes, larger ones many times the socket
/// buffer, asked for whole and in ranges, pipelined with a blocking
/// handler's answers among them; then calls back to back, each after a
/// small range of a file.
fn static_files_arrive_intact(dispatch: Dispatch, tls: bool) {
    let seed = seed();
    let name = format!("static-{}-{tls}", dispatch.name());
    let transport = Transport::new(tls, &name);
    let files = Files::new(&mut Rng::new(seed));
    let dir = static_dir(&name, &files);
    let config = Config {
        static_dir: Some(dir.path.clone()),
        ..transport.config(dispatch)
    };
    let server = start_with(&config, routes());
    let pipelines = |stream| files.pipeline(seed, stream);
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

/// `/io` passes on upstream bodies of the schedule's sizes (JSON strings,
/// every other one chunked), pipelined with canned responses among them,
/// to a slow reader on each poller; then `/io` back to back. A
/// connection's `/io` requests go one at a time over its poller's one
/// upstream connection, so the first connection's poller gets the
/// upstream's stream 0 (asked before the second connection opens), the
/// other stream 1, each in the same sizes.
fn upstream_bodies_arrive_intact(dispatch: Dispatch, tls: bool) {
    let seed = seed();
    let name = format!("io-{}-{tls}", dispatch.name());
    let transport = Transport::new(tls, &name);
    let plan = plan(&mut Rng::new(seed));
    let sizes: Vec<usize> = plan.iter().map(|&(len, _)| len).collect();
    let upstream = {
        let sizes = sizes.clone();
        upstream(move |stream, seq| Some(json_message(stream, seq as u32, *sizes.get(seq)?)))
    };
    let config = Config {
        upstream: common::upstream::with_upstream(dispatch, upstream.addr).upstream,
        ..transport.config(dispatch)
    };
    let server = start_with(&config, routes());
    let io = |stream: u32, seq: usize| {
        let (seq, len) = (seq as u32, sizes[seq]);
        Exchange::get("/io", JSON, Body::Json { stream, seq, len })
    };
    let mut first = transport.connect(&server, Pace::SLOW);
    pipeline(&mut first, &[io(0, 0)], &name, seed);
    let second = transport.connect(&server, Pace::SLOW);
    wait_for_open(&server, 2);
    assert_eq!(server.connections_per_poller(), vec![1, 1], "both pollers");
    let pipelines = |stream: u32| {
        let mut rng = Rng::new(seed ^ u64::from(stream) << 32);
        let mut exchanges = burst();
        // The first connection had its stream's first answer already.
        let from = usize::from(stream == 0);
        for (seq, &(_, back_to_back)) in plan.iter().enumerate().skip(from) {
            // Canned bodies among the schedule's, none among the calls
            // back to back.
            if !back_to_back && rng.below(4) == 0 {
                exchanges.push(any_canned(&mut rng));
            }
            exchanges.push(io(stream, seq));
        }
        exchanges
    };
    run_at_once(vec![first, second], pipelines, &name, seed);
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
