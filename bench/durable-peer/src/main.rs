//! durable-peer redb --bind ADDR --file PATH [--workers N]
//! durable-peer kv --bind ADDR --nats URL [--bucket B] [--replicas R] [--workers N]
//!
//! The peers `bench/durable.py` measures the server's durable counter
//! against, written as a user of actix-web would write them:
//!
//! - `redb`: `POST /count` runs one redb write transaction (read, add one,
//!   write, commit: redb's default durability syncs the file) on actix's
//!   blocking pool (`web::block`), and answers the new count.
//! - `kv`: `POST /count` reads the key from a JetStream KV bucket and
//!   updates it at the revision it read, again on a conflict (another
//!   writer came first), and answers the new count; 503 when JetStream
//!   fails.
//!
//! The answers are those of the server's `/count`: `200`, `text/plain`,
//! the count and a newline.

use std::process::ExitCode;
use std::sync::Arc;

use actix_web::{web, App, HttpResponse, HttpServer};
use async_nats::jetstream::kv;
use redb::{Database, ReadableTable, TableDefinition};

const USAGE: &str = "usage: durable-peer redb --bind ADDR --file PATH [--workers N]\n       \
                     durable-peer kv --bind ADDR --nats URL [--bucket B] [--replicas R] [--workers N]";

/// The counters' table in the redb file.
const COUNTS: TableDefinition<&str, u64> = TableDefinition::new("counts");

#[derive(Default)]
struct Options {
    bind: Option<String>,
    file: Option<String>,
    nats: Option<String>,
    bucket: Option<String>,
    replicas: Option<usize>,
    workers: Option<usize>,
}

fn positive(flag: &str, value: &str) -> Result<usize, String> {
    match value.parse() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{flag}: not a positive number: {value}")),
    }
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut options = Options::default();
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--bind" => options.bind = Some(value),
            "--file" => options.file = Some(value),
            "--nats" => options.nats = Some(value),
            "--bucket" => options.bucket = Some(value),
            "--replicas" => options.replicas = Some(positive(&flag, &value)?),
            "--workers" => options.workers = Some(positive(&flag, &value)?),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(options)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let store = args.next().unwrap_or_default();
    let options = match parse(args) {
        Ok(options) => options,
        Err(e) => return fail(&e),
    };
    let Some(bind) = options.bind.clone() else {
        return fail("--bind is required");
    };
    let workers = options
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let done = match (store.as_str(), &options.file, &options.nats) {
        ("redb", Some(file), None) => with_redb(bind, file.clone(), workers),
        ("kv", None, Some(nats)) => with_kv(
            bind,
            nats.clone(),
            options.bucket.clone().unwrap_or_else(|| "peer".into()),
            options.replicas.unwrap_or(1),
            workers,
        ),
        _ => return fail("a store (redb with --file, or kv with --nats) and its flags"),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("durable-peer: {e}");
            ExitCode::FAILURE
        }
    }
}

fn fail(why: &str) -> ExitCode {
    eprintln!("durable-peer: {why}\n{USAGE}");
    ExitCode::from(2)
}

fn counted(count: u64) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain")
        .body(format!("{count}\n"))
}

fn unavailable(why: impl std::fmt::Display) -> HttpResponse {
    HttpResponse::ServiceUnavailable()
        .content_type("text/plain; charset=utf-8")
        .body(format!("503 Service Unavailable: {why}\n"))
}

/// One write transaction: the count read, one added, written, committed.
fn increment(db: &Database) -> Result<u64, redb::Error> {
    let txn = db.begin_write()?;
    let count = {
        let mut table = txn.open_table(COUNTS)?;
        let count = table.get("counter")?.map_or(0, |v| v.value()) + 1;
        table.insert("counter", count)?;
        count
    };
    txn.commit()?;
    Ok(count)
}

async fn count_redb(db: web::Data<Arc<Database>>) -> HttpResponse {
    let db = Arc::clone(db.get_ref());
    match web::block(move || increment(&db)).await {
        Ok(Ok(count)) => counted(count),
        Ok(Err(e)) => unavailable(e),
        Err(e) => unavailable(e),
    }
}

#[actix_web::main]
async fn with_redb(bind: String, file: String, workers: usize) -> std::io::Result<()> {
    let db = Database::create(&file).map_err(|e| std::io::Error::other(format!("{file}: {e}")))?;
    let db = web::Data::new(Arc::new(db));
    println!("counting in {file} on {bind} ({workers} workers)");
    HttpServer::new(move || {
        App::new()
            .app_data(db.clone())
            .route("/count", web::post().to(count_redb))
    })
    .workers(workers)
    .bind(&bind)?
    .run()
    .await
}

/// Reads the count and updates it at the revision read, again while
/// another writer comes first.
async fn increment_kv(store: &kv::Store) -> Result<u64, async_nats::Error> {
    loop {
        let (count, revision) = match store.entry("counter").await? {
            Some(entry) => {
                let text = std::str::from_utf8(&entry.value)?;
                (text.trim().parse::<u64>()?, entry.revision)
            }
            None => (0, 0),
        };
        let next = count + 1;
        let value = bytes::Bytes::from(next.to_string());
        let written = match revision {
            0 => store.create("counter", value).await.map_err(|e| e.kind() == kv::CreateErrorKind::AlreadyExists),
            _ => store.update("counter", value, revision).await.map_err(|e| e.kind() == kv::UpdateErrorKind::WrongLastRevision),
        };
        match written {
            Ok(_) => return Ok(next),
            // Another writer came first: read again.
            Err(true) => continue,
            Err(false) => return Err("the write failed".into()),
        }
    }
}

async fn count_kv(store: web::Data<kv::Store>) -> HttpResponse {
    match increment_kv(store.get_ref()).await {
        Ok(count) => counted(count),
        Err(e) => unavailable(e),
    }
}

#[actix_web::main]
async fn with_kv(
    bind: String,
    nats: String,
    bucket: String,
    replicas: usize,
    workers: usize,
) -> std::io::Result<()> {
    let io = |e: &dyn std::fmt::Display| std::io::Error::other(format!("{nats}: {e}"));
    let client = async_nats::connect(&nats).await.map_err(|e| io(&e))?;
    let jetstream = async_nats::jetstream::new(client);
    let store = jetstream
        .create_key_value(kv::Config {
            bucket: bucket.clone(),
            history: 1,
            num_replicas: replicas,
            ..Default::default()
        })
        .await
        .map_err(|e| io(&e))?;
    let store = web::Data::new(store);
    println!("counting in bucket {bucket} at {nats} on {bind} ({workers} workers)");
    HttpServer::new(move || {
        App::new()
            .app_data(store.clone())
            .route("/count", web::post().to(count_kv))
    })
    .workers(workers)
    .bind(&bind)?
    .run()
    .await
}
