//! One access-log line per request, in the combined log format. A
//! connection formats the parts of its line it knows at the request head
//! (peer, time, request line, Referer, User-Agent) into a buffer it keeps,
//! and adds the status and body length when the response is written; the
//! whole line then goes to the thread's ring in [`crate::observe::access_log`].

use std::io::{self, Write};
use std::net::IpAddr;
use std::sync::Arc;

use crate::http::date::DATE_LEN;
use crate::observe::access_log::{record, AccessLog, LogShared};

/// The longest request line, Referer or User-Agent copied into a line.
const MAX_FIELD: usize = 2048;

/// One connection's part of the log: the line of the request in progress.
pub(crate) struct AccessRecorder {
    log: Arc<LogShared>,
    peer: Option<IpAddr>,
    /// The line without its status and length, which go at `split`. Its
    /// capacity is kept, so a connection's later lines allocate nothing.
    line: Vec<u8>,
    split: usize,
}

impl std::fmt::Debug for AccessRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessRecorder")
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

impl AccessRecorder {
    /// A connection's recorder into `log`; `peer` is the client's address.
    pub(crate) fn new(log: &AccessLog, peer: Option<IpAddr>) -> AccessRecorder {
        AccessRecorder {
            log: log.shared(),
            peer,
            line: Vec::new(),
            split: 0,
        }
    }

    /// A request head arrived (whole, or as much as there is of one that is
    /// refused): keep what its line needs.
    pub(crate) fn request(&mut self, head: &[u8], date: &[u8; DATE_LEN]) {
        let mut lines = head.split(|&b| b == b'\n');
        let request_line = lines.next().unwrap_or_default();
        let (mut referer, mut user_agent) = (None, None);
        for field in lines.map(|line| line.strip_suffix(b"\r").unwrap_or(line)) {
            if field.is_empty() {
                break;
            }
            let Some(colon) = field.iter().position(|&b| b == b':') else {
                continue;
            };
            let (name, value) = (&field[..colon], field[colon + 1..].trim_ascii());
            if name.eq_ignore_ascii_case(b"referer") {
                referer = referer.or(Some(value));
            } else if name.eq_ignore_ascii_case(b"user-agent") {
                user_agent = user_agent.or(Some(value));
            }
        }
        let request_line = request_line.strip_suffix(b"\r").unwrap_or(request_line);
        self.begin(Some(request_line), date);
        self.line.extend_from_slice(b" ");
        quoted(&mut self.line, referer);
        self.line.push(b' ');
        quoted(&mut self.line, user_agent);
        self.line.push(b'\n');
    }

    /// The response to the request reported last (or, if none was, to a
    /// connection that timed out before sending one) was written.
    pub(crate) fn response(&mut self, status: u16, body_len: usize, date: &[u8; DATE_LEN]) {
        if self.line.is_empty() {
            self.begin(None, date);
            self.line.extend_from_slice(b" \"-\" \"-\"\n");
        }
        let mut digits = [0u8; 32];
        let numbers = status_and_length(&mut digits, status, body_len);
        let (head, tail) = self.line.split_at(self.split);
        record(&self.log, &[head, numbers, tail]);
        self.line.clear();
    }

    /// Writes `PEER - - [TIME] "REQUEST" ` and marks where the status goes.
    fn begin(&mut self, request_line: Option<&[u8]>, date: &[u8; DATE_LEN]) {
        self.line.clear();
        match self.peer {
            Some(peer) => {
                let _ = write!(self.line, "{peer}");
            }
            None => self.line.push(b'-'),
        }
        self.line.extend_from_slice(b" - - [");
        push_log_time(&mut self.line, date);
        self.line.extend_from_slice(b"] ");
        quoted(&mut self.line, request_line);
        self.line.push(b' ');
        self.split = self.line.len();
    }
}

/// The combined format's time, `10/Oct/2000:13:55:36 +0000`, from the
/// IMF-fixdate `Tue, 10 Oct 2000 13:55:36 GMT`: the same fields reordered.
fn push_log_time(out: &mut Vec<u8>, date: &[u8; DATE_LEN]) {
    out.extend_from_slice(&date[5..7]);
    out.push(b'/');
    out.extend_from_slice(&date[8..11]);
    out.push(b'/');
    out.extend_from_slice(&date[12..16]);
    out.push(b':');
    out.extend_from_slice(&date[17..25]);
    out.extend_from_slice(b" +0000");
}

/// `"value"`, or `"-"` when absent or empty, with quotes, backslashes and
/// bytes that are not printable ASCII escaped as `\xHH` (a log line must
/// stay one line whatever a client sends), cut at `MAX_FIELD` bytes.
fn quoted(out: &mut Vec<u8>, value: Option<&[u8]>) {
    out.push(b'"');
    match value {
        Some(value) if !value.is_empty() => {
            for &byte in &value[..value.len().min(MAX_FIELD)] {
                if byte == b'"' || byte == b'\\' || !(0x20..0x7f).contains(&byte) {
                    const HEX: &[u8; 16] = b"0123456789ABCDEF";
                    let escape = [
                        b'\\',
                        b'x',
                        HEX[usize::from(byte >> 4)],
                        HEX[usize::from(byte & 15)],
                    ];
                    out.extend_from_slice(&escape);
                } else {
                    out.push(byte);
                }
            }
        }
        _ => out.push(b'-'),
    }
    out.push(b'"');
}

/// `STATUS LENGTH` in `buf`, formatted without allocating.
fn status_and_length(buf: &mut [u8; 32], status: u16, body_len: usize) -> &[u8] {
    let mut cursor = io::Cursor::new(&mut buf[..]);
    let _ = write!(cursor, "{status} {body_len}");
    let len = cursor.position() as usize;
    &buf[..len]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AccessLogTarget;
    use crate::http::date::format_imf_fixdate;
    use crate::observe::access_log::AccessLog;

    #[test]
    fn formats_the_combined_line() {
        let log = AccessLog::open(&AccessLogTarget::File(
            std::env::temp_dir().join(format!("uppercut-access-log-unit-{}", std::process::id())),
        ))
        .unwrap();
        let mut recorder = AccessRecorder::new(&log, Some("10.0.0.1".parse().unwrap()));
        let date = format_imf_fixdate(971_186_136);
        recorder.request(
            b"GET /a?b=\"c\" HTTP/1.1\r\nHost: h\r\nuser-agent: t/1\r\nReferer: \r\n\r\n",
            &date,
        );
        // The status and length go between the two spaces after the request.
        assert_eq!(
            String::from_utf8_lossy(&recorder.line),
            "10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /a?b=\\x22c\\x22 HTTP/1.1\"  \
             \"-\" \"t/1\"\n"
        );
        assert!(recorder.line[..recorder.split].ends_with(b"HTTP/1.1\" "));
        let mut digits = [0u8; 32];
        assert_eq!(status_and_length(&mut digits, 404, 12345), b"404 12345");
        log.close();
    }
}
