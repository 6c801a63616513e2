//! Integrity across servers: a room (a topic) whose members and talkers
//! sit on two and three servers joined through a real nats-server, with
//! messages from 100 bytes to 512 KiB and bursts many times larger than
//! `--nats-buffer`. Every member, on every server, gets every talker's
//! messages whole, once and in order, and no send is refused: a talker
//! that outruns its server's NATS link is slowed (its connection stops
//! reading), not cut off, and nothing is dropped. Members read slowly
//! and quickly; the test's own window keeps talkers within the members'
//! outbound limit, which would rightly cut off a member that far behind.
//!
//! Owned actors' messages across servers (an actor that outruns the link
//! pauses) are here too. A short run; `scripts/integrity.sh` runs the same
//! for minutes over many seeds, and the fault run (NATS stopped and
//! continued, restarted) with `INTEGRITY_FAULTS=1`.

mod common;

use std::sync::{mpsc, Arc};

use common::integrity::{
    client_frame, message, read_frame, rounds, seed, sizes, upgrade, Expected, Pace, Reader, Rng,
    Transport, Window,
};
use common::integrity_ws::listen;
use common::nats::Nats;
use common::{start_with, IO_TIMEOUT};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{
    last_send_error, ActorRequest, ActorResponse, Config, Dispatch, Message, Method, Outgoing,
    Routes, Server, WebSocket, WsContext,
};

/// The largest message: half a MiB, under NATS's default `max_payload`.
const MAX: usize = 512 * 1024;
/// What may wait for NATS per poller: a burst is many times this.
const BUFFER: usize = 64 * 1024;
/// How far talkers may run ahead of the slowest member (the outbound
/// limit, 16 MiB, would cut it off).
const WINDOW: u64 = 4 << 20;

/// A member subscribes to the room and listens.
struct Member;

impl WebSocket for Member {
    fn on_open(&mut self, context: &mut WsContext<'_>) {
        context.subscribe("room");
        context.send_text("joined");
    }

    fn on_message(&mut self, _message: Message<'_>, _context: &mut WsContext<'_>) {}
}

/// A talker publishes what its client says to the room; the server
/// must never refuse it while every server and NATS are up.
struct Talker {
    refused: mpsc::Sender<String>,
}

impl WebSocket for Talker {
    fn on_message(&mut self, message: Message<'_>, context: &mut WsContext<'_>) {
        if let Message::Text(text) = message {
            if let Err(e) = context.publish("room", &Outgoing::text(text)) {
                let _ = self.refused.send(format!("{}: {e}", context.address()));
            }
        }
    }
}

/// Server `node` of a cluster on `nats`, with a small NATS buffer and
/// metrics.
fn node(nats: &Nats, node: &str, dispatch: Dispatch, routes: Routes) -> Server {
    node_with(nats, node, common::config(dispatch), routes)
}

/// Server `node` of a cluster on `nats` as `config` says, with a small
/// NATS buffer and metrics.
fn node_with(nats: &Nats, node: &str, config: Config, routes: Routes) -> Server {
    let mut cluster = nats.cluster(node);
    cluster.buffer = BUFFER;
    let config = Config {
        cluster: Some(cluster),
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        ..config
    };
    let server = start_with(&config, routes);
    common::durable::wait_cluster_ready(&server);
    server
}

/// A metric of `server`.
fn sample(server: &Server, series: &str) -> u64 {
    common::durable::sample(server.metrics_addr().expect("metrics on"), series)
}

/// Members (one fast, one slow) and a talker on each of `servers`
/// servers; every member hears every talker's stream whole and in order.
fn a_room_across_servers_arrives_intact(dispatch: Dispatch, servers: usize) {
    let seed = seed();
    let nats = Nats::start();
    let (refused, refusals) = mpsc::channel();
    let nodes: Vec<Server> = (0..servers)
        .map(|n| {
            let refused = refused.clone();
            let routes =
                Routes::new()
                    .websocket("/member", |_| Member)
                    .websocket("/talk", move |_| Talker {
                        refused: refused.clone(),
                    });
            node(&nats, &format!("n{n}"), dispatch, routes)
        })
        .collect();
    drop(refused);
    let transport = Transport::new(false, "room-across");
    let paces = [Pace::Fast, Pace::SLOW];
    let mut members = Vec::new();
    for node in &nodes {
        for &pace in &paces {
            let mut member = transport.connect(node, pace);
            upgrade(&mut member, "/member");
            assert_eq!(read_frame(&mut member).payload, b"joined");
            members.push((
                member,
                format!("member on {} ({pace:?})", node.local_addr()),
            ));
        }
    }
    nats.wait_for_subscribers("upc.t.room", servers);
    let mut rng = Rng::new(seed);
    let streams: Vec<Vec<usize>> = (0..servers)
        .map(|_| {
            let mut sizes = sizes(&mut rng, 40 * rounds(), MAX);
            // 100 bytes and up: the small edges are the local tests'.
            sizes.iter_mut().for_each(|size| *size = (*size).max(100));
            sizes
        })
        .collect();
    let window = Window::new(members.len(), WINDOW);
    let listeners: Vec<_> = members
        .into_iter()
        .enumerate()
        .map(|(i, (member, name))| {
            let expected = Expected::new(streams.clone(), seed);
            let window = (Arc::clone(&window), i);
            std::thread::spawn(move || listen(member, expected, Some(window), name))
        })
        .collect();
    let talkers: Vec<_> = nodes
        .iter()
        .zip(streams)
        .enumerate()
        .map(|(stream, (node, sizes))| {
            let mut talker = transport.connect(node, Pace::Fast);
            upgrade(&mut talker, "/talk");
            let window = Arc::clone(&window);
            std::thread::spawn(move || {
                let mut rng = Rng::new(seed ^ stream as u64);
                for (seq, len) in sizes.into_iter().enumerate() {
                    let text = message(stream as u32, seq as u32, len);
                    let mask = rng.next().to_le_bytes();
                    window.before_send(len);
                    talker.send(&client_frame(
                        1,
                        &text,
                        [mask[0], mask[1], mask[2], mask[3]],
                    ));
                }
                talker
            })
        })
        .collect();
    let _talkers: Vec<Reader> = talkers.into_iter().map(|t| t.join().unwrap()).collect();
    for listener in listeners {
        if let Err(panic) = listener.join() {
            std::panic::resume_unwind(panic);
        }
    }
    let refusals: Vec<String> = refusals.try_iter().collect();
    assert!(refusals.is_empty(), "seed {seed}: refused {refusals:?}");
    // The bursts outran the links: the talkers were slowed, not refused.
    let pressed: u64 = nodes
        .iter()
        .map(|node| sample(node, "uppercut_nats_backpressure_total"))
        .sum();
    assert!(pressed > 0, "seed {seed}: no send went past the buffer");
    for node in &nodes {
        assert_eq!(
            sample(node, "uppercut_nats_refused_total{reason=\"buffer_full\"}"),
            0
        );
    }
}

fn a_room_across_two_servers_arrives_intact(dispatch: Dispatch) {
    a_room_across_servers_arrives_intact(dispatch, 2);
}

fn a_room_across_three_servers_arrives_intact(dispatch: Dispatch) {
    a_room_across_servers_arrives_intact(dispatch, 3);
}

in_both_modes!(
    a_room_across_two_servers_arrives_intact,
    a_room_across_three_servers_arrives_intact
);

/// The streams of `actor_messages_across_servers_arrive_intact`, by sender.
const BY_ACTOR: u32 = 0;
const BY_BLOCKING: u32 = 1;
const BY_SERVER_SEND: u32 = 2;

/// Sends message `seq` of its stream, of the length it is told, to
/// `sink@b` for each message it gets: an owned actor that outruns the link
/// is paused between messages, and its later messages wait for it.
struct Pump {
    stream: u32,
    seq: u32,
    /// What went wrong, said to the test at the end.
    refused: Vec<String>,
}

impl AnyActor for Pump {
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        let message = match envelope.message.downcast::<ActorRequest>() {
            Ok(request) => {
                return request.respond(ActorResponse::text(self.refused.join("\n")));
            }
            Err(message) => message,
        };
        let Ok(len) = message.downcast::<usize>() else {
            return;
        };
        let bytes = common::integrity::message(self.stream, self.seq, *len);
        sender.send("sink@b", Envelope::of(bytes));
        if let Some(error) = last_send_error() {
            self.refused
                .push(format!("{} {}: {error}", self.stream, self.seq));
        }
        self.seq += 1;
    }
}

/// Checks every message from every stream as it arrives (its stream from
/// its first letter, its bytes from its place); tells a request what it
/// saw. Nothing panics in here: the test reads the verdict.
struct Sink {
    streams: Vec<Vec<usize>>,
    next: Vec<usize>,
    wrong: Vec<String>,
}

impl AnyActor for Sink {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        let bytes = match envelope.message.downcast::<Vec<u8>>() {
            Ok(bytes) => *bytes,
            Err(message) => {
                if let Ok(request) = message.downcast::<ActorRequest>() {
                    let counts: Vec<String> = self.next.iter().map(usize::to_string).collect();
                    let body = format!("{} | {}", counts.join(" "), self.wrong.join("; "));
                    request.respond(ActorResponse::text(body));
                }
                return;
            }
        };
        let stream = usize::from(bytes.first().copied().unwrap_or(0).wrapping_sub(b'a'));
        let Some(next) = self.next.get_mut(stream) else {
            return self
                .wrong
                .push(format!("{} bytes of no stream", bytes.len()));
        };
        let want = self.streams[stream]
            .get(*next)
            .map(|&len| message(stream as u32, *next as u32, len));
        if want.as_deref() != Some(&bytes[..]) {
            self.wrong.push(format!(
                "stream {stream} message {next}: {} bytes, not as sent",
                bytes.len()
            ));
        }
        *next += 1;
    }
}

/// Three senders on server a send streams of messages of 100 bytes to 512
/// KiB, many times `--nats-buffer` in all, to one actor on server b: an
/// owned actor (paused when it outruns its link), a blocking actor (its
/// thread waits) and `Server::send` from the test's thread (which blocks).
/// Every message arrives whole, in its stream's order, and none is
/// refused.
fn actor_messages_across_servers_arrive_intact(dispatch: Dispatch) {
    let seed = seed();
    let nats = Nats::start();
    let mut rng = Rng::new(seed);
    let streams: Vec<Vec<usize>> = (0..3)
        .map(|_| {
            let mut sizes = sizes(&mut rng, 40 * rounds(), MAX);
            sizes.iter_mut().for_each(|size| *size = (*size).max(100));
            sizes
        })
        .collect();
    let sink = Sink {
        next: vec![0; streams.len()],
        streams: streams.clone(),
        wrong: Vec::new(),
    };
    let b = node(
        &nats,
        "b",
        dispatch,
        Routes::new()
            .spawn("sink", sink)
            .actor(&[Method::Get], "/sink", "sink"),
    );
    let pump = |stream| Pump {
        stream,
        seq: 0,
        refused: Vec::new(),
    };
    let a = node(
        &nats,
        "a",
        dispatch,
        Routes::new()
            .spawn("pump", pump(BY_ACTOR))
            .spawn_blocking("blocking-pump", 1, move |_| pump(BY_BLOCKING))
            .actor(&[Method::Get], "/pump", "pump")
            .actor(&[Method::Get], "/blocking-pump", "blocking-pump"),
    );
    for &len in &streams[BY_ACTOR as usize] {
        a.send("pump", Envelope::of(len)).unwrap();
    }
    for &len in &streams[BY_BLOCKING as usize] {
        a.send("blocking-pump", Envelope::of(len)).unwrap();
    }
    for (seq, &len) in streams[BY_SERVER_SEND as usize].iter().enumerate() {
        let bytes = message(BY_SERVER_SEND, seq as u32, len);
        a.send("sink@b", Envelope::of(bytes))
            .unwrap_or_else(|e| panic!("seed {seed}: Server::send refused {seq}: {e}"));
    }
    let want: Vec<String> = streams.iter().map(|s| s.len().to_string()).collect();
    let want = format!("{} | ", want.join(" "));
    let deadline = std::time::Instant::now() + 4 * IO_TIMEOUT;
    let mut client = common::Client::connect(b.local_addr());
    loop {
        client.send(b"GET /sink HTTP/1.1\r\nHost: b\r\n\r\n");
        let response = common::text(&client.response(false));
        let body = response.split("\r\n\r\n").nth(1).unwrap_or_default();
        if body == want {
            break;
        }
        assert!(
            !body.contains(" | ") || body.ends_with(" | "),
            "seed {seed}: {body}"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "seed {seed}: only {body} of {want} arrived"
        );
        // A polling interval, not a wait standing in for the condition.
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let mut client = common::Client::connect(a.local_addr());
    for path in ["/pump", "/blocking-pump"] {
        client.send(format!("GET {path} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes());
        let response = common::text(&client.response(false));
        let body = response.split("\r\n\r\n").nth(1).unwrap_or_default();
        assert_eq!(body, "", "seed {seed}: {path} was refused");
    }
    assert!(sample(&a, "uppercut_nats_backpressure_total") > 0);
    assert_eq!(
        sample(&a, "uppercut_nats_refused_total{reason=\"buffer_full\"}"),
        0
    );
}

in_both_modes!(actor_messages_across_servers_arrive_intact);

/// The state of thread `tid` of this process: blocked in the kernel
/// waiting for room to write (a socket the other side stopped reading).
fn blocked_writing(tid: i32) -> bool {
    let task = format!("/proc/self/task/{tid}");
    let wchan = std::fs::read_to_string(format!("{task}/wchan")).unwrap_or_default();
    let stat = std::fs::read_to_string(format!("{task}/stat")).unwrap_or_default();
    let sleeping = stat
        .rsplit_once(") ")
        .is_some_and(|(_, rest)| rest.starts_with('S'));
    sleeping && (wchan == "wait_woken" || wchan == "sk_stream_wait_memory")
}

/// With NATS stopped, a talker sends far more than its server can send
/// on: its connection stops reading once `--nats-buffer` is past, so the
/// talker's own writes block (TCP's flow control reaches the client),
/// and the server holds no more than the buffer and one read. NATS
/// continued, every message reaches the member on the other server,
/// whole and in order, and nobody waits any more.
fn a_talker_that_outruns_a_stopped_nats_is_slowed_not_cut_off(dispatch: Dispatch) {
    const FRAMES: usize = 512;
    const LEN: usize = 64 * 1024;
    let nats = Nats::start();
    let routes = || {
        Routes::new()
            .websocket("/member", |_| Member)
            .websocket("/talk", |_| Talker {
                refused: mpsc::channel().0,
            })
    };
    let a = node(&nats, "a", dispatch, routes());
    // NATS continued hands b the whole stream at once, faster than a
    // client on a loaded machine may read it: b may hold all of it for
    // its member (else the member is cut off as one that cannot keep
    // up, 1008, which is not what this test is about).
    let holds_all = Config {
        ws_max_message: FRAMES * (LEN + 16),
        ..common::config(dispatch)
    };
    let b = node_with(&nats, "b", holds_all, routes());
    let transport = Transport::new(false, "stopped-nats");
    let mut member = transport.connect(&b, Pace::Fast);
    upgrade(&mut member, "/member");
    assert_eq!(read_frame(&mut member).payload, b"joined");
    nats.wait_for_subscribers("upc.t.room", 1);
    nats.pause(true);
    let mut talker = transport.connect(&a, Pace::Fast);
    upgrade(&mut talker, "/talk");
    let written = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (tid_tx, tid_rx) = mpsc::channel();
    let writer = {
        let written = Arc::clone(&written);
        std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tid_tx.send(unsafe { libc::gettid() }).unwrap();
            for seq in 0..FRAMES {
                let text = message(0, seq as u32, LEN);
                talker.send(&client_frame(1, &text, [9, 8, 7, 6]));
                written.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            talker
        })
    };
    let tid = tid_rx.recv().unwrap();
    let deadline = std::time::Instant::now() + IO_TIMEOUT;
    while sample(&a, "uppercut_nats_paused_senders") < 1 || !blocked_writing(tid) {
        let sent = written.load(std::sync::atomic::Ordering::SeqCst);
        assert!(
            sent < FRAMES,
            "the server read all {FRAMES} messages while NATS was stopped"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "the talker was not slowed: {sent} messages written"
        );
        // A polling interval, not a wait standing in for the condition.
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // The server holds the buffer and what one read brought past it.
    let waiting = sample(&a, "uppercut_nats_waiting_bytes");
    let bound = (BUFFER + 2 * (LEN + 256)) as u64;
    assert!(waiting <= bound, "{waiting} bytes wait for NATS");
    nats.pause(false);
    let mut expected = Expected::new(vec![vec![LEN; FRAMES]], 0);
    while expected.remaining() > 0 {
        let frame = read_frame(&mut member);
        assert_eq!(frame.head, 0x81);
        expected.check(&frame.payload, "the member on b");
    }
    let _talker = writer.join().unwrap();
    let deadline = std::time::Instant::now() + IO_TIMEOUT;
    while sample(&a, "uppercut_nats_paused_senders") > 0 {
        assert!(std::time::Instant::now() < deadline, "a sender still waits");
        // A polling interval, not a wait standing in for the condition.
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(sample(&a, "uppercut_nats_waiting_bytes"), 0);
}

in_both_modes!(a_talker_that_outruns_a_stopped_nats_is_slowed_not_cut_off);

/// With NATS stopped, an owned actor told to send far more than the
/// buffer pauses once past it (its later messages wait in its queue), and
/// a program's thread in `Server::send` blocks: the server holds the
/// buffer and one message past it for each. NATS continued, both streams
/// arrive whole and in order.
fn senders_that_outrun_a_stopped_nats_wait(dispatch: Dispatch) {
    const COUNT: usize = 100;
    const LEN: usize = 64 * 1024;
    let nats = Nats::start();
    let streams = vec![vec![LEN; COUNT]; 3];
    let sink = Sink {
        next: vec![0; streams.len()],
        streams: streams.clone(),
        wrong: Vec::new(),
    };
    let b = node(
        &nats,
        "b",
        dispatch,
        Routes::new()
            .spawn("sink", sink)
            .actor(&[Method::Get], "/sink", "sink"),
    );
    let a = node(
        &nats,
        "a",
        dispatch,
        Routes::new().spawn(
            "pump",
            Pump {
                stream: BY_ACTOR,
                seq: 0,
                refused: Vec::new(),
            },
        ),
    );
    nats.pause(true);
    for _ in 0..COUNT {
        a.send("pump", Envelope::of(LEN)).unwrap();
    }
    let sent = std::sync::atomic::AtomicUsize::new(0);
    let sender = a.sender();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for seq in 0..COUNT {
                let bytes = message(BY_SERVER_SEND, seq as u32, LEN);
                sender.send("sink@b", Envelope::of(bytes)).unwrap();
                sent.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        let deadline = std::time::Instant::now() + IO_TIMEOUT;
        while sample(&a, "uppercut_nats_paused_senders") < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "the actor and the thread did not both wait"
            );
            // A polling interval, not a wait standing in for the condition.
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let waiting = sample(&a, "uppercut_nats_waiting_bytes");
        let bound = (BUFFER + 2 * (LEN + 256)) as u64;
        assert!(waiting <= bound, "{waiting} bytes wait for NATS");
        assert!(sent.load(std::sync::atomic::Ordering::SeqCst) < COUNT);
        nats.pause(false);
    });
    let want = format!("{COUNT} 0 {COUNT} | ");
    let deadline = std::time::Instant::now() + 2 * IO_TIMEOUT;
    let mut client = common::Client::connect(b.local_addr());
    loop {
        client.send(b"GET /sink HTTP/1.1\r\nHost: b\r\n\r\n");
        let response = common::text(&client.response(false));
        let body = response.split("\r\n\r\n").nth(1).unwrap_or_default();
        if body == want {
            break;
        }
        assert!(body.ends_with(" | "), "{body}");
        assert!(std::time::Instant::now() < deadline, "only {body} arrived");
        // A polling interval, not a wait standing in for the condition.
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

in_both_modes!(senders_that_outrun_a_stopped_nats_wait);

/// What a member of the fault run makes of each stream: messages may be
/// lost while NATS is away, but none may arrive corrupt, twice or out of
/// order. A message is found at its place in its stream by its bytes,
/// searching forward from the last one taken.
struct Lossy {
    streams: Vec<Vec<usize>>,
    /// Per stream: the place after the last message taken.
    next: Vec<usize>,
    /// Per stream: the messages taken.
    taken: Vec<usize>,
    /// Per stream: its closing message came.
    ended: Vec<bool>,
}

impl Lossy {
    fn new(streams: Vec<Vec<usize>>) -> Lossy {
        let n = streams.len();
        Lossy {
            streams,
            next: vec![0; n],
            taken: vec![0; n],
            ended: vec![false; n],
        }
    }

    fn take(&mut self, got: &[u8], reader: &str) {
        if let Some(stream) = std::str::from_utf8(got)
            .ok()
            .and_then(|text| text.strip_prefix("end "))
        {
            let stream: usize = stream.parse().expect("an end names its stream");
            assert!(!self.ended[stream], "{reader}: stream {stream} ended twice");
            self.ended[stream] = true;
            return;
        }
        let stream = usize::from(got.first().copied().unwrap_or(0).wrapping_sub(b'a'));
        assert!(stream < self.streams.len(), "{reader}: no stream's message");
        assert!(!self.ended[stream], "{reader}: after stream {stream}'s end");
        let sizes = &self.streams[stream];
        let found = (self.next[stream]..sizes.len()).find(|&seq| {
            sizes[seq] == got.len() && message(stream as u32, seq as u32, got.len()) == got
        });
        let Some(seq) = found else {
            panic!(
                "{reader}: a message of {} bytes of stream {stream} that is none of its next ones \
                 (corrupt, repeated or out of order; {} taken)",
                got.len(),
                self.next[stream]
            );
        };
        self.taken[stream] += 1;
        self.next[stream] = seq + 1;
    }

    fn done(&self) -> bool {
        self.ended.iter().all(|&ended| ended)
    }

    /// Messages that never came.
    fn lost(&self) -> usize {
        let sent: usize = self.streams.iter().map(Vec::len).sum();
        sent - self.taken.iter().sum::<usize>()
    }
}

/// A fault each time a talker asks for one (at random places in its
/// stream): NATS stopped and continued, or killed and started again. The
/// talker hears once the fault has begun, and goes on sending through it.
/// Returns how many.
fn inject_faults(nats: &mut Nats, rng: &mut Rng, asked: mpsc::Receiver<mpsc::Sender<()>>) -> usize {
    let mut faults = 0;
    for begun in asked {
        // How long NATS stays away: the fault itself, not a wait for
        // anything.
        let away = std::time::Duration::from_millis(20 + rng.below(300));
        match rng.below(3) {
            0 => nats.restart_after(|| {
                let _ = begun.send(());
                std::thread::sleep(away);
            }),
            _ => {
                nats.pause(true);
                let _ = begun.send(());
                std::thread::sleep(away);
                nats.pause(false);
            }
        }
        faults += 1;
    }
    faults
}

/// Members on two servers and a talker on each while NATS is stopped,
/// continued, killed and started again under them: whatever is lost, no
/// member gets a message corrupt, twice or out of its stream's order.
/// Each round sends less than the members' outbound limit in all, so no
/// member is cut off however far behind it falls.
fn a_room_across_servers_survives_nats_faults(dispatch: Dispatch) {
    let seed = seed();
    let mut nats = Nats::start();
    let routes = || {
        Routes::new()
            .websocket("/member", |_| Member)
            .websocket("/talk", |_| Talker {
                refused: mpsc::channel().0,
            })
    };
    let nodes = [
        node(&nats, "a", dispatch, routes()),
        node(&nats, "b", dispatch, routes()),
    ];
    let transport = Transport::new(false, "faults");
    let mut rng = Rng::new(seed);
    let (mut lost, mut faults) = (0, 0);
    for round in 0..rounds() {
        for node in &nodes {
            common::durable::wait_cluster_ready(node);
        }
        let streams: Vec<Vec<usize>> = (0..nodes.len())
            .map(|_| {
                let mut sizes = sizes(&mut rng, 60, 128 * 1024);
                sizes.iter_mut().for_each(|size| *size = (*size).max(100));
                sizes
            })
            .collect();
        let members: Vec<Reader> = nodes
            .iter()
            .flat_map(|node| [node, node])
            .map(|node| {
                let mut member = transport.connect(node, Pace::Fast);
                upgrade(&mut member, "/member");
                assert_eq!(read_frame(&mut member).payload, b"joined");
                member
            })
            .collect();
        nats.wait_for_subscribers("upc.t.room", nodes.len());
        let listeners: Vec<_> = members
            .into_iter()
            .enumerate()
            .map(|(i, mut member)| {
                let mut lossy = Lossy::new(streams.clone());
                let name = format!("seed {seed} round {round} member {i}");
                std::thread::spawn(move || {
                    while !lossy.done() {
                        let frame = read_frame(&mut member);
                        if frame.head == 0x89 {
                            member.send(&client_frame(0xa, &frame.payload, [1, 2, 3, 4]));
                            continue;
                        }
                        assert_eq!(frame.head, 0x81, "{name}");
                        lossy.take(&frame.payload, &name);
                    }
                    lossy.lost()
                })
            })
            .collect();
        let (ask, asked) = mpsc::channel();
        let talkers_done = std::thread::scope(|scope| {
            let driver = scope.spawn(|| {
                let mut rng = Rng::new(seed ^ round as u64);
                inject_faults(&mut nats, &mut rng, asked)
            });
            let talkers: Vec<_> = nodes
                .iter()
                .zip(&streams)
                .enumerate()
                .map(|(stream, (node, sizes))| {
                    let mut talker = transport.connect(node, Pace::Fast);
                    upgrade(&mut talker, "/talk");
                    let ask = ask.clone();
                    let mut rng = Rng::new(seed ^ (round as u64) << 8 ^ stream as u64);
                    scope.spawn(move || {
                        for (seq, &len) in sizes.iter().enumerate() {
                            // About one fault in twenty messages.
                            if rng.below(20) == 0 {
                                let (begun, fault) = mpsc::channel();
                                if ask.send(begun).is_ok() {
                                    let _ = fault.recv();
                                }
                            }
                            let text = message(stream as u32, seq as u32, len);
                            talker.send(&client_frame(1, &text, [3, 1, 4, 1]));
                        }
                        talker
                    })
                })
                .collect();
            drop(ask);
            let talkers: Vec<Reader> = talkers.into_iter().map(|t| t.join().unwrap()).collect();
            faults += driver.join().unwrap();
            talkers
        });
        // NATS is back: each talker's end reaches every member.
        for node in &nodes {
            common::durable::wait_cluster_ready(node);
        }
        nats.wait_for_subscribers("upc.t.room", nodes.len());
        for (stream, mut talker) in talkers_done.into_iter().enumerate() {
            let end = format!("end {stream}");
            talker.send(&client_frame(1, end.as_bytes(), [2, 7, 1, 8]));
        }
        for listener in listeners {
            match listener.join() {
                Ok(lost_here) => lost += lost_here,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
    }
    eprintln!("faults: seed {seed}: {faults} faults, {lost} messages lost, none corrupt, doubled or reordered");
}

in_both_modes!(a_room_across_servers_survives_nats_faults);
