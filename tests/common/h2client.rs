//! An HTTP/2 client for the tests: the `h2` crate's, over a blocking
//! socket (plain, for h2c with prior knowledge, or TLS with ALPN `h2`),
//! driven by a small loop of its own (no runtime): the request's future and
//! the connection are polled in turn until the request is answered.

use std::future::Future;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::{Connection, SendRequest};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::integrity::Stream;
use super::IO_TIMEOUT;

/// A blocking stream as `h2` wants it: a read that finds nothing within a
/// few milliseconds is `Pending` (and asks to be polled again).
struct Io(Box<dyn Stream>);

impl AsyncRead for Io {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.0.read(buf.initialize_unfilled()) {
            Ok(len) => {
                buf.advance(len);
                Poll::Ready(Ok(()))
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(self.0.write_all(data).map(|()| data.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(self.0.flush())
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// A response as a test compares it: status, fields (names lower-case,
/// in order) and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub fields: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    /// The first value of field `name`.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/2 connection.
pub struct H2Client {
    send: SendRequest<Bytes>,
    conn: Connection<Io, Bytes>,
    waker: Waker,
}

/// A plain socket to `addr`, whose reads give up after a few
/// milliseconds (so the client can poll its connection).
pub fn socket(addr: SocketAddr) -> TcpStream {
    let socket = TcpStream::connect(addr).expect("connect");
    socket.set_nodelay(true).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(5)))
        .unwrap();
    socket
}

impl H2Client {
    /// h2c with prior knowledge to `addr`.
    pub fn plain(addr: SocketAddr) -> H2Client {
        H2Client::over(Box::new(socket(addr)))
    }

    /// TLS to `addr` with ALPN `h2` (the client configuration must offer
    /// it), checking the server chose it.
    pub fn tls(addr: SocketAddr, config: &Arc<rustls::ClientConfig>) -> H2Client {
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let session = rustls::ClientConnection::new(Arc::clone(config), name).unwrap();
        let mut stream = rustls::StreamOwned::new(session, socket(addr));
        let deadline = Instant::now() + IO_TIMEOUT;
        while stream.conn.is_handshaking() {
            match stream.conn.complete_io(&mut stream.sock) {
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    assert!(Instant::now() < deadline, "the TLS handshake");
                }
                Err(e) => panic!("TLS handshake: {e}"),
            }
        }
        assert_eq!(
            stream.conn.alpn_protocol(),
            Some(&b"h2"[..]),
            "ALPN chose h2"
        );
        H2Client::over(Box::new(stream))
    }

    fn over(stream: Box<dyn Stream>) -> H2Client {
        let waker = Waker::from(Arc::new(Noop));
        let mut handshake = Box::pin(h2::client::handshake(Io(stream)));
        let deadline = Instant::now() + IO_TIMEOUT;
        let (send, conn) = loop {
            let mut cx = Context::from_waker(&waker);
            if let Poll::Ready(done) = handshake.as_mut().poll(&mut cx) {
                break done.expect("the HTTP/2 handshake");
            }
            assert!(Instant::now() < deadline, "the HTTP/2 handshake");
        };
        H2Client { send, conn, waker }
    }

    /// Polls `future` and the connection in turn until `future` is done.
    fn run<T>(&mut self, future: impl Future<Output = T>) -> T {
        let mut future = std::pin::pin!(future);
        let deadline = Instant::now() + IO_TIMEOUT;
        loop {
            let mut cx = Context::from_waker(&self.waker);
            if let Poll::Ready(done) = future.as_mut().poll(&mut cx) {
                return done;
            }
            if let Poll::Ready(ended) = Pin::new(&mut self.conn).poll(&mut cx) {
                // The connection ended: the future may still have its
                // answer (an error) to give.
                if let Poll::Ready(done) = future.as_mut().poll(&mut cx) {
                    return done;
                }
                panic!("the connection ended first: {ended:?}");
            }
            assert!(Instant::now() < deadline, "no answer in {IO_TIMEOUT:?}");
        }
    }

    /// Polls the connection (sending what waits, reading what comes)
    /// until `done` says so.
    pub fn drive_until(&mut self, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + IO_TIMEOUT;
        while !done() {
            let mut cx = Context::from_waker(&self.waker);
            if let Poll::Ready(ended) = Pin::new(&mut self.conn).poll(&mut cx) {
                panic!("the connection ended: {ended:?}");
            }
            assert!(Instant::now() < deadline, "not done in {IO_TIMEOUT:?}");
        }
    }

    /// Sends `request` with `body`, and takes its answer whole.
    pub fn request(&mut self, request: http::Request<()>, body: &[u8]) -> Answer {
        let pending = self.send_only(request, body);
        self.answer(pending)
    }

    /// Sends `request` with `body`, without waiting for its answer.
    pub fn send_only(
        &mut self,
        request: http::Request<()>,
        body: &[u8],
    ) -> h2::client::ResponseFuture {
        let mut send = self.send.clone();
        let ready = self.run(std::future::poll_fn(|cx| send.poll_ready(cx)));
        ready.expect("room for a stream");
        let (response, mut stream) = send
            .send_request(request, body.is_empty())
            .expect("the request goes");
        if !body.is_empty() {
            stream
                .send_data(Bytes::copy_from_slice(body), true)
                .expect("the body goes");
        }
        response
    }

    /// The answer `response` brings, whole.
    pub fn answer(&mut self, response: h2::client::ResponseFuture) -> Answer {
        let response = self.run(response).expect("a response");
        let (head, mut body) = response.into_parts();
        let mut bytes = Vec::new();
        loop {
            let data = self.run(std::future::poll_fn(|cx| body.poll_data(cx)));
            match data {
                Some(Ok(data)) => {
                    let _ = body.flow_control().release_capacity(data.len());
                    bytes.extend_from_slice(&data);
                }
                Some(Err(e)) => panic!("the body broke off: {e}"),
                None => break,
            }
        }
        Answer {
            status: head.status.as_u16(),
            fields: fields_of(&head.headers),
            body: bytes,
        }
    }
}

/// An HTTP/1.1 response as an [`Answer`]: the fields HTTP/2 has no place
/// for left out (`Connection`, `Keep-Alive`, `Transfer-Encoding`), names
/// lower-cased.
pub fn answer_of_http11(response: &[u8], head_only: bool) -> Answer {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Response::new(&mut fields);
    let Ok(httparse::Status::Complete(head_len)) = parsed.parse(response) else {
        panic!("not a response: {:?}", String::from_utf8_lossy(response));
    };
    let fields: Vec<(String, String)> = parsed
        .headers
        .iter()
        .map(|f| {
            (
                f.name.to_ascii_lowercase(),
                String::from_utf8_lossy(f.value).into_owned(),
            )
        })
        .filter(|(n, _)| {
            !matches!(
                n.as_str(),
                "connection" | "keep-alive" | "transfer-encoding"
            )
        })
        .collect();
    Answer {
        status: parsed.code.unwrap(),
        fields,
        body: match head_only {
            true => Vec::new(),
            false => response[head_len..].to_vec(),
        },
    }
}

/// A WebSocket on one stream of an [`H2Client`]'s connection (RFC 8441):
/// the stream's two halves, after its `200`.
pub struct H2WebSocket {
    pub send: h2::SendStream<Bytes>,
    pub recv: h2::RecvStream,
    /// Received and not yet taken.
    pending: Vec<u8>,
    /// The server ended the stream (`END_STREAM`).
    pub ended: bool,
}

/// How an extended CONNECT was answered: the answer's head (and body, if
/// refused) and, when it was `200`, the WebSocket.
pub struct Connected {
    pub answer: Answer,
    pub websocket: Option<H2WebSocket>,
}

impl H2Client {
    /// Whether the server's SETTINGS said `SETTINGS_ENABLE_CONNECT_PROTOCOL
    /// = 1` (RFC 8441 §3): known once any answer has come, since the
    /// server's SETTINGS come first.
    pub fn connect_protocol_enabled(&self) -> bool {
        self.send.is_extended_connect_protocol_enabled()
    }

    /// Sends an extended CONNECT for `protocol` to `target` (`scheme` as
    /// the connection is: `http` or `https`) with `fields`, and takes its
    /// answer's head; a refusal's body too.
    pub fn extended_connect(
        &mut self,
        scheme: &str,
        protocol: &str,
        target: &str,
        fields: &[(&str, &str)],
    ) -> Connected {
        let mut request = http::Request::builder()
            .method(http::Method::CONNECT)
            .uri(format!("{scheme}://localhost{target}"))
            .extension(h2::ext::Protocol::from(protocol));
        for (name, value) in fields {
            request = request.header(*name, *value);
        }
        let request = request.body(()).unwrap();
        let mut send = self.send.clone();
        let ready = self.run(std::future::poll_fn(|cx| send.poll_ready(cx)));
        ready.expect("room for a stream");
        let (response, stream) = send.send_request(request, false).expect("the CONNECT goes");
        let response = self.run(response).expect("a response");
        let (head, recv) = response.into_parts();
        let mut answer = Answer {
            status: head.status.as_u16(),
            fields: fields_of(&head.headers),
            body: Vec::new(),
        };
        let mut websocket = H2WebSocket {
            send: stream,
            recv,
            pending: Vec::new(),
            ended: false,
        };
        if answer.status != 200 {
            answer.body = self.ws_read_to_end(&mut websocket);
            return Connected {
                answer,
                websocket: None,
            };
        }
        Connected {
            answer,
            websocket: Some(websocket),
        }
    }

    /// Sends `bytes` on the WebSocket's stream (`h2` holds what the
    /// server's window does not take yet, and sends it as it opens).
    pub fn ws_send(&mut self, websocket: &mut H2WebSocket, bytes: &[u8]) {
        websocket
            .send
            .send_data(Bytes::copy_from_slice(bytes), false)
            .expect("the data goes");
        self.flush();
    }

    /// Polls the connection until the server ends it.
    pub fn wait_for_end(&mut self) {
        let deadline = Instant::now() + IO_TIMEOUT;
        loop {
            let mut cx = Context::from_waker(&self.waker);
            if Pin::new(&mut self.conn).poll(&mut cx).is_ready() {
                return;
            }
            assert!(Instant::now() < deadline, "not ended in {IO_TIMEOUT:?}");
        }
    }

    /// Polls the connection until what it has to send is sent, as far as
    /// windows allow (`h2` writes as it is polled).
    pub fn flush(&mut self) {
        let mut cx = Context::from_waker(&self.waker);
        if let Poll::Ready(ended) = Pin::new(&mut self.conn).poll(&mut cx) {
            panic!("the connection ended: {ended:?}");
        }
    }

    /// Exactly `len` bytes from the WebSocket's stream, reading (and
    /// reopening its window) as they come.
    pub fn ws_read(&mut self, websocket: &mut H2WebSocket, len: usize) -> Vec<u8> {
        while websocket.pending.len() < len {
            let data = self.run(std::future::poll_fn(|cx| websocket.recv.poll_data(cx)));
            match data {
                Some(Ok(data)) => {
                    let _ = websocket.recv.flow_control().release_capacity(data.len());
                    websocket.pending.extend_from_slice(&data);
                }
                Some(Err(e)) => panic!("the stream broke off: {e}"),
                None => panic!(
                    "the stream ended after {} of {len} bytes",
                    websocket.pending.len()
                ),
            }
        }
        websocket.pending.drain(..len).collect()
    }

    /// What the stream brings until the server ends it.
    pub fn ws_read_to_end(&mut self, websocket: &mut H2WebSocket) -> Vec<u8> {
        while !websocket.ended {
            let data = self.run(std::future::poll_fn(|cx| websocket.recv.poll_data(cx)));
            match data {
                Some(Ok(data)) => {
                    let _ = websocket.recv.flow_control().release_capacity(data.len());
                    websocket.pending.extend_from_slice(&data);
                }
                Some(Err(e)) => panic!("the stream broke off: {e}"),
                None => websocket.ended = true,
            }
        }
        std::mem::take(&mut websocket.pending)
    }

    /// How the stream ends: `Ok(bytes)` for `END_STREAM` after `bytes`,
    /// `Err(reason)` for a reset.
    pub fn ws_outcome(&mut self, websocket: &mut H2WebSocket) -> Result<Vec<u8>, h2::Reason> {
        loop {
            let data = self.run(std::future::poll_fn(|cx| websocket.recv.poll_data(cx)));
            match data {
                Some(Ok(data)) => {
                    let _ = websocket.recv.flow_control().release_capacity(data.len());
                    websocket.pending.extend_from_slice(&data);
                }
                Some(Err(e)) => return Err(e.reason().unwrap_or(h2::Reason::INTERNAL_ERROR)),
                None => {
                    websocket.ended = true;
                    return Ok(std::mem::take(&mut websocket.pending));
                }
            }
        }
    }
}

/// A response's fields as (name, value) pairs, in order.
fn fields_of(headers: &http::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(n, v)| {
            (
                n.to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}
