//! Reloading `--static-dir`: through the library call SIGHUP makes, in both
//! dispatch modes (new, changed and removed files; a failed reload keeping
//! the old files; a keep-alive connection living through it), and through
//! the binary: SIGHUP really reloads, and the start warns of dotfiles.

mod common;
mod static_common;

use std::fs;
use std::sync::Arc;

use common::process::{server_command, Running};
use common::{assert_response, config, start_with, Client};
use static_common::*;
use uppercut_mio_server::{Dispatch, LoadSummary, Routes, StaticLimits, StaticSite};

/// The 200 for a text file holding `body`, with the test tree's mtime.
fn text_file(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\nETag: {}\r\nAccept-Ranges: bytes\r\n\
         Content-Length: {}\r\nDate: {{date}}\r\n\r\n{body}",
        etag_of(body.as_bytes()),
        body.len()
    )
}

fn check(client: &mut Client, path: &str, expected: &str) {
    client.send(get(path).as_bytes());
    assert_response(&client.response(false), expected);
}

fn reload_swaps_the_files_under_open_connections(dispatch: Dispatch) {
    let tree = TempTree::new("reload");
    tree.file("www/a.txt", b"old\n");
    tree.file("www/gone.txt", b"gone\n");
    let limits = StaticLimits {
        max_file: 1024,
        ..StaticLimits::default()
    };
    let site = Arc::new(StaticSite::load(&tree.root.join("www"), limits, false).expect("loads"));
    let server = start_with(
        &config(dispatch),
        Routes::standard().with_static_site(site.clone()),
    );
    let mut before = Client::connect(server.local_addr());
    check(&mut before, "/a.txt", &text_file("old\n"));

    tree.file("www/a.txt", b"new and longer\n");
    tree.file("www/b/added.txt", b"added\n");
    fs::remove_file(tree.root.join("www/gone.txt")).expect("remove a file");
    let summary = site.reload().expect("the reload works");
    let expected = LoadSummary {
        files: 2,
        bytes: 21,
        skipped_dotfiles: 0,
    };
    assert_eq!(summary, expected);
    // The connection opened before the reload sees the new files at once.
    check(&mut before, "/a.txt", &text_file("new and longer\n"));
    check(&mut before, "/b/added.txt", &text_file("added\n"));
    check(&mut before, "/b", &moved("/b/"));
    check(&mut before, "/gone.txt", NOT_FOUND);
    let mut after = Client::connect(server.local_addr());
    check(&mut after, "/a.txt", &text_file("new and longer\n"));

    // A file over the limit: the reload fails, says why, and changes nothing.
    let big = tree.file("www/big.bin", &[b'b'; 2048]);
    let error = site.reload().expect_err("a file is over the limit");
    let message = format!(
        "{} is 2048 bytes, over the per-file limit of 1024 bytes",
        big.display()
    );
    assert_eq!(error.to_string(), message);
    check(&mut before, "/a.txt", &text_file("new and longer\n"));
    check(&mut before, "/big.bin", NOT_FOUND);
    assert_eq!(site.summary(), expected);

    // The directory gone: the same.
    fs::rename(tree.root.join("www"), tree.root.join("moved")).expect("move the directory");
    let error = site.reload().expect_err("the directory is gone");
    let missing = tree.root.join("www").display().to_string();
    assert!(error
        .to_string()
        .starts_with(&format!("cannot read {missing}: ")));
    check(&mut before, "/a.txt", &text_file("new and longer\n"));
    check(&mut after, "/b/added.txt", &text_file("added\n"));
}

in_both_modes!(reload_swaps_the_files_under_open_connections);

/// The binary serving `dir` with one poller and `flags`, logging at info.
fn serve_dir(dir: &std::path::Path, flags: &[&str]) -> Running {
    let mut command = server_command(&["--static-dir"]);
    command.arg(dir).args(flags).env("RUST_LOG", "info");
    Running::start_with_log(command)
}

#[test]
fn sighup_reloads_the_binary_without_dropping_a_connection() {
    let tree = TempTree::new("sighup");
    let www = tree.root.join("www");
    tree.file("www/a.txt", b"old\n");
    let mut process = serve_dir(&www, &["--static-max-file", "1K"]);
    let mut before = Client::connect(process.addr);
    check(&mut before, "/a.txt", &text_file("old\n"));

    tree.file("www/a.txt", b"new\n");
    process.signal(libc::SIGHUP);
    // The log line comes after the new table is published.
    let line = process.wait_for_log("SIGHUP: ");
    let reloaded = format!(
        "SIGHUP: reloaded 1 static files, 4 bytes, from {}",
        www.display()
    );
    assert!(line.ends_with(&reloaded), "{line}");
    check(&mut before, "/a.txt", &text_file("new\n"));
    check(
        &mut Client::connect(process.addr),
        "/a.txt",
        &text_file("new\n"),
    );

    let big = tree.file("www/big.bin", &[b'b'; 2048]);
    process.signal(libc::SIGHUP);
    let line = process.wait_for_log("SIGHUP: ");
    let failed = format!(
        "SIGHUP: reload failed, still serving the files loaded before: static directory {}: \
         {} is 2048 bytes, over the per-file limit of 1024 bytes",
        www.display(),
        big.display()
    );
    assert!(line.contains(" WARN ") && line.ends_with(&failed), "{line}");
    check(&mut before, "/a.txt", &text_file("new\n"));
    check(&mut before, "/big.bin", NOT_FOUND);

    // SIGTERM still shuts down, cleanly.
    process.signal(libc::SIGTERM);
    let status = process.child.wait().expect("the server exits");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn the_start_warns_of_dotfiles_left_out() {
    let tree = TempTree::new("dotfiles-warning");
    let www = tree.root.join("www");
    tree.file("www/.env", b"SECRET=1\n");
    tree.file("www/.git/config", b"[core]\n");
    tree.file("www/a.txt", b"a\n");
    let process = serve_dir(&www, &[]);
    let line = process.wait_for_log("not serving");
    let warning = format!(
        "--static-dir {}: not serving 2 dotfiles or dot-directories (names starting with '.'); \
         --static-dotfiles serves them",
        www.display()
    );
    assert!(
        line.contains(" WARN ") && line.ends_with(&warning),
        "{line}"
    );
    drop(process);

    // With the flag, they are served and nothing is said.
    let process = serve_dir(&www, &["--static-dotfiles"]);
    let mut client = Client::connect(process.addr);
    client.send(get("/.env").as_bytes());
    assert!(client.response(false).ends_with(b"\r\n\r\nSECRET=1\n"));
    process.signal(libc::SIGTERM);
    // Every line from the start to the shutdown: no warning among them.
    let said = process.log_until("shutting down");
    assert!(said.last().unwrap().contains("signal 15"), "{said:?}");
    assert!(
        !said
            .iter()
            .any(|line| line.contains(" WARN ") || line.contains("not serving")),
        "{said:?}"
    );
    // The dotfiles were loaded with the rest: three files, 18 bytes.
    let loaded = format!(
        "loaded 3 static files, 18 bytes, 0 with a gzip copy, from {}",
        www.display()
    );
    assert!(said.iter().any(|line| line.ends_with(&loaded)), "{said:?}");
}

/// The limits are reached, not passed: a file of exactly `max_file` bytes,
/// and files adding up to exactly `max_total`, load; one byte more fails.
#[test]
fn the_limits_themselves_are_allowed() {
    let tree = TempTree::new("exact-limits");
    let www = tree.root.join("www");
    tree.file("www/a.txt", b"aaaa");
    tree.file("www/b.txt", b"bbbbbb");
    let exact = StaticLimits {
        max_file: 6,
        max_total: 10,
    };
    let site = StaticSite::load(&www, exact, false).expect("exactly at the limits");
    let summary = LoadSummary {
        files: 2,
        bytes: 10,
        skipped_dotfiles: 0,
    };
    assert_eq!(site.summary(), summary);
    let file_under = StaticLimits {
        max_file: 5,
        ..exact
    };
    let error = StaticSite::load(&www, file_under, false).expect_err("a file over");
    let b = www.join("b.txt");
    assert_eq!(
        error.to_string(),
        format!(
            "{} is 6 bytes, over the per-file limit of 5 bytes",
            b.display()
        )
    );
    let total_under = StaticLimits {
        max_total: 9,
        ..exact
    };
    let error = StaticSite::load(&www, total_under, false).expect_err("the total over");
    assert!(
        error
            .to_string()
            .ends_with("brings the static files to 10 bytes, over the total limit of 9 bytes"),
        "{error}"
    );
}

/// A read error keeps the io::Error as its source; a symlink loop is such
/// an error (only a dangling symlink is skipped), and `Debug` names the
/// directory and the generation.
#[test]
fn errors_keep_their_cause_and_the_site_describes_itself() {
    use std::error::Error;
    let tree = TempTree::new("errors");
    let www = tree.root.join("www");
    tree.file("www/a.txt", b"a\n");
    let site = StaticSite::load(&www, StaticLimits::default(), false).expect("loads");
    assert_eq!(
        format!("{site:?}"),
        format!("StaticSite {{ dir: {www:?}, generation: 0, .. }}")
    );

    let missing = tree.root.join("missing");
    let error = StaticSite::load(&missing, StaticLimits::default(), false).expect_err("missing");
    let source = error.source().expect("the io::Error behind it");
    let io = source
        .downcast_ref::<std::io::Error>()
        .expect("an io::Error");
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);

    tree.symlink("loop-b", "www/loop-a");
    tree.symlink("loop-a", "www/loop-b");
    let error = StaticSite::load(&www, StaticLimits::default(), false).expect_err("a loop");
    assert!(error.source().is_some(), "{error}");
}

/// A request routed to a file before a reload, whose body comes after it,
/// is answered 503 (try again) once its thread holds the new table: never
/// with the old reply looked up in the new table. One poller in `local`
/// dispatch, so both connections run on the same thread; `100 Continue`
/// shows the first request has been routed.
#[test]
fn a_body_that_arrives_across_a_reload_gets_503() {
    let tree = TempTree::new("body-across-reload");
    tree.file("www/a.txt", b"old\n");
    let site = Arc::new(
        StaticSite::load(&tree.root.join("www"), StaticLimits::default(), false).expect("loads"),
    );
    let one_poller = uppercut_mio_server::Config {
        pollers: 1,
        ..config(Dispatch::Local)
    };
    let server = start_with(
        &one_poller,
        Routes::standard().with_static_site(site.clone()),
    );
    let mut routed = Client::connect(server.local_addr());
    routed.send(
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n",
    );
    assert_eq!(
        common::text(&routed.response(false)),
        "HTTP/1.1 100 Continue\r\n\r\n"
    );

    tree.file("www/0.txt", b"zero, sorted before a.txt\n");
    tree.file("www/a.txt", b"new and longer\n");
    site.reload().expect("the reload works");
    // The thread fetches the new table for this request.
    let mut other = Client::connect(server.local_addr());
    check(&mut other, "/a.txt", &text_file("new and longer\n"));

    routed.send(b"abc");
    let expected = common::error_response(503, "Service Unavailable", "", false, false);
    assert_response(&routed.response(false), &expected);
    check(&mut routed, "/a.txt", &text_file("new and longer\n"));
}
