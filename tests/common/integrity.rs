//! The integrity harness: messages whose every byte is known from where
//! they came from (a stream) and their place in it (a sequence number), so
//! that a reader can check every byte and the order of every message, with
//! sizes from one byte to past the output high-water mark; readers that
//! stall; and the WebSocket frames the checks travel in.
//!
//! A run is reproducible from its seed: `INTEGRITY_SEED` picks it (the
//! failure message names the seed it ran with), `INTEGRITY_ROUNDS`
//! lengthens it (`scripts/integrity.sh` runs many seeds for minutes).

use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use uppercut_mio_server::{Config, Dispatch, Server};

use super::tls::{Certificates, TlsStream};
use super::IO_TIMEOUT;

/// The server's output high-water mark (`request_stream::OUTPUT_HIGH_WATER`):
/// sizes around and past it are in every schedule.
pub const HIGH_WATER: usize = 64 * 1024;

/// The seed of this run: `INTEGRITY_SEED`, or one of the clock's.
pub fn seed() -> u64 {
    match std::env::var("INTEGRITY_SEED") {
        Ok(seed) => seed.parse().expect("INTEGRITY_SEED is a number"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
    }
}

/// How many times longer than the short run to go (`INTEGRITY_ROUNDS`, 1
/// by default).
pub fn rounds() -> usize {
    std::env::var("INTEGRITY_ROUNDS")
        .ok()
        .and_then(|rounds| rounds.parse().ok())
        .unwrap_or(1)
        .max(1)
}

/// splitmix64: a small, good generator, reproducible from its seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The sizes one stream sends, in order: every edge a framing or a buffer
/// has (1 byte, WebSocket's 125/126 and 65535/65536 length forms, the
/// high-water mark and past it), shuffled among sizes spread evenly over
/// the powers of two up to `max`.
pub fn sizes(rng: &mut Rng, count: usize, max: usize) -> Vec<usize> {
    let edges = [
        1,
        2,
        125,
        126,
        127,
        4095,
        4096,
        16 * 1024 + 1,
        65535,
        65536,
        HIGH_WATER + 1,
        3 * HIGH_WATER,
        max,
    ];
    let mut sizes: Vec<usize> = edges.iter().copied().filter(|&s| s <= max).collect();
    let bits = usize::BITS - max.leading_zeros();
    while sizes.len() < count {
        let top = 1 + rng.below(u64::from(bits)) as u32;
        let size = (1usize << (top - 1)) + rng.below(1 << (top - 1)) as usize;
        sizes.push(size.clamp(1, max));
    }
    sizes.truncate(count.max(1));
    // Fisher-Yates, so the edges land anywhere in the stream.
    for i in (1..sizes.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        sizes.swap(i, j);
    }
    sizes
}

/// Message `seq` of `stream`, `len` bytes of lower-case letters (valid
/// UTF-8, so it travels as WebSocket text too), each byte known from the
/// three. The first letter says the stream (`a` for 0, `b` for 1 and so
/// on), so that no two streams' messages are alike however short (a
/// reader of several streams could take one for another's); the rest are
/// pieces of `PIECE` letters, each from a place in `letters` that a
/// generator seeded with the stream and the sequence number picks. (A
/// copy per piece rather than a draw per byte: as fast as the server, even
/// in a debug build.)
pub fn message(stream: u32, seq: u32, len: usize) -> Vec<u8> {
    let letters = letters();
    let mut rng = Rng::new((u64::from(stream) << 32 | u64::from(seq)) ^ 0x05ee_d1e5_50dd_ba11);
    let mut bytes = Vec::with_capacity(len);
    while bytes.len() < len {
        let piece = (len - bytes.len()).min(PIECE);
        let at = rng.below((letters.len() - PIECE) as u64) as usize;
        bytes.extend_from_slice(&letters[at..at + piece]);
    }
    if let Some(first) = bytes.first_mut() {
        *first = b'a' + (stream % 26) as u8;
    }
    bytes
}

/// The length of a message's pieces.
const PIECE: usize = 64;

/// 64 KiB of random lower-case letters, the same in every run.
fn letters() -> &'static [u8] {
    static LETTERS: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    LETTERS.get_or_init(|| {
        let mut rng = Rng::new(0x1e77_e125);
        (0..64 * 1024)
            .map(|_| b'a' + (rng.next() % 26) as u8)
            .collect()
    })
}

/// What one reader expects: from each stream, its messages in order.
#[derive(Debug)]
pub struct Expected {
    /// Per stream: its sizes, and how many of them have arrived.
    streams: Vec<(Vec<usize>, usize)>,
    /// Said in every failure: how to run this again.
    seed: u64,
}

impl Expected {
    /// A reader of `streams`, each sending the sizes given in order.
    pub fn new(streams: Vec<Vec<usize>>, seed: u64) -> Expected {
        // A message's first letter tells them apart.
        assert!(streams.len() <= 26, "at most 26 streams");
        Expected {
            streams: streams.into_iter().map(|sizes| (sizes, 0)).collect(),
            seed,
        }
    }

    /// Messages still to come, over every stream.
    pub fn remaining(&self) -> usize {
        self.streams
            .iter()
            .map(|(sizes, next)| sizes.len() - next)
            .sum()
    }

    /// Checks `got` against the next message of each stream: it must be
    /// exactly one of them. Panics, saying where the bytes first differ
    /// and what surrounds them, when it is none.
    pub fn check(&mut self, got: &[u8], reader: &str) {
        // Only a message of the same length can be it.
        for (stream, (sizes, next)) in self.streams.iter_mut().enumerate() {
            if sizes.get(*next) == Some(&got.len())
                && message(stream as u32, *next as u32, got.len()) == got
            {
                *next += 1;
                return;
            }
        }
        // The stream its first letter names, else the one it is most like.
        let named = got
            .first()
            .map(|&first| usize::from(first.wrapping_sub(b'a')))
            .filter(|&stream| stream < self.streams.len());
        let mut closest: Option<(usize, usize)> = None;
        for (stream, (sizes, next)) in self.streams.iter().enumerate() {
            let Some(&len) = sizes.get(*next) else {
                continue;
            };
            let want = message(stream as u32, *next as u32, len);
            let same = want.iter().zip(got).take_while(|(a, b)| a == b).count();
            if closest.is_none_or(|(_, best)| same > best) {
                closest = Some((stream, same));
            }
        }
        let Some(stream) = named.or(closest.map(|(stream, _)| stream)) else {
            panic!(
                "{reader}: a message of {} bytes after every stream ended (seed {})",
                got.len(),
                self.seed
            );
        };
        let (sizes, next) = &self.streams[stream];
        let Some(&len) = sizes.get(*next) else {
            panic!(
                "{reader}: a message of {} bytes of stream {stream} after its last (seed {})",
                got.len(),
                self.seed
            );
        };
        let want = message(stream as u32, *next as u32, len);
        panic!(
            "{reader}: message {next} of stream {stream} is wrong (seed {}): {}",
            self.seed,
            difference(got, &want)
        );
    }
}

/// Where `got` first differs from `want`, the bytes around it, and what
/// looks out of place after it: for the failure message of a check.
pub fn difference(got: &[u8], want: &[u8]) -> String {
    let at = want.iter().zip(got).take_while(|(a, b)| a == b).count();
    let from = at.saturating_sub(8);
    let mut said = format!(
        "{} bytes, {} expected; first difference at byte {at}: got {:02x?}, expected {:02x?}",
        got.len(),
        want.len(),
        &got[from.min(got.len())..(at + 16).min(got.len())],
        &want[from.min(want.len())..(at + 16).min(want.len())],
    );
    // What usually lands inside a message written out of turn.
    for marker in [&b"HTTP/1.1 "[..], &[0x81, 0x7e], &[0x81, 0x7f]] {
        if let Some(found) = got[at.min(got.len())..]
            .windows(marker.len())
            .position(|w| w == marker)
        {
            said += &format!("; {marker:02x?} at byte {}", at + found);
            break;
        }
    }
    said
}

/// A byte stream a test reads and writes: plain TCP or TLS.
pub trait Stream: Read + Write + Send {}

impl Stream for TcpStream {}
impl Stream for TlsStream {}

/// How a reader takes what the server sends.
#[derive(Debug, Clone, Copy)]
pub enum Pace {
    /// As fast as it can, 64 KiB a read.
    Fast,
    /// `chunk` bytes a read, stalling `stall` after every `every` reads: a
    /// client whose socket stays full, so the server's output backs up.
    Slow {
        chunk: usize,
        every: usize,
        stall: Duration,
    },
}

impl Pace {
    /// The slow reader every integrity run has.
    pub const SLOW: Pace = Pace::Slow {
        chunk: 1024,
        every: 16,
        stall: Duration::from_millis(1),
    };
}

/// Plain TCP, or TLS with its certificates: how a run's clients reach
/// its server.
pub struct Transport {
    certificates: Option<Certificates>,
    client: Option<Arc<ClientConfig>>,
}

impl Transport {
    /// TLS with certificates of its own, named after `name` (unique per
    /// test), or plain TCP.
    pub fn new(tls: bool, name: &str) -> Transport {
        match tls {
            false => Transport {
                certificates: None,
                client: None,
            },
            true => {
                let certificates = Certificates::new(name);
                let client = certificates.client_config();
                Transport {
                    certificates: Some(certificates),
                    client: Some(client),
                }
            }
        }
    }

    /// A client's only, of a server started elsewhere: TLS with `client`,
    /// or plain TCP.
    pub fn client(client: Option<Arc<ClientConfig>>) -> Transport {
        Transport {
            certificates: None,
            client,
        }
    }

    /// The certificates a server of this transport serves with.
    pub fn certificates(&self) -> Option<&Certificates> {
        self.certificates.as_ref()
    }

    /// Two pollers in `dispatch` mode, serving over this transport.
    pub fn config(&self, dispatch: Dispatch) -> Config {
        Config {
            tls: self.certificates.as_ref().map(|c| c.files.clone()),
            ..super::config(dispatch)
        }
    }

    /// A new connection to `server`, read at `pace`.
    pub fn connect(&self, server: &Server, pace: Pace) -> Reader {
        self.connect_to(server.local_addr(), pace)
    }

    /// A new connection to `addr`, read at `pace`.
    pub fn connect_to(&self, addr: SocketAddr, pace: Pace) -> Reader {
        Reader::new(connect(addr, self.client.as_ref(), pace), pace)
    }

    /// Whether this is TLS.
    pub fn is_tls(&self) -> bool {
        self.client.is_some()
    }
}

/// A connection to `addr`, plain or over TLS; a slow reader's socket
/// buffers only 4 KiB on receipt, so its backlog sits in the server.
pub fn connect(addr: SocketAddr, tls: Option<&Arc<ClientConfig>>, pace: Pace) -> Box<dyn Stream> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a socket");
    if matches!(pace, Pace::Slow { .. }) {
        socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
    }
    socket.connect(&addr.into()).expect("connect");
    let socket = TcpStream::from(socket);
    socket.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    socket.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    socket.set_nodelay(true).unwrap();
    match tls {
        None => Box::new(socket),
        Some(config) => {
            let name = rustls::pki_types::ServerName::try_from("localhost").expect("a name");
            let session =
                rustls::ClientConnection::new(Arc::clone(config), name).expect("a session");
            let mut stream = rustls::StreamOwned::new(session, socket);
            while stream.conn.is_handshaking() {
                stream
                    .conn
                    .complete_io(&mut stream.sock)
                    .expect("the handshake completes");
            }
            Box::new(stream)
        }
    }
}

/// Reads a stream at a pace, keeping what it read past what was asked.
pub struct Reader {
    pub stream: Box<dyn Stream>,
    pace: Pace,
    reads: usize,
    pending: Vec<u8>,
    start: usize,
}

impl Reader {
    pub fn new(stream: Box<dyn Stream>, pace: Pace) -> Reader {
        Reader {
            stream,
            pace,
            reads: 0,
            pending: Vec::new(),
            start: 0,
        }
    }

    /// Writes all of `bytes`.
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
        self.stream.flush().expect("flush");
    }

    /// Exactly `len` bytes; fails at the end of the stream.
    pub fn exactly(&mut self, len: usize) -> Vec<u8> {
        while self.pending.len() - self.start < len {
            assert!(
                self.fill() > 0,
                "the stream ended with {len} bytes awaited, {} read",
                self.pending.len() - self.start
            );
        }
        let out = self.pending[self.start..self.start + len].to_vec();
        self.start += len;
        if self.start == self.pending.len() {
            self.pending.clear();
            self.start = 0;
        }
        out
    }

    /// Bytes up to and including the first `needle` (an HTTP head).
    pub fn until(&mut self, needle: &[u8]) -> Vec<u8> {
        loop {
            let held = &self.pending[self.start..];
            if let Some(at) = held.windows(needle.len()).position(|w| w == needle) {
                return self.exactly(at + needle.len());
            }
            assert!(self.fill() > 0, "the stream ended before {needle:?}");
        }
    }

    fn fill(&mut self) -> usize {
        let chunk = match self.pace {
            Pace::Fast => 64 * 1024,
            Pace::Slow {
                chunk,
                every,
                stall,
            } => {
                self.reads += 1;
                if self.reads.is_multiple_of(every) {
                    // The load shape (a client that stops reading for a
                    // moment), not a wait for anything.
                    std::thread::sleep(stall);
                }
                chunk
            }
        };
        if self.start > 0 && self.start * 2 > self.pending.len() {
            self.pending.drain(..self.start);
            self.start = 0;
        }
        let old = self.pending.len();
        self.pending.resize(old + chunk, 0);
        loop {
            match self.stream.read(&mut self.pending[old..]) {
                Ok(len) => {
                    self.pending.truncate(old + len);
                    return len;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => panic!("read failed: {e}"),
            }
        }
    }
}

/// A WebSocket frame the server sent: its first byte (FIN, RSV, opcode)
/// and payload.
#[derive(Debug, PartialEq, Eq)]
pub struct Frame {
    pub head: u8,
    pub payload: Vec<u8>,
}

/// Reads one server frame, of any length; fails on a masked one.
pub fn read_frame(reader: &mut Reader) -> Frame {
    let head = reader.exactly(2);
    assert_eq!(
        head[1] & 0x80,
        0,
        "a server frame is not masked: {head:02x?}"
    );
    let len = match head[1] & 0x7f {
        126 => u16::from_be_bytes(reader.exactly(2).try_into().unwrap()) as usize,
        127 => {
            let len = u64::from_be_bytes(reader.exactly(8).try_into().unwrap());
            usize::try_from(len).expect("a length that fits")
        }
        len => usize::from(len),
    };
    Frame {
        head: head[0],
        payload: reader.exactly(len),
    }
}

/// A client frame: final, masked with `mask`, of any length.
pub fn client_frame(opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let mut frame = vec![0x80 | opcode];
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

/// The upgrade request for `path` (the RFC 6455 §1.3 key).
pub fn upgrade_request(path: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
}

/// Upgrades `reader`'s connection at `path`; fails unless the answer is
/// a 101.
pub fn upgrade(reader: &mut Reader, path: &str) {
    reader.send(upgrade_request(path).as_bytes());
    let head = reader.until(b"\r\n\r\n");
    assert!(
        head.starts_with(b"HTTP/1.1 101 Switching Protocols\r\n"),
        "{}",
        String::from_utf8_lossy(&head)
    );
}

/// An I/O error that ends a reader, as a message (for a helper thread's
/// result).
pub fn describe(error: &io::Error) -> String {
    format!("{:?}: {error}", error.kind())
}

/// Keeps senders at most `limit` bytes ahead of the slowest reader, so a
/// long run never reaches the server's outbound limits (which cut a
/// reader that far behind, as they should): flow control between the
/// test's own threads.
#[derive(Debug)]
pub struct Window {
    state: std::sync::Mutex<WindowState>,
    moved: std::sync::Condvar,
    limit: u64,
}

#[derive(Debug)]
struct WindowState {
    sent: u64,
    received: Vec<u64>,
}

impl Window {
    pub fn new(readers: usize, limit: u64) -> Arc<Window> {
        Arc::new(Window {
            state: std::sync::Mutex::new(WindowState {
                sent: 0,
                received: vec![0; readers],
            }),
            moved: std::sync::Condvar::new(),
            limit,
        })
    }

    /// A sender is about to send `len` bytes to every reader: waits until
    /// that keeps it within the limit of the slowest.
    pub fn before_send(&self, len: usize) {
        let deadline = std::time::Instant::now() + IO_TIMEOUT;
        let mut state = self.state.lock().unwrap();
        loop {
            let slowest = state.received.iter().copied().min().unwrap_or(state.sent);
            if state.sent - slowest + len as u64 <= self.limit || state.sent == slowest {
                state.sent += len as u64;
                return;
            }
            let now = std::time::Instant::now();
            assert!(
                now < deadline,
                "the slowest reader took nothing for {IO_TIMEOUT:?}"
            );
            state = self.moved.wait_timeout(state, deadline - now).unwrap().0;
        }
    }

    /// Reader `reader` took a message of `len` bytes.
    pub fn received(&self, reader: usize, len: usize) {
        self.state.lock().unwrap().received[reader] += len as u64;
        self.moved.notify_all();
    }
}
