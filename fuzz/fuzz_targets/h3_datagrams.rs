//! Fuzz target: HTTP/3 from arbitrary bytes, in two modes chosen by bit 0
//! of byte 0.
//!
//! **Datagrams** (bit clear): the rest is datagrams, each a byte naming its
//! sender (one of four client ports) and a 16-bit length, then that many
//! bytes (what is left, if fewer), handed one by one to a server endpoint
//! (`sans_io::QuicDatagrams`: quinn-proto's endpoint with the server's QUIC
//! configuration, the poller's routing by connection ID, new connections
//! accepted and their sessions driven with `Routes::standard()`). Checked:
//! nothing panics, and the endpoint never sends more than three times the
//! bytes it received (no address is ever validated here: RFC 9000 §8.1).
//!
//! **A request stream** (bit set): byte 1 gives `n = byte % 8`, the next
//! `n` bytes are read lengths (as in `request_stream`: 0 an empty read,
//! 1-239 that many, 0xF0-0xFF 1-16 KiB; `n = 0`: byte by byte), the rest
//! is what the client sends on one request stream, then its FIN
//! (`sans_io::H3Request`: the frames, QPACK, the request's checks, the
//! HTTP/1.1 request it means, served through the gateway). Checked:
//! nothing panics; fed whole and fed cut into those reads, the outcome is
//! the same (where reads end changes no answer); an answer's field section
//! decodes, its `:status` first and equal to the HTTP/1.1 response's, its
//! body the HTTP/1.1 response's body byte for byte; a refusal's code is one
//! of HTTP/3's.

#![no_main]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use uppercut_mio_server::sans_io::{
    format_imf_fixdate, qpack_decode, H3Outcome, H3Request, QuicDatagrams, DATE_LEN,
};
use uppercut_mio_server::{Routes, TlsFiles};

const MAX_BODY: u64 = 1024 * 1024;

struct Fixture {
    routes: Routes,
    date: [u8; DATE_LEN],
    files: TlsFiles,
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    let tls = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tls");
    Fixture {
        routes: Routes::standard(),
        date: format_imf_fixdate(1_700_000_000),
        files: TlsFiles {
            cert: tls.join("ec.pem"),
            key: tls.join("ec-sec1.key"),
        },
    }
});

fuzz_target!(|input: &[u8]| {
    let Some((&mode, rest)) = input.split_first() else {
        return;
    };
    match mode & 1 {
        0 => datagrams(rest),
        _ => request_stream(rest),
    }
});

fn datagrams(mut rest: &[u8]) {
    let fixture = &*FIXTURE;
    let mut endpoint = QuicDatagrams::new(&fixture.files).expect("the fixture's certificate");
    while rest.len() >= 3 {
        let port = 40_000 + u16::from(rest[0] % 4);
        let len = usize::from(u16::from_be_bytes([rest[1], rest[2]]));
        rest = &rest[3..];
        let take = len.min(rest.len());
        let (datagram, after) = rest.split_at(take);
        rest = after;
        let from = SocketAddr::from(([127, 0, 0, 1], port));
        endpoint.handle(from, datagram, &fixture.routes, &fixture.date);
        let (received, sent) = endpoint.counts();
        assert!(sent <= 3 * received, "{sent} bytes sent for {received} received");
    }
}

/// The read lengths of the control bytes, as in `request_stream`.
fn read_len(byte: u8) -> usize {
    match byte {
        0xF0..=0xFF => (usize::from(byte - 0xEF)) * 1024,
        other => usize::from(other),
    }
}

/// Feeds `stream` in reads of `lengths` (in turn; byte by byte if none),
/// then its end; the first outcome that is not `More`.
fn feed(stream: &[u8], lengths: &[usize]) -> H3Outcome {
    let fixture = &*FIXTURE;
    let mut request = H3Request::new(MAX_BODY);
    let mut rest = stream;
    let mut turn = 0;
    while !rest.is_empty() {
        let len = match lengths.is_empty() {
            true => 1,
            false => lengths[turn % lengths.len()],
        };
        turn += 1;
        let (read, after) = rest.split_at(len.min(rest.len()));
        rest = after;
        let outcome = request.feed(read, false, &fixture.routes, &fixture.date);
        if outcome != H3Outcome::More {
            return outcome;
        }
        // Empty reads: at most a few in a row, then one byte.
        if len == 0 && turn % 4 == 0 && !rest.is_empty() {
            let (read, after) = rest.split_at(1);
            rest = after;
            let outcome = request.feed(read, false, &fixture.routes, &fixture.date);
            if outcome != H3Outcome::More {
                return outcome;
            }
        }
    }
    request.feed(b"", true, &fixture.routes, &fixture.date)
}

fn request_stream(rest: &[u8]) {
    let Some((&control, rest)) = rest.split_first() else {
        return;
    };
    let n = usize::from(control % 8).min(rest.len());
    let lengths: Vec<usize> = rest[..n].iter().map(|&b| read_len(b)).collect();
    let stream = &rest[n..];
    let whole = feed(stream, &[usize::MAX]);
    let cut = feed(stream, &lengths);
    assert_eq!(whole, cut, "where reads end changed the outcome");
    match whole {
        H3Outcome::Answered {
            response,
            fields,
            body,
        } => {
            let mut parsed = [httparse::EMPTY_HEADER; 64];
            let mut head = httparse::Response::new(&mut parsed);
            let Ok(httparse::Status::Complete(head_len)) = head.parse(&response) else {
                panic!("not a response: {:?}", String::from_utf8_lossy(&response));
            };
            let status = head.code.expect("a status");
            let decoded = qpack_decode(&fields).expect("the server's field section decodes");
            assert_eq!(decoded[0].0, b":status");
            assert_eq!(decoded[0].1, status.to_string().as_bytes());
            // The body the HTTP/1.1 response carried (none for HEAD, 204
            // and 304), byte for byte.
            assert_eq!(body, &response[head_len..]);
        }
        H3Outcome::Refused { code, .. } => {
            assert!(
                (0x100..=0x110).contains(&code) || (0x200..=0x202).contains(&code),
                "code {code:#x}"
            );
        }
        H3Outcome::More | H3Outcome::Calling => {}
    }
}
