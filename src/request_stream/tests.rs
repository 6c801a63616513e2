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

/// An actor route's request leaves a call, and the requests pipelined
/// behind it wait for its answer: responses stay in request order.
#[test]
fn pipelined_requests_wait_for_an_actor_s_answer() {
    use crate::http::method::Method;
    use crate::routes::actor_response::ActorResponse;
    use crate::routes::reply::Outcome;

    let routes = Routes::standard().actor(&[Method::Post], "/a", "actor");
    let date = format_imf_fixdate(0);
    let mut stream = RequestStream::default();
    let mut out = BytesMut::new();
    let input = b"POST /a?q=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc\
        GET /json HTTP/1.1\r\nHost: h\r\n\r\n";
    stream.feed(input, &routes, &date, &mut out);
    assert!(out.is_empty(), "nothing before the actor's answer");
    assert!(stream.is_awaiting_call());
    let call = stream.take_call().expect("a call").parts;
    let head = &call.data[..call.head_len];
    assert_eq!(&head[call.path.clone()], b"/a");
    assert_eq!(call.query.clone().map(|q| &head[q]), Some(&b"q=1"[..]));
    assert_eq!(&call.data[call.head_len..], b"abc");

    let answer = ActorResponse::text("ok");
    let end = CallEnd::Outcome(Outcome::Answered(answer));
    stream.complete_call(end, &routes, &date, &mut out);
    let output = String::from_utf8_lossy(&out).into_owned();
    let first = output.find("\r\n\r\nok").expect("the actor's answer");
    let second = output.find("Hello, World!").expect("then /json");
    assert!(first < second);
    assert!(!stream.is_awaiting_call());
}

/// No answer in time: 504, and the stream goes on.
#[test]
fn a_call_that_times_out_answers_504_and_the_stream_goes_on() {
    use crate::http::method::Method;

    let routes = Routes::standard().actor(&[Method::Get], "/a", "actor");
    let date = format_imf_fixdate(0);
    let mut stream = RequestStream::default();
    let mut out = BytesMut::new();
    stream.feed(
        b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n",
        &routes,
        &date,
        &mut out,
    );
    assert!(stream.take_call().is_some());
    stream.complete_call(CallEnd::TimedOut, &routes, &date, &mut out);
    assert_eq!(status_line(&out), "HTTP/1.1 504 Gateway Timeout");
    assert!(!stream.is_closed());
}

/// Draining: the next response says `Connection: close` and ends the
/// stream; a request pipelined behind it gets nothing.
#[test]
fn a_draining_stream_closes_after_its_next_response() {
    let routes = Routes::standard();
    let date = format_imf_fixdate(0);
    let mut stream = RequestStream::default();
    let mut out = BytesMut::new();
    stream.close_after_response();
    let input = b"GET /json HTTP/1.1\r\nHost: h\r\n\r\nGET /json HTTP/1.1\r\nHost: h\r\n\r\n";
    stream.feed(input, &routes, &date, &mut out);
    let date = String::from_utf8_lossy(&date).into_owned();
    let expected = format!(
        "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
         Content-Type: application/json\r\nContent-Length: 27\r\n\
         Date: {date}\r\nConnection: close\r\n\r\n{{\"message\":\"Hello, World!\"}}"
    );
    assert_eq!(String::from_utf8_lossy(&out), expected);
    assert!(stream.is_closed());
}

/// The same for a request that waited for an actor when the drain began.
#[test]
fn an_actor_s_answer_after_a_drain_began_closes_the_stream() {
    use crate::http::method::Method;
    use crate::routes::actor_response::ActorResponse;
    use crate::routes::reply::Outcome;

    let routes = Routes::standard().actor(&[Method::Get], "/a", "actor");
    let date = format_imf_fixdate(0);
    let mut stream = RequestStream::default();
    let mut out = BytesMut::new();
    let input = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /json HTTP/1.1\r\nHost: h\r\n\r\n";
    stream.feed(input, &routes, &date, &mut out);
    assert!(stream.take_call().is_some());
    stream.close_after_response();
    let end = CallEnd::Outcome(Outcome::Answered(ActorResponse::text("ok")));
    stream.complete_call(end, &routes, &date, &mut out);
    let output = String::from_utf8_lossy(&out).into_owned();
    assert!(
        output.ends_with("\r\nConnection: close\r\n\r\nok"),
        "{output:?}"
    );
    assert_eq!(output.matches("HTTP/1.1").count(), 1, "{output:?}");
    assert!(stream.is_closed());
}

/// A head still arriving counts as a request in flight with nothing behind
/// it (a drain then closes after its response); a head behind a whole
/// request held back by the high-water mark does not.
#[test]
fn an_incomplete_head_is_a_request_in_flight_alone() {
    let routes = Routes::standard();
    let date = format_imf_fixdate(0);
    let mut stream = RequestStream::default();
    let mut out = BytesMut::new();
    assert!(!stream.is_in_flight_alone(), "nothing arrived");
    stream.feed(
        b"GET /json HTTP/1.1\r\nHost: h\r\n",
        &routes,
        &date,
        &mut out,
    );
    assert!(stream.is_in_flight_alone());
    stream.feed(b"\r\n", &routes, &date, &mut out);
    assert!(!stream.is_in_flight_alone(), "answered");

    let mut held = RequestStream::default();
    let mut full = BytesMut::new();
    full.resize(crate::sans_io::OUTPUT_HIGH_WATER, b'x');
    held.feed(
        b"GET /json HTTP/1.1\r\nHost: h\r\n\r\nGET /",
        &routes,
        &date,
        &mut full,
    );
    assert!(held.is_held_back());
    assert!(!held.is_in_flight_alone(), "a whole request waits");
}
