//! When a JetStream request is sent again, against a NATS server of the
//! test's own (a fake that speaks the client protocol and decides, per
//! request, to answer, to answer "no responders", or to stay silent): a
//! stream just made or without a leader looks exactly like this. A read
//! that goes unanswered is sent again and its late answer serves the
//! request; a write answered "no responders" is sent again; a write that
//! goes unanswered is never sent again (it may have been done), and the
//! request is 503. The durable counter of `common::durable`, both
//! dispatch modes, exact bodies and exact counts of what the fake saw.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::durable::{exchange, ok, wait_cluster_ready, Counter};
use common::{config, start_with};
use uppercut_mio_server::{
    ClusterConfig, Config, Dispatch, Method, NatsUrl, Routes, Server, StateConfig,
};

/// What the fake does with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    Answer,
    NoResponders,
    Silence,
}

/// Every request the fake saw, by kind: `create`, `get`, `put`.
#[derive(Default)]
struct Seen {
    requests: Vec<&'static str>,
}

/// A fake NATS with JetStream: one client at a time; `script` says what
/// to do with the n-th request of a kind (`get` 0, `get` 1, ...).
struct FakeNats {
    url: String,
    seen: Arc<Mutex<Seen>>,
}

impl FakeNats {
    fn start(script: fn(&str, usize) -> Then) -> FakeNats {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("nats://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Seen::default()));
        let shared = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let seen = Arc::clone(&shared);
                std::thread::spawn(move || serve(stream, script, &seen));
            }
        });
        FakeNats { url, seen }
    }

    fn seen(&self, kind: &str) -> usize {
        let seen = self.seen.lock().unwrap();
        seen.requests.iter().filter(|&&k| k == kind).count()
    }
}

/// One client connection: INFO, then PONGs, SUBs noted, and each request
/// to JetStream handled as the script says.
fn serve(stream: TcpStream, script: fn(&str, usize) -> Then, seen: &Mutex<Seen>) {
    let mut out = stream.try_clone().unwrap();
    let info = r#"INFO {"server_id":"FAKE","server_name":"fake","version":"2.10.0","proto":1,"headers":true,"max_payload":1048576}"#;
    if out.write_all(format!("{info}\r\n").as_bytes()).is_err() {
        return;
    }
    let mut reader = BufReader::new(stream);
    let mut wildcards: Vec<(String, String)> = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.first().copied() {
            Some("PING") => {
                let _ = out.write_all(b"PONG\r\n");
            }
            Some("SUB") => {
                // The answers come to a wildcard: `PREFIX*`.
                if let (Some(subject), Some(sid)) = (words.get(1), words.last()) {
                    if let Some(prefix) = subject.strip_suffix('*') {
                        wildcards.push((prefix.to_string(), sid.to_string()));
                    }
                }
            }
            Some(verb @ ("PUB" | "HPUB")) => {
                let total: usize = words.last().and_then(|n| n.parse().ok()).unwrap_or(0);
                let mut payload = vec![0; total + 2];
                if reader.read_exact(&mut payload).is_err() {
                    return;
                }
                let subject = words[1];
                let reply = match (verb, words.len()) {
                    ("PUB", 4) | ("HPUB", 5) => words[2],
                    _ => continue,
                };
                let kind = if subject.starts_with("$JS.API.STREAM.CREATE.") {
                    "create"
                } else if subject.starts_with("$JS.API.STREAM.MSG.GET.") {
                    "get"
                } else if subject.starts_with("$KV.") {
                    "put"
                } else {
                    "other"
                };
                let n = {
                    let mut seen = seen.lock().unwrap();
                    seen.requests.push(kind);
                    seen.requests.iter().filter(|&&k| k == kind).count() - 1
                };
                let Some((_, sid)) = wildcards
                    .iter()
                    .find(|(prefix, _)| reply.starts_with(prefix.as_str()))
                else {
                    continue;
                };
                let body: &[u8] = match kind {
                    "create" => br#"{"type":"io.nats.jetstream.api.v1.stream_create_response","config":{}}"#,
                    "get" => br#"{"error":{"code":404,"err_code":10037,"description":"no message found"}}"#,
                    "put" => br#"{"stream":"KV_upc","seq":1}"#,
                    _ => br#"{"error":{"code":500,"err_code":1,"description":"not faked"}}"#,
                };
                let written = match script(kind, n) {
                    Then::Answer => {
                        let mut msg = format!("MSG {reply} {sid} {}\r\n", body.len()).into_bytes();
                        msg.extend_from_slice(body);
                        msg.extend_from_slice(b"\r\n");
                        out.write_all(&msg)
                    }
                    Then::NoResponders => {
                        let headers = "NATS/1.0 503\r\n\r\n";
                        let len = headers.len();
                        out.write_all(
                            format!("HMSG {reply} {sid} {len} {len}\r\n{headers}\r\n").as_bytes(),
                        )
                    }
                    Then::Silence => Ok(()),
                };
                if written.is_err() {
                    return;
                }
            }
            _ => {}
        }
    }
}

/// A server on `fake`, its durable `counter` at `/count`, its state in
/// JetStream with `timeout`.
fn node(fake: &FakeNats, dispatch: Dispatch, timeout: Duration) -> Server {
    let routes = Routes::new()
        .spawn_durable("counter", Counter::default())
        .actor(&[Method::Get, Method::Post], "/count", "counter");
    let config = Config {
        cluster: Some(ClusterConfig::new(
            vec![NatsUrl::parse(&fake.url).unwrap()],
            "a",
        )),
        state: Some(StateConfig::JetStream {
            timeout,
            replicas: 1,
        }),
        ..config(dispatch)
    };
    let server = start_with(&config, routes);
    wait_cluster_ready(&server);
    server
}

/// The first read of the state goes unanswered (a stream without a
/// leader): it is sent again, answered, and the count is served.
fn a_read_that_goes_unanswered_is_sent_again(dispatch: Dispatch) {
    let fake = FakeNats::start(|kind, n| match (kind, n) {
        ("get", 0) => Then::Silence,
        _ => Then::Answer,
    });
    let a = node(&fake, dispatch, Duration::from_secs(10));
    assert_eq!(exchange(a.local_addr(), "POST", "/count"), ok("1"));
    assert_eq!(
        (fake.seen("create"), fake.seen("get"), fake.seen("put")),
        (1, 2, 1)
    );
}

/// A read that is never answered is tried again until its timeout, and
/// no longer: 503 then, after exactly two tries (at 0 and at 0.5 s; the
/// second waits the rest of the 1.5 s).
fn a_read_never_answered_is_503_at_its_timeout(dispatch: Dispatch) {
    let fake = FakeNats::start(|kind, _| match kind {
        "get" => Then::Silence,
        _ => Then::Answer,
    });
    let a = node(&fake, dispatch, Duration::from_millis(1500));
    assert_eq!(
        exchange(a.local_addr(), "POST", "/count"),
        (
            "HTTP/1.1 503 Service Unavailable".to_string(),
            "503 Service Unavailable: the state of counter is unavailable: the store did not \
             answer in time\n"
                .to_string()
        )
    );
    assert_eq!(
        (fake.seen("create"), fake.seen("get"), fake.seen("put")),
        (1, 2, 0)
    );
}

/// A write answered "no responders" (nobody behind the stream's subject
/// yet) is sent again, then acknowledged: one count, answered once.
fn a_write_nobody_heard_is_sent_again(dispatch: Dispatch) {
    let fake = FakeNats::start(|kind, n| match (kind, n) {
        ("put", 0 | 1) => Then::NoResponders,
        _ => Then::Answer,
    });
    let a = node(&fake, dispatch, Duration::from_secs(10));
    assert_eq!(exchange(a.local_addr(), "POST", "/count"), ok("1"));
    assert_eq!(
        (fake.seen("create"), fake.seen("get"), fake.seen("put")),
        (1, 1, 3)
    );
}

/// A write that goes unanswered may have been done: it is not sent
/// again, and the request is 503 once the timeout has passed.
fn a_write_that_goes_unanswered_is_not_sent_again(dispatch: Dispatch) {
    let fake = FakeNats::start(|kind, _| match kind {
        "put" => Then::Silence,
        _ => Then::Answer,
    });
    let a = node(&fake, dispatch, Duration::from_millis(1500));
    assert_eq!(
        exchange(a.local_addr(), "POST", "/count"),
        (
            "HTTP/1.1 503 Service Unavailable".to_string(),
            "503 Service Unavailable: the state of counter was not saved: the store did not \
             answer in time\n"
                .to_string()
        )
    );
    assert_eq!(
        (fake.seen("create"), fake.seen("get"), fake.seen("put")),
        (1, 1, 1)
    );
}

/// An API request answered "no responders" is JetStream missing, not a
/// stream without a leader: not sent again, 503 at once.
fn an_api_request_nobody_heard_is_not_sent_again(dispatch: Dispatch) {
    let fake = FakeNats::start(|kind, _| match kind {
        "create" => Then::NoResponders,
        _ => Then::Answer,
    });
    let a = node(&fake, dispatch, Duration::from_secs(10));
    let (status, _) = exchange(a.local_addr(), "POST", "/count");
    assert_eq!(status, "HTTP/1.1 503 Service Unavailable");
    assert_eq!(
        (fake.seen("create"), fake.seen("get"), fake.seen("put")),
        (1, 0, 0)
    );
}

in_both_modes!(
    a_read_that_goes_unanswered_is_sent_again,
    a_read_never_answered_is_503_at_its_timeout,
    a_write_nobody_heard_is_sent_again,
    a_write_that_goes_unanswered_is_not_sent_again,
    an_api_request_nobody_heard_is_not_sent_again,
);
