//! Test harness: a server started in-process on 127.0.0.1:0 and a raw-socket
//! client that reads responses by their framing, never by timing.

#![allow(dead_code)] // each test file uses its own part of the harness

pub mod alloc;
pub mod crash;
pub mod durable;
pub mod h2client;
pub mod h3client;
pub mod integrity;
pub mod integrity_http;
pub mod integrity_serve;
pub mod integrity_ws;
pub mod nats;
pub mod process;
pub mod tls;
pub mod upstream;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use uppercut_mio_server::sans_io::format_imf_fixdate;
use uppercut_mio_server::{Config, Dispatch, Routes, Server};

/// A safety net so that a server bug fails a test instead of hanging it.
pub const IO_TIMEOUT: Duration = Duration::from_secs(20);

/// The standard routes' `/`, as `assert_response` expects it.
pub const HELLO: &str = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
    Content-Type: text/plain; charset=utf-8\r\nContent-Length: 6\r\nDate: {date}\r\n\r\nhello\n";
/// `HELLO` without its body, the answer to `HEAD /`.
pub const HELLO_HEAD: &str = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
    Content-Type: text/plain; charset=utf-8\r\nContent-Length: 6\r\nDate: {date}\r\n\r\n";
/// `HELLO` to a request that asked to close.
pub const HELLO_CLOSE: &str = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
    Content-Type: text/plain; charset=utf-8\r\nContent-Length: 6\r\nDate: {date}\r\n\
    Connection: close\r\n\r\nhello\n";

/// The standard routes' `/v1/user`, the fixture file served whole.
pub fn v1_user() -> String {
    let body = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/v1-user.json"
    ))
    .expect("fixture");
    assert_eq!(body.len(), 3696);
    format!(
        "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\ncontent-type: application/json\r\n\
         engine: Rust/Uppercut\r\nlocation: /v1/user\r\nContent-Length: 3696\r\nDate: {{date}}\r\n\r\n{body}"
    )
}

/// Two pollers on a free loopback port, the rest as the binary's defaults.
pub fn config(dispatch: Dispatch) -> Config {
    Config {
        bind: "127.0.0.1:0".parse().unwrap(),
        pollers: 2,
        dispatch,
        ..Config::default()
    }
}

pub fn start(dispatch: Dispatch) -> Server {
    start_with(&config(dispatch), Routes::standard())
}

pub fn start_with(config: &Config, routes: Routes) -> Server {
    Server::start(config, routes).expect("server starts")
}

/// A client over `S`: a TCP stream, or a TLS stream over one
/// (`common::tls`).
pub struct Client<S = TcpStream> {
    pub stream: S,
    /// Bytes read past the last response returned.
    pending: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        Client::from_stream(TcpStream::connect(addr).expect("connect"))
    }

    pub fn from_stream(stream: TcpStream) -> Client {
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Client::over(stream)
    }

    pub fn close_write(&mut self) {
        self.stream.shutdown(Shutdown::Write).unwrap();
    }
}

impl<S: Read + Write> Client<S> {
    /// A client over a stream already set up.
    pub fn over(stream: S) -> Client<S> {
        Client {
            stream,
            pending: Vec::new(),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    /// Reads one response, framed by its Content-Length (no body for HEAD,
    /// 1xx, 204 or 304, which have no Content-Length).
    pub fn response(&mut self, head_only: bool) -> Vec<u8> {
        let head_end = loop {
            if let Some(end) = find(&self.pending, b"\r\n\r\n") {
                break end + 4;
            }
            assert!(
                self.fill() > 0,
                "EOF inside a response head: {:?}",
                text(&self.pending)
            );
        };
        let head = text(&self.pending[..head_end]);
        let bodiless = head.starts_with("HTTP/1.1 1")
            || head.starts_with("HTTP/1.1 204 ")
            || head.starts_with("HTTP/1.1 304 ");
        let length = if head_only || bodiless {
            0
        } else {
            head.lines()
                .find_map(|line| line.strip_prefix("Content-Length: "))
                .expect("every response has Content-Length")
                .parse::<usize>()
                .unwrap()
        };
        while self.pending.len() < head_end + length {
            assert!(self.fill() > 0, "EOF inside a response body");
        }
        self.pending.drain(..head_end + length).collect()
    }

    /// Reads exactly `len` bytes (what the server sent after a response,
    /// such as WebSocket frames).
    pub fn exactly(&mut self, len: usize) -> Vec<u8> {
        while self.pending.len() < len {
            assert!(
                self.fill() > 0,
                "EOF after {:?}, {len} bytes expected",
                text(&self.pending)
            );
        }
        self.pending.drain(..len).collect()
    }

    /// Reads until the server closes; fails on a reset.
    pub fn rest_until_close(&mut self) -> Vec<u8> {
        while self.fill() > 0 {}
        std::mem::take(&mut self.pending)
    }

    /// The server closed the connection and sent nothing more.
    pub fn assert_closed(&mut self) {
        assert_eq!(text(&self.rest_until_close()), "");
    }

    fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 64 * 1024];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(len) => {
                    self.pending.extend_from_slice(&chunk[..len]);
                    return len;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => panic!("read failed: {e}"),
            }
        }
    }
}

/// A connection whose socket buffers only 4 KiB on receipt, so that the
/// server's output to it backs up after a few responses.
pub fn slow_reader(addr: SocketAddr) -> Client {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&addr.into()).unwrap();
    Client::from_stream(TcpStream::from(socket))
}

/// Sets the send buffer of the server's end of `client`'s connection (a
/// socket of this process, as the server runs in it) to `bytes`, which
/// also ends the kernel's growing it on its own; returns the size the
/// kernel then reports (twice what was asked, bookkeeping included).
pub fn set_server_send_buffer(client: &TcpStream, bytes: usize) -> usize {
    use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
    let wanted = (client.peer_addr().unwrap(), client.local_addr().unwrap());
    let ends = |fd: RawFd| {
        Some((
            address_of(fd, libc::getsockname)?,
            address_of(fd, libc::getpeername)?,
        ))
    };
    let fds = std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd");
    let server_end = fds
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<RawFd>().ok())
        .find(|&fd| fd != client.as_raw_fd() && ends(fd) == Some(wanted))
        .expect("the server's end of the connection is a socket of this process");
    // SAFETY: the server keeps its end open while the connection lasts,
    // and `client` keeps the connection.
    let server_end = unsafe { BorrowedFd::borrow_raw(server_end) };
    let socket = socket2::SockRef::from(&server_end);
    socket.set_send_buffer_size(bytes).unwrap();
    socket.send_buffer_size().unwrap()
}

/// What `call` (`getsockname` or `getpeername`) says of `fd`, if it is an
/// IP socket. Another thread may close `fd` meanwhile: then the call fails.
fn address_of(
    fd: std::os::fd::RawFd,
    call: unsafe extern "C" fn(
        libc::c_int,
        *mut libc::sockaddr,
        *mut libc::socklen_t,
    ) -> libc::c_int,
) -> Option<SocketAddr> {
    // SAFETY: `try_init` hands the call zeroed storage and its length, and
    // the call writes no more than that length into it.
    let named = unsafe {
        socket2::SockAddr::try_init(|storage, len| match call(fd, storage.cast(), len) {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        })
    };
    named.ok()?.1.as_socket()
}

/// Whether this process holds the socket with this inode open (a
/// descriptor in /proc/self/fd names it `socket:[INODE]`). Unlike the
/// kernel's list of listeners, a copy of the descriptor table that a
/// parallel test's `Command` holds between fork and exec does not count.
pub fn holds_socket(inode: u64) -> bool {
    let name = format!("socket:[{inode}]");
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .any(|target| target.as_os_str() == name.as_str())
}

/// The sockets listening on `addr` (IPv4), by inode, as the kernel lists
/// them in /proc/net/tcp. A listener's inode names that socket alone: once
/// it is gone from the list it is closed, whoever listens on the port since.
pub fn listening_sockets(addr: SocketAddr) -> Vec<u64> {
    let SocketAddr::V4(addr) = addr else {
        panic!("{addr}: IPv4 only");
    };
    // The address as the kernel prints it: its four bytes as one native
    // integer, in hex, then the port in hex.
    let local = format!(
        "{:08X}:{:04X}",
        u32::from_ne_bytes(addr.ip().octets()),
        addr.port()
    );
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    table
        .lines()
        .skip(1)
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        // Fields: slot, local, remote, state (0A is LISTEN), ..., inode.
        .filter(|fields| fields.len() > 9 && fields[1] == local && fields[3] == "0A")
        .map(|fields| fields[9].parse().expect("an inode"))
        .collect()
}

/// The kernel's `tx_queue:rx_queue` for the IPv4 TCP socket from `local`
/// to `remote`, from /proc/net/tcp (bytes sent but not yet acknowledged;
/// bytes received but not yet read by the program holding it).
fn socket_queues(local: SocketAddr, remote: SocketAddr) -> Option<(u64, u64)> {
    let hex = |addr: SocketAddr| match addr {
        SocketAddr::V4(addr) => format!(
            "{:08X}:{:04X}",
            u32::from_ne_bytes(addr.ip().octets()),
            addr.port()
        ),
        SocketAddr::V6(_) => panic!("{addr}: IPv4 only"),
    };
    let (local, remote) = (hex(local), hex(remote));
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    table
        .lines()
        .skip(1)
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .find(|fields| fields.len() > 4 && fields[1] == local && fields[2] == remote)
        .and_then(|fields| {
            let (tx, rx) = fields[4].split_once(':')?;
            Some((
                u64::from_str_radix(tx, 16).ok()?,
                u64::from_str_radix(rx, 16).ok()?,
            ))
        })
}

/// Waits until the server in this process has read everything `client`
/// has sent: the client's socket has no byte unacknowledged and the
/// server's end of the connection none unread. A read barrier: what the
/// client writes next reaches the server in a read of its own.
pub fn wait_until_server_read(client: &TcpStream) {
    let (local, peer) = (client.local_addr().unwrap(), client.peer_addr().unwrap());
    let deadline = std::time::Instant::now() + IO_TIMEOUT;
    loop {
        let sent = socket_queues(local, peer).map(|(tx, _)| tx);
        let unread = socket_queues(peer, local).map(|(_, rx)| rx);
        if sent == Some(0) && unread == Some(0) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server did not read what was sent: {sent:?} unacknowledged, {unread:?} unread"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Writes `request` `count` times on `client`'s connection from a second
/// thread (the server stops reading while its output is backed up, so the
/// writer may block until the test reads); joins to the write's result.
pub fn pipeline_from_thread(
    client: &Client,
    request: &str,
    count: usize,
) -> std::thread::JoinHandle<std::io::Result<()>> {
    let mut writer = client.stream.try_clone().unwrap();
    let batch = request.repeat(count);
    std::thread::spawn(move || writer.write_all(batch.as_bytes()))
}

/// Waits until the peer has closed or reset the connection, without reading
/// what it sent (POLLRDHUP reports the close even with data still queued).
pub fn wait_until_peer_closes(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let deadline = std::time::Instant::now() + IO_TIMEOUT;
    while std::time::Instant::now() < deadline {
        let mut poll_fd = libc::pollfd {
            fd: stream.as_raw_fd(),
            events: libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for the duration of the call.
        let ready = unsafe { libc::poll(&mut poll_fd, 1, 100) };
        if ready > 0 && poll_fd.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
            return;
        }
    }
    panic!("the server did not close the connection within {IO_TIMEOUT:?}");
}

/// The sum of a counter's samples over the pollers (`name` up to its `{`),
/// from one scrape of the metrics page.
pub fn page_sum(metrics: std::net::SocketAddr, name: &str) -> u64 {
    let mut scrape = Client::connect(metrics);
    scrape.send(b"GET /metrics HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n");
    let page = String::from_utf8(scrape.rest_until_close()).unwrap();
    page.lines()
        .filter(|line| line.starts_with(name))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Header and keep-alive timeouts of an hour: a test that needs the server
/// to see a client's end gets no help from a timeout closing it anyway.
pub fn an_hour_to_wait() -> uppercut_mio_server::Timeouts {
    let hour = Duration::from_secs(3600);
    uppercut_mio_server::Timeouts {
        header: hour,
        keepalive: hour,
        ..Default::default()
    }
}

/// Makes closing `stream` send a reset (RST), not a FIN.
pub fn reset(stream: &TcpStream) {
    socket2::SockRef::from(stream)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
}

/// Waits until the server's pollers hold `open` connections in all. A
/// close reaches the count (and frees the connection's place under
/// `max_connections`) asynchronously in `system` dispatch, so a test that
/// needs the count exact waits for it; fails after `IO_TIMEOUT`.
pub fn wait_for_open(server: &Server, open: usize) {
    let deadline = std::time::Instant::now() + IO_TIMEOUT;
    loop {
        let counts = server.connections_per_poller();
        if counts.iter().sum::<usize>() == open {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the pollers hold {counts:?}, not {open} in all, after {IO_TIMEOUT:?}"
        );
        // A polling interval, not a wait standing in for the condition.
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A connection served one request (whatever answers `GET /nope`) and
/// left idle. A drain closes it at once, and nothing else would while a
/// test runs (keep-alive lasts 75 s): its end, read on the test's own
/// socket, says the drain has begun, where a refused connect might be
/// another listener that took the port meanwhile.
pub fn idle_connection(addr: SocketAddr) -> Client {
    let mut client = Client::connect(addr);
    client.send(b"GET /nope HTTP/1.1\r\nHost: t\r\n\r\n");
    client.response(false);
    client
}

/// Waits until `count` threads of this process have names starting with
/// `prefix`: a thread names itself once it runs, and its name is gone
/// once the kernel has reaped it, a moment after it was joined. Fails
/// after `IO_TIMEOUT`.
pub fn wait_for_threads(prefix: &str, count: usize) {
    let deadline = std::time::Instant::now() + IO_TIMEOUT;
    loop {
        let named = threads_named(prefix);
        if named.len() == count {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "threads named {prefix}*: {named:?}, not {count}, after {IO_TIMEOUT:?}"
        );
        // A polling interval, not a wait standing in for the condition.
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The names of this process's threads that start with `prefix`.
pub fn threads_named(prefix: &str) -> Vec<String> {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    let names =
        tasks.filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok());
    names
        .map(|name| name.trim_end().to_string())
        .filter(|name| name.starts_with(prefix))
        .collect()
}

/// Reads until EOF or a reset; returns what arrived.
pub fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut received = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return received,
            Ok(len) => received.extend_from_slice(&chunk[..len]),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return received,
            Err(e) => panic!("read failed: {e}"),
        }
    }
}

/// One request on a fresh connection; the response that comes back.
pub fn exchange(server: &Server, request: &str) -> Vec<u8> {
    let mut client = Client::connect(server.local_addr());
    client.send(request.as_bytes());
    client.response(request.starts_with("HEAD "))
}

/// Asserts that `actual` is `expected` with `{date}` standing for the Date
/// header, which must be a well-formed date within a few seconds of now.
pub fn assert_response(actual: &[u8], expected: &str) {
    let actual = text(actual);
    let date = actual
        .split("\r\nDate: ")
        .nth(1)
        .map(|rest| &rest[..rest.len().min(29)])
        .unwrap_or_else(|| panic!("no Date header in {actual:?}"));
    assert_recent_date(date);
    assert_eq!(actual, expected.replace("{date}", date));
}

pub fn assert_recent_date(date: &str) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // Wide enough for a machine starved by other load; a wrong or stuck
    // date would be off by far more.
    let recent = (now - 30..=now + 1).any(|second| format_imf_fixdate(second) == date.as_bytes());
    assert!(recent, "Date {date:?} is not a date of the last 30 seconds");
}

/// The canned error response for `code reason`, with `extra` headers,
/// closing the connection or not, and without its body for HEAD.
pub fn error_response(
    code: u16,
    reason: &str,
    extra: &str,
    closes: bool,
    head_only: bool,
) -> String {
    let body = format!("{code} {reason}\n");
    let connection = if closes { "Connection: close\r\n" } else { "" };
    error_with_body(code, reason, extra, connection, &body, head_only)
}

/// An error response whose body names a cause after the reason
/// (`502 Bad Gateway: upstream ...`), as `/io` and actor routes give;
/// the connection stays open.
pub fn error_with_cause(code: u16, reason: &str, cause: &str, head_only: bool) -> String {
    let body = format!("{code} {reason}: {cause}\n");
    error_with_body(code, reason, "", "", &body, head_only)
}

/// The layout every error response shares: `extra` header lines before the
/// length, `connection` (empty or a `Connection` line) after the date.
fn error_with_body(
    code: u16,
    reason: &str,
    extra: &str,
    connection: &str,
    body: &str,
    head_only: bool,
) -> String {
    format!(
        "HTTP/1.1 {code} {reason}\r\nServer: uppercut-mio-server\r\n\
         Content-Type: text/plain; charset=utf-8\r\n{extra}Content-Length: {}\r\nDate: {{date}}\r\n\
         {connection}\r\n{}",
        body.len(),
        if head_only { "" } else { body }
    )
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// Says, where a passing run shows it, that the calling test skipped
/// (part of) its check and why. libtest keeps what `println!` and
/// `eprintln!` print to show only for a failing test, so a skip said that
/// way is silent in a run that passes; a write to the stderr handle itself
/// is not kept back. The test's thread bears the test's name.
pub fn say_skipped(why: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    let file = env!("CARGO_CRATE_NAME");
    let _ = writeln!(std::io::stderr(), "SKIPPED: {file}::{test}: {why}");
}

/// What went wrong off the test thread (in an actor the server runs, in a
/// helper thread), carried to the test thread: an assertion there would
/// only show here as a timeout further on. `report` from the actor;
/// `check` (or `join`) on the test thread fails at once naming the cause.
#[derive(Clone, Default)]
pub struct Failures(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl Failures {
    /// Records `what` went wrong.
    pub fn report(&self, what: impl Into<String>) {
        let mut failures = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        failures.push(what.into());
    }

    /// Fails if anything was reported.
    pub fn check(&self) {
        // Read under the lock, failed after it: a panic holding it would
        // poison it for the actor still reporting.
        let failures = self.0.lock().unwrap().join("; ");
        if !failures.is_empty() {
            panic!("off the test thread: {failures}");
        }
    }

    /// Runs `step` (a read that would fail on a symptom); if it fails,
    /// names what was reported meanwhile, the cause, before the symptom.
    pub fn during<T>(&self, step: impl FnOnce() -> T) -> T {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(step));
        self.check();
        match outcome {
            Ok(value) => value,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    /// Waits for `thread`, failing as soon as anything is reported
    /// meanwhile; a panic of the thread is raised again here.
    pub fn join<T>(&self, thread: std::thread::JoinHandle<T>) -> T {
        while !thread.is_finished() {
            self.check();
            std::thread::sleep(Duration::from_millis(5));
        }
        self.check();
        match thread.join() {
            Ok(value) => value,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

/// Runs the test body once per dispatch mode, as `NAME::local` and `NAME::system`.
#[macro_export]
macro_rules! in_both_modes {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn local() {
                    super::$name(uppercut_mio_server::Dispatch::Local);
                }
                #[test]
                fn system() {
                    super::$name(uppercut_mio_server::Dispatch::System);
                }
            }
        )*
    };
}
