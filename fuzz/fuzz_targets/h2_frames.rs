//! Fuzz target: an HTTP/2 connection's session, `H2Session`, on arbitrary
//! bytes after the client preface, answering from `Routes::standard()`.
//!
//! Input: byte 0 gives `n = byte % 8` and two switches: 0x08, the server
//! drains (`go_away`) after the first read; 0x10, it pings the client
//! after the first read. The next `n` bytes are read lengths (as in
//! `request_stream`: 0 an empty read, 1-239 that many bytes, 0xF0-0xFF
//! 1-16 KiB; `n = 0`: byte by byte); the rest is what the client sends
//! after the preface. The session is fed read by read (one every 10 ms of
//! its clock, which the control-frame flood limit counts by), driven after
//! each and its output taken (again while it had more than its output
//! holds), and nothing more fed once it says the connection is over; at the
//! end the client's side ends and it is driven once more.
//!
//! What the client sent is read as frames too (as far as they are whole),
//! only for bounds: the largest frame size and stream window it allowed,
//! the window it added to the connection and to each stream, the SETTINGS
//! and PINGs it sent. The target checks what must hold whatever the input:
//!
//! - nothing panics, and the session ends every drive (a loop is a
//!   libFuzzer timeout);
//! - the output is whole frames, nothing left over, the first a SETTINGS
//!   without ACK (the server's preface);
//! - each frame is no longer than the largest frame size the client
//!   allowed (16,384 unless its SETTINGS raised it), has the reserved bit
//!   clear, is of a type a server sends (no PUSH_PROMISE, PRIORITY or
//!   unknown type), on stream 0 for SETTINGS, PING and GOAWAY, on a
//!   client's (odd) stream for DATA, HEADERS and CONTINUATION, on any
//!   but stream 0 for RST_STREAM (h2 resets the stream a malformed header
//!   block names, even an even-numbered one), with the fixed length its type
//!   has (RST_STREAM and WINDOW_UPDATE 4, PING 8, GOAWAY at least 8,
//!   SETTINGS a multiple of 6 and empty with ACK) and a window increment
//!   that is not 0;
//! - a header block is contiguous: HEADERS without END_HEADERS is followed
//!   by CONTINUATION frames on its stream up to END_HEADERS, and a
//!   CONTINUATION comes nowhere else;
//! - on a stream, no DATA before its HEADERS, and no HEADERS or DATA after
//!   END_STREAM or after the server reset it;
//! - the DATA sent stays within the windows the client gave: on the
//!   connection 65,535 plus its connection WINDOW_UPDATEs, on each stream
//!   the largest initial window it set (or 65,535) plus that stream's
//!   WINDOW_UPDATEs;
//! - no more SETTINGS ACKs than SETTINGS the client sent, and each PING ACK
//!   echoes a PING the client sent, no more often than it sent it;
//! - GOAWAY's last stream never grows from one GOAWAY to the next, and no
//!   HEADERS comes on a stream above it.

#![no_main]

use std::collections::HashMap;
use std::sync::LazyLock;

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use uppercut_mio_server::sans_io::{format_imf_fixdate, H2Session, DATE_LEN};
use uppercut_mio_server::Routes;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The server's default largest request body.
const MAX_BODY: u64 = 1024 * 1024;

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const PRIORITY: u8 = 0x2;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PUSH_PROMISE: u8 = 0x5;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;

const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
const DEFAULT_WINDOW: u64 = 65_535;
const DEFAULT_MAX_FRAME: usize = 16_384;

struct Fixture {
    routes: Routes,
    date: [u8; DATE_LEN],
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| Fixture {
    routes: Routes::standard(),
    date: format_imf_fixdate(1_700_000_000),
});

/// One frame: its header's fields and its payload.
struct Frame<'a> {
    kind: u8,
    flags: u8,
    /// The reserved bit and the stream id, as on the wire.
    raw_stream: u32,
    payload: &'a [u8],
}

impl Frame<'_> {
    fn stream(&self) -> u32 {
        self.raw_stream & 0x7fff_ffff
    }
}

/// The whole frames at the start of `bytes`, and what is left after them.
fn frames(mut bytes: &[u8]) -> (Vec<Frame<'_>>, &[u8]) {
    let mut all = Vec::new();
    while bytes.len() >= 9 {
        let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
        if bytes.len() < 9 + len {
            break;
        }
        all.push(Frame {
            kind: bytes[3],
            flags: bytes[4],
            raw_stream: u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]),
            payload: &bytes[9..9 + len],
        });
        bytes = &bytes[9 + len..];
    }
    (all, bytes)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// What the client's frames allow the server at most.
struct Bounds {
    max_frame: usize,
    stream_window: u64,
    connection_window: u64,
    stream_updates: HashMap<u32, u64>,
    settings: usize,
    /// Each PING payload the client sent, and how often.
    pings: HashMap<[u8; 8], usize>,
}

fn bounds(client: &[u8]) -> Bounds {
    let mut bounds = Bounds {
        max_frame: DEFAULT_MAX_FRAME,
        stream_window: DEFAULT_WINDOW,
        connection_window: DEFAULT_WINDOW,
        stream_updates: HashMap::new(),
        settings: 0,
        pings: HashMap::new(),
    };
    for frame in frames(client).0 {
        match frame.kind {
            SETTINGS if frame.flags & ACK == 0 => {
                bounds.settings += 1;
                for setting in frame.payload.chunks_exact(6) {
                    let id = u16::from_be_bytes([setting[0], setting[1]]);
                    let value = u32_at(setting, 2);
                    match id {
                        SETTINGS_MAX_FRAME_SIZE if value < 1 << 24 => {
                            bounds.max_frame = bounds.max_frame.max(value as usize);
                        }
                        SETTINGS_INITIAL_WINDOW_SIZE if value < 1 << 31 => {
                            bounds.stream_window = bounds.stream_window.max(u64::from(value));
                        }
                        _ => {}
                    }
                }
            }
            PING if frame.flags & ACK == 0 && frame.payload.len() == 8 => {
                let mut payload = [0; 8];
                payload.copy_from_slice(frame.payload);
                *bounds.pings.entry(payload).or_default() += 1;
            }
            WINDOW_UPDATE if frame.payload.len() == 4 => {
                let increment = u64::from(u32_at(frame.payload, 0) & 0x7fff_ffff);
                match frame.stream() {
                    0 => bounds.connection_window += increment,
                    stream => *bounds.stream_updates.entry(stream).or_default() += increment,
                }
            }
            _ => {}
        }
    }
    bounds
}

/// Where a stream is, as far as the server's frames go.
#[derive(Default)]
struct StreamSeen {
    headers: bool,
    ended: bool,
    data: u64,
}

/// Checks the server's whole output against the module comment's rules.
fn check_output(output: &[u8], bounds: &Bounds) {
    let (all, rest) = frames(output);
    assert!(
        rest.is_empty(),
        "{} bytes after the last whole frame",
        rest.len()
    );
    if let Some(first) = all.first() {
        assert!(
            first.kind == SETTINGS && first.flags & ACK == 0,
            "the server's first frame is type {} flags {:#x}, not its SETTINGS",
            first.kind,
            first.flags
        );
    }
    let mut streams: HashMap<u32, StreamSeen> = HashMap::new();
    let mut connection_data = 0u64;
    let mut settings_acks = 0;
    let mut pings = bounds.pings.clone();
    let mut last_stream: Option<u32> = None;
    // The stream whose header block is open.
    let mut block: Option<u32> = None;
    for (at, frame) in all.iter().enumerate() {
        let what = format!(
            "frame {at} (type {}, flags {:#x}, stream {}, {} bytes)",
            frame.kind,
            frame.flags,
            frame.raw_stream,
            frame.payload.len()
        );
        assert!(
            frame.payload.len() <= bounds.max_frame,
            "{what}: longer than {}",
            bounds.max_frame
        );
        assert_eq!(frame.raw_stream >> 31, 0, "{what}: reserved bit set");
        let stream = frame.stream();
        if let Some(open) = block {
            assert!(
                frame.kind == CONTINUATION && stream == open,
                "{what}: inside the header block of stream {open}"
            );
        }
        match frame.kind {
            SETTINGS | PING | GOAWAY => assert_eq!(stream, 0, "{what}: not on stream 0"),
            DATA | HEADERS | CONTINUATION => {
                assert!(stream % 2 == 1, "{what}: not on a client's stream")
            }
            // h2 resets the stream a malformed header block or a PRIORITY
            // on itself names, whatever its number (an even one too, where
            // RFC 9113 section 5.1.1 would have a connection error).
            RST_STREAM => assert_ne!(stream, 0, "{what}: on stream 0"),
            WINDOW_UPDATE => {}
            PRIORITY | PUSH_PROMISE => panic!("{what}: a server does not send this type"),
            _ => panic!("{what}: unknown type"),
        }
        match frame.kind {
            DATA => {
                let seen = streams.entry(stream).or_default();
                assert!(seen.headers, "{what}: DATA before HEADERS");
                assert!(!seen.ended, "{what}: DATA after the stream ended");
                let len = frame.payload.len() as u64;
                seen.data += len;
                connection_data += len;
                let window =
                    bounds.stream_window + bounds.stream_updates.get(&stream).copied().unwrap_or(0);
                assert!(
                    seen.data <= window,
                    "{what}: {} bytes on a window of {window}",
                    seen.data
                );
                assert!(
                    connection_data <= bounds.connection_window,
                    "{what}: {connection_data} bytes on a connection window of {}",
                    bounds.connection_window
                );
                seen.ended |= frame.flags & END_STREAM != 0;
            }
            HEADERS => {
                if let Some(last) = last_stream {
                    assert!(stream <= last, "{what}: above GOAWAY's last stream {last}");
                }
                let seen = streams.entry(stream).or_default();
                assert!(!seen.ended, "{what}: HEADERS after the stream ended");
                seen.headers = true;
                seen.ended |= frame.flags & END_STREAM != 0;
                if frame.flags & END_HEADERS == 0 {
                    block = Some(stream);
                }
            }
            CONTINUATION => {
                assert_eq!(
                    block,
                    Some(stream),
                    "{what}: CONTINUATION outside a header block"
                );
                if frame.flags & END_HEADERS != 0 {
                    block = None;
                }
            }
            RST_STREAM => {
                assert_eq!(frame.payload.len(), 4, "{what}: RST_STREAM's length");
                streams.entry(stream).or_default().ended = true;
            }
            SETTINGS if frame.flags & ACK != 0 => {
                assert!(
                    frame.payload.is_empty(),
                    "{what}: a SETTINGS ACK with settings"
                );
                settings_acks += 1;
                assert!(
                    settings_acks <= bounds.settings,
                    "{what}: {settings_acks} SETTINGS ACKs for {} SETTINGS",
                    bounds.settings
                );
            }
            SETTINGS => {
                assert_eq!(frame.payload.len() % 6, 0, "{what}: SETTINGS' length");
            }
            PING => {
                assert_eq!(frame.payload.len(), 8, "{what}: PING's length");
                if frame.flags & ACK != 0 {
                    let payload: [u8; 8] = frame.payload.try_into().unwrap_or_default();
                    let left = pings.get_mut(&payload).filter(|left| **left > 0);
                    let left = left.unwrap_or_else(|| panic!("{what}: acks a PING not sent"));
                    *left -= 1;
                }
            }
            GOAWAY => {
                assert!(frame.payload.len() >= 8, "{what}: GOAWAY's length");
                let last = u32_at(frame.payload, 0);
                assert_eq!(
                    last >> 31,
                    0,
                    "{what}: reserved bit in GOAWAY's last stream"
                );
                if let Some(before) = last_stream {
                    assert!(last <= before, "{what}: last stream {last} after {before}");
                }
                last_stream = Some(last);
            }
            WINDOW_UPDATE => {
                assert_eq!(frame.payload.len(), 4, "{what}: WINDOW_UPDATE's length");
                let increment = u32_at(frame.payload, 0) & 0x7fff_ffff;
                assert_ne!(increment, 0, "{what}: a WINDOW_UPDATE of 0");
            }
            _ => unreachable!(),
        }
    }
}

/// Drives `session` and takes its output, again while it had more to write
/// than its output holds (as the connection does once the socket took it);
/// whether the connection is still open.
fn run(session: &mut H2Session, output: &mut BytesMut, fixture: &Fixture) -> bool {
    let mut rounds = 0;
    loop {
        let open = session.drive(&fixture.routes, &fixture.date);
        if !session.take_output(output) {
            return open;
        }
        rounds += 1;
        assert!(rounds <= 1_000, "the session keeps refilling its output");
    }
}

/// A read length from one input byte (as in `request_stream`).
fn read_len(byte: u8) -> usize {
    match byte {
        0..=0xEF => byte as usize,
        _ => (byte as usize - 0xEF) * 1024,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let count = (first % 8) as usize;
    let (drain, ping) = (first & 0x08 != 0, first & 0x10 != 0);
    if rest.len() < count {
        return;
    }
    let (len_bytes, client) = rest.split_at(count);
    let mut lens: Vec<usize> = len_bytes.iter().map(|&b| read_len(b)).collect();
    if lens.iter().all(|&len| len == 0) {
        lens.push(1);
    }

    let fixture = &*FIXTURE;
    let mut session = H2Session::new(MAX_BODY, PREFACE, 0);
    let mut output = BytesMut::new();
    let mut open = run(&mut session, &mut output, fixture);
    let mut start = 0;
    let mut reads = 0u64;
    for &len in lens.iter().cycle() {
        if start == client.len() || !open {
            break;
        }
        let end = (start + len).min(client.len());
        // A read every 10 ms: the flood limit's bucket refills as it would.
        reads += 1;
        session.feed(&client[start..end], reads * 10);
        start = end;
        if reads == 1 {
            if drain {
                session.go_away();
            }
            if ping {
                session.ping();
            }
        }
        open = run(&mut session, &mut output, fixture);
    }
    if open {
        session.end_input();
        run(&mut session, &mut output, fixture);
    }
    check_output(&output, &bounds(client));
});
