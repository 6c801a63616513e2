//! `--metrics`: after a known sequence of requests, `/metrics` (on its own
//! listener) reports exactly what happened, in the Prometheus text format,
//! with HELP and TYPE once for every family; `promtool check metrics`
//! accepts a scrape taken under load.

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::{config, read_until_closed, start_with, text, Client};
use uppercut_mio_server::{Config, Dispatch, Routes, Server};

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
/// and every sample belongs to the family announced last.
fn assert_families_announced(page: &str) {
    let mut help = HashMap::new();
    let mut kind = HashMap::new();
    let mut current = String::new();
    for line in page.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap().to_string();
            *help.entry(name.clone()).or_insert(0) += 1;
            current = name;
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, family) = rest.split_once(' ').unwrap();
            assert!(["counter", "gauge"].contains(&family), "{line}");
            assert_eq!(name, current, "TYPE right after its HELP: {line}");
            *kind.entry(name.to_string()).or_insert(0) += 1;
        } else {
            let name = line.split(['{', ' ']).next().unwrap();
            assert_eq!(name, current, "sample outside its family: {line}");
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
        (
            "uppercut_upstream_connections{poller=\"0\",state=\"idle\"}",
            0,
        ),
        (
            "uppercut_upstream_connections{poller=\"0\",state=\"busy\"}",
            0,
        ),
        (
            "uppercut_upstream_requests_total{poller=\"0\",result=\"ok\"}",
            0,
        ),
        (
            "uppercut_upstream_requests_total{poller=\"0\",result=\"queue_full\"}",
            0,
        ),
    ];
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
        // Stopping ends the metrics thread too, and frees its port.
        server.stop();
        TcpStream::connect(addr).expect_err("the metrics listener is closed");
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
/// Without promtool the test says so and passes, except under CI, which
/// installs it (.ci/run).
#[test]
fn promtool_accepts_a_scrape_taken_under_load() {
    if Command::new("promtool").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but promtool is missing: .ci/run installs it (Debian package prometheus)"
        );
        println!("note: promtool not found (Debian package prometheus); exposition not checked");
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
        // Scrape once the load is running, not before.
        while served.load(Ordering::Relaxed) < 100 {
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
