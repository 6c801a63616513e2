//! The server side of the HTTP integrity runs: the routes they ask (an
//! actor route to each kind of actor the server owns, a handler and a
//! blocking handler, each answering with the message the request names,
//! `?s=STREAM&n=SEQ&len=LEN`, and canned bodies), a static directory's
//! files on disk, and an upstream for `/io`.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{
    ActorRequest, ActorResponse, CannedResponse, Method, Request, Response, Routes,
};

use super::integrity::message;
use super::integrity_http::{Files, Kind, CANNED, CANNED_STREAM, MTIME, STATIC_STREAM};
use super::upstream::{spawn, Upstream};

/// What a request for a body asks: `?s=STREAM&n=SEQ&len=LEN`.
fn asked(request: &Request<'_>) -> Option<(u32, u32, usize)> {
    let number = |name| request.query_param(name)?.parse().ok();
    Some((number("s")?, number("n")?, number("len")? as usize))
}

/// How long an answer from another thread takes: a moment that varies
/// with the message (up to 300 µs), so that answers land at different
/// points of a stalled reader's progress (a load shape, as the reader's
/// stalls are).
fn pause(seq: u32) -> Duration {
    Duration::from_micros(u64::from(seq % 4) * 100)
}

/// Answers each request with the message it asks for. On a poller: now,
/// or for every other message from another thread (a relay the run
/// starts, after a `pause`), so that the answer comes back through the
/// poller's reply queue. On a blocking thread: after a `pause`.
struct Blob {
    relay: mpsc::Sender<(ActorRequest, ActorResponse)>,
    blocking: bool,
}

impl AnyActor for Blob {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        let Ok(request) = envelope.message.downcast::<ActorRequest>() else {
            return;
        };
        // A request that asks for nothing is dropped: a 502 no run expects.
        let Some((stream, seq, len)) = asked(&request.request()) else {
            return;
        };
        let response = ActorResponse::text(message(stream, seq, len));
        if self.blocking {
            std::thread::sleep(pause(seq));
            request.respond(response);
        } else if seq % 2 == 1 {
            let _ = self.relay.send((*request, response));
        } else {
            request.respond(response);
        }
    }
}

/// The handlers: the message the request asks for; on a blocking thread,
/// after a `pause`.
fn blob_handler(blocking: bool) -> impl Fn(&Request<'_>, &mut Response<'_>) + Send + Sync {
    move |request, response| {
        let Some((stream, seq, len)) = asked(request) else {
            response.set_status(uppercut_mio_server::StatusCode::BAD_REQUEST);
            return;
        };
        if blocking {
            std::thread::sleep(pause(seq));
        }
        let _ = response.header("Content-Type", "text/plain; charset=utf-8");
        response.body(&message(stream, seq, len));
    }
}

/// Every route the runs ask: an actor route to each kind of actor, the
/// handlers, and the canned bodies.
pub fn routes() -> Routes {
    let (relay, answers) = mpsc::channel::<(ActorRequest, ActorResponse)>();
    // Ends once the server has dropped its actors (and so every sender).
    std::thread::spawn(move || {
        for (request, response) in answers {
            let seq = asked(&request.request()).map_or(0, |(_, seq, _)| seq);
            std::thread::sleep(pause(seq));
            request.respond(response);
        }
    });
    let blob = move |blocking| {
        let relay = relay.clone();
        move |_| Blob {
            relay: relay.clone(),
            blocking,
        }
    };
    let mut routes = Routes::new()
        .actor(&[Method::Get], Kind::Shared.path(), "shared")
        .spawn("shared", blob(false)(0))
        .actor(&[Method::Get], Kind::PerPoller.path(), "per-poller")
        .spawn_per_poller("per-poller", blob(false))
        .actor(&[Method::Get], Kind::Blocking.path(), "blocking")
        .spawn_blocking("blocking", 2, blob(true))
        .handler(&[Method::Get], Kind::Inline.path(), blob_handler(false))
        .blocking_threads(2)
        .blocking_handler(
            &[Method::Get],
            Kind::BlockingHandler.path(),
            blob_handler(true),
        );
    for (i, &len) in CANNED.iter().enumerate() {
        let body = message(CANNED_STREAM, i as u32, len);
        let canned = CannedResponse::ok("text/plain", body);
        routes = routes.route(&format!("/canned/{i}"), canned);
    }
    routes
}

/// A directory under the target's temp dir, removed on drop.
pub struct TempDir {
    pub path: PathBuf,
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// `files` in a directory of their own named after `name` (unique per
/// test and process).
pub fn static_dir(name: &str, files: &Files) -> TempDir {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("static-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&path);
    write_files(files, &path);
    TempDir { path }
}

/// Writes `files` into `dir` (made if missing): file K, `fK.bin`, holds
/// message K of `STATIC_STREAM`, with the mtime `MTIME`.
pub fn write_files(files: &Files, dir: &Path) {
    fs::create_dir_all(dir).expect("a directory for the files");
    for (k, &(len, _)) in files.files.iter().enumerate() {
        let path = dir.join(format!("f{k}.bin"));
        fs::write(&path, message(STATIC_STREAM, k as u32, len)).expect("write a file");
        let file = fs::File::options().write(true).open(&path).expect("open");
        file.set_modified(UNIX_EPOCH + Duration::from_secs(MTIME))
            .expect("set the mtime");
    }
}

/// An upstream for `/io`: answers request N on its Cth connection (in the
/// order they came) with the JSON `body(C, N)` gives, every other one
/// chunked; `None` closes the connection.
pub fn upstream<F>(body: F) -> Upstream
where
    F: Fn(u32, usize) -> Option<Vec<u8>> + Send + Sync + 'static,
{
    let connections: Mutex<HashMap<SocketAddr, (u32, usize)>> = Mutex::default();
    spawn(move |socket: &mut TcpStream| {
        let Ok(peer) = socket.peer_addr() else {
            return false;
        };
        let (connection, seq) = {
            let mut connections = connections.lock().unwrap();
            let count = connections.len() as u32;
            let entry = connections.entry(peer).or_insert((count, 0));
            entry.1 += 1;
            (entry.0, entry.1 - 1)
        };
        let Some(body) = body(connection, seq) else {
            return false;
        };
        let mut answer = b"HTTP/1.1 200 OK\r\n".to_vec();
        if seq % 2 == 0 {
            answer.extend(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
            answer.extend(&body);
        } else {
            answer.extend(b"Transfer-Encoding: chunked\r\n\r\n");
            let (a, b) = body.split_at(body.len() / 2);
            for chunk in [a, b].into_iter().filter(|c| !c.is_empty()) {
                answer.extend(format!("{:x}\r\n", chunk.len()).as_bytes());
                answer.extend(chunk);
                answer.extend(b"\r\n");
            }
            answer.extend(b"0\r\n\r\n");
        }
        socket.write_all(&answer).is_ok()
    })
}
