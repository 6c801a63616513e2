//! The path a request is routed by: percent-decoded (RFC 3986 §2.1), its
//! dot segments removed (RFC 3986 §5.2.4), and for static files its runs of
//! `/` merged, all into a buffer the caller provides, so that looking a
//! path up by its normal form allocates nothing.
//!
//! Dot segments are removed after decoding, so `%2E%2E` is a `..` as nginx
//! takes it (decoding an unreserved character never changes what a URI
//! names, RFC 3986 §6.2.2.2), and for every route, not only static files,
//! as nginx normalizes a path before any location matches it: `/a/../json`
//! is `/json`, and a prefix route's `..` cannot step out of the prefix. A
//! `..` with nothing left to remove would climb above the root, which no
//! path can do: the request is malformed ([`AboveRoot`], a 400, as nginx
//! answers), where RFC 3986 would quietly drop it.
//!
//! Decoded here rather than by percent-encoding's `percent_decode`, which
//! passes a malformed escape through as it is, so the rules below would need
//! a pass of their own first, and costs more instructions per path
//! (docs/performance.md).

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

/// A path with a `..` segment that has nothing left to remove: it climbs
/// above the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AboveRoot;

/// Whether `path` (which starts with `/`) reads differently once
/// normalized: it holds an escape, a segment starting with `.`, or (when
/// slashes are to be merged) a run of `/`. A path without any is its own
/// normal form, so the common request skips the copy.
pub(crate) fn needs_normalizing(path: &[u8], merge_slashes: bool) -> bool {
    path.contains(&b'%')
        || path
            .windows(2)
            .any(|w| w[0] == b'/' && (w[1] == b'.' || (merge_slashes && w[1] == b'/')))
}

/// The path a route is looked up by: `path` (which starts with `/`)
/// percent-decoded as by [`decode_path`], then without dot segments.
/// `Ok(None)` when it names nothing (see [`decode_path`]).
pub(crate) fn route_path<'b>(
    path: &[u8],
    buf: &'b mut [u8],
) -> Result<Option<&'b [u8]>, AboveRoot> {
    let Some(decoded_len) = decode_path(path, buf).map(<[u8]>::len) else {
        return Ok(None);
    };
    let len = remove_dot_segments(buf, decoded_len)?;
    Ok(Some(&buf[..len]))
}

/// The path a static file is looked up by: as [`route_path`], and with each
/// run of `/` merged into one first, as nginx does by default, so
/// `//css/a.css` and `/css//a.css` name `/css/a.css` (and `/css//../a.css`
/// names `/a.css`). Merging after decoding is safe: an encoded `/` names
/// nothing, so every `/` left is a separator the client wrote.
pub(crate) fn normalize_path<'b>(
    path: &[u8],
    buf: &'b mut [u8],
) -> Result<Option<&'b [u8]>, AboveRoot> {
    let Some(decoded_len) = decode_path(path, buf).map(<[u8]>::len) else {
        return Ok(None);
    };
    let mut len = 0;
    for at in 0..decoded_len {
        let byte = buf[at];
        if byte == b'/' && len > 0 && buf[len - 1] == b'/' {
            continue;
        }
        buf[len] = byte;
        len += 1;
    }
    let len = remove_dot_segments(buf, len)?;
    Ok(Some(&buf[..len]))
}

/// Removes the `.` and `..` segments of the absolute path `buf[..len]`, in
/// place, as RFC 3986 §5.2.4 does, and returns the new length: `.` goes,
/// `..` goes with the segment before it, and either one last leaves the
/// path ending in `/` (`/a/b/..` is `/a/`). Empty segments stay. Only a
/// segment that is exactly `.` or `..` counts (`/.well-known`, `/a..b`
/// stay as they are). The path never grows, so every segment kept is
/// copied to where the output has got to, at or before where it was read.
fn remove_dot_segments(buf: &mut [u8], len: usize) -> Result<usize, AboveRoot> {
    let mut out = 0;
    // `at` is always at a `/` that starts the next segment.
    let mut at = 0;
    while at < len {
        let start = at + 1;
        let end = buf[start..len]
            .iter()
            .position(|&b| b == b'/')
            .map_or(len, |offset| start + offset);
        let last = end == len;
        match &buf[start..end] {
            b"." => {}
            b".." => {
                if out == 0 {
                    return Err(AboveRoot);
                }
                // The output starts with `/`, so there is one to go back to.
                out = buf[..out].iter().rposition(|&b| b == b'/').unwrap_or(0);
            }
            _ => {
                buf.copy_within(at..end, out);
                out += end - at;
                at = end;
                continue;
            }
        }
        if last {
            buf[out] = b'/';
            out += 1;
        }
        at = end;
    }
    Ok(out)
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
            ("/a//../b", "/b"),
        ] {
            let normalized = normalize_path(path.as_bytes(), &mut buf);
            assert_eq!(normalized, Ok(Some(expected.as_bytes())), "{path}");
        }
        assert_eq!(normalize_path(b"//%2F", &mut buf), Ok(None));
        assert_eq!(normalize_path(b"//..//x", &mut buf), Err(AboveRoot));
    }

    fn routed(path: &str) -> Result<Option<String>, AboveRoot> {
        let mut buf = [0u8; 64];
        route_path(path.as_bytes(), &mut buf)
            .map(|path| path.map(|path| String::from_utf8_lossy(path).into_owned()))
    }

    #[test]
    fn removes_dot_segments_as_rfc_3986_does() {
        // The examples of RFC 3986 §5.4, as absolute paths, and more.
        for (path, expected) in [
            ("/a/b/c/./../../g", "/a/g"),
            ("/mid/content=5/../6", "/mid/6"),
            ("/a/b/c/.", "/a/b/c/"),
            ("/a/b/c/./", "/a/b/c/"),
            ("/a/b/c/..", "/a/b/"),
            ("/a/b/c/../", "/a/b/"),
            ("/a/b/c/../..", "/a/"),
            ("/a/b/c/g.", "/a/b/c/g."),
            ("/a/b/c/.g", "/a/b/c/.g"),
            ("/a/b/c/g..", "/a/b/c/g.."),
            ("/a/b/c/..g", "/a/b/c/..g"),
            ("/a/b/c/./g/.", "/a/b/c/g/"),
            ("/a/b/c/g/./h", "/a/b/c/g/h"),
            ("/a/b/c/g/../h", "/a/b/c/h"),
            ("/.", "/"),
            ("/./", "/"),
            ("/a/..", "/"),
            ("/a//..", "/a/"),
            ("/sub/../ten.txt", "/ten.txt"),
            ("/sub/%2e%2E/ten.txt", "/ten.txt"),
            ("/.well-known/x", "/.well-known/x"),
            ("/json", "/json"),
            ("/", "/"),
        ] {
            assert_eq!(routed(path), Ok(Some(expected.to_string())), "{path}");
        }
        for climbs in [
            "/..",
            "/../",
            "/../a",
            "/a/../..",
            "/./../a",
            "/%2E%2e/a",
            "/a/b/../../../c",
        ] {
            assert_eq!(routed(climbs), Err(AboveRoot), "{climbs}");
        }
        assert_eq!(routed("/a%2F.."), Ok(None));
    }

    #[test]
    fn needs_normalizing_only_what_changes() {
        for (path, merge, needs) in [
            ("/json", true, false),
            ("/a.b/c..d", true, false),
            ("/a//b", false, false),
            ("/a//b", true, true),
            ("/a/./b", false, true),
            ("/.well-known", false, true),
            ("/a%20b", false, true),
        ] {
            assert_eq!(needs_normalizing(path.as_bytes(), merge), needs, "{path}");
        }
    }
}
