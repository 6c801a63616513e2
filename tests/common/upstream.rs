//! A test upstream for `/io`: a thread per connection that reads request
//! heads and answers each as the test says.

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use uppercut_mio_server::config::UpstreamConfig;
use uppercut_mio_server::{Config, Dispatch};

use super::{config, find};

/// A running test upstream.
pub struct Upstream {
    pub addr: SocketAddr,
    /// Connections accepted so far.
    pub accepted: Arc<AtomicUsize>,
}

/// Starts an upstream on a free loopback port. `answer` is called once for
/// each request head read, with the connection; it returns whether to go on
/// serving that connection.
pub fn spawn<F>(answer: F) -> Upstream
where
    F: Fn(&mut TcpStream) -> bool + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    let answer = Arc::new(answer);
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            counter.fetch_add(1, Ordering::Relaxed);
            let answer = Arc::clone(&answer);
            thread::spawn(move || serve(stream, &*answer));
        }
    });
    Upstream { addr, accepted }
}

fn serve(mut stream: TcpStream, answer: &dyn Fn(&mut TcpStream) -> bool) {
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(end) = find(&received, b"\r\n\r\n") {
            received.drain(..end + 4);
            if !answer(&mut stream) {
                return;
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(len) => received.extend_from_slice(&chunk[..len]),
        }
    }
}

/// A loopback address that refuses connections for as long as the socket
/// returned with it lives: bound, never listening. No other socket can
/// take the port meanwhile, as one could a port merely found free.
pub fn refusing() -> (socket2::Socket, SocketAddr) {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let loopback: SocketAddr = "127.0.0.1:0".parse().unwrap();
    socket.bind(&loopback.into()).unwrap();
    let addr = socket.local_addr().unwrap().as_socket().unwrap();
    (socket, addr)
}

/// A server whose /io asks `addr`; the upstream timeout is long, so that
/// only the test of timeouts meets one, however loaded the machine is.
pub fn with_upstream(dispatch: Dispatch, addr: SocketAddr) -> Config {
    let host = addr.to_string();
    let upstream = UpstreamConfig {
        timeout: Duration::from_secs(60),
        ..UpstreamConfig::new(addr, &host, "/status")
    };
    Config {
        upstream: Some(upstream),
        ..config(dispatch)
    }
}
