//! What the tests of durable and placed actors share: a counter whose
//! count is its state, one exchange as status line and body, a metric read
//! from `/metrics`, and a wait for a cluster's links.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{ActorRequest, ActorResponse, Method, Server};

use super::{text, Client, IO_TIMEOUT};

/// `POST` adds one and answers the count; `GET` answers it.
#[derive(Serialize, Deserialize, Default)]
pub struct Counter {
    pub count: u64,
}

impl AnyActor for Counter {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            if request.request().method() == Method::Post {
                self.count += 1;
            }
            request.respond(ActorResponse::text(format!("{}", self.count)));
        }
    }
}

/// `method path` on a connection of its own to `addr`: the status line and
/// the body of the answer.
pub fn exchange(addr: SocketAddr, method: &str, path: &str) -> (String, String) {
    let mut client = Client::connect(addr);
    client.send(format!("{method} {path} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes());
    answer(&mut client)
}

/// The status line and body of the next response on `client`.
pub fn answer(client: &mut Client) -> (String, String) {
    let response = text(&client.response(false));
    let status = response.lines().next().unwrap_or_default().to_string();
    let body = response
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    (status, body)
}

/// A 200 with `body`, as `exchange` says it.
pub fn ok(body: &str) -> (String, String) {
    ("HTTP/1.1 200 OK".to_string(), body.to_string())
}

/// The value of `series` (its name and labels, as the page writes them) on
/// the metrics page at `metrics`.
pub fn sample(metrics: SocketAddr, series: &str) -> u64 {
    let mut client = Client::connect(metrics);
    client.send(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
    let page = text(&client.response(false));
    page.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{series} in {page}"))
}

/// Waits until every poller of `server` is connected to NATS.
pub fn wait_cluster_ready(server: &Server) {
    let deadline = Instant::now() + IO_TIMEOUT;
    while !server.cluster_ready() {
        assert!(Instant::now() < deadline, "not ready after {IO_TIMEOUT:?}");
        // A polling interval, not a wait standing in for the condition.
        std::thread::sleep(Duration::from_millis(2));
    }
}
