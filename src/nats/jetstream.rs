//! JetStream's key-value buckets as bytes: the subjects and JSON of the
//! JetStream API requests a key-value client makes (create the bucket's
//! stream, read a key's last value) and what the server answers (a
//! publish's acknowledgement, a message, an API error). A bucket `B` is
//! the stream `KV_B` over the subjects `$KV.B.>`; a key's value is the
//! last message on `$KV.B.KEY`, and its revision that message's stream
//! sequence. A write is a publish with `Nats-Expected-Last-Subject-Sequence`
//! set to the revision the writer last saw, which the server refuses
//! (error 10071) if the key moved since: compare-and-set.
//!
//! As the rest of `nats`, this knows nothing of sockets: `cluster::kv`
//! sends these over the pollers' links.

use base64::Engine;
use bytes::{Bytes, BytesMut};
use serde::Deserialize;

use crate::nats::headers::HeaderWriter;

/// The header that makes a publish a compare-and-set on its subject.
pub(crate) const EXPECTED_LAST_SUBJECT_SEQUENCE: &str = "Nats-Expected-Last-Subject-Sequence";

/// `wrong last sequence`: the key moved since the revision given.
pub(crate) const WRONG_LAST_SEQUENCE: u32 = 10071;
/// `no message found`: the key was never written.
pub(crate) const NO_MESSAGE_FOUND: u32 = 10037;
/// `stream name already in use`: the bucket exists, made otherwise.
pub(crate) const STREAM_NAME_IN_USE: u32 = 10058;

/// The stream of bucket `bucket`.
pub(crate) fn stream_name(bucket: &str) -> String {
    format!("KV_{bucket}")
}

/// The subject `key`'s values are published on.
pub(crate) fn key_subject(bucket: &str, key: &str) -> String {
    format!("$KV.{bucket}.{key}")
}

/// The request that creates bucket `bucket` with `replicas`, as the NATS
/// clients create a key-value bucket: one value per key (no history), file
/// storage, new writes refused rather than old ones dropped when full,
/// deletes denied; each value lives `max_age_ms` after it was written (0:
/// for ever). Idempotent: the same request again succeeds.
pub(crate) fn create_request(bucket: &str, replicas: usize, max_age_ms: u64) -> (String, Bytes) {
    let stream = stream_name(bucket);
    let max_age_ns = max_age_ms.saturating_mul(1_000_000);
    // The window in which a message id is remembered: at most the age.
    let window_ns = match max_age_ns {
        0 => 120_000_000_000,
        age => age.min(120_000_000_000),
    };
    let config = serde_json::json!({
        "name": stream,
        "subjects": [format!("$KV.{bucket}.>")],
        "retention": "limits",
        "max_consumers": -1,
        "max_msgs_per_subject": 1,
        "max_msgs": -1,
        "max_bytes": -1,
        "max_age": max_age_ns,
        "max_msg_size": -1,
        "storage": "file",
        "discard": "new",
        "num_replicas": replicas,
        "duplicate_window": window_ns,
        "allow_rollup_hdrs": true,
        "deny_delete": true,
        "deny_purge": false,
        "allow_direct": true,
    });
    (
        format!("$JS.API.STREAM.CREATE.{stream}"),
        Bytes::from(config.to_string()),
    )
}

/// The request that reads `key`'s last value.
pub(crate) fn get_request(bucket: &str, key: &str) -> (String, Bytes) {
    let body = serde_json::json!({ "last_by_subj": key_subject(bucket, key) });
    (
        format!("$JS.API.STREAM.MSG.GET.{}", stream_name(bucket)),
        Bytes::from(body.to_string()),
    )
}

/// The request that removes every value of `key` (a lease given up).
pub(crate) fn purge_request(bucket: &str, key: &str) -> (String, Bytes) {
    let body = serde_json::json!({ "filter": key_subject(bucket, key) });
    (
        format!("$JS.API.STREAM.PURGE.{}", stream_name(bucket)),
        Bytes::from(body.to_string()),
    )
}

#[derive(Deserialize)]
struct PurgeResponse {
    error: Option<ApiError>,
}

/// A purge's answer.
pub(crate) fn parse_purge(payload: &[u8]) -> Result<(), Answer> {
    let response: PurgeResponse =
        serde_json::from_slice(payload).map_err(|e| Answer::Malformed(e.to_string()))?;
    match response.error {
        None => Ok(()),
        Some(error) => Err(Answer::Api(error)),
    }
}

/// The request that lists the keys of `bucket` from the `offset`th on
/// (the stream's subjects, a page at a time).
pub(crate) fn keys_request(bucket: &str, offset: usize) -> (String, Bytes) {
    let body = serde_json::json!({
        "subjects_filter": format!("$KV.{bucket}.>"),
        "offset": offset,
    });
    (
        format!("$JS.API.STREAM.INFO.{}", stream_name(bucket)),
        Bytes::from(body.to_string()),
    )
}

#[derive(Deserialize)]
struct StreamState {
    #[serde(default)]
    subjects: std::collections::BTreeMap<String, u64>,
}

#[derive(Deserialize)]
struct InfoResponse {
    error: Option<ApiError>,
    state: Option<StreamState>,
    #[serde(default)]
    total: usize,
    #[serde(default)]
    offset: usize,
}

/// A page of keys of `bucket`, in order, and the offset of the next page
/// (none after the last).
pub(crate) fn parse_keys(
    payload: &[u8],
    bucket: &str,
) -> Result<(Vec<String>, Option<usize>), Answer> {
    let response: InfoResponse =
        serde_json::from_slice(payload).map_err(|e| Answer::Malformed(e.to_string()))?;
    if let Some(error) = response.error {
        return Err(Answer::Api(error));
    }
    let prefix = format!("$KV.{bucket}.");
    let keys: Vec<String> = response
        .state
        .map(|state| state.subjects)
        .unwrap_or_default()
        .into_keys()
        .filter_map(|subject| subject.strip_prefix(&prefix).map(str::to_string))
        .collect();
    let next = response.offset + keys.len();
    let more = !keys.is_empty() && next < response.total;
    Ok((keys, more.then_some(next)))
}

/// The header block of a write expecting `key` at `revision`.
pub(crate) fn put_headers(revision: u64) -> Bytes {
    let mut out = BytesMut::with_capacity(64);
    let mut headers = HeaderWriter::begin(&mut out);
    headers.field(
        EXPECTED_LAST_SUBJECT_SEQUENCE,
        revision.to_string().as_bytes(),
    );
    headers.end();
    out.freeze()
}

/// An error the JetStream API answered with.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct ApiError {
    pub(crate) code: u16,
    #[serde(default)]
    pub(crate) err_code: u32,
    #[serde(default)]
    pub(crate) description: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "JetStream error {} ({}): {}",
            self.code, self.err_code, self.description
        )
    }
}

/// Why an answer could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// The API refused.
    Api(ApiError),
    /// The answer does not read as one.
    Malformed(String),
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Answer::Api(e) => e.fmt(f),
            Answer::Malformed(why) => write!(f, "a malformed JetStream answer: {why}"),
        }
    }
}

#[derive(Deserialize)]
struct PubAck {
    error: Option<ApiError>,
    #[serde(default)]
    seq: u64,
}

/// A publish's acknowledgement: the stream sequence it was stored at.
pub(crate) fn parse_pub_ack(payload: &[u8]) -> Result<u64, Answer> {
    let ack: PubAck =
        serde_json::from_slice(payload).map_err(|e| Answer::Malformed(e.to_string()))?;
    match (ack.error, ack.seq) {
        (Some(error), _) => Err(Answer::Api(error)),
        (None, 0) => Err(Answer::Malformed(
            "an acknowledgement without a sequence".into(),
        )),
        (None, seq) => Ok(seq),
    }
}

#[derive(Deserialize)]
struct StoredMsg {
    seq: u64,
    #[serde(default)]
    data: String,
}

#[derive(Deserialize)]
struct GetResponse {
    error: Option<ApiError>,
    message: Option<StoredMsg>,
}

/// A read's answer: the value and its revision, or none if the key was
/// never written.
pub(crate) fn parse_get(payload: &[u8]) -> Result<Option<(Bytes, u64)>, Answer> {
    let response: GetResponse =
        serde_json::from_slice(payload).map_err(|e| Answer::Malformed(e.to_string()))?;
    match (response.error, response.message) {
        (Some(error), _) if error.err_code == NO_MESSAGE_FOUND => Ok(None),
        (Some(error), _) => Err(Answer::Api(error)),
        (None, Some(message)) => {
            let data = base64::engine::general_purpose::STANDARD
                .decode(message.data)
                .map_err(|e| Answer::Malformed(format!("data: {e}")))?;
            Ok(Some((Bytes::from(data), message.seq)))
        }
        (None, None) => Err(Answer::Malformed("neither a message nor an error".into())),
    }
}

#[derive(Deserialize)]
struct CreateResponse {
    error: Option<ApiError>,
}

/// A bucket's creation: made, or already there.
pub(crate) fn parse_create(payload: &[u8]) -> Result<(), Answer> {
    let response: CreateResponse =
        serde_json::from_slice(payload).map_err(|e| Answer::Malformed(e.to_string()))?;
    match response.error {
        None => Ok(()),
        Some(error) if error.err_code == STREAM_NAME_IN_USE => Ok(()),
        Some(error) => Err(Answer::Api(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_and_requests() {
        assert_eq!(stream_name("upc"), "KV_upc");
        assert_eq!(key_subject("upc", "cart/42"), "$KV.upc.cart/42");
        let (subject, body) = get_request("upc", "counter");
        assert_eq!(subject, "$JS.API.STREAM.MSG.GET.KV_upc");
        assert_eq!(&body[..], br#"{"last_by_subj":"$KV.upc.counter"}"#);
        let (subject, body) = create_request("upc", 3, 0);
        assert_eq!(subject, "$JS.API.STREAM.CREATE.KV_upc");
        let config: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(config["subjects"], serde_json::json!(["$KV.upc.>"]));
        assert_eq!(config["num_replicas"], 3);
        assert_eq!(config["max_msgs_per_subject"], 1);
        assert_eq!(config["discard"], "new");
        assert_eq!(config["max_age"], 0);
        assert_eq!(config["duplicate_window"], 120_000_000_000u64);
        let (_, body) = create_request("leases", 1, 2000);
        let config: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(config["max_age"], 2_000_000_000u64);
        assert_eq!(config["duplicate_window"], 2_000_000_000u64);
        let (subject, body) = purge_request("leases", "counter");
        assert_eq!(subject, "$JS.API.STREAM.PURGE.KV_leases");
        assert_eq!(&body[..], br#"{"filter":"$KV.leases.counter"}"#);
        assert_eq!(parse_purge(br#"{"success":true,"purged":1}"#), Ok(()));
        assert_eq!(
            &put_headers(7)[..],
            b"NATS/1.0\r\nNats-Expected-Last-Subject-Sequence: 7\r\n\r\n"
        );
    }

    #[test]
    fn acknowledgements() {
        assert_eq!(parse_pub_ack(br#"{"stream":"KV_upc","seq":12}"#), Ok(12));
        let stale = parse_pub_ack(
            br#"{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 11"}}"#,
        );
        assert_eq!(
            stale,
            Err(Answer::Api(ApiError {
                code: 400,
                err_code: WRONG_LAST_SEQUENCE,
                description: "wrong last sequence: 11".into()
            }))
        );
        assert!(matches!(parse_pub_ack(b"{}"), Err(Answer::Malformed(_))));
        assert!(matches!(parse_pub_ack(b"nope"), Err(Answer::Malformed(_))));
    }

    #[test]
    fn reads() {
        let found = parse_get(
            br#"{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","message":{"subject":"$KV.upc.c","seq":5,"data":"eyJjb3VudCI6M30=","time":"2026-11-28T10:00:00Z"}}"#,
        );
        assert_eq!(found, Ok(Some((Bytes::from_static(br#"{"count":3}"#), 5))));
        let missing = parse_get(
            br#"{"error":{"code":404,"err_code":10037,"description":"no message found"}}"#,
        );
        assert_eq!(missing, Ok(None));
        let empty = parse_get(br#"{"message":{"seq":2}}"#);
        assert_eq!(empty, Ok(Some((Bytes::new(), 2))));
        let other = parse_get(
            br#"{"error":{"code":503,"err_code":10039,"description":"jetstream not enabled"}}"#,
        );
        assert!(matches!(other, Err(Answer::Api(e)) if e.code == 503));
        assert!(matches!(parse_get(b"{}"), Err(Answer::Malformed(_))));
        assert!(matches!(
            parse_get(br#"{"message":{"seq":2,"data":"!!"}}"#),
            Err(Answer::Malformed(_))
        ));
    }

    #[test]
    fn key_listings() {
        let (subject, body) = keys_request("upc", 0);
        assert_eq!(subject, "$JS.API.STREAM.INFO.KV_upc");
        assert_eq!(&body[..], br#"{"offset":0,"subjects_filter":"$KV.upc.>"}"#);
        let page = br#"{"state":{"subjects":{"$KV.upc.b":1,"$KV.upc.a/1":1}},"total":3,"offset":0,"limit":2}"#;
        assert_eq!(
            parse_keys(page, "upc"),
            Ok((vec!["a/1".to_string(), "b".to_string()], Some(2)))
        );
        let last = br#"{"state":{"subjects":{"$KV.upc.c":1}},"total":3,"offset":2,"limit":2}"#;
        assert_eq!(parse_keys(last, "upc"), Ok((vec!["c".to_string()], None)));
        let empty = br#"{"state":{"messages":0},"total":0,"offset":0}"#;
        assert_eq!(parse_keys(empty, "upc"), Ok((vec![], None)));
    }

    #[test]
    fn creations() {
        assert_eq!(parse_create(br#"{"type":"x","config":{}}"#), Ok(()));
        assert_eq!(
            parse_create(br#"{"error":{"code":400,"err_code":10058,"description":"stream name already in use"}}"#),
            Ok(())
        );
        assert!(matches!(
            parse_create(br#"{"error":{"code":500,"err_code":10049,"description":"x"}}"#),
            Err(Answer::Api(_))
        ));
    }
}
