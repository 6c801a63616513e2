//! The statuses this server answers with on its own (errors), and the
//! reason phrase of every status a route may send.

use bytes::Bytes;

use crate::http::head::reason_phrase;
use crate::http::response::{CannedResponse, ResponseError};

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
    /// A plain request for a WebSocket route, or an upgrade to a
    /// WebSocket version other than 13.
    UpgradeRequired,
}

impl ErrorStatus {
    pub(crate) const ALL: [ErrorStatus; 13] = [
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
        ErrorStatus::UpgradeRequired,
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
            ErrorStatus::UpgradeRequired => 426,
        }
    }

    /// The reason phrase of the status line.
    pub(crate) fn reason(self) -> &'static str {
        reason_phrase(self.code())
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
                | ErrorStatus::UpgradeRequired
        )
    }

    /// The server's own response: the status line's words as text.
    pub(crate) fn canned(self) -> CannedResponse {
        let body = Bytes::from(format!("{} {}\n", self.code(), self.reason()));
        match self.canned_as(TEXT, body, None) {
            Ok(response) => response,
            Err(e) => unreachable!("the server's own error response: {e}"),
        }
    }

    /// The response with this body of this content type, and the fields
    /// the status calls for: `Allow` on a 405 (`allow`, else what a path
    /// without routes of its own accepts: static files), `Upgrade` on a
    /// 426. An error if the content type cannot go in a field.
    pub(crate) fn canned_as(
        self,
        content_type: &str,
        body: Bytes,
        allow: Option<&str>,
    ) -> Result<CannedResponse, ResponseError> {
        let mut fields = vec![("Content-Type", content_type)];
        match self {
            ErrorStatus::MethodNotAllowed => fields.push(("Allow", allow.unwrap_or("GET, HEAD"))),
            // RFC 9110 §15.5.22 and RFC 6455 §4.4: name what to upgrade to.
            ErrorStatus::UpgradeRequired => {
                fields.extend([("Upgrade", "websocket"), ("Sec-WebSocket-Version", "13")])
            }
            _ => {}
        }
        CannedResponse::try_new(self.code(), self.reason(), &fields, body)
    }
}

/// The content type of the server's own error bodies.
pub(crate) const TEXT: &str = "text/plain; charset=utf-8";

/// The 405 for a path that accepts the methods `allow` lists.
pub(crate) fn not_allowed(allow: &str) -> CannedResponse {
    let status = ErrorStatus::MethodNotAllowed;
    let body = Bytes::from(format!("{} {}\n", status.code(), status.reason()));
    match status.canned_as(TEXT, body, Some(allow)) {
        Ok(response) => response,
        Err(e) => unreachable!("the server's own 405: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_status_has_its_reason_phrase() {
        for status in ErrorStatus::ALL {
            assert!(!status.reason().is_empty(), "{status:?}");
        }
        assert_eq!(
            ErrorStatus::HeaderFieldsTooLarge.reason(),
            "Request Header Fields Too Large"
        );
        assert_eq!(ErrorStatus::PayloadTooLarge.reason(), "Payload Too Large");
    }
}
