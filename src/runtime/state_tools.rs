//! `--state-export FILE` and `--state-import FILE`: a store's every key as
//! lines of JSON (`state::export_line`), and back, so that state moves
//! between the embedded file and JetStream, or to another machine. Run
//! while no server uses the store (the embedded file is locked; a JetStream
//! bucket is not, but a server writing meanwhile makes an export a moment
//! of a moving state, and an import a race it loses or wins).
//!
//! For JetStream the tool joins the cluster as a server of its own would,
//! with no routes and one poller, and reads or writes the bucket over that
//! poller's link.

use std::io::{self, BufRead, Write};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster::kv::JetStreamKv;
use crate::config::{Config, StateConfig};
use crate::routes::Routes;
use crate::runtime::server::Server;
use crate::runtime::state_file::StateFile;
use crate::state::metrics::StateMetrics;
use crate::state::{export_line, import_line, StateStore, StoreError};

/// Writes every key of the store `config` names to `to`, a line each, in
/// key order; the number of keys.
pub fn export_state(config: &Config, to: &mut dyn Write) -> io::Result<usize> {
    if let Some(StateConfig::JetStream { .. }) = &config.state {
        return export_jetstream(config, to);
    }
    let file = open(config)?;
    let mut count = 0;
    let mut written = Ok(());
    file.each(|key, stored| {
        if written.is_ok() {
            written = writeln!(to, "{}", export_line(key, stored));
            count += 1;
        }
    })
    .map_err(store_error)?;
    written?;
    to.flush()?;
    Ok(count)
}

/// Writes every line of `from` (as `export_state` wrote them) to the store
/// `config` names, over what the keys held; the number of keys. A line
/// that does not read stops the import, naming its number; the lines
/// before it are written.
pub fn import_state(config: &Config, from: &mut dyn BufRead) -> io::Result<usize> {
    if let Some(StateConfig::JetStream { .. }) = &config.state {
        let (_server, kv) = join(config)?;
        return import_into(&*kv, from);
    }
    let file = open(config)?;
    let count = import_into(&*file, from)?;
    file.stop();
    Ok(count)
}

/// Writes every line of `from` into `store`, over what the keys held.
fn import_into(store: &dyn StateStore, from: &mut dyn BufRead) -> io::Result<usize> {
    let mut count = 0;
    for (number, line) in from.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let (key, bytes) = import_line(&line).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("line {}: {e}", number + 1),
            )
        })?;
        let current = read_revision(store, &key)?;
        let (done, outcome) = mpsc::channel();
        store.write(
            &key,
            bytes,
            current,
            Box::new(move |written| {
                let _ = done.send(written);
            }),
        );
        outcome
            .recv()
            .map_err(|_| io::Error::other("the state writer stopped"))?
            .map_err(store_error)?;
        count += 1;
    }
    Ok(count)
}

/// The embedded file `config` names.
fn open(config: &Config) -> io::Result<Arc<StateFile>> {
    match &config.state {
        Some(StateConfig::Dir(dir)) => Ok(Arc::new(StateFile::open(
            dir,
            Arc::new(StateMetrics::default()),
        )?)),
        Some(StateConfig::JetStream { .. }) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not an embedded store",
        )),
        None => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--state-export and --state-import need --state",
        )),
    }
}

/// Joins the cluster `config` names as a server with no routes and one
/// poller would, and opens its JetStream bucket.
fn join(config: &Config) -> io::Result<(Server, Arc<JetStreamKv>)> {
    let Some(StateConfig::JetStream { timeout, replicas }) = &config.state else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not JetStream"));
    };
    let mut cluster = config.cluster.clone().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "--state jetstream needs --nats",
        )
    })?;
    // Another node's name: the servers of the cluster keep theirs.
    cluster.node = format!("{}-state-tool-{}", cluster.node, std::process::id());
    let joining = Config {
        bind: "127.0.0.1:0".parse().map_err(io::Error::other)?,
        pollers: 1,
        cluster: Some(cluster),
        ..Config::default()
    };
    let server = Server::start(&joining, Routes::new())?;
    let deadline = Instant::now() + *timeout + Duration::from_secs(5);
    while !server.cluster_ready() {
        if Instant::now() > deadline {
            return Err(io::Error::other("NATS: not connected in time"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let cluster = server
        .cluster()
        .cloned()
        .ok_or_else(|| io::Error::other("no cluster"))?;
    let kv = JetStreamKv::new(
        cluster,
        *timeout,
        *replicas,
        Arc::new(StateMetrics::default()),
    );
    Ok((server, kv))
}

/// `export_state` for a JetStream bucket.
fn export_jetstream(config: &Config, to: &mut dyn Write) -> io::Result<usize> {
    let (_server, kv) = join(config)?;
    let (done, outcome) = mpsc::channel();
    kv.bucket().keys(Box::new(move |keys| {
        let _ = done.send(keys);
    }));
    let keys = outcome
        .recv()
        .map_err(|_| io::Error::other("the store did not answer"))?
        .map_err(store_error)?;
    let mut count = 0;
    for key in keys {
        let (done, outcome) = mpsc::channel();
        kv.load(
            &key,
            Box::new(move |read| {
                let _ = done.send(read);
            }),
        );
        let read = outcome
            .recv()
            .map_err(|_| io::Error::other("the store did not answer"))?
            .map_err(store_error)?;
        if let Some(stored) = read {
            writeln!(to, "{}", export_line(&key, &stored))?;
            count += 1;
        }
    }
    to.flush()?;
    Ok(count)
}

/// The revision `key` is at (0: never written).
fn read_revision(store: &dyn StateStore, key: &str) -> io::Result<u64> {
    let (done, outcome) = mpsc::channel();
    store.load(
        key,
        Box::new(move |read| {
            let _ = done.send(read);
        }),
    );
    let read = outcome
        .recv()
        .map_err(|_| io::Error::other("the store did not answer"))?;
    Ok(read
        .map_err(store_error)?
        .map_or(0, |stored| stored.revision))
}

fn store_error(e: StoreError) -> io::Error {
    io::Error::other(e.to_string())
}
