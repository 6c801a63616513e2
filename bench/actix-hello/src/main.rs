//! actix-hello ADDR WORKERS
//!
//! The reference peer for `bench/run`: the same two routes as
//! uppercut-mio-server, served by actix-web 4 with WORKERS threads.

use actix_web::{http::header::ContentType, web, App, HttpResponse, HttpServer};

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

fn usage() -> ! {
    eprintln!("usage: actix-hello ADDR WORKERS   (e.g. actix-hello 127.0.0.1:9200 2)");
    std::process::exit(2);
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| usage());
    let workers: usize = match args.next().map(|w| w.parse()) {
        Some(Ok(n)) if n > 0 => n,
        _ => usage(),
    };

    let server = HttpServer::new(|| {
        App::new()
            .route("/", web::get().to(hello))
            .route("/v1/user", web::get().to(v1_user))
    })
    .workers(workers)
    .bind(&addr)?;

    println!("listening on http://{addr} ({workers} workers)");
    server.run().await
}
