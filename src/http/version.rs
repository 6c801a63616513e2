//! The HTTP version at the end of a request line, read by hand where
//! httparse refuses it (any version but 1.0 and 1.1).

/// What the bytes after a request line's target hold.
pub(crate) enum VersionLine {
    Partial,
    Invalid,
    /// HTTP/1.x, and the length of the version and its line end.
    Http1(usize),
    OtherMajor,
}

/// Reads `HTTP/` DIGIT `.` DIGIT and a line end (CRLF, or a bare LF as
/// httparse allows) at the start of `rest`, refusing at the first byte that
/// cannot be part of one, so the answer does not depend on where reads end.
pub(crate) fn version_line(rest: &[u8]) -> VersionLine {
    const PATTERN: &[u8; 8] = b"HTTP/0.0";
    for (at, &b) in rest.iter().take(PATTERN.len()).enumerate() {
        let fits = match PATTERN[at] {
            b'0' => b.is_ascii_digit(),
            expected => b == expected,
        };
        if !fits {
            return VersionLine::Invalid;
        }
    }
    let line_end = match rest.get(PATTERN.len()..) {
        None | Some([] | [b'\r']) => return VersionLine::Partial,
        Some([b'\r', b'\n', ..]) => 2,
        Some([b'\n', ..]) => 1,
        Some(_) => return VersionLine::Invalid,
    };
    if rest[5] == b'1' {
        VersionLine::Http1(PATTERN.len() + line_end)
    } else {
        VersionLine::OtherMajor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_versions_and_line_ends() {
        assert!(matches!(
            version_line(b"HTTP/1.2\r\n"),
            VersionLine::Http1(10)
        ));
        assert!(matches!(version_line(b"HTTP/1.9\n"), VersionLine::Http1(9)));
        assert!(matches!(
            version_line(b"HTTP/2.0\r\n"),
            VersionLine::OtherMajor
        ));
        assert!(matches!(version_line(b"HTTP/1."), VersionLine::Partial));
        assert!(matches!(version_line(b"HTTP/1.1\r"), VersionLine::Partial));
        assert!(matches!(
            version_line(b"HTTX/1.1\r\n"),
            VersionLine::Invalid
        ));
        assert!(matches!(
            version_line(b"HTTP/1.10\r\n"),
            VersionLine::Invalid
        ));
    }
}
