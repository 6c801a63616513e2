//! How a connection's bytes travel: as they are, or through a TLS session.
//!
//! rustls' `ServerConnection` is sans-I/O: bytes from the socket go in with
//! `read_tls` and `process_new_packets`, plaintext comes out of `reader()`;
//! plaintext goes in through `writer()` and the records out with
//! `write_tls`. A [`Transport`] drives it from the connection's own thread,
//! one socket read per call, so a TLS connection keeps the rules of a plain
//! one: a read shorter than asked emptied the socket (edge-triggered epoll
//! raises a new edge for more), and what the socket does not take stays
//! queued (in rustls, up to the output high-water mark; past it the caller
//! keeps the plaintext), which is the backpressure.
//!
//! A transport is also the one way bytes reach the client: [`Transport::send`]
//! puts a batch behind everything sent before it. What the socket (or the
//! TLS queue) does not take waits in the transport's backlog, and a later
//! batch joins the backlog's end rather than going to the socket ahead of
//! it; nothing else can write the socket. That keeps a response or a
//! WebSocket frame whole whoever produced it and whenever: an actor's
//! answer, mail from another poller, a ping, a close.
//!
//! The first byte of a TLS connection is a handshake record's (0x16): a
//! client whose first byte is anything else is not speaking TLS, and one
//! whose first byte is an upper-case letter is almost surely sending a plain
//! HTTP request, which the caller answers as nginx does. The first record is
//! read before rustls sees it, too: a ClientHello offering only TLS 1.1 or
//! older gets the `protocol_version` alert the RFCs ask for
//! (`client_hello`), where rustls would say `handshake_failure`.

use std::io::{self, ErrorKind, Read, Write};

use bytes::{Buf, BytesMut};
use std::net::{Shutdown, SocketAddr};

use mio::net::TcpStream;
use rustls::ServerConnection;

use crate::net::client_hello::{
    hello_versions, protocol_version_alert, version_name, HelloVersions,
};
use crate::net::socket::write_until_blocked;

/// A TLS record of type handshake: how every TLS connection begins.
const HANDSHAKE_RECORD: u8 = 0x16;

/// What one read found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Received {
    /// `len` bytes of plaintext; `drained` when the socket was emptied and
    /// nothing decrypted is left, so the next read would find nothing.
    Data { len: usize, drained: bool },
    /// Nothing to read now (the socket is empty, or held only handshake
    /// bytes).
    Nothing,
    /// The client ended the stream.
    End,
    /// TLS expected, and the client is not speaking it; `http` when its
    /// first byte looks like the start of an HTTP request.
    NotTls { http: bool },
}

/// The TLS handshake's fate, for the caller to count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Handshake {
    /// Completed during the last call.
    Done,
    /// Failed during the last call, with rustls' reason.
    Failed(String),
}

/// What a transport counted since the caller last asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WireCounts {
    /// Bytes read from the socket.
    pub(crate) received: usize,
    /// Bytes written to the socket.
    pub(crate) sent: usize,
    /// Bytes of what was sent that the socket (or the TLS queue) took.
    pub(crate) taken: usize,
}

/// A socket just accepted, and the address of its peer (which accept
/// returns: keeping it saves a `getpeername` for the access log and
/// `Request::peer_addr`).
#[derive(Debug)]
pub(crate) struct Accepted {
    pub(crate) socket: TcpStream,
    pub(crate) peer: SocketAddr,
    /// It came in on a TLS listener.
    pub(crate) tls: bool,
}

/// A connection's socket, with a TLS session or without.
pub(crate) struct Transport {
    socket: TcpStream,
    peer: SocketAddr,
    tls: Option<Box<TlsState>>,
    /// What was sent and not yet taken, in order: plaintext, written to
    /// the socket (or encrypted) before anything sent after it. Empty, and
    /// holding no memory, while the client keeps up.
    backlog: BytesMut,
    /// Bytes read from and written to the socket, and bytes of what was
    /// sent that the socket (or the TLS queue) took, since the caller last
    /// took the counts.
    wire_in: usize,
    wire_out: usize,
    taken: usize,
}

struct TlsState {
    session: ServerConnection,
    /// Some byte has come: the client was seen to speak TLS.
    started: bool,
    /// Whether the client's first record offers a TLS rustls speaks.
    hello: HelloCheck,
    /// The last socket read was shorter than asked.
    socket_drained: bool,
    /// Decrypted bytes not yet read.
    plaintext: usize,
    /// The client said `close_notify`: once its plaintext is read, the end.
    peer_closed: bool,
    /// The poller saw the client's end (or an error): a short read is no
    /// sign the socket is empty, since no edge will come for what is left.
    hung_up: bool,
    handshake: Option<Handshake>,
}

impl Transport {
    /// Plain TCP.
    pub(crate) fn plain(accepted: Accepted) -> Transport {
        Transport {
            socket: accepted.socket,
            peer: accepted.peer,
            tls: None,
            backlog: BytesMut::new(),
            wire_in: 0,
            wire_out: 0,
            taken: 0,
        }
    }

    /// TCP carrying `session`, which queues at most `queued` bytes of
    /// records the socket has not taken.
    pub(crate) fn tls(
        accepted: Accepted,
        mut session: ServerConnection,
        queued: usize,
    ) -> Transport {
        session.set_buffer_limit(Some(queued));
        Transport {
            socket: accepted.socket,
            peer: accepted.peer,
            tls: Some(Box::new(TlsState {
                session,
                started: false,
                hello: HelloCheck::Pending(Vec::new()),
                socket_drained: false,
                plaintext: 0,
                peer_closed: false,
                hung_up: false,
                handshake: None,
            })),
            backlog: BytesMut::new(),
            wire_in: 0,
            wire_out: 0,
            taken: 0,
        }
    }

    /// The socket, to register with a poll.
    pub(crate) fn socket_mut(&mut self) -> &mut TcpStream {
        &mut self.socket
    }

    pub(crate) fn peer_addr(&self) -> Option<SocketAddr> {
        Some(self.peer)
    }

    /// The poller reported the client's end: a TLS read that brings only
    /// handshake records goes on to find the end, not waiting for an edge
    /// that was already spent.
    pub(crate) fn note_hangup(&mut self) {
        if let Some(tls) = &mut self.tls {
            tls.hung_up = true;
        }
    }

    /// The connection is TLS.
    pub(crate) fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// TLS, and the handshake chose HTTP/2 (ALPN `h2`).
    pub(crate) fn chose_http2(&self) -> bool {
        self.tls
            .as_ref()
            .is_some_and(|tls| tls.session.alpn_protocol() == Some(b"h2"))
    }

    /// TLS, with the handshake not finished.
    pub(crate) fn is_handshaking(&self) -> bool {
        self.tls
            .as_ref()
            .is_some_and(|tls| tls.session.is_handshaking())
    }

    /// The handshake's fate since the last call, if it was decided.
    pub(crate) fn take_handshake(&mut self) -> Option<Handshake> {
        self.tls.as_mut().and_then(|tls| tls.handshake.take())
    }

    /// Since the last call: bytes read from and written to the socket, and
    /// bytes of what was sent that the socket (or the TLS queue) took.
    pub(crate) fn take_wire_counts(&mut self) -> WireCounts {
        let counts = WireCounts {
            received: self.wire_in,
            sent: self.wire_out,
            taken: self.taken,
        };
        (self.wire_in, self.wire_out, self.taken) = (0, 0, 0);
        counts
    }

    /// Reads plaintext into `buf`. Plain TCP reads the socket once; TLS reads
    /// it until some plaintext comes or the socket is empty (handshake
    /// records carry none).
    pub(crate) fn read(&mut self, buf: &mut [u8]) -> io::Result<Received> {
        if self.tls.is_none() {
            return match self.socket.read(buf) {
                Ok(0) => Ok(Received::End),
                Ok(len) => {
                    self.wire_in += len;
                    let drained = len < buf.len();
                    Ok(Received::Data { len, drained })
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(Received::Nothing),
                Err(e) => Err(e),
            };
        }
        loop {
            if let Some(received) = self.read_tls_once(buf)? {
                return Ok(received);
            }
        }
    }

    /// One step of a TLS read: decrypted bytes if there are some, else one
    /// socket read and what it brought; `None` to go on reading.
    fn read_tls_once(&mut self, buf: &mut [u8]) -> io::Result<Option<Received>> {
        let Some(tls) = &mut self.tls else {
            return Ok(Some(Received::Nothing));
        };
        // What an earlier read decrypted comes first.
        if tls.plaintext > 0 {
            return tls.read_plaintext(buf).map(Some);
        }
        // The client said close_notify, and all it sent before is read.
        if tls.peer_closed {
            return Ok(Some(Received::End));
        }
        // Refused for its versions: nothing more is read.
        if tls.hello == HelloCheck::Refused {
            return Ok(Some(Received::End));
        }
        let mut sniff = Sniff {
            socket: &mut self.socket,
            started: &mut tls.started,
            hello: &mut tls.hello,
            not_tls: None,
            too_old: None,
            read: 0,
            short: false,
        };
        let read_tls = tls.session.read_tls(&mut sniff);
        let (not_tls, too_old) = (sniff.not_tls, sniff.too_old);
        let (read, short) = (sniff.read, sniff.short);
        if let Some((client_version, record_version)) = too_old {
            self.wire_in += read;
            let alert = protocol_version_alert(record_version);
            let _ = self.write_unencrypted(&alert);
            let version = version_name(client_version);
            if let Some(tls) = &mut self.tls {
                tls.handshake = Some(Handshake::Failed(format!(
                    "the client offers {version} at most (answered protocol_version)"
                )));
            }
            let message = format!("a ClientHello offering {version} at most");
            return Err(io::Error::new(ErrorKind::InvalidData, message));
        }
        match read_tls {
            Ok(0) => {
                // The stream ended: a clean close_notify, or a truncation.
                if tls.session.is_handshaking() && tls.started {
                    tls.handshake =
                        Some(Handshake::Failed("the client closed mid-handshake".into()));
                }
                return Ok(Some(Received::End));
            }
            Ok(_) => {}
            Err(_) if not_tls.is_some() => {
                let http = not_tls == Some(true);
                tls.handshake = Some(Handshake::Failed(match http {
                    true => "a plain HTTP request".into(),
                    false => "not a TLS handshake".into(),
                }));
                return Ok(Some(Received::NotTls { http }));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(Some(Received::Nothing)),
            Err(e) => return Err(e),
        }
        self.wire_in += read;
        tls.socket_drained = short;
        let handshaking = tls.session.is_handshaking();
        match tls.session.process_new_packets() {
            Ok(state) => {
                tls.plaintext = state.plaintext_bytes_to_read();
                tls.peer_closed = state.peer_has_closed();
            }
            Err(e) => {
                if handshaking {
                    tls.handshake = Some(Handshake::Failed(e.to_string()));
                }
                // The alert rustls queued, if the socket takes it.
                let _ = self.send_records();
                return Err(io::Error::new(ErrorKind::InvalidData, e));
            }
        }
        if handshaking && !tls.session.is_handshaking() {
            tls.handshake = Some(Handshake::Done);
        }
        // A close_notify with nothing before it ends the stream now (a
        // handshake it followed counted as done).
        if tls.peer_closed && tls.plaintext == 0 {
            return Ok(Some(Received::End));
        }
        // Handshake records to send; what the socket will not take now waits
        // for `flush` (the caller asks for WRITABLE while `has_pending`).
        if tls.session.wants_write() {
            self.send_records()?;
        }
        let Some(tls) = &mut self.tls else {
            return Ok(Some(Received::Nothing));
        };
        if tls.plaintext > 0 {
            return tls.read_plaintext(buf).map(Some);
        }
        Ok((tls.socket_drained && !tls.hung_up).then_some(Received::Nothing))
    }

    /// Sends `batch` after everything sent before it: straight to the
    /// socket (or the TLS queue) when nothing waits, else behind what
    /// waits; then writes what it can. What the socket does not take stays
    /// in the backlog for [`Transport::flush`] (the caller asks for
    /// WRITABLE while [`Transport::is_backed_up`]).
    pub(crate) fn send(&mut self, batch: &[u8]) -> io::Result<()> {
        if batch.is_empty() {
            return self.flush().map(drop);
        }
        if self.backlog.is_empty() {
            let written = self.write_now(batch)?;
            self.backlog.extend_from_slice(&batch[written..]);
        } else {
            self.backlog.extend_from_slice(batch);
        }
        self.flush().map(drop)
    }

    /// Writes what waits (TLS records queued, then the backlog) until all
    /// of it went or the socket is full: with edge-triggered readiness a
    /// new writable edge comes only after a write the socket refused. True
    /// when all of it went.
    pub(crate) fn flush(&mut self) -> io::Result<bool> {
        loop {
            if !self.send_records()? {
                return Ok(false);
            }
            if self.backlog.is_empty() {
                // A client that caught up holds no buffer.
                self.backlog = BytesMut::new();
                return Ok(true);
            }
            let backlog = std::mem::take(&mut self.backlog);
            let written = self.write_now(&backlog);
            self.backlog = backlog;
            self.backlog.advance(written?);
            // Plain TCP took what the socket would: the rest waits for it.
            // TLS queued records, which the next turn sends.
            if !self.has_pending_records() && !self.backlog.is_empty() {
                return Ok(false);
            }
        }
    }

    /// Something sent waits for the socket: plaintext in the backlog, or
    /// TLS records queued.
    pub(crate) fn is_backed_up(&self) -> bool {
        !self.backlog.is_empty() || self.has_pending_records()
    }

    /// Bytes of plaintext sent that wait in the backlog (not counting TLS
    /// records already queued, at most the high-water mark).
    pub(crate) fn backlog_len(&self) -> usize {
        self.backlog.len()
    }

    /// Writes plaintext now, ahead of nothing: only `send` and `flush`
    /// call it, once the backlog is empty or with the backlog's head. How
    /// much was taken. Plain TCP writes to the socket until it is full:
    /// what it does not take, it would not take now. TLS encrypts into the
    /// session's queue what fits there, and sends nothing: `flush` then
    /// sends, and writes again while the queue drains.
    fn write_now(&mut self, data: &[u8]) -> io::Result<usize> {
        let written = match &mut self.tls {
            None => {
                let written = write_until_blocked(&mut self.socket, data)?;
                self.wire_out += written;
                written
            }
            Some(tls) => tls.session.writer().write(data)?,
        };
        self.taken += written;
        Ok(written)
    }

    /// Sends the TLS records queued; true when none is left.
    fn send_records(&mut self) -> io::Result<bool> {
        let Some(tls) = &mut self.tls else {
            return Ok(true);
        };
        while tls.session.wants_write() {
            match tls.session.write_tls(&mut self.socket) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(written) => self.wire_out += written,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// TLS records are queued that the socket has not taken.
    fn has_pending_records(&self) -> bool {
        self.tls
            .as_ref()
            .is_some_and(|tls| tls.session.wants_write())
    }

    /// Writes `bytes` as they are, past any TLS session: the answer to a
    /// plain HTTP request on a TLS port. How much the socket took.
    pub(crate) fn write_unencrypted(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let written = write_until_blocked(&mut self.socket, bytes)?;
        self.wire_out += written;
        Ok(written)
    }

    /// A TLS session says `close_notify`, if the socket takes it now; the
    /// socket stays as it is. Plain TCP has nothing to say.
    pub(crate) fn close_notify(&mut self) -> io::Result<()> {
        if let Some(tls) = &mut self.tls {
            if !tls.session.is_handshaking() {
                tls.session.send_close_notify();
                self.send_records()?;
            }
        }
        Ok(())
    }

    /// Ends the writing side: a TLS session says `close_notify` first.
    pub(crate) fn shutdown_write(&mut self) -> io::Result<()> {
        self.close_notify()?;
        self.socket.shutdown(Shutdown::Write)
    }

    /// Ends both sides of the socket now.
    pub(crate) fn shutdown(&mut self) -> io::Result<()> {
        self.socket.shutdown(Shutdown::Both)
    }
}

impl TlsState {
    /// Hands out decrypted bytes.
    fn read_plaintext(&mut self, buf: &mut [u8]) -> io::Result<Received> {
        let len = self.session.reader().read(buf)?;
        self.plaintext = self.plaintext.saturating_sub(len);
        // After a close_notify, one more read finds the end.
        let drained = self.socket_drained && self.plaintext == 0 && !self.peer_closed;
        Ok(Received::Data { len, drained })
    }
}

/// Whether the first record offers a TLS version rustls speaks.
#[derive(Debug, PartialEq, Eq)]
enum HelloCheck {
    /// Not known yet: what came of the first record so far, kept only when
    /// a read brought part of it (empty, and holding no memory, otherwise).
    Pending(Vec<u8>),
    /// It does, or it is for rustls to judge.
    Passed,
    /// It offers TLS 1.1 or older only, and was answered so.
    Refused,
}

/// The socket as rustls reads it: notes how much one read took and whether
/// it was short, checks the very first byte, and reads the first record's
/// versions.
struct Sniff<'a> {
    socket: &'a mut TcpStream,
    started: &'a mut bool,
    hello: &'a mut HelloCheck,
    /// The first byte was not a handshake record's: `Some(true)` when it
    /// looks like an HTTP request.
    not_tls: Option<bool>,
    /// The first record is a ClientHello offering at most this version,
    /// in a record of this version.
    too_old: Option<(u16, [u8; 2])>,
    read: usize,
    short: bool,
}

impl Read for Sniff<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let len = self.socket.read(buf)?;
        if len > 0 && !*self.started {
            if buf[0] != HANDSHAKE_RECORD {
                self.not_tls = Some(buf[0].is_ascii_uppercase());
                return Err(ErrorKind::InvalidData.into());
            }
            *self.started = true;
        }
        self.read += len;
        self.short = len < buf.len();
        if len > 0 {
            self.check_hello(&buf[..len])?;
        }
        Ok(len)
    }
}

impl Sniff<'_> {
    /// Reads the first record's versions as its bytes pass, keeping them
    /// only while the record is not all here; an error stops rustls.
    fn check_hello(&mut self, read: &[u8]) -> io::Result<()> {
        let HelloCheck::Pending(kept) = &mut *self.hello else {
            return Ok(());
        };
        let verdict = match kept.is_empty() {
            true => hello_versions(read),
            false => {
                kept.extend_from_slice(read);
                hello_versions(kept)
            }
        };
        match verdict {
            HelloVersions::NeedMore => {
                if kept.is_empty() {
                    kept.extend_from_slice(read);
                }
            }
            HelloVersions::Acceptable => *self.hello = HelloCheck::Passed,
            HelloVersions::TooOld {
                client_version,
                record_version,
            } => {
                *self.hello = HelloCheck::Refused;
                self.too_old = Some((client_version, record_version));
                return Err(ErrorKind::InvalidData.into());
            }
        }
        Ok(())
    }
}
