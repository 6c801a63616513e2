//! An HTTP/3 client for the tests: quinn-proto's client over a real UDP
//! socket, driven here with blocking reads, and HTTP/3 framing written by
//! hand (QPACK through `sans_io`), so a test can send what no well-behaved
//! client would: a stream that breaks the rules, a field section too
//! large, a client that stops acknowledging.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_proto::crypto::rustls::QuicClientConfig;
use quinn_proto::{
    ClientConfig, Connection, ConnectionError, ConnectionHandle, DatagramEvent, Dir, Endpoint,
    EndpointConfig, Event, ReadError, StreamId, VarInt,
};
use rustls::crypto::ring;
use rustls::pki_types::CertificateDer;
use rustls::RootCertStore;
use uppercut_mio_server::sans_io::{qpack_decode, qpack_encode};

use super::IO_TIMEOUT;

/// A response: its status, its fields (but `:status`) and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct H3Response {
    pub status: u16,
    pub fields: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl H3Response {
    /// The first field named `name`.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A QUIC client configuration trusting `ca`, offering `h3`.
pub fn client_config(ca: &CertificateDer<'static>) -> ClientConfig {
    let mut roots = RootCertStore::empty();
    roots.add(ca.clone()).expect("the CA is a trust anchor");
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    ClientConfig::new(Arc::new(
        QuicClientConfig::try_from(tls).expect("a QUIC client configuration"),
    ))
}

/// Appends `value` as a QUIC varint.
pub fn put_varint(out: &mut Vec<u8>, value: u64) {
    match value {
        0..=63 => out.push(value as u8),
        64..=16_383 => out.extend_from_slice(&(value as u16 | 0x4000).to_be_bytes()),
        16_384..=1_073_741_823 => {
            out.extend_from_slice(&(value as u32 | 0x8000_0000).to_be_bytes())
        }
        _ => out.extend_from_slice(&(value | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

/// The varint at the start of `input`, and its length.
fn read_varint(input: &[u8]) -> Option<(u64, usize)> {
    let first = *input.first()?;
    let len = 1usize << (first >> 6);
    let bytes = input.get(..len)?;
    let mut value = u64::from(first & 0x3f);
    for &byte in &bytes[1..] {
        value = value << 8 | u64::from(byte);
    }
    Some((value, len))
}

/// The value of the varint `bytes` start with.
pub fn varint(bytes: &[u8]) -> Option<u64> {
    read_varint(bytes).map(|(value, _)| value)
}

/// The whole frames `bytes` hold, as type and payload.
pub fn frames(mut bytes: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let mut frames = Vec::new();
    while let Some((kind, a)) = read_varint(bytes) {
        let Some((len, b)) = read_varint(&bytes[a..]) else {
            break;
        };
        let Some(payload) = bytes.get(a + b..a + b + len as usize) else {
            break;
        };
        frames.push((kind, payload.to_vec()));
        bytes = &bytes[a + b + len as usize..];
    }
    frames
}

/// Appends a frame of `kind` with `payload`.
pub fn put_frame(out: &mut Vec<u8>, kind: u64, payload: &[u8]) {
    put_varint(out, kind);
    put_varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

/// A request's HEADERS frame: `fields` after the pseudo-fields of
/// `method` and `path` (https, authority `localhost`).
pub fn headers_frame(method: &str, path: &str, fields: &[(&str, &str)]) -> Vec<u8> {
    let mut all: Vec<(&[u8], &[u8])> = vec![
        (b":method", method.as_bytes()),
        (b":scheme", b"https"),
        (b":authority", b"localhost"),
        (b":path", path.as_bytes()),
    ];
    all.extend(fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())));
    let mut frame = Vec::new();
    put_frame(&mut frame, 0x1, &qpack_encode(&all));
    frame
}

/// How a stream ended: with its FIN, or reset with a code.
pub type Ended = Result<(), u64>;

/// One HTTP/3 connection to a server.
pub struct H3Client {
    socket: UdpSocket,
    server: SocketAddr,
    endpoint: Endpoint,
    handle: ConnectionHandle,
    pub conn: Connection,
    /// Why the connection ended, once it did.
    pub lost: Option<ConnectionError>,
    /// Drop what the server sends, acknowledging nothing.
    pub deaf: bool,
    /// Deaf, and its own timers stopped too: a client gone silent (its
    /// own idle timeout does not end the connection on its side).
    pub frozen: bool,
    /// Bytes the server sent (UDP payloads), and the client sent.
    pub received: u64,
    pub sent: u64,
    /// What each of the server's unidirectional streams sent.
    pub server_streams: HashMap<StreamId, Vec<u8>>,
    /// What each request stream has sent back so far, and whether it ended.
    replies: HashMap<StreamId, (Vec<u8>, Option<Ended>)>,
}

impl H3Client {
    /// A connection to `addr`, handshake done, its control stream open
    /// with empty SETTINGS.
    pub fn connect(addr: SocketAddr, config: ClientConfig) -> H3Client {
        let mut client = H3Client::start(addr, config);
        client.drive_until(|c| (!c.conn.is_handshaking()).then_some(()));
        assert!(client.lost.is_none(), "handshake failed: {:?}", client.lost);
        let control = client.conn.streams().open(Dir::Uni).expect("a stream");
        // Type 0 (control), SETTINGS (4) of length 0.
        client.write(control, &[0x00, 0x04, 0x00], false);
        client
    }

    /// A connection begun (its first Initial queued), not driven.
    pub fn start(addr: SocketAddr, config: ClientConfig) -> H3Client {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("a UDP socket");
        let mut endpoint = Endpoint::new(Arc::new(EndpointConfig::default()), None, false, None);
        let (handle, conn) = endpoint
            .connect(Instant::now(), config, addr, "localhost")
            .expect("connect");
        H3Client {
            socket,
            server: addr,
            endpoint,
            handle,
            conn,
            lost: None,
            deaf: false,
            frozen: false,
            received: 0,
            sent: 0,
            server_streams: HashMap::new(),
            replies: HashMap::new(),
        }
    }

    /// The socket the client sends from.
    pub fn socket(&self) -> &UdpSocket {
        &self.socket
    }

    /// Sends what the connection has to send.
    pub fn flush(&mut self) {
        let mut buf = Vec::new();
        let now = Instant::now();
        while let Some(event) = self.conn.poll_endpoint_events() {
            if let Some(event) = self.endpoint.handle_event(self.handle, event) {
                self.conn.handle_event(event);
            }
        }
        loop {
            buf.clear();
            let Some(transmit) = self.conn.poll_transmit(now, 1, &mut buf) else {
                return;
            };
            self.sent += transmit.size as u64;
            let _ = self.socket.send_to(&buf[..transmit.size], self.server);
        }
    }

    /// Receives for up to `wait` (or the connection's next timer), and
    /// handles what came; false when nothing did.
    pub fn receive(&mut self, wait: Duration) -> bool {
        let now = Instant::now();
        let wait = match self.conn.poll_timeout() {
            Some(due) => wait.min(due.saturating_duration_since(now)),
            None => wait,
        };
        self.socket
            .set_read_timeout(Some(wait.max(Duration::from_millis(1))))
            .unwrap();
        let mut buf = vec![0u8; 65_536];
        let got = match self.socket.recv_from(&mut buf) {
            Ok((len, _)) => {
                self.received += len as u64;
                if !self.deaf && !self.frozen {
                    self.handle_datagram(&buf[..len]);
                }
                true
            }
            Err(_) => false,
        };
        let now = Instant::now();
        if !self.frozen && self.conn.poll_timeout().is_some_and(|due| due <= now) {
            self.conn.handle_timeout(now);
        }
        self.poll_events();
        got
    }

    /// Handles one datagram as if it came from the server.
    pub fn handle_datagram(&mut self, datagram: &[u8]) {
        let mut buf = Vec::new();
        let event = self.endpoint.handle(
            Instant::now(),
            self.server,
            None,
            None,
            BytesMut::from(datagram),
            &mut buf,
        );
        if let Some(DatagramEvent::ConnectionEvent(_, event)) = event {
            self.conn.handle_event(event);
        }
        self.poll_events();
    }

    /// A client that was frozen wakes: sends a request, and hands the
    /// server's first answer to the connection before any of its own
    /// timers (long past) can end it. How the connection then stands.
    pub fn thaw_with_request(&mut self) -> Option<ConnectionError> {
        self.deaf = true;
        self.send("GET", "/", &[], b"");
        self.socket.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let mut buf = vec![0u8; 65_536];
        let (len, _) = self.socket.recv_from(&mut buf).expect("the server answers");
        self.frozen = false;
        self.deaf = false;
        self.handle_datagram(&buf[..len]);
        self.lost.clone()
    }

    /// Takes the connection's events: its end, and what streams brought.
    fn poll_events(&mut self) {
        while let Some(event) = self.conn.poll() {
            if let Event::ConnectionLost { reason } = event {
                self.lost = Some(reason);
            }
        }
        while let Some(id) = self.conn.streams().accept(Dir::Uni) {
            self.server_streams.insert(id, Vec::new());
        }
        let uni: Vec<StreamId> = self.server_streams.keys().copied().collect();
        for id in uni {
            let (bytes, _) = self.read(id);
            if let Some(held) = self.server_streams.get_mut(&id) {
                held.extend_from_slice(&bytes);
            }
        }
        let open: Vec<StreamId> = self
            .replies
            .iter()
            .filter(|(_, (_, end))| end.is_none())
            .map(|(id, _)| *id)
            .collect();
        for id in open {
            let (bytes, end) = self.read(id);
            if let Some((held, ended)) = self.replies.get_mut(&id) {
                held.extend_from_slice(&bytes);
                *ended = end;
            }
        }
    }

    /// What stream `id` has now, and how it ended, if it did: `Ok` with
    /// its FIN, `Err` with the code of its reset.
    fn read(&mut self, id: StreamId) -> (Vec<u8>, Option<Ended>) {
        let mut bytes = Vec::new();
        let mut recv = self.conn.recv_stream(id);
        let Ok(mut chunks) = recv.read(true) else {
            return (bytes, Some(Ok(())));
        };
        let end = loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => bytes.extend_from_slice(&chunk.bytes),
                Ok(None) => break Some(Ok(())),
                Err(ReadError::Blocked) => break None,
                Err(ReadError::Reset(code)) => break Some(Err(code.into_inner())),
            }
        };
        let _ = chunks.finalize();
        (bytes, end)
    }

    /// Drives the connection until `done` says so or it is lost, within
    /// the tests' I/O timeout.
    pub fn drive_until<T>(
        &mut self,
        mut done: impl FnMut(&mut H3Client) -> Option<T>,
    ) -> Option<T> {
        let deadline = Instant::now() + IO_TIMEOUT;
        loop {
            self.flush();
            if let Some(result) = done(self) {
                return Some(result);
            }
            if self.lost.is_some() {
                return None;
            }
            assert!(Instant::now() < deadline, "no progress in {IO_TIMEOUT:?}");
            self.receive(Duration::from_millis(50));
        }
    }

    /// Writes `bytes` on stream `id`, finishing it with `fin`.
    pub fn write(&mut self, id: StreamId, bytes: &[u8], fin: bool) {
        let mut at = 0;
        while at < bytes.len() {
            match self.conn.send_stream(id).write(&bytes[at..]) {
                Ok(n) => at += n,
                Err(_) => {
                    self.flush();
                    self.receive(Duration::from_millis(20));
                }
            }
        }
        if fin {
            let _ = self.conn.send_stream(id).finish();
        }
        self.flush();
    }

    /// Opens a request stream and sends `bytes` on it (then its end).
    pub fn send_raw(&mut self, bytes: &[u8], fin: bool) -> StreamId {
        let id = self.conn.streams().open(Dir::Bi).expect("a request stream");
        self.replies.insert(id, (Vec::new(), None));
        self.write(id, bytes, fin);
        id
    }

    /// Sends a request: HEADERS with `fields`, `body` as one DATA frame.
    pub fn send(
        &mut self,
        method: &str,
        path: &str,
        fields: &[(&str, &str)],
        body: &[u8],
    ) -> StreamId {
        let mut bytes = headers_frame(method, path, fields);
        if !body.is_empty() {
            put_frame(&mut bytes, 0x0, body);
        }
        self.send_raw(&bytes, true)
    }

    /// How stream `id` ended: its reply's bytes and FIN, or the reset's
    /// code. `None` if the connection ended first.
    pub fn reply(&mut self, id: StreamId) -> Option<Result<Vec<u8>, u64>> {
        self.drive_until(|c| match c.replies.get(&id) {
            Some((bytes, Some(Ok(())))) => Some(Ok(bytes.clone())),
            Some((_, Some(Err(code)))) => Some(Err(*code)),
            _ => None,
        })
    }

    /// The response on stream `id`.
    pub fn response(&mut self, id: StreamId) -> H3Response {
        let bytes = match self.reply(id) {
            Some(Ok(bytes)) => bytes,
            other => panic!("no response on {id}: {other:?}, connection {:?}", self.lost),
        };
        parse_response(&bytes)
    }

    /// Sends a request and waits for its response.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        fields: &[(&str, &str)],
        body: &[u8],
    ) -> H3Response {
        let id = self.send(method, path, fields, body);
        self.response(id)
    }

    /// Waits for the connection to end; the application error code of its
    /// CONNECTION_CLOSE when the server closed it with one.
    pub fn closed(&mut self) -> ConnectionError {
        self.drive_until(|c| c.lost.clone());
        self.lost.clone().expect("the connection ended")
    }

    /// Closes the connection from this side.
    pub fn close(&mut self) {
        self.conn
            .close(Instant::now(), VarInt::from_u32(0x100), bytes::Bytes::new());
        self.flush();
    }
}

/// The application error code of `error`, when the peer closed with one.
pub fn application_code(error: &ConnectionError) -> Option<u64> {
    match error {
        ConnectionError::ApplicationClosed(close) => Some(close.error_code.into_inner()),
        _ => None,
    }
}

/// A response's frames: one HEADERS, then DATA (and nothing else).
pub fn parse_response(mut bytes: &[u8]) -> H3Response {
    let mut response = H3Response {
        status: 0,
        fields: Vec::new(),
        body: Vec::new(),
    };
    while !bytes.is_empty() {
        let (kind, a) = read_varint(bytes).expect("a frame type");
        let (len, b) = read_varint(&bytes[a..]).expect("a frame length");
        let payload = &bytes[a + b..a + b + len as usize];
        match kind {
            0x1 => {
                assert_eq!(response.status, 0, "one HEADERS frame");
                for (name, value) in qpack_decode(payload).expect("a field section") {
                    let (name, value) = (
                        String::from_utf8(name).expect("a name"),
                        String::from_utf8(value).expect("a value"),
                    );
                    match name.as_str() {
                        ":status" => response.status = value.parse().expect("a status"),
                        _ => response.fields.push((name, value)),
                    }
                }
            }
            0x0 => {
                assert_ne!(response.status, 0, "DATA after HEADERS");
                response.body.extend_from_slice(payload);
            }
            other => panic!("frame type {other:#x} on a request stream"),
        }
        bytes = &bytes[a + b + len as usize..];
    }
    response
}
