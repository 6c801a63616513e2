//! Actor state that outlives the process, as bytes: the store an actor's
//! state is kept in, behind one trait with two implementations (an
//! embedded file, `--state DIR`, in `runtime::state_file`; a NATS
//! JetStream key-value bucket, `--state jetstream`, in `cluster::kv`),
//! and the bookkeeping (`book`) that holds each answer back until the
//! change it depends on is durable.
//!
//! Sans-I/O: nothing here opens a file or a socket. A store takes a key's
//! bytes with the revision the writer last saw (compare-and-set, as
//! Orleans' ETags and JetStream's `Nats-Expected-Last-Subject-Sequence`
//! are) and says later, from any thread, how it went. Both stores keep the
//! same bytes (the state's JSON), so state moves between them
//! (`export_line`, `import_line`).

pub(crate) mod book;
pub(crate) mod lease;
pub(crate) mod metrics;

use std::fmt;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;
use uppercut::api::{AnyActor, AnySender, Envelope};

/// A key's revision: how many times it was written in the store's own
/// count (a JetStream sequence, or the embedded file's counter). 0: the
/// key was never written.
pub(crate) type Revision = u64;

/// A key's bytes and the revision they are at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stored {
    pub(crate) bytes: Bytes,
    pub(crate) revision: Revision,
}

/// Why a store did not do what it was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoreError {
    /// Someone else wrote the key since the revision the writer had: the
    /// writer's state is stale, and must be read again, never written over.
    Stale {
        /// The revision the write expected.
        expected: Revision,
    },
    /// The disk is full.
    Full(String),
    /// The store did not answer in time: the write may or may not have
    /// happened.
    Timeout,
    /// The store cannot be reached now (NATS down, JetStream not enabled).
    Unavailable(String),
    /// The store's file is corrupt, or held by another process.
    Unusable(String),
    /// Anything else the store said.
    Failed(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Stale { expected } => write!(
                f,
                "someone else wrote the state since revision {expected}: read again, not written"
            ),
            StoreError::Full(why) => write!(f, "the store's disk is full: {why}"),
            StoreError::Timeout => f.write_str("the store did not answer in time"),
            StoreError::Unavailable(why) => write!(f, "the store is unavailable: {why}"),
            StoreError::Unusable(why) => write!(f, "the store cannot be used: {why}"),
            StoreError::Failed(why) => write!(f, "the store failed: {why}"),
        }
    }
}

impl StoreError {
    /// The label `/metrics` counts it under.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            StoreError::Stale { .. } => "stale",
            StoreError::Full(_) => "full",
            StoreError::Timeout => "timeout",
            StoreError::Unavailable(_) => "unavailable",
            StoreError::Unusable(_) => "unusable",
            StoreError::Failed(_) => "failed",
        }
    }
}

/// How a store's work went, told once, from whichever thread did it.
pub(crate) type Done<T> = Box<dyn FnOnce(Result<T, StoreError>) + Send>;

/// Where actors' state is kept. Calls return at once; `done` is called
/// once with the outcome, on the caller's thread or another.
pub(crate) trait StateStore: Send + Sync + fmt::Debug {
    /// `embedded` or `jetstream`, for logs and metrics.
    fn kind(&self) -> &'static str;

    /// Reads `key`: its bytes and revision, or none if it was never
    /// written.
    fn load(&self, key: &str, done: Done<Option<Stored>>);

    /// Writes `bytes` at `key` if the key is still at `expected` (0: never
    /// written); gives the new revision. Writes that arrive together are
    /// committed together, at the store's own pace.
    fn write(&self, key: &str, bytes: Bytes, expected: Revision, done: Done<Revision>);

    /// Whether `load` is done before it returns (a local file): then a
    /// durable actor reads its state as the server starts, and a state
    /// that does not read stops the start.
    fn reads_at_once(&self) -> bool {
        false
    }
}

/// A durable actor's state, as the server handles it without knowing its
/// type: an actor that is also a serde type (its JSON is what the store
/// keeps).
pub(crate) trait StateActor: Send {
    /// The actor's own `receive`.
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender);
    /// The actor's own `on_stop`.
    fn on_stop(&self, sender: &mut dyn AnySender);
    /// The state as JSON.
    fn to_json(&self) -> Result<Vec<u8>, String>;
    /// Becomes the state `json` says, or says why it cannot.
    fn read_json(&mut self, json: &[u8]) -> Result<(), String>;
}

impl<S> StateActor for S
where
    S: AnyActor + Serialize + DeserializeOwned,
{
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        AnyActor::receive(self, envelope, sender);
    }

    fn on_stop(&self, sender: &mut dyn AnySender) {
        AnyActor::on_stop(self, sender);
    }

    fn to_json(&self) -> Result<Vec<u8>, String> {
        serde_json::to_vec(self).map_err(|e| e.to_string())
    }

    fn read_json(&mut self, json: &[u8]) -> Result<(), String> {
        *self = serde_json::from_slice(json).map_err(|e| e.to_string())?;
        Ok(())
    }
}

/// What a durable actor needs from the server that runs it.
pub(crate) struct DurableEnv {
    /// Its key in the store (its address).
    pub(crate) key: String,
    pub(crate) store: std::sync::Arc<dyn StateStore>,
    /// How the store's news reaches it: mailed to its own address, from
    /// any thread. Set once the server's directory exists, before any
    /// message.
    pub(crate) wake: Wake,
    pub(crate) metrics: std::sync::Arc<metrics::StateMetrics>,
    /// For a placed actor's activation: until when (`lease::now_ms`) it may
    /// serve, which its lease moves on; past it, messages are refused.
    pub(crate) serves_until: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
    /// Write the state as soon as it is read, before any answer leaves:
    /// an activation taking a name over fences off any earlier one, whose
    /// writes expect the revision this one moves past.
    pub(crate) fence: bool,
}

/// The server's state store, as its durable actors get it.
#[derive(Debug, Clone)]
pub(crate) struct StateHost {
    pub(crate) store: std::sync::Arc<dyn StateStore>,
    pub(crate) metrics: std::sync::Arc<metrics::StateMetrics>,
}

/// Mails an envelope to one actor, from any thread.
pub(crate) type Wake =
    std::sync::Arc<std::sync::OnceLock<std::sync::Arc<dyn Fn(Envelope) + Send + Sync>>>;

/// A key a store accepts: the characters JetStream allows in a key
/// (letters, digits, `-`, `_`, `=`, `/`, `.` between tokens), so that a
/// state moves between the stores unchanged.
pub(crate) fn check_key(key: &str) -> Result<(), String> {
    let valid = !key.is_empty()
        && !key.starts_with('.')
        && !key.ends_with('.')
        && !key.contains("..")
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_=/.".contains(&b));
    match valid {
        true => Ok(()),
        false => Err(format!(
            "state key {key:?}: use letters, digits, '-', '_', '=', '/' and '.' between words"
        )),
    }
}

/// One key of an export: `{"key":"counter","revision":7,"value":...}`, the
/// value the state's own JSON, byte for byte (or, if the bytes are not
/// JSON, their base64 under `"base64"`).
pub(crate) fn export_line(key: &str, stored: &Stored) -> String {
    use base64::Engine;
    let key = serde_json::Value::String(key.to_string());
    match serde_json::from_slice::<&serde_json::value::RawValue>(&stored.bytes) {
        Ok(value) => format!(
            r#"{{"key":{key},"revision":{},"value":{}}}"#,
            stored.revision,
            value.get()
        ),
        Err(_) => {
            let encoded = base64::engine::general_purpose::STANDARD.encode(&stored.bytes);
            format!(
                r#"{{"key":{key},"revision":{},"base64":"{encoded}"}}"#,
                stored.revision
            )
        }
    }
}

/// A line of an export, as `export_line` writes it.
#[derive(serde::Deserialize)]
struct ExportLine<'a> {
    key: String,
    #[serde(borrow)]
    value: Option<&'a serde_json::value::RawValue>,
    base64: Option<String>,
}

/// A line of an export: the key and its bytes, as they were exported.
pub(crate) fn import_line(line: &str) -> Result<(String, Bytes), String> {
    use base64::Engine;
    let line: ExportLine<'_> =
        serde_json::from_str(line).map_err(|e| format!("not a line of an export: {e}"))?;
    check_key(&line.key)?;
    let bytes = match (line.value, line.base64) {
        (Some(value), _) => value.get().as_bytes().to_vec(),
        (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|e| format!("{}: base64: {e}", line.key))?,
        (None, None) => return Err(format!("{}: no value", line.key)),
    };
    Ok((line.key, Bytes::from(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_what_jetstream_takes() {
        for key in ["counter", "cart/42", "a-b_c=d.e", "x"] {
            assert_eq!(check_key(key), Ok(()), "{key}");
        }
        for key in ["", ".a", "a.", "a..b", "a b", "a*", "a>", "é"] {
            assert!(check_key(key).is_err(), "{key:?}");
        }
    }

    #[test]
    fn an_export_line_round_trips_json_and_other_bytes() {
        // The state's own bytes, its keys' order and spacing kept.
        let json = Stored {
            bytes: Bytes::from_static(br#"{"z":1, "count":7}"#),
            revision: 3,
        };
        let line = export_line("counter", &json);
        assert_eq!(
            line,
            r#"{"key":"counter","revision":3,"value":{"z":1, "count":7}}"#
        );
        assert_eq!(
            import_line(&line),
            Ok((
                "counter".to_string(),
                Bytes::from_static(br#"{"z":1, "count":7}"#)
            ))
        );
        let raw = Stored {
            bytes: Bytes::from_static(b"\xff\x00"),
            revision: 1,
        };
        let line = export_line("raw", &raw);
        assert_eq!(line, r#"{"key":"raw","revision":1,"base64":"/wA="}"#);
        assert_eq!(
            import_line(&line),
            Ok(("raw".to_string(), Bytes::from_static(b"\xff\x00")))
        );
        assert!(import_line(r#"{"key":"a b","value":1}"#).is_err());
        assert!(import_line(r#"{"key":"k"}"#).is_err());
        assert!(import_line("not json").is_err());
    }
}
