//! The long-lived half of `scripts/integrity.sh`: two tests that `cargo
//! test` skips (`#[ignore]`), run by the script as processes of their own.
//!
//! - `serve` runs two servers until it is killed, plain in `local`
//!   dispatch and TLS in `system` dispatch, each with every route the
//!   integrity runs ask, a static directory, an upstream for `/io`, and
//!   WebSocket targets and relays; it feeds a target from threads of its
//!   own when the target's client asks (through `Server::send` and
//!   `WsHandle::send`). It writes where the servers listen, and the CA
//!   the TLS one's certificate comes from, into `INTEGRITY_SOAK_DIR`.
//! - `drive` sends one round of the integrity runs' pipelines and
//!   WebSocket streams through both servers (`INTEGRITY_SEED`), checking
//!   every byte, then ends its connections.
//!
//! The script runs `drive` round after round and samples the serving
//! process's memory between rounds: a server that keeps what it should
//! not (a backlog, a mail bag, a reply) grows.

mod common;

use std::path::PathBuf;
use std::sync::{mpsc, Arc};

use common::integrity::{
    client_frame, read_frame, rounds, seed, sizes, upgrade, Expected, Pace, Reader, Rng, Transport,
};
use common::integrity_http::{
    actor_pipeline, any_canned, burst, io_of_its_length, json_message, plan, run_at_once, Files,
    MAX,
};
use common::integrity_serve::{routes, upstream, write_files};
use common::integrity_ws::{listen, relay_command, text_message, Deliver, Relay, Target, ToFeeder};
use common::start_with;
use uppercut_mio_server::uppercut::api::Envelope;
use uppercut_mio_server::{Config, Dispatch, Server};

/// The seed of what both halves know: the static files, and the sizes
/// of the upstream's answers.
const SHARED_SEED: u64 = 0x50a4_5eed;
/// The upstream's answers are `json_message(IO_STREAM, len, len)`.
const IO_STREAM: u32 = 300;
/// Messages in each WebSocket stream of a round.
const MESSAGES: usize = 40;

/// Where the halves meet: `INTEGRITY_SOAK_DIR`.
fn soak_dir() -> PathBuf {
    let dir = std::env::var_os("INTEGRITY_SOAK_DIR").expect("INTEGRITY_SOAK_DIR is set");
    PathBuf::from(dir)
}

/// Serves until killed; see the module's doc.
#[test]
#[ignore = "run by scripts/integrity.sh"]
fn serve() {
    let dir = soak_dir();
    let files = Files::new(&mut Rng::new(SHARED_SEED));
    write_files(&files, &dir.join("www"));
    let io_sizes: Vec<usize> = plan(&mut Rng::new(SHARED_SEED))
        .into_iter()
        .map(|(len, _)| len)
        .collect();
    let upstream = upstream(move |_, seq| {
        let len = io_sizes[seq % io_sizes.len()];
        Some(json_message(IO_STREAM, len as u32, len))
    });
    let (listening, addresses) = mpsc::channel();
    for (tls, dispatch) in [(false, Dispatch::Local), (true, Dispatch::System)] {
        let transport = Transport::new(tls, &format!("soak-{}", std::process::id()));
        let config = Config {
            static_dir: Some(dir.join("www")),
            upstream: common::upstream::with_upstream(dispatch, upstream.addr).upstream,
            ..transport.config(dispatch)
        };
        let listening = listening.clone();
        std::thread::spawn(move || {
            let (feeder, feeds) = mpsc::channel();
            let routes = routes()
                .websocket("/target", move |_| Target {
                    feeder: feeder.clone(),
                })
                .websocket("/relay", |_| Relay::default());
            let server = start_with(&config, routes);
            let ca = transport.certificates().map(|c| c.ca.to_vec());
            let _ = listening.send((tls, server.local_addr(), ca));
            // Holds the certificates (and the server) for good.
            let _transport = transport;
            feed(&server, &feeds);
        });
    }
    let mut written = String::new();
    for _ in 0..2 {
        let (tls, addr, ca) = addresses.recv().expect("a server started");
        written += &format!("{} {addr}\n", if tls { "tls" } else { "plain" });
        if let Some(ca) = ca {
            std::fs::write(dir.join("ca.der"), ca).expect("write the CA");
        }
    }
    // Whole or not at all, for the script that waits for it.
    std::fs::write(dir.join("addresses.new"), written).expect("write the addresses");
    std::fs::rename(dir.join("addresses.new"), dir.join("addresses")).expect("rename");
    loop {
        std::thread::park();
    }
}

/// Feeds targets as their clients ask: `feed server STREAM SEED` through
/// `Server::send` to the target's address, here; `feed handle STREAM SEED`
/// through its `WsHandle`, from a thread of its own. `MESSAGES` messages of
/// the sizes `sizes` gives with the seed.
fn feed(server: &Server, feeds: &mpsc::Receiver<ToFeeder>) {
    for asked in feeds {
        let ToFeeder::Feed(handle, text) = asked else {
            continue;
        };
        let words: Vec<&str> = text.split(' ').collect();
        let (Some(stream), Some(seed)) = (
            words.get(2).and_then(|w| w.parse().ok()),
            words.get(3).and_then(|w| w.parse().ok()),
        ) else {
            panic!("a feed: {text:?}");
        };
        let sizes = sizes(&mut Rng::new(seed), MESSAGES * rounds(), MAX);
        match words.get(1) {
            Some(&"server") => {
                for (seq, &len) in sizes.iter().enumerate() {
                    let message = Deliver(text_message(stream, seq, len));
                    server
                        .send(handle.address(), Envelope::of(message))
                        .expect("a local address takes mail");
                }
            }
            _ => {
                std::thread::spawn(move || {
                    for (seq, &len) in sizes.iter().enumerate() {
                        // False once the client has gone: nothing to feed.
                        if !handle.send(text_message(stream, seq, len)) {
                            return;
                        }
                    }
                });
            }
        }
    }
}

/// One round through both servers; see the module's doc.
#[test]
#[ignore = "run by scripts/integrity.sh"]
fn drive() {
    let dir = soak_dir();
    let seed = seed();
    let addresses = std::fs::read_to_string(dir.join("addresses")).expect("the addresses");
    let ca = std::fs::read(dir.join("ca.der")).expect("the CA");
    let tls = common::tls::client_config(
        &ca.into(),
        &[&rustls::version::TLS13, &rustls::version::TLS12],
    );
    for line in addresses.lines() {
        let (kind, addr) = line.split_once(' ').expect("KIND ADDRESS");
        let addr = addr.parse().expect("an address");
        let client = (kind == "tls").then(|| Arc::clone(&tls));
        let transport = Transport::client(client);
        let connect = || {
            (0..2)
                .map(|_| transport.connect_to(addr, Pace::SLOW))
                .collect()
        };
        let name = |what: &str| format!("soak, {kind} server, {what}");
        run_at_once(
            connect(),
            |stream| actor_pipeline(seed, stream),
            &name("actors"),
            seed,
        );
        let files = Files::new(&mut Rng::new(SHARED_SEED));
        run_at_once(
            connect(),
            |stream| files.pipeline(seed, stream),
            &name("static files"),
            seed,
        );
        run_at_once(connect(), |stream| io(seed, stream), &name("/io"), seed);
        mail(&transport, addr, seed, &name("WebSocket mail"));
    }
}

/// Connection `stream`'s `/io` pipeline: the burst, then `/io` with
/// canned bodies among them.
fn io(seed: u64, stream: u32) -> Vec<common::integrity_http::Exchange> {
    let mut rng = Rng::new(seed ^ u64::from(stream) << 32);
    let mut exchanges = burst();
    for (_, back_to_back) in plan(&mut rng) {
        if !back_to_back && rng.below(4) == 0 {
            exchanges.push(any_canned(&mut rng));
        }
        exchanges.push(io_of_its_length(IO_STREAM));
    }
    exchanges
}

/// Two targets that read slowly, each fed four streams: from two relays
/// by address (streams 0 and 1), and by the serving process, through
/// `Server::send` (2) and its `WsHandle` (3).
fn mail(transport: &Transport, addr: std::net::SocketAddr, seed: u64, name: &str) {
    let mut targets = Vec::new();
    let mut addresses = Vec::new();
    for _ in 0..2 {
        let mut target = transport.connect_to(addr, Pace::SLOW);
        upgrade(&mut target, "/target");
        let address = read_frame(&mut target).payload;
        addresses.push(String::from_utf8(address).expect("an address"));
        targets.push(target);
    }
    let mut relays: Vec<Reader> = (0..2)
        .map(|_| {
            let mut relay = transport.connect_to(addr, Pace::Fast);
            upgrade(&mut relay, "/relay");
            let to = format!("to {}", addresses.join(" "));
            relay.send(&client_frame(1, to.as_bytes(), [1, 2, 3, 4]));
            relay
        })
        .collect();
    let mut rng = Rng::new(seed);
    let mut streams: Vec<Vec<usize>> = (0..2)
        .map(|_| sizes(&mut rng, MESSAGES * rounds(), MAX))
        .collect();
    let fed = [(2, "server", seed ^ 2), (3, "handle", seed ^ 3)];
    for (_, _, seed) in fed {
        streams.push(sizes(&mut Rng::new(seed), MESSAGES * rounds(), MAX));
    }
    let listeners: Vec<_> = targets
        .into_iter()
        .enumerate()
        .map(|(i, mut target)| {
            for (stream, by, seed) in fed {
                let asked = format!("feed {by} {stream} {seed}");
                target.send(&client_frame(1, asked.as_bytes(), [5, 6, 7, 8]));
            }
            let expected = Expected::new(streams.clone(), seed);
            let name = format!("{name}, target {i} (streams 0 and 1 by send_to, 2 by Server::send, 3 by WsHandle::send)");
            std::thread::spawn(move || listen(target, expected, None, name))
        })
        .collect();
    for (stream, relay) in relays.iter_mut().enumerate() {
        for (seq, &len) in streams[stream].iter().enumerate() {
            let command = relay_command(stream, seq, len);
            relay.send(&client_frame(1, command.as_bytes(), [9, 10, 11, 12]));
        }
    }
    for listener in listeners {
        if let Err(panic) = listener.join() {
            std::panic::resume_unwind(panic);
        }
    }
    // Every relayed message has arrived: the relays may go.
    drop(relays);
}
