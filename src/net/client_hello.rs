//! The first record of a TLS connection, read before rustls sees it, for
//! one question: does the client offer TLS 1.2 or 1.3 at all? rustls
//! answers a client that offers only TLS 1.0 or 1.1 with a
//! `handshake_failure` alert; RFC 5246 (Appendix E.1) and RFC 8446 (§4.2.1,
//! Appendix D) ask for `protocol_version`, which tells that client (and the
//! person reading its error) what is wrong. Nothing here allocates; bytes in,
//! a verdict out.

/// What the first record says of the versions the client offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HelloVersions {
    /// The record (or its ClientHello's start) has not all arrived.
    NeedMore,
    /// TLS 1.2 or later is offered, or the bytes are not a ClientHello
    /// whose versions can be read here: rustls decides.
    Acceptable,
    /// A ClientHello offering at most `client_version` (below TLS 1.2),
    /// with no `supported_versions` extension offering more, in a record
    /// of `record_version`.
    TooOld {
        client_version: u16,
        record_version: [u8; 2],
    },
}

/// A handshake record's content type.
const HANDSHAKE: u8 = 0x16;
/// A handshake message's type: ClientHello.
const CLIENT_HELLO: u8 = 0x01;
/// The `supported_versions` extension (RFC 8446 §4.2.1).
const SUPPORTED_VERSIONS: u16 = 0x002b;
/// TLS 1.2's version number; TLS 1.3 sends it as its legacy version too.
const TLS12: u16 = 0x0303;
/// The largest plaintext record (RFC 8446 §5.1).
const MAX_RECORD: usize = 1 << 14;

/// The verdict on `bytes`, the first bytes a client sent (a prefix of its
/// stream: more may follow).
pub(crate) fn hello_versions(bytes: &[u8]) -> HelloVersions {
    let Some(header) = bytes.get(..5) else {
        return HelloVersions::NeedMore;
    };
    if header[0] != HANDSHAKE {
        return HelloVersions::Acceptable;
    }
    let record_len = usize::from(u16::from_be_bytes([header[3], header[4]]));
    if record_len > MAX_RECORD {
        return HelloVersions::Acceptable;
    }
    let record_end = (5 + record_len).min(bytes.len());
    let body = &bytes[5..record_end];
    let complete = bytes.len() >= 5 + record_len;
    // The message's type, length and the client's version.
    let Some(start) = body.get(..6) else {
        return match complete {
            true => HelloVersions::Acceptable,
            false => HelloVersions::NeedMore,
        };
    };
    if start[0] != CLIENT_HELLO {
        return HelloVersions::Acceptable;
    }
    let client_version = u16::from_be_bytes([start[4], start[5]]);
    if client_version >= TLS12 {
        return HelloVersions::Acceptable;
    }
    let hello_len =
        usize::from(start[1]) << 16 | usize::from(start[2]) << 8 | usize::from(start[3]);
    // A ClientHello split over records: its extensions are not all here.
    if 4 + hello_len > record_len {
        return HelloVersions::Acceptable;
    }
    if !complete {
        return HelloVersions::NeedMore;
    }
    match offers_tls12_or_later(&body[4..4 + hello_len]) {
        Some(false) => HelloVersions::TooOld {
            client_version,
            record_version: [header[1], header[2]],
        },
        // It does, or the message is malformed, which rustls answers.
        Some(true) | None => HelloVersions::Acceptable,
    }
}

/// Whether a ClientHello's body (from its version on) has a
/// `supported_versions` extension listing TLS 1.2 or later; `None` when it
/// does not parse.
fn offers_tls12_or_later(hello: &[u8]) -> Option<bool> {
    let mut reader = Reader(hello);
    reader.take(2 + 32)?; // version, random
    let session_id = reader.u8()?;
    reader.take(usize::from(session_id))?;
    let suites = reader.u16()?;
    reader.take(usize::from(suites))?;
    let compressions = reader.u8()?;
    reader.take(usize::from(compressions))?;
    if reader.0.is_empty() {
        // A ClientHello without extensions (TLS 1.0 allows that).
        return Some(false);
    }
    let extensions_len = reader.u16()?;
    let mut extensions = Reader(reader.take(usize::from(extensions_len))?);
    while !extensions.0.is_empty() {
        let kind = extensions.u16()?;
        let len = extensions.u16()?;
        let data = extensions.take(usize::from(len))?;
        if kind == SUPPORTED_VERSIONS {
            let mut versions = Reader(data);
            let list_len = versions.u8()?;
            let list = versions.take(usize::from(list_len))?;
            let offered = list
                .chunks_exact(2)
                .any(|v| u16::from_be_bytes([v[0], v[1]]) >= TLS12);
            return Some(offered);
        }
    }
    Some(false)
}

/// Reads big-endian fields off the front of a slice.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        if self.0.len() < len {
            return None;
        }
        let (taken, rest) = self.0.split_at(len);
        self.0 = rest;
        Some(taken)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
}

/// The fatal `protocol_version` alert (70), in a plaintext record of
/// `record_version`: what a client offering too old a TLS is answered.
pub(crate) fn protocol_version_alert(record_version: [u8; 2]) -> [u8; 7] {
    let [major, minor] = record_version;
    [0x15, major, minor, 0x00, 0x02, 0x02, 70]
}

/// The name of a version a client offered, for the log.
pub(crate) fn version_name(version: u16) -> String {
    match version {
        0x0300 => "SSL 3.0".to_string(),
        0x0301 => "TLS 1.0".to_string(),
        0x0302 => "TLS 1.1".to_string(),
        other => format!("version {other:#06x}"),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A ClientHello record: `version` as its client version, `record` as
    /// the record's, and `extensions` (each type and data).
    pub(crate) fn client_hello(record: u16, version: u16, extensions: &[(u16, &[u8])]) -> Vec<u8> {
        let mut hello = Vec::new();
        hello.extend_from_slice(&version.to_be_bytes());
        hello.extend_from_slice(&[7; 32]); // random
        hello.push(0); // no session id
        hello.extend_from_slice(&[0, 4, 0x00, 0x2f, 0x00, 0x35]); // two suites
        hello.extend_from_slice(&[1, 0]); // null compression
        if !extensions.is_empty() {
            let mut all = Vec::new();
            for (kind, data) in extensions {
                all.extend_from_slice(&kind.to_be_bytes());
                all.extend_from_slice(&(data.len() as u16).to_be_bytes());
                all.extend_from_slice(data);
            }
            hello.extend_from_slice(&(all.len() as u16).to_be_bytes());
            hello.extend_from_slice(&all);
        }
        let mut message = vec![CLIENT_HELLO];
        message.extend_from_slice(&(hello.len() as u32).to_be_bytes()[1..]);
        message.extend_from_slice(&hello);
        let mut out = vec![HANDSHAKE];
        out.extend_from_slice(&record.to_be_bytes());
        out.extend_from_slice(&(message.len() as u16).to_be_bytes());
        out.extend_from_slice(&message);
        out
    }

    /// Server name `localhost`, as an extension's data.
    const SNI: &[u8] = b"\x00\x0e\x00\x00\x0blocalhost";

    #[test]
    fn a_hello_offering_tls_1_0_or_1_1_only_is_too_old() {
        for version in [0x0300, 0x0301, 0x0302] {
            let hello = client_hello(0x0301, version, &[(0x0000, SNI)]);
            let expected = HelloVersions::TooOld {
                client_version: version,
                record_version: [3, 1],
            };
            assert_eq!(hello_versions(&hello), expected);
            // Arriving a byte at a time, it waits for the whole record.
            for cut in 0..hello.len() {
                assert_eq!(hello_versions(&hello[..cut]), HelloVersions::NeedMore);
            }
        }
        // No extensions at all, as TLS 1.0 allows.
        let bare = client_hello(0x0302, 0x0302, &[]);
        assert!(matches!(
            hello_versions(&bare),
            HelloVersions::TooOld { .. }
        ));
        // supported_versions offering 1.1 and 1.0 only.
        let old_list = client_hello(0x0301, 0x0302, &[(0x002b, b"\x04\x03\x02\x03\x01")]);
        assert!(matches!(
            hello_versions(&old_list),
            HelloVersions::TooOld { .. }
        ));
    }

    #[test]
    fn tls_1_2_or_later_goes_to_rustls() {
        let tls12 = client_hello(0x0301, 0x0303, &[(0x0000, SNI)]);
        assert_eq!(hello_versions(&tls12), HelloVersions::Acceptable);
        // The version is known before the rest of the record comes.
        assert_eq!(hello_versions(&tls12[..11]), HelloVersions::Acceptable);
        // A legacy version below 1.2, but supported_versions offers 1.3.
        let listed = client_hello(0x0301, 0x0301, &[(0x002b, b"\x04\x03\x04\x03\x03")]);
        assert_eq!(hello_versions(&listed), HelloVersions::Acceptable);
    }

    #[test]
    fn what_is_not_a_readable_client_hello_goes_to_rustls() {
        let mut broken = client_hello(0x0301, 0x0301, &[(0x0000, SNI)]);
        // The extensions' length says more than the message holds.
        let at = broken.len() - SNI.len() - 6;
        broken[at] = 0xff;
        assert_eq!(hello_versions(&broken), HelloVersions::Acceptable);
        // Not a ClientHello; not a handshake record; a record too long.
        assert_eq!(
            hello_versions(b"\x16\x03\x01\x00\x06\x02\x00\x00\x02\x03\x01"),
            HelloVersions::Acceptable
        );
        assert_eq!(
            hello_versions(b"\x15\x03\x01\x00\x02"),
            HelloVersions::Acceptable
        );
        assert_eq!(
            hello_versions(b"\x16\x03\x01\xff\xff"),
            HelloVersions::Acceptable
        );
        // A ClientHello longer than its record (split over records).
        let mut split = client_hello(0x0301, 0x0301, &[]);
        split[8] += 1;
        assert_eq!(hello_versions(&split), HelloVersions::Acceptable);
    }

    /// A TLS 1.0 ClientHello whose record is exactly `record_len` bytes,
    /// padded with the padding extension (RFC 7685, type 21).
    fn old_hello_of_record_len(record_len: usize) -> Vec<u8> {
        let bare = client_hello(0x0301, 0x0301, &[(0x0015, &[])]).len() - 5;
        let padding = vec![0; record_len - bare];
        let hello = client_hello(0x0301, 0x0301, &[(0x0015, &padding)]);
        assert_eq!(hello.len(), 5 + record_len);
        hello
    }

    #[test]
    fn a_record_of_the_largest_size_is_read_and_one_byte_more_is_not() {
        // 2^14 bytes is a record a client may send (RFC 8446 §5.1): an old
        // client padding its hello to it still hears protocol_version.
        let largest = old_hello_of_record_len(MAX_RECORD);
        assert_eq!(
            hello_versions(&largest),
            HelloVersions::TooOld {
                client_version: 0x0301,
                record_version: [3, 1],
            }
        );
        // One byte past is not a record; rustls answers it.
        let past = old_hello_of_record_len(MAX_RECORD + 1);
        assert_eq!(hello_versions(&past), HelloVersions::Acceptable);
        // A hello claiming 2^16 bytes more than it holds is longer than its
        // record, whatever its two lower length bytes say: rustls answers.
        let mut overlong = old_hello_of_record_len(300);
        overlong[6] = 1;
        assert_eq!(hello_versions(&overlong), HelloVersions::Acceptable);
    }

    #[test]
    fn the_alert_is_protocol_version() {
        assert_eq!(protocol_version_alert([3, 1]), [0x15, 3, 1, 0, 2, 2, 70]);
        assert_eq!(version_name(0x0301), "TLS 1.0");
        assert_eq!(version_name(0x0200), "version 0x0200");
    }
}
