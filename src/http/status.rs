//! The statuses this server answers with on its own (errors), and the
//! reason phrase of every status a route may send.

use bytes::Bytes;

use crate::http::response::CannedResponse;

/// The error statuses this server answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorStatus {
    BadRequest,
    NotFound,
    MethodNotAllowed,
    RequestTimeout,
    PayloadTooLarge,
    UriTooLong,
    HeaderFieldsTooLarge,
    NotImplemented,
    BadGateway,
    ServiceUnavailable,
    GatewayTimeout,
    HttpVersionNotSupported,
}

impl ErrorStatus {
    pub(crate) const ALL: [ErrorStatus; 12] = [
        ErrorStatus::BadRequest,
        ErrorStatus::NotFound,
        ErrorStatus::MethodNotAllowed,
        ErrorStatus::RequestTimeout,
        ErrorStatus::PayloadTooLarge,
        ErrorStatus::UriTooLong,
        ErrorStatus::HeaderFieldsTooLarge,
        ErrorStatus::NotImplemented,
        ErrorStatus::BadGateway,
        ErrorStatus::ServiceUnavailable,
        ErrorStatus::GatewayTimeout,
        ErrorStatus::HttpVersionNotSupported,
    ];

    pub(crate) fn code(self) -> u16 {
        match self {
            ErrorStatus::BadRequest => 400,
            ErrorStatus::NotFound => 404,
            ErrorStatus::MethodNotAllowed => 405,
            ErrorStatus::RequestTimeout => 408,
            ErrorStatus::PayloadTooLarge => 413,
            ErrorStatus::UriTooLong => 414,
            ErrorStatus::HeaderFieldsTooLarge => 431,
            ErrorStatus::NotImplemented => 501,
            ErrorStatus::BadGateway => 502,
            ErrorStatus::ServiceUnavailable => 503,
            ErrorStatus::GatewayTimeout => 504,
            ErrorStatus::HttpVersionNotSupported => 505,
        }
    }

    pub(crate) fn reason(self) -> &'static str {
        match self {
            ErrorStatus::BadRequest => "Bad Request",
            ErrorStatus::NotFound => "Not Found",
            ErrorStatus::MethodNotAllowed => "Method Not Allowed",
            ErrorStatus::RequestTimeout => "Request Timeout",
            ErrorStatus::PayloadTooLarge => "Payload Too Large",
            ErrorStatus::UriTooLong => "URI Too Long",
            ErrorStatus::HeaderFieldsTooLarge => "Request Header Fields Too Large",
            ErrorStatus::NotImplemented => "Not Implemented",
            ErrorStatus::BadGateway => "Bad Gateway",
            ErrorStatus::ServiceUnavailable => "Service Unavailable",
            ErrorStatus::GatewayTimeout => "Gateway Timeout",
            ErrorStatus::HttpVersionNotSupported => "HTTP Version Not Supported",
        }
    }

    /// Whether the request stream can go on after this error. Routing and
    /// upstream errors leave the framing intact; after the others we cannot
    /// tell where the next request starts.
    pub(crate) fn keeps_connection(self) -> bool {
        matches!(
            self,
            ErrorStatus::NotFound
                | ErrorStatus::MethodNotAllowed
                | ErrorStatus::BadGateway
                | ErrorStatus::ServiceUnavailable
                | ErrorStatus::GatewayTimeout
        )
    }

    pub(crate) fn canned(self) -> CannedResponse {
        match self {
            // What a path without routes of its own accepts: static files.
            ErrorStatus::MethodNotAllowed => not_allowed("GET, HEAD"),
            _ => self.canned_with(&[]),
        }
    }

    fn canned_with(self, headers: &[(&str, &str)]) -> CannedResponse {
        let body = format!("{} {}\n", self.code(), self.reason());
        let mut all = vec![("Content-Type", "text/plain; charset=utf-8")];
        all.extend_from_slice(headers);
        CannedResponse::new(self.code(), self.reason(), &all, Bytes::from(body))
    }
}

/// The 405 for a path that accepts the methods `allow` lists.
pub(crate) fn not_allowed(allow: &str) -> CannedResponse {
    ErrorStatus::MethodNotAllowed.canned_with(&[("Allow", allow)])
}

/// The reason phrase for `code`; empty for a code without a registered
/// one (a status line may have an empty reason, RFC 9112 §4).
pub(crate) fn reason_phrase(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        203 => "Non-Authoritative Information",
        204 => "No Content",
        205 => "Reset Content",
        206 => "Partial Content",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Payload Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}
