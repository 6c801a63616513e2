//! Instructions per call of the server's small utilities, beside the crates of
//! the field that do the same job, for `bench/utility-costs/run` to count under
//! callgrind (repeatable on a shared machine, where timing is not).
//!
//! The server's own modules are compiled in from `src/` as they are now, so a
//! case named `ours` always measures the code of the commit it runs at. A case
//! named after a crate measures the call the server would make instead,
//! keeping the server's rules on top where the crate does not have them.
//!
//! `utility-costs CASE N` runs case `CASE` N times inside [`run`], the one
//! function callgrind collects in; `utility-costs --list` names every case.

#![allow(dead_code)]

use std::hint::black_box;
use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::de::IgnoredAny;

#[path = "../../../src/upstream/json.rs"]
mod json;

#[path = "../../../src/http/date.rs"]
mod date;
#[path = "../../../src/http/http_date.rs"]
mod http_date;
#[path = "../../../src/http/percent.rs"]
mod percent;

/// The paths the server's modules name each other by.
mod http {
    pub(crate) use super::{date, http_date, percent};
}

/// What the bench's upstream answers `/io` with.
const IO_BODY: &[u8] = br#"{"status": 200, "msg": "Good Luck!"}"#;
/// The 20-user list of `/v1/user`: a larger body with nesting and escapes.
const V1_USER: &[u8] = include_bytes!("../../../fixtures/v1-user.json");

const IMF_FIXDATE: &[u8] = b"Sun, 06 Nov 1994 08:49:37 GMT";
const RFC_850: &[u8] = b"Sunday, 06-Nov-94 08:49:37 GMT";
const ASCTIME: &[u8] = b"Sun Nov  6 08:49:37 1994";
/// Some time in 2025, which places an RFC 850 date's year.
const NOW: u64 = 1_750_000_000;

/// A path with escapes: the only kind that is decoded (one without `%` or a
/// dot segment is looked up as it is).
const ESCAPED_PATH: &[u8] = b"/docs/caf%C3%A9%20menu/r%C3%A9sum%C3%A9.html";
/// A longer path with a single escape.
const LONG_PATH: &[u8] = b"/static/assets/images/2025/summer/holiday%20photo.jpeg";

type Case = (&'static str, fn());

const CASES: &[Case] = &[
    ("baseline", || {}),
    ("json-io-ours", || {
        black_box(json::is_valid(black_box(IO_BODY)));
    }),
    ("json-io-serde_json", || {
        black_box(serde_json_is_valid(black_box(IO_BODY)));
    }),
    ("json-user-ours", || {
        black_box(json::is_valid(black_box(V1_USER)));
    }),
    ("json-user-serde_json", || {
        black_box(serde_json_is_valid(black_box(V1_USER)));
    }),
    ("date-parse-imf-ours", || {
        black_box(http::http_date::parse_http_date(black_box(IMF_FIXDATE), NOW));
    }),
    ("date-parse-imf-httpdate", || {
        black_box(httpdate_parse(black_box(IMF_FIXDATE)));
    }),
    ("date-parse-rfc850-ours", || {
        black_box(http::http_date::parse_http_date(black_box(RFC_850), NOW));
    }),
    ("date-parse-rfc850-httpdate", || {
        black_box(httpdate_parse(black_box(RFC_850)));
    }),
    ("date-parse-asctime-ours", || {
        black_box(http::http_date::parse_http_date(black_box(ASCTIME), NOW));
    }),
    ("date-parse-asctime-httpdate", || {
        black_box(httpdate_parse(black_box(ASCTIME)));
    }),
    ("date-format-ours", || {
        black_box(http::date::format_imf_fixdate(black_box(784_111_777)));
    }),
    ("date-format-httpdate", || {
        black_box(httpdate_format(black_box(784_111_777)));
    }),
    ("percent-escaped-ours", || {
        let mut buf = [0u8; 128];
        black_box(http::percent::decode_path(black_box(ESCAPED_PATH), &mut buf).is_some());
    }),
    ("percent-escaped-percent_encoding", || {
        let mut buf = [0u8; 128];
        black_box(percent_encoding_decode_path(black_box(ESCAPED_PATH), &mut buf).is_some());
    }),
    ("percent-long-ours", || {
        let mut buf = [0u8; 128];
        black_box(http::percent::decode_path(black_box(LONG_PATH), &mut buf).is_some());
    }),
    ("percent-long-percent_encoding", || {
        let mut buf = [0u8; 128];
        black_box(percent_encoding_decode_path(black_box(LONG_PATH), &mut buf).is_some());
    }),
];

/// JSON validation as serde_json does it: parse, keep nothing.
fn serde_json_is_valid(text: &[u8]) -> bool {
    serde_json::from_slice::<IgnoredAny>(text).is_ok()
}

/// An HTTP-date read by httpdate, as seconds since 1970 (what the server
/// compares with a file's modification time). httpdate takes a `str`.
fn httpdate_parse(value: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(value).ok()?;
    let time = httpdate::parse_http_date(text).ok()?;
    time.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs())
}

/// An IMF-fixdate written by httpdate into a fixed buffer, without allocating.
fn httpdate_format(unix_seconds: u64) -> [u8; 29] {
    let mut out = [0u8; 29];
    let time: SystemTime = UNIX_EPOCH + Duration::from_secs(unix_seconds);
    let _ = write!(&mut out[..], "{}", httpdate::HttpDate::from(time));
    out
}

/// `decode_path` on percent-encoding: `percent_decode` passes a malformed
/// escape through as it is and decodes `%2F` and `%00`, so the server's rules
/// (each names nothing) need a pass over the escapes first.
fn percent_encoding_decode_path<'b>(path: &[u8], buf: &'b mut [u8]) -> Option<&'b [u8]> {
    use http::percent::hex_digit;
    let mut rest = path;
    while let Some(at) = rest.iter().position(|&b| b == b'%') {
        let [high, low, ..] = rest[at + 1..] else {
            return None;
        };
        let decoded = hex_digit(high)? << 4 | hex_digit(low)?;
        if decoded == b'/' || decoded == 0 {
            return None;
        }
        rest = &rest[at + 3..];
    }
    let mut len = 0;
    for byte in percent_encoding::percent_decode(path) {
        *buf.get_mut(len)? = byte;
        len += 1;
    }
    Some(&buf[..len])
}

/// The loop callgrind collects in (`--toggle-collect=utility_costs::run`).
#[inline(never)]
fn run(case: fn(), iterations: u64) {
    for _ in 0..iterations {
        black_box(case)();
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match &args[..] {
        [flag] if flag == "--list" => {
            for (name, _) in CASES {
                println!("{name}");
            }
        }
        [name, iterations] => {
            let Some((_, case)) = CASES.iter().find(|(known, _)| known == name) else {
                eprintln!("utility-costs: no case {name} (see --list)");
                std::process::exit(2);
            };
            let Ok(iterations) = iterations.parse() else {
                eprintln!("utility-costs: not a number of iterations: {iterations}");
                std::process::exit(2);
            };
            // Every case must give the server's answer, or its count means nothing.
            assert_same_answers();
            run(*case, iterations);
        }
        _ => {
            eprintln!("usage: utility-costs CASE ITERATIONS | utility-costs --list");
            std::process::exit(2);
        }
    }
}

/// The crate versions answer the measured inputs as the server does.
fn assert_same_answers() {
    for text in [IO_BODY, V1_USER] {
        assert_eq!(json::is_valid(text), serde_json_is_valid(text));
    }
    for value in [IMF_FIXDATE, RFC_850, ASCTIME] {
        let ours = http::http_date::parse_http_date(value, NOW);
        assert_eq!(ours, httpdate_parse(value));
    }
    assert_eq!(
        http::date::format_imf_fixdate(784_111_777),
        httpdate_format(784_111_777)
    );
    for path in [ESCAPED_PATH, LONG_PATH] {
        let (mut a, mut b) = ([0u8; 128], [0u8; 128]);
        let ours = http::percent::decode_path(path, &mut a);
        assert_eq!(ours, percent_encoding_decode_path(path, &mut b));
    }
}
