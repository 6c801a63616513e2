//! The binary as an operator meets it: a second server on a busy address
//! refuses to start, the start line names the static directory and the
//! upstream, and `--access-log` writes one combined-format line per request,
//! naming the server, in time order across pollers, all of them by the time
//! SIGTERM has made it exit.

mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use common::process::{server_command, Running, BINARY};
use common::{config, text, Client};
use socket2::{Domain, Socket, Type};

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
            "listening on http://{} (1 poller, dispatch local, static {dir_arg}: 1 file, \
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
        "--log-name",
        "web-1",
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
        "127.0.0.1 - - [DATE] \"GET /json?x=1 HTTP/1.1\" 200 27 \"http://example.com/\" \"curl/8.0\" server=web-1\n\
         127.0.0.1 - - [DATE] \"HEAD / HTTP/1.1\" 200 0 \"-\" \"-\" server=web-1\n\
         127.0.0.1 - - [DATE] \"GET /missing HTTP/1.1\" 404 14 \"-\" \"say \\x22hi\\x22\" server=web-1\n\
         127.0.0.1 - - [DATE] \"POST / HTTP/1.1\" 405 23 \"-\" \"-\" server=web-1\n\
         127.0.0.1 - - [DATE] \"GET / HTTP/1.0\" 200 6 \"-\" \"-\" server=web-1\n\
         127.0.0.1 - - [DATE] \"GET / HTTP/1.1\" 400 16 \"-\" \"-\" server=web-1\n",
        "{log}"
    );
    fs::remove_file(&path).unwrap();
}

/// Polls `done` until it holds; the server's work shows in files only.
fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "waited 20 s for {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

/// logrotate's convention: the file is moved away, SIGUSR1 makes the server
/// open the path afresh, and from the moment the new file exists every
/// line goes to it; the moved file keeps what was written before.
fn sigusr1_reopens_the_access_log(dispatch: &str) {
    let path = scratch_path(&format!("access-log-reopen-{dispatch}"));
    let rotated = path.with_extension("1");
    let _ = fs::remove_file(&rotated);
    let mut server = Running::start(server_command(&[
        "--dispatch",
        dispatch,
        "--access-log",
        path.to_str().unwrap(),
    ]));
    let mut client = Client::connect(server.addr);
    client.send(b"GET /json HTTP/1.1\r\nHost: t\r\n\r\n");
    client.response(false);
    let read = |path: &PathBuf| fs::read_to_string(path).unwrap_or_default();
    wait_for("the first line", || read(&path).ends_with('\n'));

    fs::rename(&path, &rotated).unwrap();
    server.signal(libc::SIGUSR1);
    wait_for("the reopened file", || path.exists());
    client.send(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n");
    client.response(false);
    // Without --log-name, the server is its host and its process.
    let name = format!(
        "{}:{}",
        uppercut_mio_server::host_node_name(),
        server.child.id()
    );
    assert_eq!(server.terminate(), Some(0));

    assert_eq!(
        without_dates(&read(&rotated)),
        format!("127.0.0.1 - - [DATE] \"GET /json HTTP/1.1\" 200 27 \"-\" \"-\" server={name}\n")
    );
    assert_eq!(
        without_dates(&read(&path)),
        format!(
            "127.0.0.1 - - [DATE] \"GET /plaintext HTTP/1.1\" 200 13 \"-\" \"-\" server={name}\n"
        )
    );
    fs::remove_file(&path).unwrap();
    fs::remove_file(&rotated).unwrap();
}

#[test]
fn sigusr1_reopens_the_access_log_local() {
    sigusr1_reopens_the_access_log("local");
}

#[test]
fn sigusr1_reopens_the_access_log_system() {
    sigusr1_reopens_the_access_log("system");
}

/// A response the server stops sending (a client that reads nothing, past
/// the shutdown timeout) is logged with the body bytes its client was
/// sent, which the client counts once it reads to the end: the socket
/// delivers what it took before the close.
fn logs_the_bytes_sent_of_a_response_cut_short(dispatch: &str) {
    let dir = scratch_path(&format!("cut-short-{dispatch}"));
    fs::create_dir_all(&dir).unwrap();
    const SIZE: usize = 32 << 20;
    let content: Vec<u8> = (0..SIZE).map(|i| (i % 251) as u8).collect();
    fs::write(dir.join("big.bin"), &content).unwrap();
    let path = scratch_path(&format!("access-log-cut-short-{dispatch}"));
    let args = [
        "--dispatch",
        dispatch,
        "--static-dir",
        dir.to_str().unwrap(),
        "--static-max-file",
        "64M",
        "--shutdown-timeout",
        "100ms",
        "--access-log",
        path.to_str().unwrap(),
        "--log-name",
        "cut",
    ];
    // The shutdown timeout's warning is expected: read, not printed.
    let mut server = Running::start_with_log(server_command(&args));
    // A small receive window, and nothing read past the head: the server
    // can send a few MiB at most before its socket stops taking them.
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&server.addr.into()).unwrap();
    let mut stream = TcpStream::from(socket);
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
        .write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    // The head has come: the response is under way.
    let mut received = vec![0u8; 16];
    stream.read_exact(&mut received).unwrap();
    assert_eq!(&received, b"HTTP/1.1 200 OK\r");
    // Cut short: the exit status says so.
    assert_eq!(server.terminate(), Some(3));
    let stderr = server.log_until("shutdown timeout");
    assert!(
        stderr.len() == 1
            && stderr[0].ends_with(
                " WARN  uppercut_mio_server::runtime::server] \
                 shutdown timeout: closed the connections still busy"
            ),
        "{stderr:?}"
    );
    stream.read_to_end(&mut received).unwrap();

    let head_len = received
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .expect("a whole head")
        + 4;
    let body_sent = received.len() - head_len;
    assert!(body_sent < SIZE, "the whole file went: not cut short");
    assert_eq!(&received[head_len..], &content[..body_sent]);
    assert_eq!(
        without_dates(&fs::read_to_string(&path).unwrap()),
        format!(
            "127.0.0.1 - - [DATE] \"GET /big.bin HTTP/1.1\" 200 {body_sent} \"-\" \"-\" server=cut\n"
        )
    );
    fs::remove_file(&path).unwrap();
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn logs_the_bytes_sent_of_a_response_cut_short_local() {
    logs_the_bytes_sent_of_a_response_cut_short("local");
}

#[test]
fn logs_the_bytes_sent_of_a_response_cut_short_system() {
    logs_the_bytes_sent_of_a_response_cut_short("system");
}

#[test]
fn writes_one_line_per_request_local() {
    writes_one_line_per_request("local");
}

#[test]
fn writes_one_line_per_request_system() {
    writes_one_line_per_request("system");
}

/// Two pollers, a connection on each, and requests taking turns between
/// them, each sent once the one before was recorded: the file has them in
/// the order they were answered, which is the order sent, though each
/// poller's lines wait in a ring of its own and the flusher drains the
/// rings one after the other. (A line is timed as its response leaves,
/// once the socket took it, and the client may read the response before
/// its poller gets that far; but a poller records what the socket took
/// as it reads the connection again, before it answers the next request,
/// so the answer to a second request on the same connection, a barrier
/// left out of the check, means the first's line is recorded.)
fn lines_from_every_poller_are_in_time_order(dispatch: uppercut_mio_server::Dispatch) {
    let path = scratch_path(&format!("access-log-order-{}", dispatch.name()));
    let config = uppercut_mio_server::Config {
        pollers: 2,
        access_log: Some(uppercut_mio_server::AccessLogTarget::File(path.clone())),
        log_name: Some("ordered".into()),
        ..config(dispatch)
    };
    let server = common::start_with(&config, uppercut_mio_server::Routes::standard());
    let mut clients = [
        Client::connect(server.local_addr()),
        Client::connect(server.local_addr()),
    ];
    // Each connection has had a response, so each is with its poller.
    for client in &mut clients {
        client.send(b"GET /json?n=start HTTP/1.1\r\nHost: t\r\n\r\n");
        client.response(false);
    }
    assert_eq!(server.connections_per_poller(), [1, 1]);
    for n in 0..40 {
        let client = &mut clients[n % 2];
        client.send(format!("GET /json?n={n} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        client.response(false);
        client.send(b"GET /json?barrier HTTP/1.1\r\nHost: t\r\n\r\n");
        client.response(false);
    }
    server.stop();
    let log = fs::read_to_string(&path).unwrap();
    let expected: String = (0..40)
        .map(|n| {
            format!(
                "127.0.0.1 - - [DATE] \"GET /json?n={n} HTTP/1.1\" 200 27 \"-\" \"-\" server=ordered\n"
            )
        })
        .collect();
    let lines = without_dates(&log);
    let answered = lines
        .lines()
        .filter(|line| !line.contains("n=start") && !line.contains("?barrier"))
        .map(|line| format!("{line}\n"))
        .collect::<String>();
    assert_eq!(answered, expected, "{log}");
    fs::remove_file(&path).unwrap();
}

#[test]
fn lines_from_every_poller_are_in_time_order_local() {
    lines_from_every_poller_are_in_time_order(uppercut_mio_server::Dispatch::Local);
}

#[test]
fn lines_from_every_poller_are_in_time_order_system() {
    lines_from_every_poller_are_in_time_order(uppercut_mio_server::Dispatch::System);
}
