//! The binary as an operator meets it: a second server on a busy address
//! refuses to start, the start line names the static directory and the
//! upstream, and `--access-log` writes one combined-format line per request,
//! all of them by the time SIGTERM has made it exit.

mod common;

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use common::process::{server_command, Running, BINARY};
use common::{text, Client};

/// A path in the target directory, unique to this test and process.
fn scratch_path(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!("{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&path);
    let _ = fs::remove_file(&path);
    path
}

#[test]
fn a_second_server_on_the_same_address_exits_1() {
    let first = Running::start(server_command(&[]));
    let addr = first.addr.to_string();
    let second = Command::new(BINARY)
        .args(["--bind", &addr, "--pollers", "2"])
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(1));
    assert_eq!(
        text(&second.stderr),
        format!("uppercut-mio-server: cannot listen on {addr}: address already in use\n")
    );
    assert_eq!(second.stdout, b"");
}

#[test]
fn the_start_line_names_the_static_directory_and_the_upstream() {
    let dir = scratch_path("start-line-static");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("a.txt"), "a").unwrap();
    let dir_arg = dir.to_str().unwrap();
    let mut server = Running::start(server_command(&[
        "--static-dir",
        dir_arg,
        "--upstream",
        "http://127.0.0.1:9/status",
    ]));
    assert_eq!(
        server.start_line,
        format!(
            "listening on http://{} (1 pollers, dispatch local, static {dir_arg}: 1 file, \
             upstream http://127.0.0.1:9/status)\n",
            server.addr
        )
    );
    assert_eq!(server.terminate(), Some(0));
    fs::remove_dir_all(&dir).unwrap();
}

/// `[10/Oct/2000:13:55:36 +0000]` in each line becomes `[DATE]`, after its
/// shape is checked.
fn without_dates(log: &str) -> String {
    let mut out = String::new();
    for line in log.lines() {
        let open = line.find(" [").expect("a time field") + 2;
        let close = open + 26;
        let time = &line[open..close];
        let shape: String = time
            .chars()
            .map(|c| if c.is_ascii_digit() { '9' } else { c })
            .collect();
        let month = &time[3..6];
        assert_eq!(
            shape.replace(month, "Mon"),
            "99/Mon/9999:99:99:99 +9999",
            "{line}"
        );
        assert!(time.ends_with(" +0000"), "{line}");
        assert!(month.chars().all(|c| c.is_ascii_alphabetic()), "{line}");
        assert_eq!(&line[close..close + 1], "]", "{line}");
        out.push_str(&format!("{}DATE{}\n", &line[..open], &line[close..]));
    }
    out
}

fn writes_one_line_per_request(dispatch: &str) {
    let path = scratch_path(&format!("access-log-{dispatch}"));
    let mut server = Running::start(server_command(&[
        "--dispatch",
        dispatch,
        "--access-log",
        path.to_str().unwrap(),
    ]));
    let mut client = Client::connect(server.addr);
    client.send(
        b"GET /json?x=1 HTTP/1.1\r\nHost: t\r\nUser-Agent: curl/8.0\r\n\
          Referer: http://example.com/\r\n\r\n\
          HEAD / HTTP/1.1\r\nHost: t\r\n\r\n\
          GET /missing HTTP/1.1\r\nHost: t\r\nUser-Agent: say \"hi\"\r\n\r\n\
          POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc",
    );
    for head_only in [false, true, false, false] {
        client.response(head_only);
    }
    client.send(b"GET / HTTP/1.0\r\n\r\n");
    client.response(false);
    let mut bad = Client::connect(server.addr);
    bad.send(b"GET / HTTP/1.1\r\n\r\n");
    bad.response(false);
    assert_eq!(server.terminate(), Some(0));

    let log = fs::read_to_string(&path).unwrap();
    assert_eq!(
        without_dates(&log),
        "127.0.0.1 - - [DATE] \"GET /json?x=1 HTTP/1.1\" 200 27 \"http://example.com/\" \"curl/8.0\"\n\
         127.0.0.1 - - [DATE] \"HEAD / HTTP/1.1\" 200 0 \"-\" \"-\"\n\
         127.0.0.1 - - [DATE] \"GET /missing HTTP/1.1\" 404 14 \"-\" \"say \\x22hi\\x22\"\n\
         127.0.0.1 - - [DATE] \"POST / HTTP/1.1\" 405 23 \"-\" \"-\"\n\
         127.0.0.1 - - [DATE] \"GET / HTTP/1.0\" 200 6 \"-\" \"-\"\n\
         127.0.0.1 - - [DATE] \"GET / HTTP/1.1\" 400 16 \"-\" \"-\"\n",
        "{log}"
    );
    fs::remove_file(&path).unwrap();
}

#[test]
fn writes_one_line_per_request_local() {
    writes_one_line_per_request("local");
}

#[test]
fn writes_one_line_per_request_system() {
    writes_one_line_per_request("system");
}
