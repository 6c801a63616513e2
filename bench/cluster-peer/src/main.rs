//! cluster-peer responder --nats URL --subject S [--queue Q]
//! cluster-peer requester --nats URL --bind ADDR --subject S [--workers N]
//!
//! The peer that `bench/run --cluster` measures the server's NATS cluster
//! against, built the way the field would build it: actix-web 4 in front,
//! async-nats for the request-reply.
//!
//! - `responder`: one NATS connection, a queue subscription to S, and every
//!   request answered with `Hello, World!` (node B's `hello` actor).
//! - `requester`: actix-web with N workers (default: the CPU count); each
//!   worker keeps a NATS connection of its own (as each of our pollers
//!   does), and `GET /remote` sends a request to S and answers its reply as
//!   `text/plain`, or 503 when the request fails (no responder, timeout).

use std::process::ExitCode;

use actix_web::{web, App, HttpResponse, HttpServer};
use futures_util::StreamExt;

const USAGE: &str = "usage: cluster-peer responder --nats URL --subject S [--queue Q]\n       \
                     cluster-peer requester --nats URL --bind ADDR --subject S [--workers N]";

/// The answer, as our `hello` actor gives it.
const HELLO: &[u8] = b"Hello, World!";

#[derive(Default)]
struct Options {
    nats: Option<String>,
    subject: Option<String>,
    queue: Option<String>,
    bind: Option<String>,
    workers: Option<usize>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut options = Options::default();
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--nats" => options.nats = Some(value),
            "--subject" => options.subject = Some(value),
            "--queue" => options.queue = Some(value),
            "--bind" => options.bind = Some(value),
            "--workers" => match value.parse() {
                Ok(n) if n > 0 => options.workers = Some(n),
                _ => return Err(format!("--workers: not a positive number: {value}")),
            },
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(options)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let role = args.next().unwrap_or_default();
    let options = match parse(args) {
        Ok(options) => options,
        Err(e) => return fail(&e),
    };
    let (Some(nats), Some(subject)) = (options.nats.clone(), options.subject.clone()) else {
        return fail("--nats and --subject are required");
    };
    let done = match (role.as_str(), options.bind) {
        ("responder", None) => responder(nats, subject, options.queue),
        ("requester", Some(bind)) => {
            let workers = options
                .workers
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            requester(nats, bind, subject, workers).map_err(Into::into)
        }
        _ => return fail("a role (responder or requester) and its flags"),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cluster-peer: {e}");
            ExitCode::FAILURE
        }
    }
}

fn fail(why: &str) -> ExitCode {
    eprintln!("cluster-peer: {why}\n{USAGE}");
    ExitCode::from(2)
}

/// Answers every request on `subject` with `Hello, World!`.
#[tokio::main]
async fn responder(
    nats: String,
    subject: String,
    queue: Option<String>,
) -> Result<(), async_nats::Error> {
    let client = async_nats::connect(&nats).await?;
    let mut requests = match queue {
        Some(queue) => client.queue_subscribe(subject.clone(), queue).await?,
        None => client.subscribe(subject.clone()).await?,
    };
    client.flush().await?;
    println!("responding on {subject} at {nats}");
    let hello = bytes::Bytes::from_static(HELLO);
    while let Some(request) = requests.next().await {
        if let Some(reply) = request.reply {
            client.publish(reply, hello.clone()).await?;
        }
    }
    Ok(())
}

/// `GET /remote`: a NATS request to the subject, its answer as the body.
async fn remote(client: web::Data<async_nats::Client>, subject: web::Data<String>) -> HttpResponse {
    match client
        .request(subject.get_ref().clone(), Default::default())
        .await
    {
        // The same status, content type and body as our actor route.
        Ok(answer) => HttpResponse::Ok()
            .content_type("text/plain")
            .body(answer.payload),
        Err(e) => HttpResponse::ServiceUnavailable()
            .content_type("text/plain; charset=utf-8")
            .body(format!("503 Service Unavailable: {e}\n")),
    }
}

#[actix_web::main]
async fn requester(
    nats: String,
    bind: String,
    subject: String,
    workers: usize,
) -> std::io::Result<()> {
    // Fail at start, not in each worker, when NATS is not there.
    let check = async_nats::connect(&nats)
        .await
        .map_err(|e| std::io::Error::other(format!("{nats}: {e}")))?;
    let _ = check.drain().await;
    let subject = web::Data::new(subject);
    let server = HttpServer::new(move || {
        let nats = nats.clone();
        App::new()
            .app_data(subject.clone())
            // Made on each worker's own runtime, so that worker's connection
            // is driven on its thread.
            .data_factory(move || async_nats::connect(nats.clone()))
            .route("/remote", web::get().to(remote))
    })
    .workers(workers)
    .bind(&bind)?;
    println!("listening on http://{bind} ({workers} workers)");
    server.run().await
}
