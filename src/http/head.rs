//! The bytes every response head shares, however it is built: the
//! `Server` name, the `Connection` header the exchange needs, the `Date` at
//! the end, decimal lengths, and reason phrases; and [`ResponseOut`], what
//! every response writer is handed, so the output, the date and what the
//! exchange decided travel as one value rather than as four arguments.
//!
//! Every head ends in [`ResponseOut::put_date_and_end`], so the fields an
//! operator adds to every response (`--header`), and those a route's
//! middleware adds (`FieldsAfter`), are written there, once, whatever
//! built the rest of the head.

use bytes::BytesMut;

use crate::http::date::DATE_LEN;

/// The `Server` header's value.
pub(crate) const SERVER_NAME: &str = "uppercut-mio-server";

/// The `Connection` header a response carries, which depends on the exchange
/// rather than on the route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Persistence {
    /// HTTP/1.1 keep-alive: the default, no header needed.
    KeepAlive,
    /// HTTP/1.0 keep-alive must be confirmed by the server.
    KeepAliveHttp10,
    /// The connection closes once this response is written.
    Close,
}

impl Persistence {
    /// The bytes from the end of the `Date` value to the end of the head.
    pub(crate) fn head_end(self) -> &'static [u8] {
        match self {
            Persistence::KeepAlive => b"\r\n\r\n",
            Persistence::KeepAliveHttp10 => b"\r\nConnection: keep-alive\r\n\r\n",
            Persistence::Close => b"\r\nConnection: close\r\n\r\n",
        }
    }
}

/// Writes header lines into a response's head after `Date` (and the
/// `--header` fields), knowing its status: a route's middleware, whose
/// `after` hooks see every response of their routes, whatever writer built
/// the rest of the head.
pub(crate) trait FieldsAfter {
    /// Appends lines, each starting with CRLF, for a response of `status`.
    fn put(&self, status: u16, out: &mut BytesMut);
}

/// Where a response goes and what its exchange decided: the connection's
/// output, the `Date` value of this batch, the `Connection` header the
/// response carries, whether it answers a HEAD request (head only), and
/// the fields every response carries.
pub(crate) struct ResponseOut<'a> {
    pub(crate) out: &'a mut BytesMut,
    pub(crate) date: &'a [u8; DATE_LEN],
    pub(crate) persistence: Persistence,
    pub(crate) head_only: bool,
    /// Header lines written after `Date`, each starting with CRLF
    /// (`AddedFields`).
    added: &'a [u8],
    /// Lines a route's middleware writes after those, and where in `out`
    /// the response they go in begins (to read its status).
    after: Option<(&'a dyn FieldsAfter, usize)>,
}

impl<'a> ResponseOut<'a> {
    pub(crate) fn new(
        out: &'a mut BytesMut,
        date: &'a [u8; DATE_LEN],
        persistence: Persistence,
        head_only: bool,
    ) -> ResponseOut<'a> {
        ResponseOut {
            out,
            date,
            persistence,
            head_only,
            added: &[],
            after: None,
        }
    }

    /// The same, with the checked header lines `added` (each starting with
    /// CRLF) after `Date`.
    pub(crate) fn with_added(self, added: &'a [u8]) -> ResponseOut<'a> {
        ResponseOut { added, ..self }
    }

    /// The same, with `after` writing lines after those, for the one
    /// response about to be written.
    pub(crate) fn with_after<'b>(self, after: &'b dyn FieldsAfter) -> ResponseOut<'b>
    where
        'a: 'b,
    {
        let start = self.out.len();
        ResponseOut {
            after: Some((after, start)),
            ..self
        }
    }

    /// Appends head bytes.
    pub(crate) fn put(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }

    /// Appends `value` in decimal, formatted on the stack.
    pub(crate) fn put_decimal(&mut self, value: usize) {
        write_decimal(self.out, value);
    }

    /// Ends a head whose last header line is not yet ended: the `Date`
    /// header, with the `Connection` header the exchange needs, and the
    /// blank line.
    pub(crate) fn end_head(&mut self) {
        self.out.extend_from_slice(b"\r\nDate: ");
        self.put_date_and_end();
    }

    /// Ends a head built up to `Date: `: the date, the added fields, the
    /// `Connection` header the exchange needs, and the blank line.
    pub(crate) fn put_date_and_end(&mut self) {
        self.out.extend_from_slice(self.date);
        self.out.extend_from_slice(self.added);
        if let Some((after, start)) = self.after {
            let status = status_of(&self.out[start..]);
            after.put(status, self.out);
        }
        self.out.extend_from_slice(self.persistence.head_end());
    }

    /// Appends the body, unless the request was HEAD.
    pub(crate) fn body(&mut self, body: &[u8]) {
        if !self.head_only {
            self.out.extend_from_slice(body);
        }
    }
}

impl std::fmt::Debug for ResponseOut<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseOut")
            .field("len", &self.out.len())
            .field("persistence", &self.persistence)
            .field("head_only", &self.head_only)
            .field("after", &self.after.is_some())
            .finish_non_exhaustive()
    }
}

/// The status code of a head that starts `HTTP/1.1 NNN` (0 if it does not).
pub(crate) fn status_of(head: &[u8]) -> u16 {
    head.get(9..12)
        .and_then(|digits| std::str::from_utf8(digits).ok())
        .and_then(|digits| digits.parse().ok())
        .unwrap_or(0)
}

/// Appends `value` in decimal, formatted on the stack.
fn write_decimal(out: &mut BytesMut, mut value: usize) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[start..]);
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
        426 => "Upgrade Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}
