//! N requests over one QUIC connection through quinn-proto, client and
//! server in one process, datagrams handed over in memory. The server's
//! work runs inside `server_side` (callgrind --toggle-collect=*server_side*).
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn_proto::{
    ClientConfig, Connection, ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig,
    ServerConfig, StreamId,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

#[derive(Debug)]
struct NoVerify;
impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(&self, _: &CertificateDer<'_>, _: &[CertificateDer<'_>], _: &ServerName<'_>, _: &[u8], _: UnixTime) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(&self, _: &[u8], _: &CertificateDer<'_>, _: &rustls::DigitallySignedStruct) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(&self, _: &[u8], _: &CertificateDer<'_>, _: &rustls::DigitallySignedStruct) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::ring::default_provider().signature_verification_algorithms.supported_schemes()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    let mut p = rustls::crypto::ring::default_provider();
    p.cipher_suites = vec![rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256];
    Arc::new(p)
}

struct Server {
    ep: Endpoint,
    conn: Option<(ConnectionHandle, Connection)>,
    config: Arc<ServerConfig>,
    body: Vec<u8>,
    pending: Vec<(StreamId, usize)>,
    reading: Vec<StreamId>,
}

#[inline(never)]
fn server_side(s: &mut Server, now: Instant, input: &mut VecDeque<Vec<u8>>, out: &mut VecDeque<Vec<u8>>, client: SocketAddr) {
    let mut buf = Vec::new();
    while let Some(d) = input.pop_front() {
        match s.ep.handle(now, client, None, None, BytesMut::from(&d[..]), &mut buf) {
            Some(DatagramEvent::NewConnection(inc)) => {
                let c = s.ep.accept(inc, now, &mut buf, Some(s.config.clone())).unwrap();
                s.conn = Some(c);
            }
            Some(DatagramEvent::ConnectionEvent(_, ev)) => s.conn.as_mut().unwrap().1.handle_event(ev),
            Some(DatagramEvent::Response(t)) => out.push_back(buf[..t.size].to_vec()),
            None => {}
        }
    }
    let Some((ch, conn)) = s.conn.as_mut() else { return };
    while let Some(ev) = conn.poll_endpoint_events() {
        if let Some(ev) = s.ep.handle_event(*ch, ev) { conn.handle_event(ev); }
    }
    while conn.poll().is_some() {}
    while let Some(id) = conn.streams().accept(Dir::Bi) {
        s.reading.push(id);
    }
    s.reading.retain(|id| {
        let mut rs = conn.recv_stream(*id);
        let Ok(mut chunks) = rs.read(true) else { return true };
        let mut fin = false;
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(_)) => {}
                Ok(None) => { fin = true; break }
                Err(_) => break,
            }
        }
        let _ = chunks.finalize();
        if fin { s.pending.push((*id, 0)); false } else { true }
    });
    // Write responses.
    s.pending.retain_mut(|(id, written)| {
        let mut st = conn.send_stream(*id);
        while *written < s.body.len() {
            match st.write(&s.body[*written..]) { Ok(n) => *written += n, Err(_) => break }
        }
        if *written == s.body.len() { let _ = st.finish(); false } else { true }
    });
    buf.clear();
    while let Some(t) = conn.poll_transmit(now, 1, &mut buf) {
        out.push_back(buf[..t.size].to_vec());
        buf.clear();
    }
    while let Some(ev) = conn.poll_endpoint_events() {
        if let Some(ev) = s.ep.handle_event(*ch, ev) { conn.handle_event(ev); }
    }
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&format!("{}/cert.pem", dir())).unwrap().map(|c| c.unwrap()).collect();
    let key = PrivateKeyDer::from_pem_file(&format!("{}/key.pem", dir())).unwrap();
    let mut tls = rustls::ServerConfig::builder_with_provider(provider()).with_protocol_versions(&[&rustls::version::TLS13]).unwrap()
        .with_no_client_auth().with_single_cert(certs, key).unwrap();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.max_early_data_size = u32::MAX;
    let server_config = Arc::new(ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(tls).unwrap())));
    let mut ctls = rustls::ClientConfig::builder_with_provider(provider()).with_protocol_versions(&[&rustls::version::TLS13]).unwrap()
        .dangerous().with_custom_certificate_verifier(Arc::new(NoVerify)).with_no_client_auth();
    ctls.alpn_protocols = vec![b"h3".to_vec()];
    let client_config = ClientConfig::new(Arc::new(QuicClientConfig::try_from(ctls).unwrap()));
    let server_addr: SocketAddr = "127.0.0.1:4433".parse().unwrap();
    let client_addr: SocketAddr = "127.0.0.1:5555".parse().unwrap();
    let mut server = Server {
        ep: Endpoint::new(Arc::new(EndpointConfig::default()), Some(server_config.clone()), true, Some([1; 32])),
        conn: None, config: server_config, body: vec![b'x'; 1000], pending: Vec::new(), reading: Vec::new(),
    };
    let mut cep = Endpoint::new(Arc::new(EndpointConfig::default()), None, true, Some([2; 32]));
    let now0 = Instant::now();
    let (cch, mut cconn) = cep.connect(now0, client_config, server_addr, "localhost").unwrap();
    let _ = cch;
    let mut to_server: VecDeque<Vec<u8>> = VecDeque::new();
    let mut to_client: VecDeque<Vec<u8>> = VecDeque::new();
    let request = vec![b'r'; 40];
    let mut done = 0usize;
    let mut open: Vec<(StreamId, usize)> = Vec::new();
    let mut started = 0usize;
    let concurrent = 10;
    let mut buf = Vec::new();
    let mut rounds = 0;
    let mut handshaken = false;
    while done < n {
        rounds += 1;
        assert!(rounds < 1_000_000, "stuck at {done}");
        let now = now0 + std::time::Duration::from_micros(rounds as u64 * 20);
        // client
        while let Some(d) = to_client.pop_front() {
            if let Some(DatagramEvent::ConnectionEvent(_, ev)) = cep.handle(now, server_addr, None, None, BytesMut::from(&d[..]), &mut buf) { cconn.handle_event(ev); }
        }
        while let Some(ev) = cconn.poll() { if let quinn_proto::Event::Connected = ev { handshaken = true; } }
        if handshaken {
            while open.len() < concurrent && started < n {
                let Some(id) = cconn.streams().open(Dir::Bi) else { break };
                let mut st = cconn.send_stream(id);
                st.write(&request).unwrap();
                st.finish().unwrap();
                open.push((id, 0));
                started += 1;
            }
            open.retain_mut(|(id, got)| {
                let mut rs = cconn.recv_stream(*id);
                let Ok(mut chunks) = rs.read(true) else { return true };
                let mut fin = false;
                loop {
                    match chunks.next(usize::MAX) {
                        Ok(Some(c)) => *got += c.bytes.len(),
                        Ok(None) => { fin = true; break }
                        Err(_) => break,
                    }
                }
                let _ = chunks.finalize();
                if fin { assert_eq!(*got, 1000); done += 1; false } else { true }
            });
        }
        buf.clear();
        while let Some(t) = cconn.poll_transmit(now, 1, &mut buf) { to_server.push_back(buf[..t.size].to_vec()); buf.clear(); }
        while let Some(ev) = cconn.poll_endpoint_events() { if let Some(ev) = cep.handle_event(cch, ev) { cconn.handle_event(ev); } }
        // server
        server_side_all(&mut server, now, &mut to_server, &mut to_client, client_addr);
    }
    eprintln!("quinn-proto: {n} requests, {rounds} rounds, {:?}", now0.elapsed());
}

#[inline(never)]
fn server_side_all(s: &mut Server, now: Instant, input: &mut VecDeque<Vec<u8>>, out: &mut VecDeque<Vec<u8>>, client: SocketAddr) {
    server_side(s, now, input, out, client);
}

/// Where cert.pem and key.pem are (run.sh makes them).
fn dir() -> String {
    std::env::var("CERT_DIR").unwrap_or_else(|_| ".".into())
}
