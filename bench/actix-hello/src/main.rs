//! actix-hello ADDR WORKERS [CERT KEY]
//!
//! The reference peer for `bench/run`: the same routes as
//! uppercut-mio-server's `/`, `/v1/user` and `POST /hello/json` (a small
//! JSON body in, JSON out, through actix-web's `Json<T>`), served by
//! actix-web 4 with WORKERS threads; with a
//! PEM certificate chain and key, over TLS with rustls (the ring provider,
//! as the server under test uses, so the comparison is of the servers and
//! not of their cryptography).

use std::fs::File;
use std::io::BufReader;
use std::sync::Arc;

use actix_web::{http::header::ContentType, web, App, HttpResponse, HttpServer};
use serde::{Deserialize, Serialize};

/// The fixture that `GET /v1/user` returns, shared with the server under test.
static V1_USER: &[u8] = include_bytes!("../../../fixtures/v1-user.json");

async fn hello() -> HttpResponse {
    HttpResponse::Ok()
        .content_type(ContentType::plaintext())
        .body("hello\n")
}

async fn v1_user() -> HttpResponse {
    HttpResponse::Ok()
        .content_type(ContentType::json())
        .body(V1_USER)
}

/// Whom `POST /hello/json` greets.
#[derive(Deserialize)]
struct Greet {
    name: String,
}

/// What `POST /hello/json` answers.
#[derive(Serialize)]
struct Greeting {
    message: String,
}

async fn hello_json(greet: web::Json<Greet>) -> web::Json<Greeting> {
    web::Json(Greeting {
        message: format!("Hello, {}!", greet.name),
    })
}

fn usage() -> ! {
    eprintln!(
        "usage: actix-hello ADDR WORKERS [CERT KEY]   (e.g. actix-hello 127.0.0.1:9200 2)"
    );
    std::process::exit(2);
}

/// A rustls configuration for the certificate chain and key in `cert` and
/// `key` (PEM), offering http/1.1.
fn tls_config(cert: &str, key: &str) -> rustls::ServerConfig {
    let open = |path: &str| {
        BufReader::new(File::open(path).unwrap_or_else(|e| panic!("{path}: {e}")))
    };
    let certs = rustls_pemfile::certs(&mut open(cert))
        .collect::<Result<Vec<_>, _>>()
        .expect("certificates");
    let key = rustls_pemfile::private_key(&mut open(key))
        .expect("a key file")
        .expect("a private key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("the certificate and key");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| usage());
    let workers: usize = match args.next().map(|w| w.parse()) {
        Some(Ok(n)) if n > 0 => n,
        _ => usage(),
    };
    let tls = match (args.next(), args.next()) {
        (Some(cert), Some(key)) => Some(tls_config(&cert, &key)),
        (None, None) => None,
        _ => usage(),
    };

    let server = HttpServer::new(|| {
        App::new()
            .route("/", web::get().to(hello))
            .route("/v1/user", web::get().to(v1_user))
            .route("/hello/json", web::post().to(hello_json))
    })
    .workers(workers);
    let (server, scheme) = match tls {
        Some(config) => (server.bind_rustls_0_23(&addr, config)?, "https"),
        None => (server.bind(&addr)?, "http"),
    };

    println!("listening on {scheme}://{addr} ({workers} workers)");
    server.run().await
}
