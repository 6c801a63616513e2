//! ws-load: a WebSocket load client for `bench/run --ws`, since there is
//! no wrk for WebSockets.
//!
//!     ws-load --url ws://127.0.0.1:9000/ws --connections 64 --size 32 --duration 10
//!             [--rate R] [--threads 2] [--warmup 2]
//!     ws-load --url ws://127.0.0.1:9002/chat --broadcast --members 1000 --rate 100
//!     ws-load --url ws://127.0.0.1:9000/ws --deflate --size 1024
//!     ws-load --url ws://127.0.0.1:9002/chat --url ws://127.0.0.1:9003/chat --broadcast --hold
//!
//! Echo, closed loop (no `--rate`): each connection sends its next message
//! when the echo of the last comes back; the result is round trips per
//! second and their latency. Echo, open loop (`--rate R`, messages per
//! second over all connections): each connection's messages fall due on a
//! fixed schedule, sent as soon as due whether or not earlier echoes came
//! back, and latency runs from when a message was due, not when it was
//! sent, so a stalled server is charged for the messages it held up
//! (coordinated omission, as `oha --latency-correction` and wrk2 count).
//! Broadcast (`--broadcast`): `--members` connections join a room (the
//! chat example's `/chat`), one more sends `--rate` messages a second, each
//! carrying the time it fell due, and every member's receipt is a sample of
//! the latency from due to delivery.
//!
//! `--url` more than once (or a comma list): the connections are dealt
//! round-robin over the URLs (a broadcast's members, 500 on each of two
//! servers for 1,000; its sender stays on the first URL), and the output
//! gains `per_url`: each URL's connections, messages counted and latency.
//! `--hold`: once every connection is open, say `open` on stderr and wait
//! for a line on stdin before the first message falls due (so a caller
//! can wait until a room spans its servers).
//!
//! Echo with `--deflate`: each connection offers permessage-deflate (as a
//! browser does, `permessage-deflate; client_max_window_bits`) and needs
//! it answered; its message is `--size` bytes of JSON text, compressed
//! once before the run (a client may always compress each message on its
//! own) and sent with RSV1. Echoes are counted by their frames, not
//! inflated.
//!
//! A broadcast's end: the sender stops at the end of the run, and every
//! member reads on (at most `DRAIN`) until it has every message the sender
//! sent; the output gains `sent` and `lost` (messages a member never got,
//! over every member), so a room that loses messages shows it.
//!
//! It prints one JSON object: what ran, the messages counted, their rate,
//! the echoes received over the whole run, warm-up included
//! (`messages_all`, to divide a server's CPU time by), and latency
//! percentiles in microseconds. mio, a few threads, a state machine per
//! connection; nothing allocates per message.

mod stats;

use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use stats::{Histogram, Schedule};

/// What to run.
#[derive(Debug, Clone)]
struct Options {
    /// Where the connections go, dealt round-robin; the first has the
    /// broadcast's sender.
    targets: Vec<Target>,
    connections: usize,
    size: usize,
    duration: Duration,
    warmup: Duration,
    rate: Option<f64>,
    threads: usize,
    broadcast: bool,
    deflate: bool,
    hold: bool,
}

/// One `--url`: where to connect and what to ask for.
#[derive(Debug, Clone)]
struct Target {
    url: String,
    addr: SocketAddr,
    host: String,
    path: String,
}

impl Target {
    fn parse(url: &str) -> Result<Target, String> {
        let rest = url.strip_prefix("ws://").ok_or("only ws:// URLs")?;
        let (authority, path) = match rest.find('/') {
            Some(slash) => rest.split_at(slash),
            None => (rest, "/"),
        };
        let addr = authority
            .to_socket_addrs()
            .ok()
            .and_then(|mut addrs| addrs.next())
            .ok_or_else(|| format!("cannot resolve {authority}"))?;
        Ok(Target {
            url: url.to_string(),
            addr,
            host: authority.to_string(),
            path: path.to_string(),
        })
    }
}

fn usage() -> &'static str {
    "usage: ws-load --url ws://HOST:PORT/PATH[,URL...] [--url URL]... [--connections N] [--size BYTES]\n\
     \x20              [--duration S] [--rate R] [--threads T] [--warmup S] [--broadcast --members N]\n\
     \x20              [--deflate] [--hold]"
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut urls: Vec<String> = Vec::new();
    let mut options = Options {
        targets: Vec::new(),
        connections: 64,
        size: 32,
        duration: Duration::from_secs(10),
        warmup: Duration::from_secs(1),
        rate: None,
        threads: 2,
        broadcast: false,
        deflate: false,
        hold: false,
    };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |text: &String| {
            text.parse::<f64>()
                .map_err(|_| format!("{flag}: not a number: {text}"))
        };
        match flag.as_str() {
            "--url" => urls.extend(
                value()?
                    .split(',')
                    .filter(|u| !u.is_empty())
                    .map(String::from),
            ),
            "--connections" | "--members" => options.connections = number(value()?)? as usize,
            "--size" => options.size = number(value()?)? as usize,
            "--duration" => options.duration = Duration::from_secs_f64(number(value()?)?),
            "--warmup" => options.warmup = Duration::from_secs_f64(number(value()?)?),
            "--rate" => options.rate = Some(number(value()?)?),
            "--threads" => options.threads = (number(value()?)? as usize).max(1),
            "--broadcast" => options.broadcast = true,
            "--deflate" => options.deflate = true,
            "--hold" => options.hold = true,
            other => return Err(format!("unknown option {other}\n{}", usage())),
        }
    }
    if urls.is_empty() {
        return Err(usage().to_string());
    }
    options.targets = urls
        .iter()
        .map(|url| Target::parse(url))
        .collect::<Result<_, _>>()?;
    if options.size < 16 && options.broadcast {
        options.size = 16;
    }
    if options.broadcast && options.rate.is_none() {
        options.rate = Some(100.0);
    }
    Ok(options)
}

/// A masked client frame carrying `payload` (binary).
fn client_frame(payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    frame_of(0x82, payload, mask)
}

/// A masked client frame: first byte `first` (FIN and opcode), `payload`.
fn frame_of(first: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let mut frame = vec![first];
    match payload.len() {
        len if len < 126 => frame.push(0x80 | len as u8),
        len if len <= 0xffff => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(len as u16).to_be_bytes());
        }
        len => {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    frame
}

/// `size` bytes of JSON text: an array of small records, as a feed sends.
fn json(size: usize) -> Vec<u8> {
    let mut text = String::from("[");
    let mut i = 0;
    while text.len() < size {
        text.push_str(&format!(
            "{{\"id\":{i},\"user\":\"user{i}\",\"online\":{},\"score\":{}}},",
            i % 3 == 0,
            i * 37 % 101
        ));
        i += 1;
    }
    text.truncate(size.saturating_sub(1));
    text.push(']');
    text.truncate(size);
    text.into_bytes()
}

/// `message` deflated as one permessage-deflate message: sync-flushed,
/// without the flush's trailing `00 00 ff ff` (RFC 7692 §7.2.1).
fn deflated(message: &[u8]) -> Vec<u8> {
    use flate2::{Compress, Compression, FlushCompress};
    let mut compressor = Compress::new(Compression::new(6), false);
    let mut out = Vec::with_capacity(message.len() * 2 + 64);
    let _ = compressor.compress_vec(message, &mut out, FlushCompress::Sync);
    if out.ends_with(&[0, 0, 0xff, 0xff]) {
        out.truncate(out.len() - 4);
    }
    out
}

/// Opens a WebSocket to `target` (blocking handshake), then hands the
/// stream to mio.
fn connect(options: &Options, target: &Target) -> io::Result<TcpStream> {
    let mut stream = std::net::TcpStream::connect(target.addr)?;
    stream.set_nodelay(true)?;
    let offer = match options.deflate {
        true => "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n",
        false => "",
    };
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{offer}\r\n",
        target.path, target.host
    );
    stream.write_all(request.as_bytes())?;
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte)?;
        head.push(byte[0]);
    }
    if !head.starts_with(b"HTTP/1.1 101") {
        let head = String::from_utf8_lossy(&head).into_owned();
        return Err(io::Error::other(format!(
            "{}: no upgrade: {head}",
            target.url
        )));
    }
    let lower = String::from_utf8_lossy(&head).to_ascii_lowercase();
    if options.deflate && !lower.contains("sec-websocket-extensions: permessage-deflate") {
        return Err(io::Error::other("permessage-deflate was not agreed"));
    }
    stream.set_nonblocking(true)?;
    Ok(TcpStream::from_std(stream))
}

/// One connection's state: what it still has to write, what it has read
/// of the frame in progress, and when its messages fell due.
struct Conn {
    stream: TcpStream,
    out: Vec<u8>,
    written: usize,
    /// Bytes of the current server frame still to skip, once its head is read.
    head: [u8; 10],
    head_have: usize,
    payload_left: u64,
    /// The first payload bytes of the frame in progress (a broadcast's due
    /// time, in hex).
    stamp: [u8; 16],
    stamp_have: usize,
    due: std::collections::VecDeque<Instant>,
    schedule: Option<Schedule>,
    /// Which of the `--url`s it is connected to.
    target: usize,
    /// A broadcast's sender (not a member).
    sender: bool,
    /// A broadcast's messages this member received.
    received: u64,
}

/// How long a broadcast's members read on after the run for the messages
/// still on their way.
const DRAIN: Duration = Duration::from_secs(10);

/// What the threads share.
struct Shared {
    options: Options,
    start: Instant,
    /// Messages sent before this count as warm-up.
    measure_from: Instant,
    end: Instant,
    /// A broadcast's messages sent so far.
    sent: AtomicU64,
    /// The sender has written its last message.
    sent_all: AtomicBool,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse(&args) {
        Ok(options) => options,
        Err(e) => {
            eprintln!("ws-load: {e}");
            return ExitCode::from(2);
        }
    };
    match run(options) {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ws-load: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(options: Options) -> io::Result<String> {
    // The sender of a broadcast is one more connection, on thread 0.
    let total = options.connections + usize::from(options.broadcast);
    let mut streams = Vec::with_capacity(total);
    for index in 0..total {
        let target = target_of(&options, index);
        streams.push((target, connect(&options, &options.targets[target])?));
    }
    if options.hold {
        eprintln!("open");
        let mut line = String::new();
        io::stdin().read_line(&mut line)?;
    }
    let threads = options.threads.min(total).max(1);
    let start = Instant::now() + Duration::from_millis(200);
    let shared = Arc::new(Shared {
        measure_from: start + options.warmup,
        end: start + options.warmup + options.duration,
        start,
        options: options.clone(),
        sent: AtomicU64::new(0),
        sent_all: AtomicBool::new(false),
    });
    let barrier = Arc::new(Barrier::new(threads));
    let mut parts: Vec<Vec<(usize, usize, TcpStream)>> = (0..threads).map(|_| Vec::new()).collect();
    for (index, (target, stream)) in streams.into_iter().enumerate() {
        parts[index % threads].push((index, target, stream));
    }
    let handles: Vec<_> = parts
        .into_iter()
        .map(|part| {
            let shared = Arc::clone(&shared);
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || drive(part, &shared, &barrier))
        })
        .collect();
    let mut histogram = Histogram::default();
    let mut messages = 0u64;
    let mut messages_all = 0u64;
    let mut lost = 0u64;
    let targets = options.targets.len();
    let mut per_target: Vec<(Histogram, u64)> =
        (0..targets).map(|_| (Histogram::default(), 0)).collect();
    for handle in handles {
        let (parts, all, thread_lost) = handle
            .join()
            .map_err(|_| io::Error::other("a thread panicked"))??;
        lost += thread_lost;
        for ((part, count), (target_histogram, target_count)) in parts.iter().zip(&mut per_target) {
            histogram.merge(part);
            target_histogram.merge(part);
            messages += count;
            *target_count += count;
        }
        messages_all += all;
    }
    // Only with more than one URL, so one URL's output stays as it was.
    let per_url = match targets {
        1 => String::new(),
        _ => {
            let entries: Vec<String> = per_target
                .iter()
                .enumerate()
                .map(|(target, (histogram, count))| {
                    let connections = (0..total).filter(|&i| target_of(&options, i) == target).count();
                    format!(
                        "{{\"url\":\"{}\",\"connections\":{connections},\"messages\":{count},\"latency_us\":{}}}",
                        options.targets[target].url,
                        histogram.json()
                    )
                })
                .collect();
            format!(",\"per_url\":[{}]", entries.join(","))
        }
    };
    let delivery = match options.broadcast {
        true => format!(
            ",\"sent\":{},\"lost\":{lost}",
            shared.sent.load(Ordering::Acquire)
        ),
        false => String::new(),
    };
    let seconds = options.duration.as_secs_f64();
    let mode = match (options.broadcast, options.rate) {
        (true, _) => "broadcast",
        (false, Some(_)) => "open",
        (false, None) => "closed",
    };
    Ok(format!(
        "{{\"mode\":\"{mode}\",\"connections\":{},\"size\":{},\"duration_s\":{seconds},\
         \"rate\":{},\"deflate\":{},\"messages\":{messages},\"messages_all\":{messages_all},\
         \"per_second\":{:.1},\"latency_us\":{}{per_url}{delivery}}}",
        options.connections,
        options.size,
        options.rate.map_or("null".to_string(), |r| r.to_string()),
        options.deflate,
        messages as f64 / seconds,
        histogram.json()
    ))
}

/// Which `--url` connection `index` goes to: round-robin, the members of
/// a broadcast dealt after its sender, which stays on the first.
fn target_of(options: &Options, index: usize) -> usize {
    let targets = options.targets.len();
    match options.broadcast {
        true => index.saturating_sub(1) % targets,
        false => index % targets,
    }
}

/// Runs one thread's connections until the end; returns, per `--url`,
/// the latencies measured and the messages counted, every echo received,
/// and (a broadcast) the messages its members never got.
fn drive(
    part: Vec<(usize, usize, TcpStream)>,
    shared: &Shared,
    barrier: &Barrier,
) -> io::Result<(Vec<(Histogram, u64)>, u64, u64)> {
    let options = &shared.options;
    let mut poll = Poll::new()?;
    let mut conns = Vec::with_capacity(part.len());
    let frame = match options.deflate {
        // Text, FIN and RSV1.
        true => frame_of(
            0xc1,
            &deflated(&json(options.size)),
            [0x12, 0x34, 0x56, 0x78],
        ),
        false => {
            let payload: Vec<u8> = (0..options.size).map(|i| i as u8).collect();
            client_frame(&payload, [0x12, 0x34, 0x56, 0x78])
        }
    };
    // Open loop: each echo connection's share of the rate, its schedule
    // offset so connections do not all send at once.
    let per_connection = options
        .rate
        .map(|rate| rate / options.connections.max(1) as f64);
    for (slot, (index, target, mut stream)) in part.into_iter().enumerate() {
        poll.registry().register(
            &mut stream,
            Token(slot),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        let sender = options.broadcast && index == 0;
        let schedule = match (options.broadcast, sender, per_connection) {
            (true, true, _) => Some(Schedule::new(
                shared.start,
                options.rate.unwrap_or(100.0),
                0.0,
            )),
            (true, false, _) => None,
            (false, _, Some(rate)) => Some(Schedule::new(
                shared.start,
                rate,
                index as f64 / options.connections as f64,
            )),
            (false, _, None) => None,
        };
        conns.push(Conn {
            stream,
            out: Vec::with_capacity(frame.len() * 4),
            written: 0,
            head: [0; 10],
            head_have: 0,
            payload_left: 0,
            stamp: [0; 16],
            stamp_have: 0,
            due: std::collections::VecDeque::with_capacity(64),
            schedule,
            target,
            sender,
            received: 0,
        });
    }
    barrier.wait();
    while Instant::now() < shared.start {
        thread::sleep(Duration::from_millis(1));
    }
    let closed_loop = options.rate.is_none() && !options.broadcast;
    if closed_loop {
        for conn in &mut conns {
            conn.due.push_back(Instant::now());
            conn.out.extend_from_slice(&frame);
        }
    }
    let mut measured: Vec<(Histogram, u64)> = (0..options.targets.len())
        .map(|_| (Histogram::default(), 0))
        .collect();
    let mut messages_all = 0u64;
    let mut events = Events::with_capacity(1024);
    let mut buf = vec![0u8; 64 * 1024];
    let mut stamped = vec![b'x'; options.size.max(16)];
    loop {
        let now = Instant::now();
        if now >= shared.end {
            break;
        }
        // Open loop and broadcast sender: queue every message now due.
        let mut next_due: Option<Instant> = None;
        for conn in &mut conns {
            let Some(schedule) = &mut conn.schedule else {
                continue;
            };
            while let Some(due) = schedule.take_due(now) {
                if options.broadcast {
                    // A text message (a chat room relays text): the due
                    // time in 16 hex digits, then padding.
                    let nanos = due.duration_since(shared.start).as_nanos() as u64;
                    stamped[..16].copy_from_slice(format!("{nanos:016x}").as_bytes());
                    let frame = frame_of(0x81, &stamped, [0x12, 0x34, 0x56, 0x78]);
                    conn.out.extend_from_slice(&frame);
                    shared.sent.fetch_add(1, Ordering::AcqRel);
                } else {
                    conn.due.push_back(due);
                    conn.out.extend_from_slice(&frame);
                }
            }
            let upcoming = schedule.next();
            next_due = Some(next_due.map_or(upcoming, |d: Instant| d.min(upcoming)));
        }
        for conn in &mut conns {
            flush(conn)?;
        }
        let wait = next_due
            .map(|due| due.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_millis(5))
            .min(shared.end.saturating_duration_since(Instant::now()))
            .min(Duration::from_millis(5));
        poll.poll(&mut events, Some(wait))?;
        for event in events.iter() {
            let conn = &mut conns[event.token().0];
            if event.is_writable() {
                flush(conn)?;
            }
            if !event.is_readable() {
                continue;
            }
            loop {
                let len = match conn.stream.read(&mut buf) {
                    Ok(0) => return Err(io::Error::other("the server closed a connection")),
                    Ok(len) => len,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                let received = Instant::now();
                let mut input = &buf[..len];
                while let Some(stamp) = next_message(conn, &mut input) {
                    messages_all += 1;
                    if stamp.is_some() {
                        conn.received += 1;
                    }
                    let due = match (options.broadcast, stamp) {
                        (true, Some(nanos)) => Some(shared.start + Duration::from_nanos(nanos)),
                        (true, None) => None,
                        (false, _) => conn.due.pop_front(),
                    };
                    let Some(due) = due else { continue };
                    if due >= shared.measure_from && received < shared.end {
                        let (histogram, messages) = &mut measured[conn.target];
                        histogram.record(received.saturating_duration_since(due));
                        *messages += 1;
                    }
                    if closed_loop {
                        conn.due.push_back(received);
                        conn.out.extend_from_slice(&frame);
                    }
                }
            }
            if closed_loop {
                flush(conn)?;
            }
        }
    }
    let lost = match options.broadcast {
        true => drain(&mut conns, &mut poll, &mut events, &mut buf, shared)?,
        false => 0,
    };
    Ok((measured, messages_all, lost))
}

/// After a broadcast: the sender writes what it still holds, and the
/// members read on until each has every message sent, or `DRAIN` passed;
/// the messages they never got.
fn drain(
    conns: &mut [Conn],
    poll: &mut Poll,
    events: &mut Events,
    buf: &mut [u8],
    shared: &Shared,
) -> io::Result<u64> {
    let deadline = Instant::now() + DRAIN;
    loop {
        for conn in conns.iter_mut() {
            flush(conn)?;
        }
        if conns
            .iter()
            .any(|conn| conn.sender && conn.written == conn.out.len())
        {
            shared.sent_all.store(true, Ordering::Release);
        }
        let sent = shared.sent.load(Ordering::Acquire);
        let missing: u64 = conns
            .iter()
            .filter(|conn| !conn.sender)
            .map(|conn| sent.saturating_sub(conn.received))
            .sum();
        let all_sent = shared.sent_all.load(Ordering::Acquire);
        if (all_sent && missing == 0) || Instant::now() >= deadline {
            return Ok(missing);
        }
        poll.poll(events, Some(Duration::from_millis(5)))?;
        for event in events.iter() {
            let conn = &mut conns[event.token().0];
            loop {
                let len = match conn.stream.read(buf) {
                    Ok(0) => return Err(io::Error::other("the server closed a connection")),
                    Ok(len) => len,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                let mut input = &buf[..len];
                while let Some(stamp) = next_message(conn, &mut input) {
                    if stamp.is_some() {
                        conn.received += 1;
                    }
                }
            }
        }
    }
}

/// Writes what the connection has queued, as far as the socket takes it.
fn flush(conn: &mut Conn) -> io::Result<()> {
    while conn.written < conn.out.len() {
        match conn.stream.write(&conn.out[conn.written..]) {
            Ok(len) => conn.written += len,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    conn.out.clear();
    conn.written = 0;
    Ok(())
}

/// Consumes `input` up to the end of the next whole server frame: `None`
/// when no frame ends in it, else `Some` with the frame's first payload
/// bytes as a due time (for a broadcast: 16 hex digits; `None` inside
/// when it has none).
fn next_message(conn: &mut Conn, input: &mut &[u8]) -> Option<Option<u64>> {
    loop {
        if conn.payload_left == 0 {
            // Reading a head.
            let need = match conn.head_have {
                0 | 1 => 2,
                _ => match conn.head[1] & 0x7f {
                    126 => 4,
                    127 => 10,
                    _ => 2,
                },
            };
            if conn.head_have < need {
                let (&byte, rest) = input.split_first()?;
                *input = rest;
                conn.head[conn.head_have] = byte;
                conn.head_have += 1;
                continue;
            }
            let len = match conn.head[1] & 0x7f {
                126 => u64::from(u16::from_be_bytes([conn.head[2], conn.head[3]])),
                127 => u64::from_be_bytes(conn.head[2..10].try_into().unwrap_or([0; 8])),
                len => u64::from(len),
            };
            conn.head_have = 0;
            conn.stamp_have = 0;
            if len == 0 {
                return Some(None);
            }
            conn.payload_left = len;
        }
        let take = (conn.payload_left as usize).min(input.len());
        if take == 0 {
            return None;
        }
        let stamp_take = take.min(16 - conn.stamp_have);
        conn.stamp[conn.stamp_have..conn.stamp_have + stamp_take]
            .copy_from_slice(&input[..stamp_take]);
        conn.stamp_have += stamp_take;
        *input = &input[take..];
        conn.payload_left -= take as u64;
        if conn.payload_left == 0 {
            let stamp = std::str::from_utf8(&conn.stamp[..conn.stamp_have])
                .ok()
                .filter(|hex| hex.len() == 16)
                .and_then(|hex| u64::from_str_radix(hex, 16).ok());
            return Some(stamp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(args: &[&str]) -> Options {
        parse(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn one_url_takes_every_connection() {
        let options = options(&["--url", "ws://127.0.0.1:9000/ws", "--connections", "4"]);
        assert_eq!(options.targets.len(), 1);
        assert_eq!(options.targets[0].path, "/ws");
        assert!((0..4).all(|i| target_of(&options, i) == 0));
    }

    #[test]
    fn members_are_dealt_round_robin_and_the_sender_stays_on_the_first() {
        let a = "ws://127.0.0.1:9002/chat";
        let b = "ws://127.0.0.1:9003/chat";
        for args in [
            vec!["--url", a, "--url", b, "--broadcast", "--members", "1000"],
            vec![
                "--url",
                &format!("{a},{b}"),
                "--broadcast",
                "--members",
                "1000",
            ],
        ] {
            let options = options(&args);
            assert_eq!(options.targets.len(), 2);
            assert_eq!(options.targets[1].addr.port(), 9003);
            // Index 0 is the sender; members 1..=1000.
            assert_eq!(target_of(&options, 0), 0);
            let on_b = (1..=1000).filter(|&i| target_of(&options, i) == 1).count();
            assert_eq!(on_b, 500);
        }
    }
}
