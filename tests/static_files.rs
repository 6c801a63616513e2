//! `--static-dir` over real sockets, in both dispatch modes: the exact bytes
//! of a served file, index files, content types, conditional requests, HEAD,
//! percent-decoding, dot segments, and every way out of the directory ending
//! at 400 or 404. Each
//! test builds its own directory tree under the system temp dir.

mod common;
mod static_common;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use common::{assert_recent_date, assert_response, error_response, exchange, text, Client};
use static_common::*;
use uppercut_mio_server::Dispatch;

fn serves_a_file_with_every_header(dispatch: Dispatch) {
    let tree = site("every-header");
    let server = serve(dispatch, &tree);
    let expected = format!("{CSS_HEAD}{CSS}");
    assert_response(&exchange(&server, &get("/css/a.css")), &expected);
    // A symlink that stays inside is served as the file it points to.
    let linked = exchange(&server, &get("/inside-link.css"));
    assert_response(&linked, &expected);
}

fn serves_index_html_at_its_directory(dispatch: Dispatch) {
    let tree = site("index");
    let server = serve(dispatch, &tree);
    for (path, expected) in [
        ("/", "<h1>home</h1>\n"),
        ("/index.html", "<h1>home</h1>\n"),
        ("/a/", "<h1>a</h1>\n"),
        ("/a/index.html", "<h1>a</h1>\n"),
        ("/json", "{\"message\":\"Hello, World!\"}"),
    ] {
        assert_eq!(body(&exchange(&server, &get(path))), expected, "{path}");
    }
    // The directory without its slash is redirected to it.
    let redirect = "HTTP/1.1 301 Moved Permanently\r\nServer: uppercut-mio-server\r\n\
        Content-Type: text/plain; charset=utf-8\r\nLocation: /a/\r\nContent-Length: 22\r\n\
        Date: {date}\r\n\r\n301 Moved Permanently\n";
    assert_response(&exchange(&server, &get("/a")), redirect);
}

fn sets_the_content_type_by_extension(dispatch: Dispatch) {
    let tree = site("types");
    let server = serve(dispatch, &tree);
    let mut client = Client::connect(server.local_addr());
    for (name, content_type) in TYPED {
        client.send(get(&format!("/types/{name}")).as_bytes());
        let response = text(&client.response(false));
        let header = format!("\r\nContent-Type: {content_type}\r\n");
        assert!(response.contains(&header), "{name}: {response:?}");
        assert!(
            response.ends_with(&format!("\r\n\r\n{name}")),
            "{response:?}"
        );
    }
}

fn answers_304_to_a_matching_if_none_match(dispatch: Dispatch) {
    let tree = site("conditional");
    let server = serve(dispatch, &tree);
    // One connection throughout: a 304 keeps it open.
    let mut client = Client::connect(server.local_addr());
    for matching in [
        CSS_ETAG.to_string(),
        format!("W/{CSS_ETAG}"),
        format!("\"stale\", {CSS_ETAG}"),
        "*".to_string(),
    ] {
        client.send(conditional("GET", "/css/a.css", &matching).as_bytes());
        assert_response(&client.response(false), CSS_NOT_MODIFIED);
    }
    let full = format!("{CSS_HEAD}{CSS}");
    for other in [
        "\"stale\"",
        "4e78ec085d82e2a8",
        "\"4E78EC085D82E2A8\"",
        "W/",
    ] {
        client.send(conditional("GET", "/css/a.css", other).as_bytes());
        assert_response(&client.response(false), &full);
    }
    // Another file's tag does not match this one.
    client.send(conditional("GET", "/a%20b.txt", CSS_ETAG).as_bytes());
    assert_eq!(body(&client.response(false)), "spaced\n");
}

fn answers_head_without_the_body(dispatch: Dispatch) {
    let tree = site("head");
    let server = serve(dispatch, &tree);
    let mut client = Client::connect(server.local_addr());
    client.send(b"HEAD /css/a.css HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_response(&client.response(true), CSS_HEAD);
    client.send(conditional("HEAD", "/css/a.css", CSS_ETAG).as_bytes());
    assert_response(&client.response(true), CSS_NOT_MODIFIED);
    // Nothing else arrived: the next response is the next request's.
    client.send(get("/css/a.css").as_bytes());
    assert_response(&client.response(false), &format!("{CSS_HEAD}{CSS}"));
}

fn decodes_percent_encoded_paths(dispatch: Dispatch) {
    let tree = site("percent");
    let server = serve(dispatch, &tree);
    let mut client = Client::connect(server.local_addr());
    for path in ["/a%20b.txt", "/a%20b.txt?q=%zz", "/%61%20%62.txt"] {
        client.send(get(path).as_bytes());
        assert_eq!(body(&client.response(false)), "spaced\n", "{path}");
    }
    client.send(get("/%63ss/a%2Ecss").as_bytes());
    assert_response(&client.response(false), &format!("{CSS_HEAD}{CSS}"));
    // Invalid percent-encoding names nothing, nor does an encoded slash,
    // which is not a separator: 404, and the connection stays.
    for path in ["/a%2", "/a%zz.txt", "/a%20b.txt%", "/%", "/css%2Fa.css"] {
        client.send(get(path).as_bytes());
        assert_response(&client.response(false), NOT_FOUND);
    }
}

fn never_serves_outside_the_directory(dispatch: Dispatch) {
    let tree = site("traversal");
    let server = serve(dispatch, &tree);
    let secret = tree.root.join("secret.txt").display().to_string();
    let encoded_secret = secret.replace('/', "%2F");
    // 400: a malformed target (neither origin-form nor absolute-form, a
    // backslash, or a path that climbs above the root, encoded or not);
    // 404: a path that names nothing loaded (an encoded `/` is no separator).
    let attempts = [
        ("/../secret.txt".to_string(), 400),
        ("/css/../../secret.txt".to_string(), 400),
        ("/./../secret.txt".to_string(), 400),
        ("/%2e%2e/secret.txt".to_string(), 400),
        ("/.%2E/secret.txt".to_string(), 400),
        ("//..//secret.txt".to_string(), 400),
        ("/a/./../../secret.txt".to_string(), 400),
        ("http://t/../secret.txt".to_string(), 400),
        ("/css/..".to_string(), 200),
        ("/%2E%2E%2Fsecret.txt".to_string(), 404),
        ("/..%2fsecret.txt".to_string(), 404),
        ("/css%2f..%2f..%2fsecret.txt".to_string(), 404),
        ("/..\\secret.txt".to_string(), 400),
        ("/css\\..\\..\\secret.txt".to_string(), 400),
        ("/secret.txt".to_string(), 404),
        ("/index.html%00".to_string(), 404),
        (secret.clone(), 404),
        (format!("/{secret}"), 404),
        (encoded_secret.clone(), 400),
        (format!("/{encoded_secret}"), 404),
        (format!("http://t{secret}"), 404),
        ("/outside-link.txt".to_string(), 404),
        ("/outside-dir/secret.txt".to_string(), 404),
        ("/outside-dir/www/index.html".to_string(), 404),
        ("/dangling.txt".to_string(), 404),
    ];
    for (attempt, status) in attempts {
        let response = exchange(&server, &get(&attempt));
        assert!(!text(&response).contains(SECRET), "{attempt} leaked");
        let expected = match status {
            400 => error_response(400, "Bad Request", "", true, false),
            404 => NOT_FOUND.to_string(),
            // Inside the directory still: its index.
            _ => HOME.to_string(),
        };
        assert_response(&response, &expected);
    }
}

/// `/` at the root's index, as `css/..` names it.
const HOME: &str = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
    Content-Type: text/html; charset=utf-8\r\nLast-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
    ETag: \"84c545b842c084bb\"\r\nAccept-Ranges: bytes\r\nContent-Length: 14\r\n\
    Date: {date}\r\n\r\n<h1>home</h1>\n";

/// Dot segments are removed before the lookup (RFC 3986 §5.2.4), encoded
/// or not and after slashes are merged, as nginx does: a path that stays
/// inside the directory names what it resolves to.
fn resolves_dot_segments_inside_the_directory(dispatch: Dispatch) {
    let tree = site("dots");
    let server = serve(dispatch, &tree);
    let css = format!("{CSS_HEAD}{CSS}");
    let mut client = Client::connect(server.local_addr());
    for path in [
        "/a/../css/a.css",
        "/./css/a.css",
        "/css/./a.css",
        "/types/../a/../css/a.css",
        "/a/%2e%2E/css/a.css",
        "/css/x/..//a.css",
        "//a//..//css/a.css",
        "http://t/a/../css/a.css",
    ] {
        client.send(get(path).as_bytes());
        assert_response(&client.response(false), &css);
    }
    for (path, expected) in [
        ("/css/..", "<h1>home</h1>\n"),
        ("/a/.", "<h1>a</h1>\n"),
        ("/css/../a/./", "<h1>a</h1>\n"),
        ("/css/../a%20b.txt", "spaced\n"),
    ] {
        client.send(get(path).as_bytes());
        assert_eq!(body(&client.response(false)), expected, "{path}");
    }
    // A file's path with a segment after it is no file: 404, and the
    // connection stays.
    client.send(get("/css/a.css/.").as_bytes());
    assert_response(&client.response(false), NOT_FOUND);
    // A directory reached by dots without its slash is redirected to it.
    client.send(get("/css/../a").as_bytes());
    assert_response(&client.response(false), &moved("/a/"));
}

fn never_dates_a_file_after_the_response(dispatch: Dispatch) {
    let tree = TempTree::new("future");
    let file = tree.file("www/future.txt", b"later\n");
    let tomorrow = SystemTime::now() + Duration::from_secs(86_400);
    let handle = fs::File::options().write(true).open(file).expect("open");
    handle.set_modified(tomorrow).expect("set the mtime");
    let server = serve(dispatch, &tree);
    let response = text(&exchange(&server, &get("/future.txt")));
    let last_modified = response
        .split("\r\nLast-Modified: ")
        .nth(1)
        .map(|rest| &rest[..29])
        .expect("a Last-Modified header");
    assert_recent_date(last_modified);
}

in_both_modes!(
    serves_a_file_with_every_header,
    serves_index_html_at_its_directory,
    sets_the_content_type_by_extension,
    answers_304_to_a_matching_if_none_match,
    answers_head_without_the_body,
    decodes_percent_encoded_paths,
    never_serves_outside_the_directory,
    resolves_dot_segments_inside_the_directory,
    never_dates_a_file_after_the_response,
);

/// Runs the server binary on `dir` with `flags`; it must exit 1 before it
/// listens. Returns what it printed on stderr.
fn binary_fails(dir: &Path, flags: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_uppercut-mio-server"))
        .args(["--bind", "127.0.0.1:0", "--static-dir"])
        .arg(dir)
        .args(flags)
        .env_remove("RUST_LOG")
        .output()
        .expect("run the server binary");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(text(&output.stdout), "");
    text(&output.stderr)
}

#[test]
fn start_fails_naming_the_file_over_a_limit() {
    let tree = TempTree::new("limits");
    let www = tree.root.join("www");
    tree.file("www/a.txt", &[b'a'; 600]);
    let big = tree.file("www/big.bin", &[b'b'; 2048]);
    let second = tree.file("www/c.txt", &[b'c'; 600]);

    let stderr = binary_fails(&www, &["--static-max-file", "1K"]);
    let expected = format!(
        "uppercut-mio-server: --static-dir {}: {} is 2048 bytes, over the per-file limit of 1024 bytes\n",
        www.display(),
        big.display()
    );
    assert_eq!(stderr, expected);

    fs::remove_file(big).expect("remove the big file");
    let stderr = binary_fails(&www, &["--static-max-total=1000"]);
    let expected = format!(
        "uppercut-mio-server: --static-dir {}: {} brings the static files to 1200 bytes, \
         over the total limit of 1000 bytes\n",
        www.display(),
        second.display()
    );
    assert_eq!(stderr, expected);

    let missing = tree.root.join("missing");
    let stderr = binary_fails(&missing, &[]);
    assert!(stderr.contains(&format!("cannot read {}: ", missing.display())));
}
