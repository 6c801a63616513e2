//! `--state-export FILE` and `--state-import FILE`: a store's every key as
//! lines of JSON (`state::export_line`), and back, so that state moves
//! between the embedded file and JetStream, or to another machine. Run
//! while no server uses the store.

use std::io::{self, BufRead, Write};
use std::sync::mpsc;
use std::sync::Arc;

use crate::config::{Config, StateConfig};
use crate::runtime::state_file::StateFile;
use crate::state::metrics::StateMetrics;
use crate::state::{export_line, import_line, StateStore, StoreError};

/// Writes every key of the store `config` names to `to`, a line each, in
/// key order; the number of keys.
pub fn export_state(config: &Config, to: &mut dyn Write) -> io::Result<usize> {
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
    let file = open(config)?;
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
        let current = read_revision(&*file, &key)?;
        let (done, outcome) = mpsc::channel();
        file.write(
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
    file.stop();
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
            io::ErrorKind::Unsupported,
            "--state jetstream: export and import the embedded store for now \
             (docs/operations.md, Durable state, says how to move state)",
        )),
        None => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--state-export and --state-import need --state",
        )),
    }
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
