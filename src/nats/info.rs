//! The `INFO` a server opens every connection with, and the `CONNECT` a
//! client answers it with.

use serde_json::{json, Map, Value};

/// nats-server's default `max_payload`, used until a server says its own.
pub(crate) const DEFAULT_MAX_PAYLOAD: usize = 1 << 20;

/// What a server's `INFO` says that this client uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerInfo {
    pub(crate) server_id: String,
    pub(crate) version: String,
    /// The largest payload (headers included) it takes.
    pub(crate) max_payload: usize,
    /// It understands `HPUB` and sends `HMSG`.
    pub(crate) headers: bool,
    /// The connection must go on in TLS.
    pub(crate) tls_required: bool,
    /// A nonce to sign with an NKEY, when it asks for one.
    pub(crate) nonce: Option<String>,
    /// The other servers of its cluster that clients may use
    /// (`host:port`), unless the cluster says `no_advertise`.
    pub(crate) connect_urls: Vec<String>,
}

impl ServerInfo {
    /// Reads the JSON of an `INFO`; fields it lacks take their defaults.
    pub(crate) fn parse(json: &[u8]) -> Result<ServerInfo, String> {
        let value: Value = serde_json::from_slice(json).map_err(|e| format!("INFO: {e}"))?;
        let Value::Object(info) = value else {
            return Err("INFO: not an object".into());
        };
        let text = |name: &str| info.get(name).and_then(Value::as_str).map(str::to_string);
        let flag = |name: &str| info.get(name).and_then(Value::as_bool).unwrap_or(false);
        let max_payload = info
            .get("max_payload")
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n > 0)
            .unwrap_or(DEFAULT_MAX_PAYLOAD);
        Ok(ServerInfo {
            server_id: text("server_id").unwrap_or_default(),
            version: text("version").unwrap_or_default(),
            max_payload,
            headers: flag("headers"),
            tls_required: flag("tls_required"),
            nonce: text("nonce"),
            connect_urls: info
                .get("connect_urls")
                .and_then(Value::as_array)
                .map(|urls| {
                    urls.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
        })
    }
}

/// Who the client says it is in its `CONNECT`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Credentials {
    pub(crate) user: Option<String>,
    pub(crate) pass: Option<String>,
    pub(crate) token: Option<String>,
    /// A user JWT (from a `.creds` file) or an NKEY's public key (from a
    /// seed), and the server's nonce signed by the key (`nats::identity`).
    pub(crate) jwt: Option<String>,
    pub(crate) nkey: Option<String>,
    pub(crate) sig: Option<String>,
}

/// The JSON of a `CONNECT`: headers and "no responders" on, messages this
/// connection publishes not sent back to it, no `+OK`s.
pub(crate) fn connect_json(name: &str, credentials: &Credentials, tls: bool) -> String {
    let mut connect = Map::new();
    connect.insert("verbose".into(), json!(false));
    connect.insert("pedantic".into(), json!(false));
    connect.insert("tls_required".into(), json!(tls));
    connect.insert("name".into(), json!(name));
    connect.insert("lang".into(), json!("rust"));
    connect.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
    connect.insert("protocol".into(), json!(1));
    connect.insert("echo".into(), json!(false));
    connect.insert("headers".into(), json!(true));
    connect.insert("no_responders".into(), json!(true));
    let fields = [
        ("user", &credentials.user),
        ("pass", &credentials.pass),
        ("auth_token", &credentials.token),
        ("jwt", &credentials.jwt),
        ("nkey", &credentials.nkey),
        ("sig", &credentials.sig),
    ];
    for (name, value) in fields {
        if let Some(value) = value {
            connect.insert(name.into(), json!(value));
        }
    }
    Value::Object(connect).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_info_and_defaults() {
        let info = ServerInfo::parse(
            br#"{"server_id":"NA","version":"2.9.10","max_payload":2048,"headers":true,"tls_required":true,"nonce":"abc"}"#,
        )
        .unwrap();
        assert_eq!(info.max_payload, 2048);
        assert!(info.headers && info.tls_required);
        assert_eq!(info.nonce.as_deref(), Some("abc"));
        assert!(info.connect_urls.is_empty());
        let routed =
            ServerInfo::parse(br#"{"connect_urls":["127.0.0.1:4223",7,"[::1]:4224"]}"#).unwrap();
        assert_eq!(routed.connect_urls, ["127.0.0.1:4223", "[::1]:4224"]);
        let bare = ServerInfo::parse(b"{}").unwrap();
        assert_eq!(bare.max_payload, DEFAULT_MAX_PAYLOAD);
        assert!(!bare.headers);
        assert!(ServerInfo::parse(b"[1]").is_err());
        assert!(ServerInfo::parse(b"{").is_err());
    }

    #[test]
    fn connect_carries_the_credentials_given() {
        let credentials = Credentials {
            user: Some("ann".into()),
            pass: Some("p\"w".into()),
            ..Credentials::default()
        };
        let json: Value =
            serde_json::from_str(&connect_json("node-a", &credentials, false)).unwrap();
        assert_eq!(json["user"], "ann");
        assert_eq!(json["pass"], "p\"w");
        assert_eq!(json["headers"], true);
        assert_eq!(json["no_responders"], true);
        assert_eq!(json["echo"], false);
        assert!(json.get("auth_token").is_none());
        let signed = Credentials {
            nkey: Some("UABC".into()),
            sig: Some("c2ln".into()),
            ..Credentials::default()
        };
        let json: Value = serde_json::from_str(&connect_json("node-a", &signed, false)).unwrap();
        assert_eq!(
            (&json["nkey"], &json["sig"]),
            (&json!("UABC"), &json!("c2ln"))
        );
        assert!(json.get("jwt").is_none() && json.get("user").is_none());
    }
}
