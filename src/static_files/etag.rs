//! Entity tags (RFC 9110 §8.8.3): the strong tag a static file gets from a
//! hash of its content, and the `If-None-Match` test against such a tag.
//!
//! The tag hashes the content rather than the file's mtime and length: it
//! changes whenever the bytes do, even when an edit keeps the length and the
//! mtime (a coarse clock, a restored backup, reproducible builds that stamp
//! every file with the same time), and it is the same on every machine and
//! after every restart that serves the same bytes. It costs one pass over
//! the content at start; nothing per request.

/// FNV-1a 64 parameters (http://www.isthe.com/chongo/tech/comp/fnv/).
const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The strong entity tag of `content`, quoted: its FNV-1a 64 hash in hex.
pub(crate) fn strong_etag(content: &[u8]) -> String {
    format!("\"{:016x}\"", fnv1a_64(content))
}

fn fnv1a_64(content: &[u8]) -> u64 {
    content.iter().fold(FNV_OFFSET_BASIS, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME)
    })
}

/// Whether an `If-None-Match` value (trimmed) matches `etag`, a strong tag
/// with its quotes: the value is `*`, or one of its entity tags equals `etag`
/// by the weak comparison RFC 9110 §13.1.2 prescribes, so `W/"x"` matches
/// `"x"`. A malformed value matches nothing: the full response is always a
/// correct answer, a 304 only when the client provably holds the content.
pub(crate) fn if_none_match(value: &[u8], etag: &[u8]) -> bool {
    if value == b"*" {
        return true;
    }
    let mut rest = value;
    loop {
        // Empty list elements and the whitespace around them are allowed (§5.6.1).
        rest = rest.trim_ascii_start();
        while let Some(after_comma) = rest.strip_prefix(b",") {
            rest = after_comma.trim_ascii_start();
        }
        if rest.is_empty() {
            return false;
        }
        let tag = rest.strip_prefix(b"W/").unwrap_or(rest);
        let Some(opaque) = tag.strip_prefix(b"\"") else {
            return false;
        };
        let Some(close) = opaque.iter().position(|&b| b == b'"') else {
            return false;
        };
        // The opaque tag with both quotes.
        if &tag[..close + 2] == etag {
            return true;
        }
        rest = opaque[close + 1..].trim_ascii_start();
        if !rest.is_empty() && !rest.starts_with(b",") {
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_with_fnv1a_64() {
        // Test vectors from the FNV reference code.
        assert_eq!(fnv1a_64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(strong_etag(b"a"), "\"af63dc4c8601ec8c\"");
    }

    #[test]
    fn matches_any_listed_tag_by_weak_comparison() {
        let etag = b"\"af63dc4c8601ec8c\"";
        for value in [
            &b"*"[..],
            b"\"af63dc4c8601ec8c\"",
            b"W/\"af63dc4c8601ec8c\"",
            b"\"x\", \"af63dc4c8601ec8c\"",
            b"\"a,b\",W/\"af63dc4c8601ec8c\"",
            b", ,\"af63dc4c8601ec8c\" ,",
        ] {
            assert!(if_none_match(value, etag), "{:?}", value.escape_ascii());
        }
    }

    #[test]
    fn anything_else_matches_nothing() {
        let etag = b"\"af63dc4c8601ec8c\"";
        for value in [
            &b""[..],
            b"\"af63dc4c8601ec8d\"",
            b"af63dc4c8601ec8c",
            b"\"af63dc4c8601ec8c",
            b"w/\"af63dc4c8601ec8c\"",
            b"\"x\" \"af63dc4c8601ec8c\"",
            b"\"x\", *",
            b"\"x\"junk, \"af63dc4c8601ec8c\"",
        ] {
            assert!(!if_none_match(value, etag), "{:?}", value.escape_ascii());
        }
    }
}
