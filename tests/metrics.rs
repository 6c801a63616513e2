//! `--metrics`: after a known sequence of requests, `/metrics` (on its own
//! listener) reports exactly what happened, in the Prometheus text format,
//! with HELP and TYPE once for every family: every status under its own
//! code, each route's request durations, and no series for what the server
//! was not given; `promtool check metrics` accepts a scrape taken under
//! load.

mod common;
mod static_common;

use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::upstream::with_upstream;
use common::{
    config, pipeline_from_thread, read_until_closed, slow_reader, start_with, text, wait_for_open,
    wait_until_peer_closes, Client,
};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{ActorRequest, Config, Dispatch, Method, Routes, Server, StatusCode};

const CONTENT_TYPE: &str = "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n";

fn metrics_config(dispatch: Dispatch, pollers: usize) -> Config {
    let mut config = Config {
        pollers,
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        ..config(dispatch)
    };
    // Short enough for the test to wait for, long enough for any request
    // this test sends whole.
    config.timeouts.header = Duration::from_millis(500);
    config.timeouts.sweep = Duration::from_millis(50);
    config
}

/// One request to the metrics listener; the whole response.
fn get(addr: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect to /metrics");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    text(&read_until_closed(&mut stream))
}

/// The page at `GET /metrics`, after checking its status and content type.
fn scrape(server: &Server) -> String {
    let addr = server.metrics_addr().expect("metrics are on");
    let response = get(addr, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
    let (head, body) = response.split_once("\r\n\r\n").expect("a whole response");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(format!("{head}\r\n").contains(CONTENT_TYPE), "{head}");
    assert!(
        head.contains(&format!("Content-Length: {}", body.len())),
        "{head}"
    );
    body.to_string()
}

/// Sample lines by series (name and labels), as the page spells them.
fn samples(page: &str) -> HashMap<String, String> {
    page.lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
            (series.to_string(), value.to_string())
        })
        .collect()
}

/// Every family has exactly one HELP and one TYPE line, before its samples,
/// and every sample belongs to the family announced last (a histogram's
/// with `_bucket`, `_sum` or `_count` after the family's name).
fn assert_families_announced(page: &str) {
    let mut help = HashMap::new();
    let mut kind = HashMap::new();
    let mut current = String::new();
    let mut histogram = false;
    for line in page.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap().to_string();
            *help.entry(name.clone()).or_insert(0) += 1;
            current = name;
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, family) = rest.split_once(' ').unwrap();
            assert!(
                ["counter", "gauge", "histogram"].contains(&family),
                "{line}"
            );
            assert_eq!(name, current, "TYPE right after its HELP: {line}");
            histogram = family == "histogram";
            *kind.entry(name.to_string()).or_insert(0) += 1;
        } else {
            let name = line.split(['{', ' ']).next().unwrap();
            let family = match histogram {
                true => ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|suffix| name.strip_suffix(suffix))
                    .unwrap_or(name),
                false => name,
            };
            assert_eq!(family, current, "sample outside its family: {line}");
        }
    }
    assert_eq!(help, kind, "HELP and TYPE for the same families");
    assert!(help.values().all(|&n| n == 1), "once each: {help:?}");
}

fn known_sequence(dispatch: Dispatch) {
    let server = start_with(&metrics_config(dispatch, 1), Routes::standard());
    let mut sent = 0;
    let mut received = 0;

    // Keep-alive: 200, 404, 200, then a 200 that closes.
    let mut client = Client::connect(server.local_addr());
    for request in [
        "GET / HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    ] {
        client.send(request.as_bytes());
        sent += request.len();
        received += client.response(false).len();
    }
    client.assert_closed();

    // A head that never ends: 408 after the header timeout, then a close.
    let mut slow = Client::connect(server.local_addr());
    let partial = "GET / HTTP/1.1\r\nHost: t\r\n";
    slow.send(partial.as_bytes());
    sent += partial.len();
    let timed_out = slow.rest_until_close();
    assert!(text(&timed_out).starts_with("HTTP/1.1 408 "));
    received += timed_out.len();

    let page = scrape(&server);
    assert_families_announced(&page);
    let samples = samples(&page);
    let expected = [
        ("uppercut_connections_open{poller=\"0\"}", 0),
        ("uppercut_connections_accepted_total{poller=\"0\"}", 2),
        ("uppercut_connections_refused_total{poller=\"0\"}", 0),
        ("uppercut_requests_total{poller=\"0\",code=\"200\"}", 3),
        ("uppercut_requests_total{poller=\"0\",code=\"404\"}", 1),
        ("uppercut_requests_total{poller=\"0\",code=\"408\"}", 1),
        ("uppercut_bytes_received_total{poller=\"0\"}", sent),
        ("uppercut_bytes_sent_total{poller=\"0\"}", received),
        ("uppercut_timeouts_total{poller=\"0\",kind=\"header\"}", 1),
        ("uppercut_timeouts_total{poller=\"0\",kind=\"idle\"}", 0),
        ("uppercut_timeouts_total{poller=\"0\",kind=\"write\"}", 0),
        ("uppercut_accept_pauses_total{poller=\"0\"}", 0),
    ];
    // No series for what the server was not given: no --upstream, no
    // cluster, no TLS, no WebSocket route, no static files here.
    for absent in [
        "uppercut_upstream",
        "uppercut_nats",
        "uppercut_tls",
        "uppercut_websocket",
        "route=\"static\"",
    ] {
        assert!(!page.contains(absent), "{absent} in\n{page}");
    }
    // Durations by route: `/` three times; no route (the 404, and the 408
    // of a request whose head never came whole, timed as 0) twice.
    let duration = "uppercut_request_duration_seconds";
    for (route, count) in [("/", 3), ("none", 2)] {
        let labels = format!("poller=\"0\",route=\"{route}\"");
        assert_eq!(
            samples.get(&format!("{duration}_count{{{labels}}}")),
            Some(&count.to_string()),
            "{page}"
        );
        assert_eq!(
            samples.get(&format!("{duration}_bucket{{{labels},le=\"+Inf\"}}")),
            Some(&count.to_string()),
            "{page}"
        );
    }
    // Only the routes that were used.
    assert!(!page.contains("route=\"/json\""), "{page}");
    for (series, value) in expected {
        assert_eq!(
            samples.get(series).map(String::as_str),
            Some(value.to_string().as_str()),
            "{series} in\n{page}"
        );
    }
    // Only the statuses that were sent, and 200 always.
    let codes = samples
        .keys()
        .filter(|series| series.starts_with("uppercut_requests_total"))
        .count();
    assert_eq!(codes, 3, "{page}");

    let envelopes = samples.get("uppercut_scheduler_envelopes_total{poller=\"0\"}");
    match dispatch {
        // At least a wake per request and the poller's ticks.
        Dispatch::System => assert!(
            envelopes.is_some_and(|n| n.parse::<u64>().unwrap() >= 5),
            "{page}"
        ),
        Dispatch::Local => assert_eq!(envelopes, None, "{page}"),
    }
    for name in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    ] {
        let value: f64 = samples[name].parse().expect("a number");
        assert!(value >= 0.0, "{name} {value}");
    }
    assert!(samples["process_open_fds"].parse::<u64>().unwrap() > 0);
}

#[test]
fn metrics_count_a_known_sequence_in_local_dispatch() {
    known_sequence(Dispatch::Local);
}

#[test]
fn metrics_count_a_known_sequence_in_system_dispatch() {
    known_sequence(Dispatch::System);
}

/// Every status a route sends counted under its own code (a 201, a 418,
/// one a server never sends itself), an unknown method's 405 under the
/// route it came to; and each route's request durations under its path as
/// declared, the static files as one route, a request no route took as
/// `none`, a route that answered nothing with no series at all.
fn every_status_and_route_has_its_own_series(dispatch: Dispatch) {
    let tree = static_common::TempTree::new(&format!("metrics-routes-{}", dispatch.name()));
    tree.file("a.txt", b"a\n");
    let config = Config {
        static_dir: Some(tree.root.clone()),
        ..metrics_config(dispatch, 1)
    };
    let routes = Routes::new()
        .handler(&[Method::Get], "/status/{code}", |request, response| {
            let code = request.param("code").unwrap_or_default();
            let code = code.parse().unwrap_or(0);
            response.set_status(StatusCode::from_u16(code).unwrap_or(StatusCode::OK));
        })
        .blocking_handler(&[Method::Get], "/slow", |_, response| {
            thread::sleep(Duration::from_millis(30));
            response.body(b"slow");
        })
        .handler(&[Method::Get], "/unused", |_, _| {});
    let server = start_with(&config, routes);
    let mut client = Client::connect(server.local_addr());
    for request in [
        "GET /status/201 HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /status/201 HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /status/418 HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /status/299 HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /status/599 HTTP/1.1\r\nHost: t\r\n\r\n",
        "PAUSE /status/201 HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /slow HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n",
    ] {
        client.send(request.as_bytes());
        client.response(false);
    }
    let page = scrape(&server);
    assert_families_announced(&page);
    let requests = |code: &str| format!("uppercut_requests_total{{poller=\"0\",code=\"{code}\"}}");
    assert_samples(
        &page,
        &[
            (&requests("201"), 2),
            (&requests("418"), 1),
            (&requests("299"), 1),
            (&requests("599"), 1),
            (&requests("405"), 1),
            (&requests("200"), 2),
            (&requests("404"), 1),
        ],
    );
    assert!(!page.contains("code=\"other\""), "{page}");
    let duration = |route: &str, what: &str| {
        format!("uppercut_request_duration_seconds_{what}{{poller=\"0\",route=\"{route}\"}}")
    };
    assert_samples(
        &page,
        &[
            (&duration("/status/{code}", "count"), 6),
            (&duration("/slow", "count"), 1),
            (&duration("static", "count"), 1),
            (&duration("none", "count"), 1),
        ],
    );
    // The blocking handler took 30 ms: past the 25 ms bucket, within 5 s.
    let bucket = |le: &str| {
        format!(
            "uppercut_request_duration_seconds_bucket{{poller=\"0\",route=\"/slow\",le=\"{le}\"}}"
        )
    };
    assert_samples(
        &page,
        &[
            (&bucket("0.025"), 0),
            (&bucket("5"), 1),
            (&bucket("+Inf"), 1),
        ],
    );
    let slow_sum: f64 = samples(&page)[&duration("/slow", "sum")].parse().unwrap();
    assert!((0.03..5.0).contains(&slow_sum), "{slow_sum}");
    assert!(!page.contains("route=\"/unused\""), "{page}");
}

in_both_modes!(every_status_and_route_has_its_own_series);

/// Asserts each `(series, value)` in `expected` on `page`.
fn assert_samples(page: &str, expected: &[(&str, u64)]) {
    let samples = samples(page);
    for (series, value) in expected {
        assert_eq!(
            samples.get(*series).map(String::as_str),
            Some(value.to_string().as_str()),
            "{series} in\n{page}"
        );
    }
}

/// The value of `series` on `page`.
fn sample(page: &str, series: &str) -> u64 {
    samples(page)
        .get(series)
        .unwrap_or_else(|| panic!("no {series} in\n{page}"))
        .parse()
        .expect("a whole number")
}

/// Keeps every request it is sent and answers none: a connection waiting
/// for it stays open, with no timeout but the route's (a minute here).
struct Hoarder(Vec<ActorRequest>);

impl AnyActor for Hoarder {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            self.0.push(*request);
        }
    }
}

/// The second scenario: each connection counter and each timeout kind made
/// non-zero, with a different count each (header 1, idle 2, write 3,
/// refused 4), so a count that lands under another label fails.
fn every_counter_under_its_own_label(dispatch: Dispatch) {
    let mut config = Config {
        max_connections: 3,
        ..metrics_config(dispatch, 1)
    };
    config.timeouts.header = Duration::from_millis(200);
    config.timeouts.keepalive = Duration::from_millis(300);
    config.timeouts.write = Duration::from_millis(400);
    let routes = Routes::standard()
        .reply_timeout(Duration::from_secs(60))
        .actor(&[Method::Get], "/hold", "hoarder")
        .spawn("hoarder", Hoarder(Vec::new()));
    let server = start_with(&config, routes);
    let addr = server.local_addr();
    let (mut sent, mut received) = (0, 0);
    // Requests for one connection go in one write, so none of them waits
    // idle for the test thread, however loaded the machine.
    let mut exchange = |client: &mut Client, requests: &[&str]| {
        let requests = requests.concat();
        client.send(requests.as_bytes());
        sent += requests.len();
        for _ in 0..requests.matches(" HTTP/1.1\r\n").count() {
            received += client.response(false).len();
        }
    };

    // A 405 and a 200 that closes; then, at once (three connections, the
    // limit), one header timeout, two idle ones, a 200 and a 404.
    let mut closing = Client::connect(addr);
    exchange(
        &mut closing,
        &[
            "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n",
            "GET /plaintext HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        ],
    );
    closing.assert_closed();
    wait_for_open(&server, 0);
    let mut partial = Client::connect(addr);
    let head = "GET / HTTP/1.1\r\nHost: t\r\n";
    partial.send(head.as_bytes());
    let mut idle = [Client::connect(addr), Client::connect(addr)];
    exchange(
        &mut idle[0],
        &[
            "GET / HTTP/1.1\r\nHost: t\r\n\r\n",
            "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n",
        ],
    );
    exchange(&mut idle[1], &["GET /json HTTP/1.1\r\nHost: t\r\n\r\n"]);
    for client in &mut idle {
        client.assert_closed();
    }
    let timed_out = partial.rest_until_close();
    assert!(text(&timed_out).starts_with("HTTP/1.1 408 "));
    sent += head.len();
    received += timed_out.len();
    wait_for_open(&server, 0);

    let page = scrape(&server);
    assert_samples(
        &page,
        &[
            ("uppercut_connections_open{poller=\"0\"}", 0),
            ("uppercut_connections_accepted_total{poller=\"0\"}", 4),
            ("uppercut_connections_refused_total{poller=\"0\"}", 0),
            ("uppercut_requests_total{poller=\"0\",code=\"200\"}", 3),
            ("uppercut_requests_total{poller=\"0\",code=\"404\"}", 1),
            ("uppercut_requests_total{poller=\"0\",code=\"405\"}", 1),
            ("uppercut_requests_total{poller=\"0\",code=\"408\"}", 1),
            ("uppercut_bytes_received_total{poller=\"0\"}", sent as u64),
            ("uppercut_bytes_sent_total{poller=\"0\"}", received as u64),
            ("uppercut_timeouts_total{poller=\"0\",kind=\"header\"}", 1),
            ("uppercut_timeouts_total{poller=\"0\",kind=\"idle\"}", 2),
            ("uppercut_timeouts_total{poller=\"0\",kind=\"write\"}", 0),
        ],
    );

    // Three clients that read nothing: three write timeouts. How many
    // responses each got out first is not known, so from here bytes and
    // 200s are only seen to grow.
    let readers: Vec<Client> = (0..3).map(|_| slow_reader(addr)).collect();
    let writers: Vec<_> = readers
        .iter()
        .map(|reader| {
            pipeline_from_thread(reader, "GET /v1/user HTTP/1.1\r\nHost: t\r\n\r\n", 3000)
        })
        .collect();
    for reader in &readers {
        wait_until_peer_closes(&reader.stream);
    }
    // Whether a writer finished before the close depends on buffer sizes.
    for writer in writers {
        let _ = writer.join().unwrap();
    }
    drop(readers);
    wait_for_open(&server, 0);

    // Three connections held open by an actor that never answers fill the
    // limit; the next four are refused.
    let mut held: Vec<Client> = (0..3).map(|_| Client::connect(addr)).collect();
    for client in &mut held {
        client.send(b"GET /hold HTTP/1.1\r\nHost: t\r\n\r\n");
    }
    wait_for_open(&server, 3);
    for _ in 0..4 {
        let mut refused = Client::connect(addr);
        // Closed at once, with a reset or not.
        assert_eq!(read_until_closed(&mut refused.stream), b"");
    }

    let after = scrape(&server);
    assert_samples(
        &after,
        &[
            ("uppercut_connections_open{poller=\"0\"}", 3),
            ("uppercut_connections_accepted_total{poller=\"0\"}", 10),
            ("uppercut_connections_refused_total{poller=\"0\"}", 4),
            ("uppercut_requests_total{poller=\"0\",code=\"404\"}", 1),
            ("uppercut_requests_total{poller=\"0\",code=\"405\"}", 1),
            ("uppercut_requests_total{poller=\"0\",code=\"408\"}", 1),
            ("uppercut_timeouts_total{poller=\"0\",kind=\"header\"}", 1),
            ("uppercut_timeouts_total{poller=\"0\",kind=\"idle\"}", 2),
            ("uppercut_timeouts_total{poller=\"0\",kind=\"write\"}", 3),
        ],
    );
    for series in [
        "uppercut_requests_total{poller=\"0\",code=\"200\"}",
        "uppercut_bytes_received_total{poller=\"0\"}",
        "uppercut_bytes_sent_total{poller=\"0\"}",
    ] {
        let (before, now) = (sample(&page, series), sample(&after, series));
        assert!(now > before + 2, "{series}: {before} then {now}");
    }
    drop(held);
}

in_both_modes!(every_counter_under_its_own_label);

/// How the test upstream answers in one case of the upstream scenario.
#[derive(Clone, Copy)]
enum Upstream {
    Json,
    Status500,
    Silent,
    Down,
    Gated,
}

/// Each upstream result made by its own server, a different number of
/// times (ok 1, bad_response 2, timeout 3, refused 4, queue_full 5), with
/// every other result at 0; the connection gauges while one request is in
/// flight (busy 1, idle 0) and after (busy 0, idle 1).
fn upstream_results_each_under_their_own_label(dispatch: Dispatch) {
    let results = ["ok", "bad_response", "timeout", "refused", "queue_full"];
    let series = |label: &str| {
        format!("uppercut_upstream_requests_total{{poller=\"0\",result=\"{label}\"}}")
    };
    let gauge =
        |state: &str| format!("uppercut_upstream_connections{{poller=\"0\",state=\"{state}\"}}");
    let get_io = "GET /io HTTP/1.1\r\nHost: t\r\n\r\n";
    for (case, want) in [
        (Upstream::Json, [1, 0, 0, 0, 0]),
        (Upstream::Status500, [0, 2, 0, 0, 0]),
        (Upstream::Silent, [0, 0, 3, 0, 0]),
        (Upstream::Down, [0, 0, 0, 4, 0]),
        (Upstream::Gated, [2, 0, 0, 0, 5]),
    ] {
        let (reached, reached_rx) = mpsc::channel::<()>();
        let (gate, gate_rx) = mpsc::channel::<()>();
        let gate_rx = Arc::new(Mutex::new(gate_rx));
        let reached = Arc::new(Mutex::new(reached));
        // Down: an address that refuses, held for the whole case.
        let (_bound, refusing) = common::upstream::refusing();
        let upstream_addr = match case {
            Upstream::Down => refusing,
            _ => {
                common::upstream::spawn(move |stream| {
                    let answer = match case {
                        Upstream::Json => "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
                        Upstream::Status500 => "HTTP/1.1 500 Oops\r\nContent-Length: 2\r\n\r\n{}",
                        // Holds the connection: the server times out.
                        Upstream::Silent => loop {
                            thread::park();
                        },
                        Upstream::Gated => {
                            let _ = reached.lock().unwrap().send(());
                            let _ = gate_rx.lock().unwrap().recv();
                            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
                        }
                        Upstream::Down => unreachable!(),
                    };
                    stream.write_all(answer.as_bytes()).is_ok()
                })
                .addr
            }
        };
        let mut config = Config {
            metrics: Some("127.0.0.1:0".parse().unwrap()),
            ..with_upstream(dispatch, upstream_addr)
        };
        config.pollers = 1;
        config.timeouts.sweep = Duration::from_millis(50);
        if let Some(upstream) = &mut config.upstream {
            // Only the silent upstream meets the timeout: every other case
            // keeps the long one of `with_upstream`, so that an upstream
            // thread a loaded machine delays (or the gate the test holds
            // while it scrapes) is not taken for a silent one.
            if let Upstream::Silent = case {
                upstream.timeout = Duration::from_millis(300);
            }
            if let Upstream::Gated = case {
                upstream.conns = 1;
                upstream.queue = 1;
            }
        }
        let server = start_with(&config, Routes::standard());
        let mut client = Client::connect(server.local_addr());
        let expect_status = |client: &mut Client, status: &str| {
            client.send(get_io.as_bytes());
            let response = client.response(false);
            assert!(
                response.starts_with(format!("HTTP/1.1 {status} ").as_bytes()),
                "{}",
                text(&response)
            );
        };
        match case {
            Upstream::Json => expect_status(&mut client, "200"),
            Upstream::Status500 => (0..2).for_each(|_| expect_status(&mut client, "502")),
            // Three at once, so the test waits for one timeout, not three.
            Upstream::Silent => thread::scope(|scope| {
                for _ in 0..3 {
                    let addr = server.local_addr();
                    scope.spawn(move || expect_status(&mut Client::connect(addr), "504"));
                }
            }),
            Upstream::Down => (0..4).for_each(|_| expect_status(&mut client, "502")),
            Upstream::Gated => {
                // The first request takes the one connection, the second
                // waits in the queue of one, the next five are turned away.
                client.send(get_io.as_bytes());
                reached_rx.recv_timeout(Duration::from_secs(20)).unwrap();
                let mut queued = Client::connect(server.local_addr());
                queued.send(get_io.as_bytes());
                let mut turned_away = 0;
                while turned_away < 5 {
                    let mut other = Client::connect(server.local_addr());
                    other.send(get_io.as_bytes());
                    let response = other.response(false);
                    // The queued request may not have reached the queue yet.
                    if response.starts_with(b"HTTP/1.1 503 ") {
                        turned_away += 1;
                    } else {
                        panic!("{}", text(&response));
                    }
                }
                let page = scrape(&server);
                assert_samples(&page, &[(&gauge("busy"), 1), (&gauge("idle"), 0)]);
                gate.send(()).unwrap();
                gate.send(()).unwrap();
                assert!(client.response(false).starts_with(b"HTTP/1.1 200 "));
                assert!(queued.response(false).starts_with(b"HTTP/1.1 200 "));
            }
        }
        let page = scrape(&server);
        let expected: Vec<(String, u64)> = results
            .iter()
            .zip(want)
            .map(|(label, count)| (series(label), count))
            .collect();
        let expected: Vec<(&str, u64)> = expected.iter().map(|(s, n)| (s.as_str(), *n)).collect();
        assert_samples(&page, &expected);
        if let Upstream::Gated = case {
            // The pool publishes its gauges after the round that freed the
            // link, which may come after the client has its answer.
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut page = page;
            while sample(&page, &gauge("idle")) != 1 && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(5));
                page = scrape(&server);
            }
            assert_samples(&page, &[(&gauge("busy"), 0), (&gauge("idle"), 1)]);
        }
    }
}

in_both_modes!(upstream_results_each_under_their_own_label);

/// Echoes each text message.
struct Echo;

impl uppercut_mio_server::WebSocket for Echo {
    fn on_message(
        &mut self,
        message: uppercut_mio_server::Message<'_>,
        context: &mut uppercut_mio_server::WsContext<'_>,
    ) {
        if let uppercut_mio_server::Message::Text(text) = message {
            context.send_text(text);
        }
    }
}

/// A masked client frame with a payload under 126 bytes.
fn client_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![0x80 | opcode, 0x80 | payload.len() as u8, 0, 0, 0, 0];
    frame.extend_from_slice(payload);
    frame
}

fn websockets_by_close_code(dispatch: Dispatch) {
    let server = start_with(
        &metrics_config(dispatch, 1),
        Routes::new().websocket("/ws", |_| Echo),
    );
    let upgrade = "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                   Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
    let open = || {
        let mut client = Client::connect(server.local_addr());
        client.send(upgrade.as_bytes());
        client.response(true);
        client
    };
    let mut closing = open();
    closing.send(&client_frame(1, b"hi"));
    assert_eq!(closing.exactly(4), b"\x81\x02hi");
    closing.send(&client_frame(8, &1000u16.to_be_bytes()));
    assert_eq!(closing.rest_until_close(), b"\x88\x02\x03\xe8");
    let breaking = open();
    // Unmasked: a protocol error, 1002.
    let mut breaking = breaking;
    breaking.send(b"\x81\x00");
    assert_eq!(breaking.rest_until_close(), b"\x88\x02\x03\xea");
    let cut = open();
    drop(cut);
    let deadline = Instant::now() + Duration::from_secs(20);
    while sample(
        &scrape(&server),
        "uppercut_websocket_closes_total{poller=\"0\",code=\"none\"}",
    ) == 0
    {
        assert!(Instant::now() < deadline, "the cut was counted");
        thread::yield_now();
    }
    let page = scrape(&server);
    assert_families_announced(&page);
    assert_samples(
        &page,
        &[
            ("uppercut_websocket_upgrades_total{poller=\"0\"}", 3),
            ("uppercut_websocket_open{poller=\"0\"}", 0),
            (
                "uppercut_websocket_messages_received_total{poller=\"0\"}",
                1,
            ),
            ("uppercut_websocket_messages_sent_total{poller=\"0\"}", 1),
            (
                "uppercut_websocket_closes_total{poller=\"0\",code=\"1000\"}",
                1,
            ),
            (
                "uppercut_websocket_closes_total{poller=\"0\",code=\"1002\"}",
                1,
            ),
            (
                "uppercut_websocket_closes_total{poller=\"0\",code=\"none\"}",
                1,
            ),
            (
                "uppercut_websocket_closes_total{poller=\"0\",code=\"other\"}",
                0,
            ),
            ("uppercut_requests_total{poller=\"0\",code=\"101\"}", 3),
        ],
    );
}

in_both_modes!(websockets_by_close_code);

#[test]
fn the_metrics_listener_answers_404_to_anything_else() {
    for dispatch in [Dispatch::Local, Dispatch::System] {
        let server = start_with(&metrics_config(dispatch, 2), Routes::standard());
        let addr = server.metrics_addr().unwrap();
        for request in [
            "GET / HTTP/1.1\r\nHost: t\r\n\r\n",
            "POST /metrics HTTP/1.1\r\nHost: t\r\n\r\n",
            "GET /metricsx HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(
                get(addr, request),
                "HTTP/1.1 404 Not Found\r\nContent-Length: 10\r\nConnection: close\r\n\
                 Content-Type: text/plain; charset=utf-8\r\n\r\nnot found\n"
            );
        }
        // The served port has no /metrics: it stays the benchmarked routes.
        let response = common::exchange(&server, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
        assert!(text(&response).starts_with("HTTP/1.1 404 "));
        // Stopping ends the metrics thread too, which owns the listener:
        // this process no longer holds that socket. (Not the kernel's list
        // of listeners: promtool's test spawns a process beside this one,
        // and between fork and exec its copy of the descriptors keeps the
        // socket listening a moment longer; 1 run in 40 failed so.)
        let listener = common::listening_sockets(addr);
        assert_eq!(listener.len(), 1, "the metrics listener");
        assert!(common::holds_socket(listener[0]), "held while serving");
        server.stop();
        assert!(
            !common::holds_socket(listener[0]),
            "the metrics listener is closed"
        );
    }
}

/// `HEAD /metrics` gets the head a GET gets, with the page's length, and
/// no body; a HEAD elsewhere gets the 404's head alone.
#[test]
fn head_metrics_answers_with_the_head_alone() {
    for dispatch in [Dispatch::Local, Dispatch::System] {
        let server = start_with(&metrics_config(dispatch, 1), Routes::standard());
        let addr = server.metrics_addr().unwrap();
        let page_len = scrape(&server).len();
        let response = get(addr, "HEAD /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
        let length: usize = response
            .strip_prefix("HTTP/1.1 200 OK\r\nContent-Length: ")
            .and_then(|rest| rest.split("\r\n").next())
            .and_then(|digits| digits.parse().ok())
            .unwrap_or_else(|| panic!("not a 200 with a length: {response:?}"));
        assert_eq!(
            response,
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {length}\r\nConnection: close\r\n\
                 {CONTENT_TYPE}\r\n"
            )
        );
        // The page as it is now: the same series, counts a digit or two longer.
        assert!(
            length.abs_diff(page_len) < 64,
            "{length} against {page_len}"
        );
        assert_eq!(
            get(addr, "HEAD /nope HTTP/1.1\r\nHost: t\r\n\r\n"),
            "HTTP/1.1 404 Not Found\r\nContent-Length: 10\r\nConnection: close\r\n\
             Content-Type: text/plain; charset=utf-8\r\n\r\n"
        );
    }
}

#[test]
fn without_metrics_there_is_no_metrics_listener() {
    let server = common::start(Dispatch::Local);
    assert_eq!(server.metrics_addr(), None);
}

/// `promtool check metrics` on a scrape taken while clients send requests.
/// Without promtool the test fails (.ci/run installs it; so does
/// `apt-get install prometheus`), unless SKIP_PROMTOOL=1 says to skip it,
/// which it then prints.
#[test]
fn promtool_accepts_a_scrape_taken_under_load() {
    if Command::new("promtool").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("SKIP_PROMTOOL").is_some_and(|v| v == "1"),
            "promtool is missing: install it (Debian package prometheus, as .ci/run does) \
             or set SKIP_PROMTOOL=1 to skip this check"
        );
        common::say_skipped("promtool not found and SKIP_PROMTOOL=1: exposition not checked");
        return;
    }
    for dispatch in [Dispatch::Local, Dispatch::System] {
        let server = start_with(&metrics_config(dispatch, 2), Routes::standard());
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicU64::new(0));
        let clients: Vec<_> = (0..4)
            .map(|_| {
                let (stop, served) = (Arc::clone(&stop), Arc::clone(&served));
                let addr = server.local_addr();
                thread::spawn(move || {
                    let mut client = Client::connect(addr);
                    while !stop.load(Ordering::Relaxed) {
                        client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
                        client.response(false);
                        served.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        // Scrape once the load is running, not before; a client that
        // panicked (or a server that stopped answering) fails the test
        // instead of hanging it.
        let deadline = Instant::now() + Duration::from_secs(20);
        while served.load(Ordering::Relaxed) < 100 {
            assert!(
                clients.iter().all(|client| !client.is_finished()),
                "a client stopped before the scrape"
            );
            assert!(Instant::now() < deadline, "100 requests took over 20 s");
            thread::yield_now();
        }
        let page = scrape(&server);
        stop.store(true, Ordering::Relaxed);
        for client in clients {
            client.join().unwrap();
        }
        let mut promtool = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("promtool runs");
        promtool
            .stdin
            .take()
            .unwrap()
            .write_all(page.as_bytes())
            .unwrap();
        let output = promtool.wait_with_output().unwrap();
        let mut said = String::from_utf8_lossy(&output.stdout).into_owned();
        said.push_str(&String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "promtool: {said}\n{page}");
        assert_eq!(said.trim(), "", "promtool has lint remarks:\n{page}");
    }
}
