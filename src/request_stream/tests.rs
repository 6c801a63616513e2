//! The request stream fed whole and cut into reads at every point.

use super::*;
use crate::http::date::format_imf_fixdate;
use crate::http::request::MAX_HEAD_LEN;

/// Feeds `input` in reads that end at `cuts`, then at its end, as a
/// connection does; returns all the output.
fn feed_in_reads(input: &[u8], cuts: &[usize]) -> Vec<u8> {
    let routes = Routes::standard();
    let date = format_imf_fixdate(0);
    let mut stream = RequestStream::default();
    let (mut out, mut output) = (BytesMut::new(), Vec::new());
    let mut start = 0;
    for &end in cuts.iter().chain([&input.len()]) {
        stream.feed(&input[start..end], &routes, &date, &mut out);
        start = end;
        loop {
            output.extend_from_slice(&out);
            out.clear();
            if !stream.is_held_back() {
                break;
            }
            stream.resume(&routes, &date, &mut out);
        }
    }
    output
}

fn status_line(output: &[u8]) -> String {
    let end = output.iter().position(|&b| b == b'\r').unwrap_or(0);
    String::from_utf8_lossy(&output[..end]).into_owned()
}

/// Found by the fuzz target: a request line past the head limit with a
/// bad version got 400 when it came in one read, 414 when a read ended
/// past the limit but before the version.
#[test]
fn an_oversized_head_gets_one_answer_however_it_arrives() {
    let line = format!("GET /{} HTTP/0.1\r\n\r\n", "a".repeat(MAX_HEAD_LEN));
    let whole = feed_in_reads(line.as_bytes(), &[]);
    assert_eq!(status_line(&whole), "HTTP/1.1 414 URI Too Long");
    assert_eq!(
        feed_in_reads(line.as_bytes(), &[4096, MAX_HEAD_LEN + 1]),
        whole
    );
}

/// The same for a chunk-size line past the limit: the route's answer (405
/// to this POST) in one read, 400 when a read ended inside the line past
/// the limit.
#[test]
fn an_oversized_chunk_size_line_gets_one_answer_however_it_arrives() {
    let request = format!(
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
         1;{}\r\nx\r\n0\r\n\r\n",
        "e".repeat(MAX_HEAD_LEN)
    );
    let whole = feed_in_reads(request.as_bytes(), &[]);
    assert_eq!(status_line(&whole), "HTTP/1.1 400 Bad Request");
    let cuts = [4096, request.len() - 10];
    assert_eq!(feed_in_reads(request.as_bytes(), &cuts), whole);
}
