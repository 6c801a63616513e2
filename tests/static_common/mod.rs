//! What the static-file tests share: a directory tree under the system
//! temp dir, the site most tests serve, and the exact bytes of its files'
//! responses.

#![allow(dead_code)] // each test file uses its own part

use std::fs;
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use crate::common::{config, start_with, text};
use uppercut_mio_server::{Dispatch, Routes, Server, StaticLimits};

/// The mtime every file gets: Sun, 06 Nov 1994 08:49:37 GMT.
pub const MTIME: u64 = 784_111_777;

pub const CSS: &str = "body { color: red; }\n";
/// FNV-1a 64 of `CSS`, computed independently of the server.
pub const CSS_ETAG: &str = "\"4e78ec085d82e2a8\"";
pub const CSS_HEAD: &str = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
    Content-Type: text/css; charset=utf-8\r\nLast-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
    ETag: \"4e78ec085d82e2a8\"\r\nAccept-Ranges: bytes\r\nContent-Length: 21\r\n\
    Date: {date}\r\n\r\n";
pub const CSS_NOT_MODIFIED: &str = "HTTP/1.1 304 Not Modified\r\nServer: uppercut-mio-server\r\n\
    Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\nETag: \"4e78ec085d82e2a8\"\r\n\
    Date: {date}\r\n\r\n";
pub const NOT_FOUND: &str = "HTTP/1.1 404 Not Found\r\nServer: uppercut-mio-server\r\n\
    Content-Type: text/plain; charset=utf-8\r\nContent-Length: 14\r\nDate: {date}\r\n\r\n\
    404 Not Found\n";

pub const SECRET: &str = "the secret outside the directory\n";

/// A directory tree under the system temp dir, removed on drop.
pub struct TempTree {
    pub root: PathBuf,
}

impl TempTree {
    pub fn new(test: &str) -> TempTree {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let unique = format!(
            "uppercut-static-{}-{test}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let root = std::env::temp_dir().join(unique);
        fs::create_dir_all(&root).expect("create the temp tree");
        TempTree { root }
    }

    /// Writes `content` at `path` under the root, with the mtime `MTIME`.
    pub fn file(&self, path: &str, content: &[u8]) -> PathBuf {
        let path = self.root.join(path);
        fs::create_dir_all(path.parent().expect("a parent")).expect("create the parents");
        fs::write(&path, content).expect("write a file");
        let file = fs::File::options().write(true).open(&path).expect("open");
        file.set_modified(UNIX_EPOCH + Duration::from_secs(MTIME))
            .expect("set the mtime");
        path
    }

    pub fn symlink(&self, target: &str, link: &str) {
        symlink(target, self.root.join(link)).expect("create a symlink");
    }
}

impl Drop for TempTree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

pub const TYPED: [(&str, &str); 17] = [
    ("t.html", "text/html; charset=utf-8"),
    ("t.css", "text/css; charset=utf-8"),
    ("t.js", "text/javascript; charset=utf-8"),
    ("t.json", "application/json"),
    ("t.txt", "text/plain; charset=utf-8"),
    ("t.svg", "image/svg+xml"),
    ("t.xml", "application/xml"),
    ("t.png", "image/png"),
    ("t.jpg", "image/jpeg"),
    ("t.jpeg", "image/jpeg"),
    ("t.gif", "image/gif"),
    ("t.ico", "image/x-icon"),
    ("t.wasm", "application/wasm"),
    ("t.woff2", "font/woff2"),
    ("UPPER.PNG", "image/png"),
    ("t.bin", "application/octet-stream"),
    ("no-extension", "application/octet-stream"),
];

/// `secret.txt` beside `www/`, the served directory, which holds a symlink
/// to it, a symlink to its parent, and one that stays inside.
pub fn site(test: &str) -> TempTree {
    let tree = TempTree::new(test);
    tree.file("secret.txt", SECRET.as_bytes());
    tree.file("www/index.html", b"<h1>home</h1>\n");
    tree.file("www/a/index.html", b"<h1>a</h1>\n");
    tree.file("www/css/a.css", CSS.as_bytes());
    tree.file("www/a b.txt", b"spaced\n");
    for (name, _) in TYPED {
        tree.file(&format!("www/types/{name}"), name.as_bytes());
    }
    tree.symlink("css/a.css", "www/inside-link.css");
    tree.symlink("../secret.txt", "www/outside-link.txt");
    tree.symlink("..", "www/outside-dir");
    tree.symlink("missing.txt", "www/dangling.txt");
    tree
}

pub fn serve(dispatch: Dispatch, tree: &TempTree) -> Server {
    let routes = Routes::standard()
        .with_static_dir(&tree.root.join("www"), StaticLimits::default())
        .expect("the site loads");
    start_with(&config(dispatch), routes)
}

pub fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n")
}

pub fn conditional(method: &str, path: &str, if_none_match: &str) -> String {
    format!("{method} {path} HTTP/1.1\r\nHost: t\r\nIf-None-Match: {if_none_match}\r\n\r\n")
}

pub fn body(response: &[u8]) -> String {
    let response = text(response);
    let start = response.find("\r\n\r\n").expect("a head") + 4;
    response[start..].to_string()
}

/// A request with extra header lines, each without its CRLF.
pub fn with_headers(method: &str, path: &str, headers: &[&str]) -> String {
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: t\r\n");
    for header in headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    request
}

/// The 206 that carries `CSS[first..=last]`, body included.
pub fn css_part(first: usize, last: usize) -> String {
    format!(
        "HTTP/1.1 206 Partial Content\r\nServer: uppercut-mio-server\r\n\
         Content-Type: text/css; charset=utf-8\r\nLast-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
         ETag: \"4e78ec085d82e2a8\"\r\nAccept-Ranges: bytes\r\nContent-Range: bytes {first}-{last}/21\r\n\
         Content-Length: {}\r\nDate: {{date}}\r\n\r\n{}",
        last + 1 - first,
        &CSS[first..=last]
    )
}

/// The 301 to `location`.
pub fn moved(location: &str) -> String {
    format!(
        "HTTP/1.1 301 Moved Permanently\r\nServer: uppercut-mio-server\r\n\
         Content-Type: text/plain; charset=utf-8\r\nLocation: {location}\r\nContent-Length: 22\r\n\
         Date: {{date}}\r\n\r\n301 Moved Permanently\n"
    )
}

/// The strong ETag the server should give `content`: FNV-1a 64 in hex,
/// computed here independently of the server's code.
pub fn etag_of(content: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in content {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("\"{hash:016x}\"")
}
