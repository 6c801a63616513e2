//! tls-providers PROVIDER STEP N
//!
//! What a server's side of TLS costs with one of rustls' crypto providers,
//! in memory (no sockets): run it under `valgrind --tool=callgrind` and
//! compare the instruction counts, which are the same from run to run
//! whatever else the machine does (see `bench/README.md`).
//!
//! PROVIDER is `ring` or `aws-lc-rs`; STEP is `setup` (the certificate and
//! configurations only: subtract it from the others), `full` (N full TLS 1.3
//! handshakes with an ECDSA P-256 certificate), `resumed` (N resumed ones,
//! after one full), or `records` (one handshake, then N requests of 40 bytes
//! and responses of 140, each a record each way).

use std::io::{Read, Write};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};

fn provider(name: &str) -> Arc<CryptoProvider> {
    Arc::new(match name {
        "ring" => rustls::crypto::ring::default_provider(),
        "aws-lc-rs" => rustls::crypto::aws_lc_rs::default_provider(),
        _ => usage(),
    })
}

fn usage() -> ! {
    eprintln!("usage: tls-providers ring|aws-lc-rs setup|full|resumed|records N");
    std::process::exit(2);
}

/// Moves what each side has to send to the other until neither has more.
fn pump(client: &mut ClientConnection, server: &mut ServerConnection) {
    let mut buf = Vec::new();
    loop {
        let mut moved = false;
        while client.wants_write() {
            buf.clear();
            client.write_tls(&mut buf).unwrap();
            server.read_tls(&mut &buf[..]).unwrap();
            server.process_new_packets().unwrap();
            moved = true;
        }
        while server.wants_write() {
            buf.clear();
            server.write_tls(&mut buf).unwrap();
            client.read_tls(&mut &buf[..]).unwrap();
            client.process_new_packets().unwrap();
            moved = true;
        }
        if !moved {
            return;
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [name, step, n] = &args[..] else { usage() };
    let n: usize = n.parse().unwrap_or_else(|_| usage());
    let provider = provider(name);

    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".into()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let cert_der: CertificateDer<'static> = cert.der().clone();
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let mut server_config = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert_der.clone()], key_der)
        .unwrap();
    server_config.ticketer = match name.as_str() {
        "ring" => rustls::crypto::ring::Ticketer::new().unwrap(),
        _ => rustls::crypto::aws_lc_rs::Ticketer::new().unwrap(),
    };
    let server_config = Arc::new(server_config);
    let mut roots = RootCertStore::empty();
    roots.add(cert_der).unwrap();
    let client_config = Arc::new(
        ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );
    let name = ServerName::try_from("localhost").unwrap();
    let connect = || {
        let mut client = ClientConnection::new(Arc::clone(&client_config), name.clone()).unwrap();
        let mut server = ServerConnection::new(Arc::clone(&server_config)).unwrap();
        pump(&mut client, &mut server);
        (client, server)
    };
    match step.as_str() {
        "setup" => {}
        "full" => {
            // A fresh client configuration each time: nothing to resume.
            for _ in 0..n {
                let mut client = ClientConnection::new(
                    Arc::new(ClientConfig::clone(&client_config)),
                    name.clone(),
                )
                .unwrap();
                let mut server = ServerConnection::new(Arc::clone(&server_config)).unwrap();
                pump(&mut client, &mut server);
                assert!(!server.is_handshaking());
            }
        }
        "resumed" => {
            drop(connect());
            for _ in 0..n {
                let (client, _) = connect();
                assert_eq!(client.handshake_kind(), Some(rustls::HandshakeKind::Resumed));
            }
        }
        "records" => {
            let (mut client, mut server) = connect();
            let (request, response) = ([b'q'; 40], [b'r'; 140]);
            let mut got = [0u8; 256];
            for _ in 0..n {
                client.writer().write_all(&request).unwrap();
                pump(&mut client, &mut server);
                assert_eq!(server.reader().read(&mut got).unwrap(), request.len());
                server.writer().write_all(&response).unwrap();
                pump(&mut client, &mut server);
                assert_eq!(client.reader().read(&mut got).unwrap(), response.len());
            }
        }
        _ => usage(),
    }
}
