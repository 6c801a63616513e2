//! Precompressed static files over real sockets, in both dispatch modes: the
//! gzip copy for a request that accepts it (q-values, `*`, case), its own
//! entity tag and 304s, `Vary: Accept-Encoding` on every response of such a
//! file, ranges of the file as it is, a sibling `NAME.gz` used as the copy
//! and served as a file of its own, and no copy for small or binary files.
//! Every exchange of a test shares one keep-alive connection.

mod common;
mod static_common;

use std::io::{Read, Write};

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;

use common::{assert_response, Client};
use static_common::*;
use uppercut_mio_server::Dispatch;

/// 2,900 bytes of CSS: text over 1 KiB, so the server compresses it.
fn big_css() -> String {
    (0..100)
        .map(|i| format!(".rule-{i:03} {{ color: red; }}\n"))
        .collect()
}

/// `content` gzip-compressed as the server does it (flate2, default level),
/// so the expected bytes are exact.
fn gzip(content: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(content).unwrap();
    encoder.finish().unwrap()
}

fn gunzip(compressed: &[u8]) -> Vec<u8> {
    let mut plain = Vec::new();
    GzDecoder::new(compressed).read_to_end(&mut plain).unwrap();
    plain
}

/// The site: `big.css` (compressed here), `small.txt` (1 KiB: not),
/// `photo.png` (not text), and `app.js` with an operator's `app.js.gz`.
fn gzip_site(test: &str) -> TempTree {
    let tree = TempTree::new(test);
    tree.file("www/big.css", big_css().as_bytes());
    tree.file("www/small.txt", &[b's'; 1024]);
    tree.file("www/photo.png", big_css().as_bytes());
    tree.file("www/app.js", b"let x = 1;\n");
    tree.file("www/app.js.gz", &gzip(b"let x = 1; // the operator's\n"));
    tree
}

const LAST_MODIFIED: &str = "Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n";

/// The identity 200 of a file with a gzip copy, `Vary` included.
fn identity(content_type: &str, content: &[u8]) -> Vec<u8> {
    let mut response = format!(
        "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\nContent-Type: {content_type}\r\n\
         {LAST_MODIFIED}ETag: {}\r\nAccept-Ranges: bytes\r\nVary: Accept-Encoding\r\n\
         Content-Length: {}\r\nDate: {{date}}\r\n\r\n",
        etag_of(content),
        content.len()
    )
    .into_bytes();
    response.extend_from_slice(content);
    response
}

/// The gzip copy's 200: `compressed` with its own tag, no `Accept-Ranges`.
fn gzipped(content_type: &str, compressed: &[u8]) -> Vec<u8> {
    let mut response = format!(
        "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\nContent-Type: {content_type}\r\n\
         Content-Encoding: gzip\r\n{LAST_MODIFIED}ETag: {}\r\nVary: Accept-Encoding\r\n\
         Content-Length: {}\r\nDate: {{date}}\r\n\r\n",
        etag_of(compressed),
        compressed.len()
    )
    .into_bytes();
    response.extend_from_slice(compressed);
    response
}

/// A 304 naming `etag`, with `Vary`.
fn not_modified(etag: &str) -> String {
    format!(
        "HTTP/1.1 304 Not Modified\r\nServer: uppercut-mio-server\r\n{LAST_MODIFIED}\
         ETag: {etag}\r\nVary: Accept-Encoding\r\nDate: {{date}}\r\n\r\n"
    )
}

const CSS_TYPE: &str = "text/css; charset=utf-8";

/// Sends `request` and checks the exact bytes that come back (`expected`
/// may hold binary bytes; `{date}` stands for the date).
fn check(client: &mut Client, request: &str, expected: &[u8]) {
    client.send(request.as_bytes());
    let response = client.response(request.starts_with("HEAD "));
    // `assert_response` compares text: the gzip bytes go through it
    // lossily, so compare them exactly here first.
    let body_at = |bytes: &[u8]| common::find(bytes, b"\r\n\r\n").map_or(0, |at| at + 4);
    assert_eq!(
        response[body_at(&response)..],
        expected[body_at(expected)..],
        "{request:?}"
    );
    assert_response(&response, &String::from_utf8_lossy(expected));
}

fn get_with(path: &str, accept_encoding: &str) -> String {
    with_headers(
        "GET",
        path,
        &[&format!("Accept-Encoding: {accept_encoding}")],
    )
}

fn serves_the_gzip_copy_to_a_client_that_accepts_it(dispatch: Dispatch) {
    let tree = gzip_site("accepts");
    let server = serve(dispatch, &tree);
    let css = big_css();
    let compressed = gzip(css.as_bytes());
    assert_eq!(gunzip(&compressed), css.as_bytes());
    let (plain, zipped) = (
        identity(CSS_TYPE, css.as_bytes()),
        gzipped(CSS_TYPE, &compressed),
    );
    let mut client = Client::connect(server.local_addr());
    check(&mut client, &get("/big.css"), &plain);
    for accepted in [
        "gzip",
        "gzip, deflate, br",
        "br;q=1.0, gzip;q=0.8, *;q=0.1",
        "GZip",
        "x-gzip",
        "*",
        "identity;q=0, gzip",
        "gzip ; q=0.5",
    ] {
        check(&mut client, &get_with("/big.css", accepted), &zipped);
    }
    for refused in [
        "gzip;q=0",
        "*;q=0",
        "br",
        "identity",
        "",
        "gzip;q=0.4, identity;q=0.5",
        "gzip;q=2",
        "gzip;level=9",
    ] {
        check(&mut client, &get_with("/big.css", refused), &plain);
    }
    // Two fields are one list.
    let two_fields = with_headers(
        "GET",
        "/big.css",
        &["Accept-Encoding: br", "Accept-Encoding: gzip"],
    );
    check(&mut client, &two_fields, &zipped);
    // HEAD gets the copy's head.
    let head = with_headers("HEAD", "/big.css", &["Accept-Encoding: gzip"]);
    let zipped_head = &zipped[..zipped.len() - compressed.len()];
    check(&mut client, &head, zipped_head);
}

fn tags_differ_per_encoding(dispatch: Dispatch) {
    let tree = gzip_site("tags");
    let server = serve(dispatch, &tree);
    let css = big_css();
    let compressed = gzip(css.as_bytes());
    let (plain_tag, zipped_tag) = (etag_of(css.as_bytes()), etag_of(&compressed));
    assert_ne!(plain_tag, zipped_tag);
    let (plain, zipped) = (
        identity(CSS_TYPE, css.as_bytes()),
        gzipped(CSS_TYPE, &compressed),
    );
    let conditional = |tag: &str, accept: Option<&str>| {
        let if_none_match = format!("If-None-Match: {tag}");
        let accept = accept.map(|value| format!("Accept-Encoding: {value}"));
        let mut headers = vec![if_none_match.as_str()];
        headers.extend(accept.as_deref());
        with_headers("GET", "/big.css", &headers)
    };
    let mut client = Client::connect(server.local_addr());
    let cases = [
        (
            conditional(&zipped_tag, Some("gzip")),
            not_modified(&zipped_tag).into_bytes(),
        ),
        (
            conditional(&plain_tag, None),
            not_modified(&plain_tag).into_bytes(),
        ),
        (
            conditional(&format!("W/{zipped_tag}"), Some("gzip")),
            not_modified(&zipped_tag).into_bytes(),
        ),
        // A tag of the other representation does not match.
        (conditional(&zipped_tag, None), plain.clone()),
        (conditional(&plain_tag, Some("gzip")), zipped.clone()),
        (
            conditional("*", Some("gzip")),
            not_modified(&zipped_tag).into_bytes(),
        ),
        (
            with_headers(
                "GET",
                "/big.css",
                &[
                    "Accept-Encoding: gzip",
                    "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT",
                ],
            ),
            not_modified(&zipped_tag).into_bytes(),
        ),
    ];
    for (request, expected) in cases {
        check(&mut client, &request, &expected);
    }
}

/// A `Range` is a range of the file as it is, whatever the client
/// accepts; the 206 and 416 say `Vary` too.
fn ranges_are_of_the_file_as_it_is(dispatch: Dispatch) {
    let tree = gzip_site("ranges");
    let server = serve(dispatch, &tree);
    let css = big_css();
    let len = css.len();
    let mut client = Client::connect(server.local_addr());
    let part = format!(
        "HTTP/1.1 206 Partial Content\r\nServer: uppercut-mio-server\r\nContent-Type: {CSS_TYPE}\r\n\
         {LAST_MODIFIED}ETag: {}\r\nAccept-Ranges: bytes\r\nVary: Accept-Encoding\r\n\
         Content-Range: bytes 0-9/{len}\r\nContent-Length: 10\r\nDate: {{date}}\r\n\r\n{}",
        etag_of(css.as_bytes()),
        &css[..10]
    );
    let ranged = with_headers(
        "GET",
        "/big.css",
        &["Accept-Encoding: gzip", "Range: bytes=0-9"],
    );
    check(&mut client, &ranged, part.as_bytes());
    let unsatisfiable = format!(
        "HTTP/1.1 416 Range Not Satisfiable\r\nServer: uppercut-mio-server\r\n\
         Content-Type: text/plain; charset=utf-8\r\nAccept-Ranges: bytes\r\n\
         Content-Range: bytes */{len}\r\nVary: Accept-Encoding\r\nContent-Length: 26\r\n\
         Date: {{date}}\r\n\r\n416 Range Not Satisfiable\n"
    );
    let past_the_end = with_headers(
        "GET",
        "/big.css",
        &["Accept-Encoding: gzip", &format!("Range: bytes={len}-")],
    );
    check(&mut client, &past_the_end, unsatisfiable.as_bytes());
    // Several ranges get the whole file, as it is.
    let several = with_headers(
        "GET",
        "/big.css",
        &["Accept-Encoding: gzip", "Range: bytes=0-1,5-6"],
    );
    check(&mut client, &several, &identity(CSS_TYPE, css.as_bytes()));
}

/// An operator's `NAME.gz` is the copy, even for a file too small to
/// compress here, and is served at its own path as a file of its own.
fn a_sibling_gz_is_the_copy_and_a_file_of_its_own(dispatch: Dispatch) {
    let tree = gzip_site("sibling");
    let server = serve(dispatch, &tree);
    let operators = gzip(b"let x = 1; // the operator's\n");
    let js_type = "text/javascript; charset=utf-8";
    let mut client = Client::connect(server.local_addr());
    check(
        &mut client,
        &get_with("/app.js", "gzip"),
        &gzipped(js_type, &operators),
    );
    check(
        &mut client,
        &get("/app.js"),
        &identity(js_type, b"let x = 1;\n"),
    );
    let own = {
        let mut response = format!(
            "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
             Content-Type: application/octet-stream\r\n{LAST_MODIFIED}ETag: {}\r\n\
             Accept-Ranges: bytes\r\nContent-Length: {}\r\nDate: {{date}}\r\n\r\n",
            etag_of(&operators),
            operators.len()
        )
        .into_bytes();
        response.extend_from_slice(&operators);
        response
    };
    check(&mut client, &get_with("/app.js.gz", "gzip"), &own);
}

/// A file of 1 KiB or one that is not text has no copy: no `Vary`, and
/// the same bytes whatever the client accepts.
fn small_and_binary_files_have_no_copy(dispatch: Dispatch) {
    let tree = gzip_site("no-copy");
    let server = serve(dispatch, &tree);
    let mut client = Client::connect(server.local_addr());
    let plain = |content_type: &str, content: &[u8]| {
        let mut response = format!(
            "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\nContent-Type: {content_type}\r\n\
             {LAST_MODIFIED}ETag: {}\r\nAccept-Ranges: bytes\r\nContent-Length: {}\r\n\
             Date: {{date}}\r\n\r\n",
            etag_of(content),
            content.len()
        )
        .into_bytes();
        response.extend_from_slice(content);
        response
    };
    let small = plain("text/plain; charset=utf-8", &[b's'; 1024]);
    let photo = plain("image/png", big_css().as_bytes());
    for accept in ["gzip", "*"] {
        check(&mut client, &get_with("/small.txt", accept), &small);
        check(&mut client, &get_with("/photo.png", accept), &photo);
    }
}

in_both_modes!(
    serves_the_gzip_copy_to_a_client_that_accepts_it,
    tags_differ_per_encoding,
    ranges_are_of_the_file_as_it_is,
    a_sibling_gz_is_the_copy_and_a_file_of_its_own,
    small_and_binary_files_have_no_copy,
);
