//! One access-log line per request, in the combined log format. A
//! connection formats the parts of its line it knows at the request head
//! (peer, request line, Referer, User-Agent) into a buffer it keeps;
//! when the response is written to the output the line waits, whole but
//! for its numbers and its time, until the socket has taken the response's
//! last byte, and then goes with its status and body length to the
//! thread's ring in [`crate::observe::access_log`], which times it and
//! writes the time in.
//!
//! The wait is what makes the length the body bytes actually sent, as
//! nginx's `$body_bytes_sent`: a response cut short (the server stopping
//! past its shutdown timeout, a write timeout, a client gone) is logged,
//! when the connection is dropped, with what its client was sent of it. In
//! the common case the connection writes its batch of responses at once
//! and every line goes out right after that write; the waiting lines share
//! one buffer per connection, cleared (its capacity kept) once empty, so
//! the log still allocates nothing per request.

use std::io::{self, Write};
use std::net::IpAddr;
use std::sync::Arc;

use crate::observe::access_log::{record, AccessLog, LogShared};

/// The longest request line, Referer or User-Agent copied into a line.
const MAX_FIELD: usize = 2048;
/// Waiting lines kept in a buffer larger than this (a burst of pipelined
/// requests) give the memory back once they are all out.
const KEEP_WAITING: usize = 16 * 1024;

/// One connection's part of the log: the line of the request in progress,
/// and the lines of responses the socket has not taken whole yet.
pub(crate) struct AccessRecorder {
    log: Arc<LogShared>,
    peer: Option<IpAddr>,
    /// The line without its time, which goes at `time_at`, and its status
    /// and length, which go at `split`. Its capacity is kept, so a
    /// connection's later lines allocate nothing.
    line: Vec<u8>,
    time_at: usize,
    split: usize,
    /// The lines of `waiting`, one after another, without their numbers.
    waiting_lines: Vec<u8>,
    /// Responses in the output, in order, from the first not all sent.
    waiting: Vec<Waiting>,
    /// Bytes put in the output (responses and interim responses), and
    /// bytes the socket took, since the connection began.
    queued: u64,
    sent: u64,
    /// The request came over HTTP/2 or HTTP/3 (as the HTTP/1.1 request it
    /// means): its line says this version (`HTTP/2.0`, `HTTP/3.0`).
    version: Option<&'static [u8]>,
    /// The request is an HTTP/2 extended CONNECT (RFC 8441), served as the
    /// upgrade it means: its line says `CONNECT`, as the client sent it.
    extended_connect: bool,
}

/// A response written to the output whose line waits for it to be sent.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    /// Its line in `waiting_lines`, and where the time and the numbers go
    /// in it.
    line_end: usize,
    time_at: usize,
    split: usize,
    status: u16,
    /// Where the response's body starts and where it ends in the output,
    /// counted in all the bytes queued on the connection.
    body_start: u64,
    end: u64,
}

impl Waiting {
    /// The bytes of its body among the first `sent` bytes of the output.
    fn body_sent(&self, sent: u64) -> usize {
        // At most the body's length, which is a usize.
        sent.min(self.end).saturating_sub(self.body_start) as usize
    }
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
            time_at: 0,
            split: 0,
            waiting_lines: Vec::new(),
            waiting: Vec::new(),
            queued: 0,
            sent: 0,
            version: None,
            extended_connect: false,
        }
    }

    /// The requests come over HTTP/2: their lines say so.
    pub(crate) fn over_http2(&mut self) {
        self.version = Some(b" HTTP/2.0");
    }

    /// The request is an HTTP/2 extended CONNECT, written as a `GET`
    /// upgrade: its line says `CONNECT`.
    pub(crate) fn extended_connect(&mut self) {
        self.extended_connect = true;
    }

    /// The requests come over HTTP/3: their lines say so.
    pub(crate) fn over_http3(&mut self) {
        self.version = Some(b" HTTP/3.0");
    }

    /// A request head arrived (whole, or as much as there is of one that is
    /// refused): keep what its line needs.
    pub(crate) fn request(&mut self, head: &[u8]) {
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
        match self.version {
            Some(version) => {
                let mut line = Vec::with_capacity(request_line.len() + 8);
                let request_line = match self.extended_connect {
                    true => {
                        line.extend_from_slice(b"CONNECT");
                        request_line.strip_prefix(b"GET").unwrap_or(request_line)
                    }
                    false => request_line,
                };
                line.extend_from_slice(
                    request_line
                        .strip_suffix(b" HTTP/1.1")
                        .unwrap_or(request_line),
                );
                line.extend_from_slice(version);
                self.begin(Some(&line));
            }
            None => self.begin(Some(request_line)),
        }
        self.line.extend_from_slice(b" ");
        quoted(&mut self.line, referer);
        self.line.push(b' ');
        quoted(&mut self.line, user_agent);
    }

    /// The response to the request reported last (or, if none was, to a
    /// connection that timed out before sending one) was written to the
    /// output: `len` bytes, `body_len` of them its body. Its line waits for
    /// [`AccessRecorder::sent`] to report its last byte sent.
    pub(crate) fn response(&mut self, status: u16, len: usize, body_len: usize) {
        if self.line.is_empty() {
            self.begin(None);
            self.line.extend_from_slice(b" \"-\" \"-\"");
        }
        let start = self.waiting_lines.len();
        self.waiting_lines.extend_from_slice(&self.line);
        let response_start = self.queued;
        self.queued += len as u64;
        self.waiting.push(Waiting {
            line_end: self.waiting_lines.len(),
            time_at: start + self.time_at,
            split: start + self.split,
            status,
            body_start: response_start + (len - body_len) as u64,
            end: self.queued,
        });
        self.line.clear();
    }

    /// The response to the request reported last was given by another
    /// server, `node`: its line says so (` node=NAME` after the user
    /// agent).
    pub(crate) fn answered_by(&mut self, node: &[u8]) {
        if !self.line.is_empty() {
            self.line.extend_from_slice(b" node=");
            self.line
                .extend_from_slice(&node[..node.len().min(MAX_FIELD)]);
        }
    }

    /// Bytes that are no response of their own (`100 Continue`) were
    /// written to the output.
    pub(crate) fn interim(&mut self, len: usize) {
        self.queued += len as u64;
    }

    /// The socket took `len` more bytes of the output: the lines of the
    /// responses now sent whole go to the log.
    pub(crate) fn sent(&mut self, len: usize) {
        self.sent += len as u64;
        let done = self
            .waiting
            .iter()
            .take_while(|response| response.end <= self.sent)
            .count();
        if done == 0 {
            return;
        }
        let mut start = 0;
        for response in &self.waiting[..done] {
            let line = &self.waiting_lines[start..response.line_end];
            let body_sent = response.body_sent(self.sent);
            let at = (response.time_at - start, response.split - start);
            write_line(&self.log, line, at, response.status, body_sent);
            start = response.line_end;
        }
        if done == self.waiting.len() {
            if self.waiting_lines.capacity() > KEEP_WAITING {
                self.waiting_lines = Vec::new();
                self.waiting = Vec::new();
            }
            self.waiting_lines.clear();
            self.waiting.clear();
            return;
        }
        // Some wait on behind a response sent in part: move them up.
        self.waiting_lines.drain(..start);
        self.waiting.drain(..done);
        for response in &mut self.waiting {
            response.line_end -= start;
            response.time_at -= start;
            response.split -= start;
        }
    }

    /// Writes `PEER - - [] "REQUEST" ` and marks where the time and the
    /// status go.
    fn begin(&mut self, request_line: Option<&[u8]>) {
        self.line.clear();
        match self.peer {
            Some(peer) => {
                let _ = write!(self.line, "{peer}");
            }
            None => self.line.push(b'-'),
        }
        self.line.extend_from_slice(b" - - [");
        self.time_at = self.line.len();
        self.line.extend_from_slice(b"] ");
        quoted(&mut self.line, request_line);
        self.line.push(b' ');
        self.split = self.line.len();
    }
}

/// What was never sent whole when the connection ends: each line goes to
/// the log with the body bytes its client was sent, none for a response
/// the socket took nothing of.
impl Drop for AccessRecorder {
    fn drop(&mut self) {
        let mut start = 0;
        for response in &self.waiting {
            let line = &self.waiting_lines[start..response.line_end];
            let body_sent = response.body_sent(self.sent);
            let at = (response.time_at - start, response.split - start);
            write_line(&self.log, line, at, response.status, body_sent);
            start = response.line_end;
        }
    }
}

/// Sends one line to the log, its time to go at `at.0` and its numbers at
/// `at.1`.
fn write_line(log: &LogShared, line: &[u8], at: (usize, usize), status: u16, body_len: usize) {
    let mut digits = [0u8; 32];
    let numbers = status_and_length(&mut digits, status, body_len);
    let (head, tail) = line.split_at(at.1);
    record(log, at.0, &[head, numbers, tail]);
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
    use crate::observe::access_log::AccessLog;

    #[test]
    fn formats_the_combined_line() {
        let log = AccessLog::open(
            &AccessLogTarget::File(
                std::env::temp_dir()
                    .join(format!("uppercut-access-log-unit-{}", std::process::id())),
            ),
            "unit",
        )
        .unwrap();
        let mut recorder = AccessRecorder::new(&log, Some("10.0.0.1".parse().unwrap()));
        recorder
            .request(b"GET /a?b=\"c\" HTTP/1.1\r\nHost: h\r\nuser-agent: t/1\r\nReferer: \r\n\r\n");
        // The time goes between the brackets, the status and length between
        // the two spaces after the request.
        assert_eq!(
            String::from_utf8_lossy(&recorder.line),
            "10.0.0.1 - - [] \"GET /a?b=\\x22c\\x22 HTTP/1.1\"  \"-\" \"t/1\""
        );
        assert!(recorder.line[..recorder.time_at].ends_with(b" - - ["));
        assert!(recorder.line[..recorder.split].ends_with(b"HTTP/1.1\" "));
        let mut digits = [0u8; 32];
        assert_eq!(status_and_length(&mut digits, 404, 12345), b"404 12345");
        log.close();
    }

    /// Each line goes out once its response is sent whole; what is left
    /// when the recorder is dropped goes with the body bytes sent of it.
    #[test]
    fn a_line_waits_for_its_response_to_be_sent() {
        let path =
            std::env::temp_dir().join(format!("uppercut-access-log-sent-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let log = AccessLog::open(&AccessLogTarget::File(path.clone()), "unit").unwrap();
        let mut recorder = AccessRecorder::new(&log, Some("10.0.0.1".parse().unwrap()));
        // Output bytes 0..100, the body from 20.
        recorder.request(b"GET /a HTTP/1.1\r\n\r\n");
        recorder.response(200, 100, 80);
        // 100 Continue at 100..125, then 125..175, the body from 161.
        recorder.request(b"POST /b HTTP/1.1\r\n\r\n");
        recorder.interim(25);
        recorder.response(404, 50, 14);
        // 175..215, the body from 205.
        recorder.request(b"GET /c HTTP/1.1\r\n\r\n");
        recorder.answered_by(b"b");
        recorder.response(200, 40, 10);
        recorder.sent(99);
        assert_eq!(recorder.waiting.len(), 3);
        recorder.sent(1);
        assert_eq!(recorder.waiting.len(), 2);
        recorder.sent(66);
        assert_eq!(recorder.waiting.len(), 2);
        drop(recorder);
        log.close();
        let written = std::fs::read_to_string(&path).unwrap();
        // The time, as the flusher writes it: checked for its shape.
        let without_times: Vec<String> = written
            .lines()
            .map(|line| {
                let open = line.find('[').unwrap();
                let close = line.find(']').unwrap();
                assert_eq!(close - open - 1, 26, "{line}");
                assert!(line[open..close].ends_with(" +0000"), "{line}");
                format!("{}{}", &line[..open + 1], &line[close..])
            })
            .collect();
        assert_eq!(
            without_times,
            [
                "10.0.0.1 - - [] \"GET /a HTTP/1.1\" 200 80 \"-\" \"-\" server=unit",
                "10.0.0.1 - - [] \"POST /b HTTP/1.1\" 404 5 \"-\" \"-\" server=unit",
                "10.0.0.1 - - [] \"GET /c HTTP/1.1\" 200 0 \"-\" \"-\" node=b server=unit",
            ]
        );
        let _ = std::fs::remove_file(&path);
    }
}
