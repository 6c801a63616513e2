//! The opening handshake's server side (RFC 6455 §4.2): the request is
//! already known to be a GET over HTTP/1.1 without a body asking to
//! upgrade to `websocket` (the head parser and the route table check
//! that); here the version and the key are checked and the accept value
//! made. SHA-1 and base64 come from `sha1_smol` and `base64`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

/// Appended to the client's key before hashing (RFC 6455 §1.3).
const ACCEPT_GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The `Sec-WebSocket-Accept` value: base64 of a SHA-1, 28 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Accept([u8; 28]);

impl Accept {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// Why an upgrade is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No `Sec-WebSocket-Version: 13`: 426, naming the version (§4.4).
    Version,
    /// No key, two keys, or a key that is not 16 bytes in base64: 400.
    Key,
}

impl Refusal {
    /// The status the refusal is answered with.
    pub(crate) fn status(self) -> u16 {
        match self {
            Refusal::Version => 426,
            Refusal::Key => 400,
        }
    }
}

/// Checks the upgrade request's header fields, as name and value pairs.
pub(crate) fn check<'a>(
    fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
) -> Result<Accept, Refusal> {
    let mut key = None;
    let mut keys = 0;
    let mut version = false;
    for (name, value) in fields {
        if name.eq_ignore_ascii_case(b"sec-websocket-key") {
            keys += 1;
            key = Some(value.trim_ascii());
        } else if name.eq_ignore_ascii_case(b"sec-websocket-version") {
            // A list of versions is the client's to send only after a 426.
            version |= value.trim_ascii() == b"13";
        }
    }
    if !version {
        return Err(Refusal::Version);
    }
    match key {
        Some(key) if keys == 1 && is_nonce(key) => Ok(accept(key)),
        _ => Err(Refusal::Key),
    }
}

/// A key must be 16 bytes, base64-encoded (§4.1): 24 characters.
fn is_nonce(key: &[u8]) -> bool {
    let mut decoded = [0u8; 18];
    key.len() == 24 && STANDARD.decode_slice(key, &mut decoded) == Ok(16)
}

/// The accept value for `key`.
fn accept(key: &[u8]) -> Accept {
    let mut sha1 = sha1_smol::Sha1::new();
    sha1.update(key);
    sha1.update(ACCEPT_GUID);
    let mut value = [0u8; 28];
    // 20 bytes encode to exactly 28.
    let _ = STANDARD.encode_slice(sha1.digest().bytes(), &mut value);
    Accept(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
        pairs.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes()))
    }

    #[test]
    fn the_rfc_example_gets_its_accept_value() {
        let request = [
            ("Sec-WebSocket-Key", " dGhlIHNhbXBsZSBub25jZQ== "),
            ("sec-websocket-version", "13"),
        ];
        let accept = check(fields(&request)).unwrap();
        assert_eq!(accept.as_bytes(), b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn refuses_other_versions_and_bad_keys() {
        let key = ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==");
        let v13 = ("Sec-WebSocket-Version", "13");
        let cases: [(&[(&str, &str)], Refusal); 6] = [
            (&[key], Refusal::Version),
            (&[key, ("Sec-WebSocket-Version", "8")], Refusal::Version),
            (&[v13], Refusal::Key),
            (&[v13, key, key], Refusal::Key),
            (&[v13, ("Sec-WebSocket-Key", "c2hvcnQ=")], Refusal::Key),
            (
                &[v13, ("Sec-WebSocket-Key", "!!!!!!!!!!!!!!!!!!!!!!==")],
                Refusal::Key,
            ),
        ];
        for (request, refusal) in cases {
            assert_eq!(check(fields(request)), Err(refusal), "{request:?}");
        }
        assert_eq!(Refusal::Version.status(), 426);
        assert_eq!(Refusal::Key.status(), 400);
    }
}
