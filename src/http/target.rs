//! Request targets and Host values: which of the four forms of RFC 9112 §3.2
//! a target takes, the path and query it names, and whether a host (with its
//! optional port) follows the `uri-host [ ":" port ]` grammar of RFC 3986.
//! Pure functions over borrowed bytes; nothing allocates.

use std::net::Ipv6Addr;

/// The form of a request target (RFC 9112 §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TargetForm {
    /// `/path?query`, the form every client sends to an origin server.
    Origin,
    /// `http://authority/path?query`, the form sent to proxies, which a
    /// server must accept as well (RFC 9112 §3.2.2).
    Absolute,
    /// `host:port`, only with CONNECT: it names a tunnel, not a resource.
    Authority,
    /// `*`, only with OPTIONS: the server as a whole, not a resource.
    Asterisk,
}

/// A request target, split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Target<'b> {
    pub form: TargetForm,
    /// The path without its query; it starts with `/` in origin-form and
    /// absolute-form (where an empty path is `/`), and is empty otherwise.
    pub path: &'b [u8],
    /// What follows the first `?`, if there is one.
    pub query: Option<&'b [u8]>,
    /// The authority of an absolute-form or authority-form target.
    pub authority: Option<&'b [u8]>,
}

/// Splits `target`, or `None` when it is not a form `method` may use: only
/// CONNECT takes (and must take) authority-form, only OPTIONS asterisk-form,
/// and absolute-form only with the `http` or `https` scheme, a non-empty
/// host and no user information (RFC 9110 §4.2.1 and §4.2.4). A target
/// holding a byte no URI may hold is `None` too (see [`has_foreign_byte`]).
pub(crate) fn parse_target<'b>(target: &'b [u8], method: &str) -> Option<Target<'b>> {
    if has_foreign_byte(target) {
        return None;
    }
    if method == "CONNECT" {
        return authority_form(target);
    }
    if target == b"*" {
        return (method == "OPTIONS").then_some(Target {
            form: TargetForm::Asterisk,
            path: b"",
            query: None,
            authority: None,
        });
    }
    if target.starts_with(b"/") {
        let (path, query) = split_query(target);
        return Some(Target {
            form: TargetForm::Origin,
            path,
            query,
            authority: None,
        });
    }
    absolute_form(target)
}

/// Whether `target` holds a byte that RFC 3986's grammar admits in no path,
/// query or authority, and that clients are known to send raw, so that
/// refusing it (400) beats guessing what was meant:
///
/// - `#`: a fragment is the client's own business and never sent
///   (RFC 9110 §4.2.5); one in a request target is a client bug, and
///   routing `/a#b` as the path `/a#b` or as `/a` would each be a guess;
/// - a byte over 0x7F: raw UTF-8 (or Latin-1) from a client that forgot to
///   percent-encode; httparse already refuses invalid UTF-8, and valid UTF-8
///   gets the same answer, not a 404 for a path no route could name;
/// - `\`: a separator on Windows only, where `/..\x` walks up a directory;
///   nothing here treats it as one, and nothing should pass it along.
///
/// The other characters RFC 3986 leaves out (`"`, `<`, `>`, `{`, `|`, ...)
/// are taken as they come: clients send some of them raw in queries, and
/// none of them changes what a path names.
fn has_foreign_byte(target: &[u8]) -> bool {
    target
        .iter()
        .any(|&b| b == b'#' || b == b'\\' || !b.is_ascii())
}

fn authority_form(target: &[u8]) -> Option<Target<'_>> {
    // RFC 9112 §3.2.3: `uri-host ":" port`, and RFC 9110 §9.3.6 asks for the
    // port even when it is the default.
    let (host, port) = split_host_port(target)?;
    if host.is_empty() || port.is_none_or(<[u8]>::is_empty) {
        return None;
    }
    Some(Target {
        form: TargetForm::Authority,
        path: b"",
        query: None,
        authority: Some(target),
    })
}

fn absolute_form(target: &[u8]) -> Option<Target<'_>> {
    let colon = target.iter().position(|&b| b == b':')?;
    let scheme = &target[..colon];
    if !scheme.eq_ignore_ascii_case(b"http") && !scheme.eq_ignore_ascii_case(b"https") {
        return None;
    }
    let rest = target[colon + 1..].strip_prefix(b"//")?;
    let end = rest
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .unwrap_or(rest.len());
    let (authority, path_and_query) = rest.split_at(end);
    // Any `@` is user information, never part of a valid host.
    let (host, _) = split_host_port(authority)?;
    if host.is_empty() {
        return None;
    }
    let (path, query) = split_query(path_and_query);
    Some(Target {
        form: TargetForm::Absolute,
        path: if path.is_empty() { b"/" } else { path },
        query,
        authority: Some(authority),
    })
}

fn split_query(target: &[u8]) -> (&[u8], Option<&[u8]>) {
    match target.iter().position(|&b| b == b'?') {
        Some(at) => (&target[..at], Some(&target[at + 1..])),
        None => (target, None),
    }
}

/// Whether a Host value is `uri-host [ ":" port ]` with a host that is not
/// empty. RFC 9112 §3.2 has a client send an empty Host when the target URI
/// has no authority, but this server's URIs are `http` URIs, which may not
/// have an empty host (RFC 9110 §4.2.1: a recipient must reject one as
/// invalid); nginx refuses it too. So an empty value, or a port alone
/// (`:80`), is a 400, on HTTP/1.0 as on HTTP/1.1.
pub(crate) fn is_valid_host(value: &[u8]) -> bool {
    split_host_port(value).is_some_and(|(host, _)| !host.is_empty())
}

/// Splits `uri-host [ ":" port ]` into host and port, or `None` when either
/// part breaks the grammar: a host is a bracketed IP literal or a reg-name
/// (which an IPv4 address also is), a port is digits, maybe none.
fn split_host_port(value: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    let (host, port) = if value.starts_with(b"[") {
        let close = value.iter().position(|&b| b == b']')?;
        let (literal, rest) = value.split_at(close + 1);
        if !is_ip_literal(&literal[1..close]) {
            return None;
        }
        match rest {
            [] => (literal, None),
            [b':', port @ ..] => (literal, Some(port)),
            _ => return None,
        }
    } else {
        let (host, port) = match value.iter().position(|&b| b == b':') {
            Some(at) => (&value[..at], Some(&value[at + 1..])),
            None => (value, None),
        };
        if !is_reg_name(host) {
            return None;
        }
        (host, port)
    };
    if port.is_some_and(|port| !port.iter().all(u8::is_ascii_digit)) {
        return None;
    }
    Some((host, port))
}

/// `*( unreserved / pct-encoded / sub-delims )`.
fn is_reg_name(host: &[u8]) -> bool {
    let mut rest = host;
    while let Some((&b, after)) = rest.split_first() {
        rest = match b {
            b'%' => match after {
                [high, low, after @ ..] if high.is_ascii_hexdigit() && low.is_ascii_hexdigit() => {
                    after
                }
                _ => return false,
            },
            _ if is_unreserved(b) || is_sub_delim(b) => after,
            _ => return false,
        };
    }
    true
}

/// The inside of `[...]`: an IPv6 address or `v` HEXDIG "." and more.
fn is_ip_literal(inside: &[u8]) -> bool {
    if let Some(future) = inside.strip_prefix(b"v").or(inside.strip_prefix(b"V")) {
        let Some(dot) = future.iter().position(|&b| b == b'.') else {
            return false;
        };
        let (version, rest) = (&future[..dot], &future[dot + 1..]);
        return !version.is_empty()
            && version.iter().all(u8::is_ascii_hexdigit)
            && !rest.is_empty()
            && rest
                .iter()
                .all(|&b| is_unreserved(b) || is_sub_delim(b) || b == b':');
    }
    // The standard library's parser takes exactly RFC 4291's text forms, the
    // ones RFC 3986's IPv6address lists, and works on the stack.
    std::str::from_utf8(inside).is_ok_and(|text| text.parse::<Ipv6Addr>().is_ok())
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn is_sub_delim(b: u8) -> bool {
    matches!(
        b,
        b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_hosts() {
        let valid: [&[u8]; 10] = [
            b"a",
            b"127.0.0.1:9000",
            b"example.com:",
            b"a,b",
            b"x%41y",
            b"[::1]",
            b"[::ffff:127.0.0.1]:9000",
            b"[v1.fe80::a+b]",
            b"sub-delims!$&'()*+;=",
            b"under_score~tilde",
        ];
        for host in valid {
            assert!(is_valid_host(host), "{:?}", String::from_utf8_lossy(host));
        }
        let invalid: &[&[u8]] = &[
            b"",
            b":80",
            b":",
            b"[]",
            b"127.0.0.1:9000/path",
            b"a, b",
            b"Q a",
            b"a:b",
            b"a:1:2",
            b"[::1",
            b"[::1]x",
            b"[::g]",
            b"[fe80::1%25eth0]",
            b"[v.x]",
            b"x%4",
            b"x%zz",
            // Both digits of a percent-encoding must be hex, not either.
            b"x%4z",
            b"x%z4",
            // A future-version literal needs something after its dot.
            b"[v1.]",
            b"user@host",
            b"a\tb",
        ];
        for host in invalid {
            assert!(!is_valid_host(host), "{:?}", String::from_utf8_lossy(host));
        }
    }

    /// The form, path and query of `target`, as text.
    fn parsed<'a>(target: &'a str, method: &str) -> Option<(TargetForm, &'a str, Option<&'a str>)> {
        let text = |bytes| std::str::from_utf8(bytes).expect("ASCII");
        parse_target(target.as_bytes(), method).map(|t| (t.form, text(t.path), t.query.map(text)))
    }

    #[test]
    fn splits_each_form() {
        use TargetForm::*;
        assert_eq!(
            parsed("/json?a=1?b", "GET"),
            Some((Origin, "/json", Some("a=1?b")))
        );
        assert_eq!(parsed("/", "POST"), Some((Origin, "/", None)));
        assert_eq!(
            parsed("http://127.0.0.1:9000/json", "GET"),
            Some((Absolute, "/json", None))
        );
        assert_eq!(
            parsed("HTTPS://[::1]/a/b?x", "HEAD"),
            Some((Absolute, "/a/b", Some("x")))
        );
        assert_eq!(parsed("http://host", "GET"), Some((Absolute, "/", None)));
        assert_eq!(
            parsed("http://host?x", "GET"),
            Some((Absolute, "/", Some("x")))
        );
        assert_eq!(parsed("*", "OPTIONS"), Some((Asterisk, "", None)));
        assert_eq!(
            parsed("example.com:443", "CONNECT"),
            Some((Authority, "", None))
        );
    }

    #[test]
    fn refuses_targets_a_method_may_not_use() {
        let refused = [
            ("*", "GET"),
            ("A", "GET"),
            ("%/", "HEAD"),
            (":plaintext", "GET"),
            ("example.com:443", "GET"),
            ("/", "CONNECT"),
            ("example.com", "CONNECT"),
            ("example.com:", "CONNECT"),
            (":443", "CONNECT"),
            ("ftp://host/", "GET"),
            ("http:/json", "GET"),
            ("http:///json", "GET"),
            ("http://user@host/", "GET"),
            ("http://host:x/", "GET"),
            ("http://host#frag", "GET"),
            ("/a#frag", "GET"),
            ("/#", "GET"),
            ("/?q=1#frag", "GET"),
            ("http://host/a#frag", "GET"),
            ("/a\\b", "GET"),
            ("/..\\x", "GET"),
            ("/?a\\b", "GET"),
            ("/caf\u{e9}", "GET"),
            ("/\u{1F600}", "GET"),
            ("example.com:443#x", "CONNECT"),
        ];
        for (target, method) in refused {
            assert_eq!(parsed(target, method), None, "{method} {target}");
        }
    }
}
