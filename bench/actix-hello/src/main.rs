//! actix-hello ADDR WORKERS [CERT KEY] [--h2c] [--file PATH]
//!
//! The reference peer for `bench/run`: the same routes as
//! uppercut-mio-server's `/`, `/v1/user` and `POST /hello/json` (a small
//! JSON body in, JSON out, through actix-web's `Json<T>`), served by
//! actix-web 4 with WORKERS threads; with a
//! PEM certificate chain and key, over TLS with rustls (the ring provider,
//! as the server under test uses, so the comparison is of the servers and
//! not of their cryptography), offering h2 and http/1.1 in ALPN.
//!
//! For `bench/run --h2`: `--h2c` makes a plain listener take HTTP/2 with prior
//! knowledge beside HTTP/1.1 (`bind_auto_h2c`); `--file PATH` serves the bytes
//! of PATH, read once at start, at `/` + its file name (as our `--static-dir`
//! serves a directory from memory).

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
        "usage: actix-hello ADDR WORKERS [CERT KEY] [--h2c] [--file PATH]   (e.g. actix-hello 127.0.0.1:9200 2)"
    );
    std::process::exit(2);
}

/// A rustls configuration for the certificate chain and key in `cert` and
/// `key` (PEM); actix puts h2 and http/1.1 in front of its ALPN list.
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
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("the certificate and key")
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    // Positional arguments first, then the options, in any order.
    let (mut positional, mut h2c, mut file) = (Vec::new(), false, None);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--h2c" => h2c = true,
            "--file" => file = Some(args.next().unwrap_or_else(|| usage())),
            _ if arg.starts_with("--") => usage(),
            _ => positional.push(arg),
        }
    }
    let mut positional = positional.into_iter();
    let addr = positional.next().unwrap_or_else(|| usage());
    let workers: usize = match positional.next().map(|w| w.parse()) {
        Some(Ok(n)) if n > 0 => n,
        _ => usage(),
    };
    let tls = match (positional.next(), positional.next(), positional.next()) {
        (Some(cert), Some(key), None) => Some(tls_config(&cert, &key)),
        (None, None, None) => None,
        _ => usage(),
    };
    if h2c && tls.is_some() {
        usage();
    }
    // The file's bytes and the path they are served at.
    let file: Option<(String, web::Bytes)> = file.map(|path| {
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let name = std::path::Path::new(&path)
            .file_name()
            .expect("a file name")
            .to_string_lossy()
            .into_owned();
        (format!("/{name}"), web::Bytes::from(bytes))
    });

    let server = HttpServer::new(move || {
        let app = App::new()
            .route("/", web::get().to(hello))
            .route("/v1/user", web::get().to(v1_user))
            .route("/hello/json", web::post().to(hello_json));
        match file.clone() {
            Some((path, bytes)) => app.route(
                &path,
                web::get().to(move || {
                    let bytes = bytes.clone();
                    async move {
                        HttpResponse::Ok()
                            .content_type(ContentType::octet_stream())
                            .body(bytes)
                    }
                }),
            ),
            None => app,
        }
    })
    .workers(workers);
    let (server, scheme) = match tls {
        Some(config) => (server.bind_rustls_0_23(&addr, config)?, "https"),
        None if h2c => (server.bind_auto_h2c(&addr)?, "http"),
        None => (server.bind(&addr)?, "http"),
    };

    let h2c = if h2c { ", h2c too" } else { "" };
    println!("listening on {scheme}://{addr} ({workers} workers{h2c})");
    server.run().await
}
