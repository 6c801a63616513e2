//! Percent-decoding of request paths (RFC 3986 §2.1) into a buffer the
//! caller provides, so that looking a path up by its decoded form allocates
//! nothing.

/// Decodes `path` into `buf` and returns the decoded bytes, or `None` when
/// the path cannot name any route:
///
/// - a `%` not followed by two hex digits: the path is malformed, and since
///   every route is keyed by a well-formed decoded path, none matches it;
/// - an encoded `/` (`%2F`): a slash inside a segment, which differs from a
///   segment separator (RFC 3986 §2.2) and which no route key, and no file
///   name, can hold; decoding it to a separator would let `..%2F` pass for
///   `../`;
/// - an encoded NUL, which no file name can hold either;
/// - a decoded path longer than `buf`.
pub(crate) fn decode_path<'b>(path: &[u8], buf: &'b mut [u8]) -> Option<&'b [u8]> {
    let mut len = 0;
    let mut rest = path;
    while let Some((&byte, after)) = rest.split_first() {
        let (decoded, after) = match (byte, after) {
            (b'%', [high, low, after @ ..]) => {
                let decoded = hex_digit(*high)? << 4 | hex_digit(*low)?;
                if decoded == b'/' || decoded == 0 {
                    return None;
                }
                (decoded, after)
            }
            (b'%', _) => return None,
            _ => (byte, after),
        };
        *buf.get_mut(len)? = decoded;
        len += 1;
        rest = after;
    }
    Some(&buf[..len])
}

/// The path a static file is looked up by: `path` percent-decoded as by
/// [`decode_path`], with each run of `/` merged into one, as nginx does by
/// default, so `//css/a.css` and `/css//a.css` name `/css/a.css`. Merging
/// after decoding is safe: an encoded `/` names nothing, so every `/` left
/// is a separator the client wrote.
pub(crate) fn normalize_path<'b>(path: &[u8], buf: &'b mut [u8]) -> Option<&'b [u8]> {
    let decoded_len = decode_path(path, buf)?.len();
    let mut len = 0;
    for at in 0..decoded_len {
        let byte = buf[at];
        if byte == b'/' && len > 0 && buf[len - 1] == b'/' {
            continue;
        }
        buf[len] = byte;
        len += 1;
    }
    Some(&buf[..len])
}

pub(crate) fn hex_digit(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(path: &str) -> Option<Vec<u8>> {
        let mut buf = [0u8; 64];
        decode_path(path.as_bytes(), &mut buf).map(<[u8]>::to_vec)
    }

    #[test]
    fn decodes_escapes_in_either_case() {
        assert_eq!(decoded("/a%20b.txt").as_deref(), Some(&b"/a b.txt"[..]));
        assert_eq!(decoded("/%2e%2E/x").as_deref(), Some(&b"/../x"[..]));
        assert_eq!(decoded("/%C3%A9").as_deref(), Some("/é".as_bytes()));
        assert_eq!(decoded("/%25").as_deref(), Some(&b"/%"[..]));
        assert_eq!(decoded("/plain").as_deref(), Some(&b"/plain"[..]));
    }

    #[test]
    fn refuses_what_names_nothing() {
        for path in ["/a%2", "/a%", "/%zz", "/%2g", "/a%2Fb", "/..%2f..", "/a%00"] {
            assert_eq!(decoded(path), None, "{path}");
        }
        let mut small = [0u8; 3];
        assert_eq!(decode_path(b"/%41bc", &mut small), None);
        assert_eq!(decode_path(b"/%41b", &mut small), Some(&b"/Ab"[..]));
    }

    #[test]
    fn merges_runs_of_slashes_after_decoding() {
        let mut buf = [0u8; 64];
        for (path, expected) in [
            ("//css/a.css", "/css/a.css"),
            ("/css//a.css", "/css/a.css"),
            ("///a///b//", "/a/b/"),
            ("/%20//x", "/ /x"),
            ("/", "/"),
        ] {
            let normalized = normalize_path(path.as_bytes(), &mut buf);
            assert_eq!(normalized, Some(expected.as_bytes()), "{path}");
        }
        assert_eq!(normalize_path(b"//%2F", &mut buf), None);
    }
}
