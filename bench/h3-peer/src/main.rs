//! h3-peer: the quinn peer of `bench/run --h3`, an HTTP/3 server on the h3
//! crate over quinn (h3-quinn), on one tokio thread.
//!
//! `h3-peer ADDR CERT KEY` serves `GET /plaintext` with `Hello, World!`
//! (text/plain) and anything else with 404, over QUIC on UDP ADDR, with the
//! certificate chain and key in the PEM files. Each connection and each
//! request is a task of the one thread's runtime; quinn's endpoint is
//! driven there too. Built without quinn's `log` feature, as the server under
//! test builds quinn-proto (it makes every tracing span a log check).

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

const HELLO: &[u8] = b"Hello, World!";

type Resolver = h3::server::RequestResolver<h3_quinn::Connection, Bytes>;

// ring, as the server under test uses (deprecated from rustls 0.23.48 on for
// its lack of post-quantum key exchange; the load client offers X25519 only).
#[allow(deprecated)]
fn server_config(cert: &str, key: &str) -> Result<quinn::ServerConfig, String> {
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{cert}: {e}"))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{key}: {e}"))?;
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .map_err(|e| e.to_string())?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .map_err(|e| e.to_string())?;
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let crypto =
        quinn::crypto::rustls::QuicServerConfig::try_from(tls).map_err(|e| e.to_string())?;
    Ok(quinn::ServerConfig::with_crypto(Arc::new(crypto)))
}

async fn serve(addr: SocketAddr, config: quinn::ServerConfig) -> Result<(), String> {
    let endpoint = quinn::Endpoint::server(config, addr)
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    println!("listening on https://{addr} (HTTP/3, h3 + h3-quinn, one thread)");
    while let Some(incoming) = endpoint.accept().await {
        tokio::spawn(async move {
            if let Ok(conn) = incoming.await {
                connection(conn).await;
            }
        });
    }
    Ok(())
}

/// Takes the connection's requests until it ends or the client says GOAWAY.
async fn connection(conn: quinn::Connection) {
    let mut h3 =
        match h3::server::Connection::<_, Bytes>::new(h3_quinn::Connection::new(conn)).await {
            Ok(h3) => h3,
            Err(_) => return,
        };
    while let Ok(Some(resolver)) = h3.accept().await {
        tokio::spawn(request(resolver));
    }
}

async fn request(resolver: Resolver) {
    let Ok((request, mut stream)) = resolver.resolve_request().await else {
        return;
    };
    let (status, body) =
        if request.method() == http::Method::GET && request.uri().path() == "/plaintext" {
            (http::StatusCode::OK, Bytes::from_static(HELLO))
        } else {
            (
                http::StatusCode::NOT_FOUND,
                Bytes::from_static(b"not found"),
            )
        };
    let response = http::Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "text/plain")
        .header(http::header::CONTENT_LENGTH, body.len())
        .body(())
        .unwrap();
    if stream.send_response(response).await.is_ok() && stream.send_data(body).await.is_ok() {
        let _ = stream.finish().await;
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [addr, cert, key] = args.as_slice() else {
        eprintln!("usage: h3-peer ADDR CERT KEY   (e.g. 127.0.0.1:19620 cert.pem key.pem)");
        std::process::exit(2);
    };
    let addr: SocketAddr = match addr.parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("h3-peer: {addr}: {e}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Err(e) =
        server_config(cert, key).and_then(|config| runtime.block_on(serve(addr, config)))
    {
        eprintln!("h3-peer: {e}");
        std::process::exit(1);
    }
}
