//! `--static-dir` paths over real sockets, in both dispatch modes: the 301
//! that adds a directory's missing `/` (query kept), merged slashes,
//! dotfiles (404 unless asked for), and a directory without an index (404).

mod common;
mod static_common;

use std::sync::Arc;

use common::{assert_response, config, start_with, Client};
use static_common::*;
use uppercut_mio_server::{Dispatch, Routes, Server, StaticLimits, StaticSite};

fn check(client: &mut Client, request: &str, expected: &str) {
    client.send(request.as_bytes());
    let response = client.response(request.starts_with("HEAD "));
    assert_response(&response, expected);
}

fn redirects_a_directory_to_its_slash(dispatch: Dispatch) {
    let tree = site("redirect");
    tree.file("www/a dir/x.txt", b"x\n");
    let server = serve(dispatch, &tree);
    let mut client = Client::connect(server.local_addr());
    for (path, location) in [
        ("/a", "/a/"),
        ("/a?x=1", "/a/?x=1"),
        ("/a?x=1&y=%20", "/a/?x=1&y=%20"),
        ("/a?", "/a/"),
        ("/%61", "/a/"),
        ("//a", "/a/"),
        // A directory without an index is redirected too, then 404.
        ("/css", "/css/"),
        ("/a%20dir?q", "/a%20dir/?q"),
        ("/types", "/types/"),
    ] {
        check(&mut client, &get(path), &moved(location));
    }
    let head_only = moved("/a/?x").replace("301 Moved Permanently\n", "");
    check(&mut client, &with_headers("HEAD", "/a?x", &[]), &head_only);
    // The slash it sends to: the index, or 404 without one.
    check(&mut client, &get("/a/"), &html("<h1>a</h1>\n"));
    check(&mut client, &get("/css/"), NOT_FOUND);
    check(&mut client, &get("/a%20dir/"), NOT_FOUND);
    // Other methods: 405, as for a file.
    client.send(b"DELETE /a HTTP/1.1\r\nHost: t\r\n\r\n");
    let response = client.response(false);
    assert!(response.starts_with(b"HTTP/1.1 405 Method Not Allowed\r\n"));
    // A request with a body is answered once the body is in, when its head
    // (and so its query) is gone: the redirect goes to the bare path.
    let with_body = "GET /a?x=1 HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc";
    check(&mut client, with_body, &moved("/a/"));
    check(&mut client, &get("/a?x=2"), &moved("/a/?x=2"));
}

/// The 200 for an HTML file of the test site holding `body`.
fn html(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\nContent-Type: text/html; charset=utf-8\r\n\
         Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\nETag: {}\r\nAccept-Ranges: bytes\r\n\
         Content-Length: {}\r\nDate: {{date}}\r\n\r\n{body}",
        etag_of(body.as_bytes()),
        body.len()
    )
}

fn merges_slashes(dispatch: Dispatch) {
    let tree = site("slashes");
    let server = serve(dispatch, &tree);
    let mut client = Client::connect(server.local_addr());
    let css = format!("{CSS_HEAD}{CSS}");
    for path in [
        "//css/a.css",
        "/css//a.css",
        "///css///a.css",
        "//css/a.css?x=1",
        "/%2F/css/a.css",
        "//%63ss//a.css",
    ] {
        let expected = if path.contains("%2F") {
            NOT_FOUND
        } else {
            &css
        };
        check(&mut client, &get(path), expected);
    }
    check(&mut client, &get("//a//"), &html("<h1>a</h1>\n"));
    // Merging never climbs out: a `..` above the root is a 400.
    let bad_request = common::error_response(400, "Bad Request", "", true, false);
    check(&mut client, &get("//..//secret.txt"), &bad_request);
}

/// A site with dotfiles at several depths.
fn dotted_site(test: &str) -> TempTree {
    let tree = TempTree::new(test);
    tree.file("www/.env", b"SECRET=1\n");
    tree.file("www/.git/config", b"[core]\n");
    tree.file("www/a/.hidden", b"hidden\n");
    tree.file("www/a/shown.txt", b"shown\n");
    tree.file("www/.well-known/x.txt", b"known\n");
    tree
}

fn serve_site(dispatch: Dispatch, tree: &TempTree, dotfiles: bool) -> Server {
    let www = tree.root.join("www");
    let site = StaticSite::load(&www, StaticLimits::default(), dotfiles).expect("the site loads");
    assert_eq!(
        site.summary().skipped_dotfiles,
        if dotfiles { 0 } else { 4 }
    );
    let routes = Routes::standard().with_static_site(Arc::new(site));
    start_with(&config(dispatch), routes)
}

const DOTTED: [(&str, &str); 4] = [
    ("/.env", "SECRET=1\n"),
    ("/.git/config", "[core]\n"),
    ("/a/.hidden", "hidden\n"),
    ("/.well-known/x.txt", "known\n"),
];

fn hides_dotfiles_by_default(dispatch: Dispatch) {
    let tree = dotted_site("dotfiles-hidden");
    let server = serve_site(dispatch, &tree, false);
    let mut client = Client::connect(server.local_addr());
    for (path, _) in DOTTED {
        check(&mut client, &get(path), NOT_FOUND);
    }
    for path in ["/%2eenv", "//.env", "/.git", "/.git/", "/a/%2Ehidden"] {
        check(&mut client, &get(path), NOT_FOUND);
    }
    client.send(get("/a/shown.txt").as_bytes());
    assert!(client.response(false).ends_with(b"\r\n\r\nshown\n"));
}

fn serves_dotfiles_when_asked(dispatch: Dispatch) {
    let tree = dotted_site("dotfiles-shown");
    let server = serve_site(dispatch, &tree, true);
    let mut client = Client::connect(server.local_addr());
    for (path, body) in DOTTED {
        client.send(get(path).as_bytes());
        let response = client.response(false);
        assert!(response.starts_with(b"HTTP/1.1 200 OK\r\n"), "{path}");
        assert!(
            response.ends_with(format!("\r\n\r\n{body}").as_bytes()),
            "{path}"
        );
    }
    check(&mut client, &get("/.git"), &moved("/.git/"));
}

in_both_modes!(
    redirects_a_directory_to_its_slash,
    merges_slashes,
    hides_dotfiles_by_default,
    serves_dotfiles_when_asked,
);
