//! Fuzz target: a WebSocket connection's frame decoder, `WsDecoder`, on
//! arbitrary bytes.
//!
//! Input: byte 0 gives `n = byte % 8`, and its top bit a decoder that agreed
//! to permessage-deflate (compressed messages inflated against the same
//! limit); the next `n` bytes are read lengths
//! (as in `request_stream`: 0 an empty read, 1-239 that many bytes,
//! 0xF0-0xFF 1-16 KiB); the rest is what the client sends. The decoder
//! (with a 4 KiB message limit) is fed once whole and once cut into reads
//! of those lengths (`n = 0`: byte by byte). The target checks that:
//!
//! - nothing panics;
//! - both feedings give the same events and the same output;
//! - at most one close or failure comes, and it is the last event; a
//!   failure's code is 1002, 1007 or 1009;
//! - no message is over the limit, and text is valid UTF-8 (the type says
//!   so; `from_utf8` checks again);
//! - the output is only pongs: whole unmasked frames with opcode 0xA and a
//!   payload of at most 125 bytes.

#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use uppercut_mio_server::sans_io::{WsDecoder, WsEvent};

const MAX_MESSAGE: usize = 4096;

/// What one feeding produced: each event written out, and the output.
fn decode(deflate: bool, reads: &[usize], mut input: &[u8]) -> (Vec<String>, Vec<u8>) {
    let mut decoder = match deflate {
        true => WsDecoder::with_deflate(MAX_MESSAGE),
        false => WsDecoder::new(MAX_MESSAGE),
    };
    let mut out = BytesMut::new();
    let mut events = Vec::new();
    let mut reads = reads.iter().cycle();
    while !input.is_empty() {
        let len = match reads.next() {
            Some(&len) => len.min(input.len()),
            None => input.len(),
        };
        let (read, rest) = input.split_at(len);
        input = rest;
        decoder.feed(read, &mut out, |event| {
            match event {
                WsEvent::Text(text) => {
                    assert!(text.len() <= MAX_MESSAGE);
                    assert!(std::str::from_utf8(text.as_bytes()).is_ok());
                }
                WsEvent::Binary(bytes) => assert!(bytes.len() <= MAX_MESSAGE),
                WsEvent::Close(_) => {}
                WsEvent::Fail(code) => assert!([1002, 1007, 1009].contains(&code), "{code}"),
            }
            events.push(format!("{event:?}"));
        });
    }
    (events, out.to_vec())
}

/// The read length a byte stands for.
fn read_len(byte: u8) -> usize {
    match byte {
        0xf0..=0xff => 1024 * usize::from(byte - 0xef),
        other => usize::from(other),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(first % 8).min(rest.len());
    let (lengths, input) = rest.split_at(n);
    let mut reads: Vec<usize> = lengths.iter().map(|&b| read_len(b)).collect();
    if reads.is_empty() {
        reads.push(1);
    }
    // An empty read length would never advance: make it one byte.
    for read in &mut reads {
        *read = (*read).max(1);
    }
    let deflate = first & 0x80 != 0;
    let whole = decode(deflate, &[], input);
    let cut = decode(deflate, &reads, input);
    assert_eq!(whole, cut, "whole and cut feedings differ");
    let (events, out) = whole;
    for (i, event) in events.iter().enumerate() {
        if event.starts_with("Close") || event.starts_with("Fail") {
            assert_eq!(i, events.len() - 1, "a close or failure is the last event");
        }
    }
    let mut rest = &out[..];
    while let [first, len, tail @ ..] = rest {
        assert_eq!(*first, 0x8a, "only pongs are written");
        let len = usize::from(*len);
        assert!(len <= 125 && tail.len() >= len, "a whole small pong");
        rest = &tail[len..];
    }
    assert!(rest.is_empty(), "no partial frame");
});
