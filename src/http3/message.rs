//! A request's field section as the `http` types `gateway/` reads, with
//! the checks RFC 9114 §4.3 asks of a request; and a response as the field
//! section the server sends.

use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Method, Uri};

use crate::h3::qpack::{self, Fields};

/// Fields HTTP/3 forbids (RFC 9114 §4.2): they mean something only to a
/// connection of HTTP/1.1.
const CONNECTION_SPECIFIC: [&[u8]; 5] = [
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"transfer-encoding",
    b"upgrade",
];

/// A request that breaks RFC 9114 §4.3.1 or §4.2: malformed
/// (`H3_MESSAGE_ERROR`, §4.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed;

/// The request head `fields` mean.
pub(crate) fn request_head(fields: Fields) -> Result<http::request::Parts, Malformed> {
    let (mut method, mut scheme, mut authority, mut path, mut protocol) =
        (None, None, None, None, None);
    let mut headers = HeaderMap::with_capacity(fields.fields.len());
    let mut regular = false;
    for (name, value) in fields.fields {
        if let Some(pseudo) = name.strip_prefix(b":") {
            // Pseudo-fields first, each once (§4.3).
            let slot = match pseudo {
                b"method" => &mut method,
                b"scheme" => &mut scheme,
                b"authority" => &mut authority,
                b"path" => &mut path,
                b"protocol" => &mut protocol,
                _ => return Err(Malformed),
            };
            if regular || slot.is_some() {
                return Err(Malformed);
            }
            *slot = Some(value);
            continue;
        }
        regular = true;
        // Names are lower case (§4.2); and no connection-specific field,
        // nor TE but `trailers`.
        if name.iter().any(u8::is_ascii_uppercase)
            || CONNECTION_SPECIFIC.contains(&&name[..])
            || (name == b"te" && value != b"trailers")
        {
            return Err(Malformed);
        }
        let name = HeaderName::from_bytes(&name).map_err(|_| Malformed)?;
        let value = HeaderValue::from_bytes(&value).map_err(|_| Malformed)?;
        headers.append(name, value);
    }
    let method = Method::from_bytes(&method.ok_or(Malformed)?).map_err(|_| Malformed)?;
    let uri = if method == Method::CONNECT && protocol.is_none() {
        // CONNECT names only an authority (§4.4).
        if scheme.is_some() || path.is_some() {
            return Err(Malformed);
        }
        Uri::builder()
            .authority(authority.ok_or(Malformed)?)
            .build()
            .map_err(|_| Malformed)?
    } else {
        let (Some(scheme), Some(path)) = (scheme, path) else {
            return Err(Malformed);
        };
        if path.is_empty() || protocol.is_some() && method != Method::CONNECT {
            return Err(Malformed);
        }
        match authority.as_deref().filter(|a| !a.is_empty()) {
            Some(authority) => Uri::builder()
                .scheme(&scheme[..])
                .authority(authority)
                .path_and_query(&path[..])
                .build()
                .map_err(|_| Malformed)?,
            // A host field stands for a missing :authority (§4.3.1); one
            // of the two is needed, as https and http have authorities.
            None if headers.contains_key(http::header::HOST) => Uri::builder()
                .path_and_query(&path[..])
                .build()
                .map_err(|_| Malformed)?,
            None => return Err(Malformed),
        }
    };
    let mut request = http::Request::new(());
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.headers_mut() = headers;
    Ok(request.into_parts().0)
}

/// Appends the field section of a response with `status` and `headers`
/// (names in lower case, as `http` keeps them).
pub(crate) fn response_fields(status: http::StatusCode, headers: &HeaderMap, out: &mut Vec<u8>) {
    let status = status.as_str().as_bytes();
    let fields = std::iter::once((&b":status"[..], status)).chain(
        headers
            .iter()
            .map(|(name, value)| (name.as_str().as_bytes(), value.as_bytes())),
    );
    qpack::encode(fields, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        Fields {
            fields: pairs
                .iter()
                .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect(),
        }
    }

    #[test]
    fn a_request_is_its_pseudo_fields_and_fields() {
        let head = request_head(fields(&[
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", "example.com:8443"),
            (":path", "/hello/json?x=1"),
            ("content-type", "application/json"),
            ("cookie", "a=1"),
            ("cookie", "b=2"),
        ]))
        .unwrap();
        assert_eq!(head.method, Method::POST);
        assert_eq!(
            head.uri.to_string(),
            "https://example.com:8443/hello/json?x=1"
        );
        assert_eq!(head.headers.get_all("cookie").iter().count(), 2);
        let connect = request_head(fields(&[(":method", "CONNECT"), (":authority", "a:1")]));
        assert_eq!(
            connect.unwrap().uri.authority().map(|a| a.as_str()),
            Some("a:1")
        );
    }

    /// Each of RFC 9114 §4.3.1's and §4.2's rules, broken once.
    #[test]
    fn malformed_requests_are_refused() {
        let base = [
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "a"),
            (":path", "/"),
        ];
        assert!(request_head(fields(&base)).is_ok());
        let host = [
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/x"),
            ("host", "a"),
        ];
        let head = request_head(fields(&host)).unwrap();
        assert_eq!(head.uri.to_string(), "/x");
        assert_eq!(head.headers["host"], "a");
        let m = (":method", "GET");
        let (sc, au, pa) = ((":scheme", "https"), (":authority", "a"), (":path", "/"));
        let broken: [&[(&str, &str)]; 11] = [
            // Neither :authority nor host.
            &[m, sc, pa],
            &[sc, au, pa],
            &[m, au, pa],
            &[m, sc, au],
            &[m, sc, au, (":path", "")],
            &[m, m, sc, au, pa],
            &[m, ("accept", "*/*"), sc, au, pa],
            &[m, sc, au, pa, (":status", "200")],
            &[m, sc, au, pa, ("Accept", "*/*")],
            &[m, sc, au, pa, ("connection", "close")],
            &[m, sc, au, pa, ("te", "gzip")],
        ];
        for request in broken {
            assert_eq!(
                request_head(fields(request)).err(),
                Some(Malformed),
                "{request:?}"
            );
        }
    }

    #[test]
    fn a_response_is_its_status_and_fields() {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("text/plain"));
        let mut out = Vec::new();
        response_fields(http::StatusCode::OK, &headers, &mut out);
        let decoded = qpack::decode(&out, 1024).unwrap();
        assert_eq!(
            decoded.fields,
            [
                (b":status".to_vec(), b"200".to_vec()),
                (b"content-type".to_vec(), b"text/plain".to_vec())
            ]
        );
    }
}
