//! `--static-dir` byte ranges and dates over real sockets, in both dispatch
//! modes: `Range` in each form, 416, the ranges answered with the whole file,
//! `If-Range`, and `If-Modified-Since` with and without `If-None-Match`.
//! Every exchange of a test shares one keep-alive connection, which shows
//! that each of these answers keeps it usable.

mod common;
mod static_common;

use common::{assert_response, text, Client};
use static_common::*;
use uppercut_mio_server::Dispatch;

const CSS_UNSATISFIABLE: &str = "HTTP/1.1 416 Range Not Satisfiable\r\n\
    Server: uppercut-mio-server\r\nContent-Type: text/plain; charset=utf-8\r\n\
    Accept-Ranges: bytes\r\nContent-Range: bytes */21\r\nContent-Length: 26\r\n\
    Date: {date}\r\n\r\n416 Range Not Satisfiable\n";

/// Sends `request` on `client` and checks the response's exact bytes.
fn check(client: &mut Client, request: &str, expected: &str) {
    client.send(request.as_bytes());
    let response = client.response(request.starts_with("HEAD "));
    assert_response(&response, expected);
}

fn ranged(range: &str) -> String {
    with_headers("GET", "/css/a.css", &[&format!("Range: {range}")])
}

fn answers_one_range_with_206(dispatch: Dispatch) {
    let tree = site("range");
    let server = serve(dispatch, &tree);
    let mut client = Client::connect(server.local_addr());
    for (range, first, last) in [
        ("bytes=0-3", 0, 3),
        ("bytes=5-", 5, 20),
        ("bytes=-4", 17, 20),
        ("bytes=-21", 0, 20),
        ("bytes=-500", 0, 20),
        ("bytes=10-1000", 10, 20),
        ("bytes=20-20", 20, 20),
        ("BYTES=1-1", 1, 1),
        ("bytes= 2-4 ,", 2, 4),
    ] {
        check(&mut client, &ranged(range), &css_part(first, last));
    }
    // Through the other spellings of the path, too.
    check(
        &mut client,
        &with_headers("GET", "//css/a%2Ecss", &["Range: bytes=0-3"]),
        &css_part(0, 3),
    );
    // HEAD gets the 206 head, and no body.
    let head_only = css_part(0, 3).replace("\r\n\r\nbody", "\r\n\r\n");
    check(
        &mut client,
        &with_headers("HEAD", "/css/a.css", &["Range: bytes=0-3"]),
        &head_only,
    );
}

fn answers_an_unsatisfiable_range_with_416(dispatch: Dispatch) {
    let tree = site("unsatisfiable");
    let server = serve(dispatch, &tree);
    let mut client = Client::connect(server.local_addr());
    for range in [
        "bytes=21-",
        "bytes=21-30",
        "bytes=99999999999999999999999-",
        "bytes=-0",
    ] {
        check(&mut client, &ranged(range), CSS_UNSATISFIABLE);
    }
    let head_only = CSS_UNSATISFIABLE.replace("416 Range Not Satisfiable\n", "");
    let head = with_headers("HEAD", "/css/a.css", &["Range: bytes=30-"]);
    check(&mut client, &head, &head_only);
}

fn answers_other_ranges_with_the_whole_file(dispatch: Dispatch) {
    let tree = site("whole");
    let server = serve(dispatch, &tree);
    let mut client = Client::connect(server.local_addr());
    let full = format!("{CSS_HEAD}{CSS}");
    // Several ranges, which we may answer with the whole file, and
    // malformed values, which we must ignore (RFC 9110 §14.2).
    for range in [
        "bytes=0-1,3-4",
        "bytes=0-1, 30-",
        "bytes=5-1",
        "bytes=abc",
        "bytes=",
        "bytes=1",
        "bytes =0-1",
        "items=0-1",
        "",
    ] {
        check(&mut client, &ranged(range), &full);
    }
    // Range is a single field: sent twice, it is ignored.
    let twice = with_headers(
        "GET",
        "/css/a.css",
        &["Range: bytes=0-1", "Range: bytes=0-1"],
    );
    check(&mut client, &twice, &full);
    // Only GET and HEAD are served at all.
    client.send(
        with_headers(
            "POST",
            "/css/a.css",
            &["Range: bytes=0-1", "Content-Length: 0"],
        )
        .as_bytes(),
    );
    let response = client.response(false);
    assert!(response.starts_with(b"HTTP/1.1 405 Method Not Allowed\r\n"));
}

fn honours_if_range(dispatch: Dispatch) {
    let tree = site("if-range");
    let server = serve(dispatch, &tree);
    let mut client = Client::connect(server.local_addr());
    let full = format!("{CSS_HEAD}{CSS}");
    let if_range = |validator: &str| {
        with_headers(
            "GET",
            "/css/a.css",
            &["Range: bytes=0-3", &format!("If-Range: {validator}")],
        )
    };
    // The current tag, or the date of Last-Modified: the range.
    check(&mut client, &if_range(CSS_ETAG), &css_part(0, 3));
    check(
        &mut client,
        &if_range("Sun, 06 Nov 1994 08:49:37 GMT"),
        &css_part(0, 3),
    );
    // Anything else (a weak tag, by the strong comparison If-Range needs,
    // another tag, another date, not a validator): the whole file.
    for validator in [
        &format!("W/{CSS_ETAG}")[..],
        "\"stale\"",
        "Sun, 06 Nov 1994 08:49:38 GMT",
        "Sun, 06 Nov 1994 08:49:36 GMT",
        "yesterday",
    ] {
        check(&mut client, &if_range(validator), &full);
    }
    // If-Range without Range changes nothing.
    let alone = with_headers("GET", "/css/a.css", &[&format!("If-Range: {CSS_ETAG}")]);
    check(&mut client, &alone, &full);
}

fn answers_304_when_not_modified_since(dispatch: Dispatch) {
    let tree = site("if-modified-since");
    let server = serve(dispatch, &tree);
    let mut client = Client::connect(server.local_addr());
    let since = |date: &str| {
        with_headers(
            "GET",
            "/css/a.css",
            &[&format!("If-Modified-Since: {date}")],
        )
    };
    // The file is from Sun, 06 Nov 1994 08:49:37 GMT: at or after that,
    // in any of the three date forms, it was not modified.
    for date in [
        "Sun, 06 Nov 1994 08:49:37 GMT",
        "Mon, 07 Nov 1994 00:00:00 GMT",
        "Sunday, 06-Nov-94 08:49:37 GMT",
        "Sun Nov  6 08:49:37 1994",
    ] {
        check(&mut client, &since(date), CSS_NOT_MODIFIED);
    }
    let full = format!("{CSS_HEAD}{CSS}");
    // Before it, in the future (invalid), or not a date: the file.
    for date in [
        "Sun, 06 Nov 1994 08:49:36 GMT",
        "Fri, 01 Jan 2100 00:00:00 GMT",
        "Sun, 06 Nov 1994 08:49:37 UTC",
        "1994-11-06",
        "",
    ] {
        check(&mut client, &since(date), &full);
    }
    // HEAD too; and not modified wins over a range.
    let head = with_headers(
        "HEAD",
        "/css/a.css",
        &["If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT"],
    );
    check(&mut client, &head, CSS_NOT_MODIFIED);
    let ranged = with_headers(
        "GET",
        "/css/a.css",
        &[
            "Range: bytes=0-3",
            "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT",
        ],
    );
    check(&mut client, &ranged, CSS_NOT_MODIFIED);
}

fn if_none_match_overrides_if_modified_since(dispatch: Dispatch) {
    let tree = site("none-match-first");
    let server = serve(dispatch, &tree);
    let mut client = Client::connect(server.local_addr());
    let date = "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT";
    // A tag that does not match: the date is not even looked at.
    let stale = with_headers("GET", "/css/a.css", &["If-None-Match: \"stale\"", date]);
    check(&mut client, &stale, &format!("{CSS_HEAD}{CSS}"));
    let old = with_headers(
        "GET",
        "/css/a.css",
        &[
            &format!("If-None-Match: {CSS_ETAG}"),
            "If-Modified-Since: Sun, 06 Nov 1994 08:49:36 GMT",
        ],
    );
    check(&mut client, &old, CSS_NOT_MODIFIED);
}

in_both_modes!(
    answers_one_range_with_206,
    answers_an_unsatisfiable_range_with_416,
    answers_other_ranges_with_the_whole_file,
    honours_if_range,
    answers_304_when_not_modified_since,
    if_none_match_overrides_if_modified_since,
);

/// A file modified in the very second its site loads may change again
/// within that second, so its date is no strong validator (RFC 9110
/// §8.8.2.2): `If-Range` with that date gets the whole file, not the range.
/// The load must fall in the file's second, so a try whose load crossed
/// into the next second is made again.
#[test]
fn a_date_from_the_second_of_the_load_is_weak() {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};
    use uppercut_mio_server::sans_io::format_imf_fixdate;
    use uppercut_mio_server::{Routes, StaticLimits};
    let unix_now = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_secs()
    };
    for _ in 0..10 {
        let tree = TempTree::new("same-second");
        let path = tree.file("www/a.txt", b"same second\n");
        let second = unix_now();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|file| file.set_modified(UNIX_EPOCH + Duration::from_secs(second)))
            .expect("set the mtime to now");
        let routes = Routes::standard()
            .with_static_dir(&tree.root.join("www"), StaticLimits::default())
            .expect("the site loads");
        if unix_now() != second {
            continue;
        }
        let server = common::start_with(&common::config(Dispatch::Local), routes);
        let mut client = Client::connect(server.local_addr());
        let date = String::from_utf8(format_imf_fixdate(second).to_vec()).unwrap();
        let request = with_headers(
            "GET",
            "/a.txt",
            &["Range: bytes=0-3", &format!("If-Range: {date}")],
        );
        client.send(request.as_bytes());
        let response = text(&client.response(false));
        assert!(
            response.starts_with("HTTP/1.1 200 OK\r\n")
                && response.contains(&format!("\r\nLast-Modified: {date}\r\n"))
                && response.ends_with("\r\n\r\nsame second\n"),
            "{response}"
        );
        return;
    }
    panic!("in 10 tries the load never fell in the second its file was written");
}
