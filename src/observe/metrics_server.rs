//! `--metrics ADDR:PORT`: serves `GET /metrics` on a listener of its own,
//! from one plain thread with blocking sockets. A scrape is rare and off the
//! request path, so it gets none of the pollers' machinery: one connection
//! at a time, one request per connection, then close.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use log::{debug, warn};

use crate::observe::metrics::PollerMetrics;
use crate::observe::metrics_text::{self, Series, CONTENT_TYPE};
use crate::observe::process_stats::ProcessStats;

/// Longest request head read; a scrape's is a few hundred bytes.
const MAX_HEAD: usize = 8 * 1024;
/// A scraper that stalls this long is dropped, so it cannot hold the thread.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// The running `/metrics` listener; stopping it ends its thread.
pub(crate) struct MetricsServer {
    addr: SocketAddr,
    stopping: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `addr` and serves the counters of `pollers` from a new thread.
    pub(crate) fn start(
        addr: SocketAddr,
        pollers: Vec<Arc<PollerMetrics>>,
        series: Series,
    ) -> io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot listen on {addr} for metrics: {e}"),
            )
        })?;
        let addr = listener.local_addr()?;
        let stopping = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stopping);
        let thread = thread::Builder::new()
            .name("metrics".into())
            .spawn(move || serve(&listener, &pollers, series, &flag))?;
        Ok(MetricsServer {
            addr,
            stopping,
            thread: Some(thread),
        })
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Ends the thread: sets the flag, then connects once so that the
    /// blocked `accept` returns and sees it.
    pub(crate) fn stop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.stopping.store(true, Ordering::SeqCst);
        let target = match self.addr {
            SocketAddr::V4(a) if a.ip().is_unspecified() => (Ipv4Addr::LOCALHOST, a.port()).into(),
            SocketAddr::V6(a) if a.ip().is_unspecified() => (Ipv6Addr::LOCALHOST, a.port()).into(),
            addr => addr,
        };
        match TcpStream::connect_timeout(&target, IO_TIMEOUT) {
            Ok(_) => {
                let _ = thread.join();
            }
            // The thread stays blocked in accept; it holds nothing that
            // must be released, so it is left to end with the process.
            Err(e) => warn!("stopping the metrics listener on {target}: {e}"),
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn serve(
    listener: &TcpListener,
    pollers: &[Arc<PollerMetrics>],
    series: Series,
    stopping: &AtomicBool,
) {
    loop {
        let accepted = listener.accept();
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        match accepted {
            Ok((stream, _)) => {
                if let Err(e) = answer(stream, pollers, &series) {
                    debug!("/metrics: {e}");
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                warn!("/metrics accept: {e}");
                // Out of descriptors and the like: do not spin on it.
                thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Reads one request head and answers it: the page for `GET /metrics`
/// (with or without a query), its head alone for `HEAD /metrics` (with the
/// length the page has now), 404 for anything else (its head alone to a
/// HEAD).
fn answer(
    mut stream: TcpStream,
    pollers: &[Arc<PollerMetrics>],
    series: &Series,
) -> io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() >= MAX_HEAD {
            let out = Out {
                stream: &mut stream,
                head_only: false,
            };
            return out.respond("431 Request Header Fields Too Large", "", "");
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(len) => head.extend_from_slice(&chunk[..len]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, target) = (parts.next(), parts.next());
    let path = target.map(|t| t.split(|&b| b == b'?').next().unwrap_or_default());
    let head_only = method == Some(b"HEAD");
    let out = Out {
        stream: &mut stream,
        head_only,
    };
    if (head_only || method == Some(b"GET")) && path == Some(b"/metrics") {
        let page = metrics_text::render(pollers, series, &ProcessStats::read());
        out.respond("200 OK", CONTENT_TYPE, &page)
    } else {
        out.respond("404 Not Found", "text/plain; charset=utf-8", "not found\n")
    }
}

/// Where a response goes, and whether it answers a HEAD request.
struct Out<'s> {
    stream: &'s mut TcpStream,
    head_only: bool,
}

impl Out<'_> {
    /// Writes the response, its body left out for a HEAD request (RFC 9110
    /// §9.3.2: the same head, `Content-Length` included, as a GET's).
    fn respond(self, status: &str, content_type: &str, body: &str) -> io::Result<()> {
        let mut response = format!(
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        if !content_type.is_empty() {
            response.push_str(&format!("Content-Type: {content_type}\r\n"));
        }
        response.push_str("\r\n");
        if !self.head_only {
            response.push_str(body);
        }
        self.stream.write_all(response.as_bytes())?;
        self.stream.flush()
    }
}
