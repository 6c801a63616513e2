//! limit-probe ADDR
//!
//! The floor of `bench/run --cost`: the least a keep-alive HTTP/1.1
//! responder on mio can cost per request, so that the server's CPU and
//! system calls per request can be read against what the kernel alone
//! takes. One thread, one `Poll`, edge-triggered readiness, no routing, no
//! parsing beyond finding the end of each request head: every head (`GET`,
//! no body) is answered with the same `200` and `hello\n`, as the server's
//! canned `/` is, minus its `Date` field. Pipelined heads in one read get
//! their answers in one write.
//!
//! Per request it spends one `read` and one `write`, and one `epoll_wait`
//! per round of events: a read shorter than the buffer emptied the socket,
//! and with edge-triggered readiness whatever the client sends next raises
//! a new edge, so no read is spent on `WouldBlock`.

use std::io::{self, ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::process::ExitCode;

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

/// What every request head is answered with.
const RESPONSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 6\r\n\r\nhello\n";
/// The listener's token; connections are `Token(index + 1)`.
const LISTENER: Token = Token(0);
/// Bytes read at once, and the most a head may take.
const READ_CHUNK: usize = 16 * 1024;

/// One client: its socket, the part of a head not yet complete, and the
/// answers the socket did not take yet.
struct Client {
    stream: TcpStream,
    input: Vec<u8>,
    output: Vec<u8>,
    writable: bool,
}

/// What a readiness event left a client as.
enum Fate {
    Open,
    Closed,
}

impl Client {
    fn new(stream: TcpStream) -> Client {
        Client {
            stream,
            input: Vec::with_capacity(READ_CHUNK),
            output: Vec::new(),
            writable: false,
        }
    }

    /// Writes what is owed, then reads and answers until a short read.
    fn on_event(&mut self, buf: &mut [u8], token: Token, poll: &Poll) -> io::Result<Fate> {
        if !self.flush()? {
            return self.want_writable(true, token, poll);
        }
        loop {
            let len = match self.stream.read(buf) {
                Ok(0) => return Ok(Fate::Closed),
                Ok(len) => len,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.answer(&buf[..len])?;
            if !self.output.is_empty() {
                return self.want_writable(true, token, poll);
            }
            if len < buf.len() {
                break;
            }
        }
        self.want_writable(false, token, poll)
    }

    /// Answers every complete head in what was kept plus `read`, in one write.
    fn answer(&mut self, read: &[u8]) -> io::Result<()> {
        let mut answers = 0;
        let rest = if self.input.is_empty() {
            let used = count_heads(read, &mut answers);
            &read[used..]
        } else {
            self.input.extend_from_slice(read);
            let used = count_heads(&self.input, &mut answers);
            self.input.drain(..used);
            &[][..]
        };
        if !rest.is_empty() {
            self.input.extend_from_slice(rest);
        }
        if self.input.len() > READ_CHUNK {
            return Err(io::Error::new(
                ErrorKind::InvalidData,
                "request head too long",
            ));
        }
        if answers == 0 {
            return Ok(());
        }
        if answers == 1 {
            return self.send(RESPONSE);
        }
        let batch = RESPONSE.repeat(answers);
        self.send(&batch)
    }

    /// Writes `bytes`; what the socket does not take waits in `output`.
    fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut sent = 0;
        while sent < bytes.len() {
            match self.stream.write(&bytes[sent..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        self.output.extend_from_slice(&bytes[sent..]);
        Ok(())
    }

    /// Writes what waits; true when all of it went.
    fn flush(&mut self) -> io::Result<bool> {
        while !self.output.is_empty() {
            match self.stream.write(&self.output) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => drop(self.output.drain(..n)),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    fn want_writable(&mut self, writable: bool, token: Token, poll: &Poll) -> io::Result<Fate> {
        if self.writable != writable {
            let interest = match writable {
                true => Interest::READABLE | Interest::WRITABLE,
                false => Interest::READABLE,
            };
            poll.registry()
                .reregister(&mut self.stream, token, interest)?;
            self.writable = writable;
        }
        Ok(Fate::Open)
    }
}

/// Counts the complete heads (each ending in an empty line) at the start
/// of `bytes` into `answers`; returns how many bytes they take.
fn count_heads(bytes: &[u8], answers: &mut usize) -> usize {
    let mut used = 0;
    while let Some(end) = find_head_end(&bytes[used..]) {
        used += end;
        *answers += 1;
    }
    used
}

/// Where the first head in `bytes` ends (just past its `\r\n\r\n`).
fn find_head_end(bytes: &[u8]) -> Option<usize> {
    bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| at + 4)
}

fn run(addr: SocketAddr) -> io::Result<()> {
    let mut poll = Poll::new()?;
    let mut listener = TcpListener::bind(addr)?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    println!("listening on http://{addr} (limit probe, 1 thread)");
    let mut events = Events::with_capacity(1024);
    let mut clients: Vec<Option<Client>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        if let Err(e) = poll.poll(&mut events, None) {
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        for event in events.iter() {
            if event.token() == LISTENER {
                accept(&listener, &poll, &mut clients, &mut free);
                continue;
            }
            let index = event.token().0 - 1;
            let Some(Some(client)) = clients.get_mut(index) else {
                continue;
            };
            match client.on_event(&mut buf, event.token(), &poll) {
                Ok(Fate::Open) => {}
                Ok(Fate::Closed) | Err(_) => {
                    clients[index] = None;
                    free.push(index);
                }
            }
        }
    }
}

/// Accepts until the listener has nothing more; a failed accept (out of
/// descriptors, say) waits for the next edge.
fn accept(
    listener: &TcpListener,
    poll: &Poll,
    clients: &mut Vec<Option<Client>>,
    free: &mut Vec<usize>,
) {
    loop {
        let mut stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        let index = free.pop().unwrap_or_else(|| {
            clients.push(None);
            clients.len() - 1
        });
        let _ = stream.set_nodelay(true);
        if poll
            .registry()
            .register(&mut stream, Token(index + 1), Interest::READABLE)
            .is_err()
        {
            free.push(index);
            continue;
        }
        clients[index] = Some(Client::new(stream));
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let addr = match (args.next().map(|a| a.parse::<SocketAddr>()), args.next()) {
        (Some(Ok(addr)), None) => addr,
        _ => {
            eprintln!("usage: limit-probe ADDR   (e.g. limit-probe 127.0.0.1:19500)");
            return ExitCode::from(2);
        }
    };
    match run(addr) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("limit-probe: {e}");
            ExitCode::FAILURE
        }
    }
}
