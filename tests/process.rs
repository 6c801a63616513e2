//! The binary as a process: its start line, bad flags, the typed JSON route
//! the benchmarks load, SIGTERM with a response in flight, and running out
//! of file descriptors.

mod common;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::process::Command;
use std::thread;
use std::time::Duration;

use common::process::{server_command, Running, BINARY};
use common::{
    assert_response, pipeline_from_thread, read_until_closed, slow_reader, v1_user, Client, HELLO,
};
use uppercut_mio_server::raise_open_files_limit;

/// `command` (which runs the binary with one poller) started, after
/// checking its whole start line.
fn started(command: Command, dispatch: &str) -> Running {
    let server = Running::start(command);
    assert_eq!(
        server.start_line,
        format!(
            "listening on http://{} (1 poller, dispatch {dispatch})\n",
            server.addr
        )
    );
    server
}

#[test]
fn refuses_bad_flags_in_one_line_with_status_2() {
    let output = Command::new(BINARY).arg("--pollers=none").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "uppercut-mio-server: --pollers: not a positive number: none (try --help)\n"
    );
    assert_eq!(output.stdout, b"");

    // An argument that is not UTF-8 is refused like any other, not a panic.
    let not_utf8 = OsString::from_vec(b"--pollers=\xff".to_vec());
    let output = Command::new(BINARY).arg(not_utf8).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "uppercut-mio-server: --pollers: not UTF-8: \u{FFFD} (try --help)\n"
    );

    let help = Command::new(BINARY).arg("--help").output().unwrap();
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).starts_with("usage: uppercut-mio-server"));

    let version = Command::new(BINARY).arg("--version").output().unwrap();
    assert_eq!(version.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        format!("uppercut-mio-server {}\n", env!("CARGO_PKG_VERSION"))
    );
}

/// `POST /hello/json` (what `bench/run --routes` loads as its JSON row)
/// reads a name from a JSON body and answers JSON, in both dispatch modes.
#[test]
fn the_json_route_greets_in_json() {
    for dispatch in ["local", "system"] {
        let server = started(server_command(&["--dispatch", dispatch]), dispatch);
        let mut client = Client::connect(server.addr);
        client.send(
            b"POST /hello/json HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n\
              Content-Length: 16\r\n\r\n{\"name\":\"World\"}",
        );
        let expected = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
            Content-Type: application/json\r\nContent-Length: 27\r\nDate: {date}\r\n\r\n\
            {\"message\":\"Hello, World!\"}";
        assert_response(&client.response(false), expected);
        client.send(b"POST /hello/json HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}");
        let refused = client.response(false);
        assert!(refused.starts_with(b"HTTP/1.1 415 "), "{refused:?}");
    }
}

fn sigterm_finishes_the_response_in_flight_and_exits_0(dispatch: &str) {
    let mut server = started(server_command(&["--dispatch", dispatch]), dispatch);
    let mut client = slow_reader(server.addr);
    let writing = pipeline_from_thread(&client, "GET /v1/user HTTP/1.1\r\nHost: t\r\n\r\n", 2000);
    let user = v1_user();
    assert_response(&client.response(false), &user);

    server.signal(libc::SIGTERM);
    writing.join().unwrap().expect("all requests sent");
    // Every one of the 2,000 responses arrives whole, byte for byte.
    for _ in 1..2000 {
        assert_response(&client.response(false), &user);
    }
    client.assert_closed();
    assert_eq!(server.child.wait().unwrap().code(), Some(0));
}

#[test]
fn sigterm_finishes_the_response_in_flight_and_exits_0_local() {
    sigterm_finishes_the_response_in_flight_and_exits_0("local");
}

#[test]
fn sigterm_finishes_the_response_in_flight_and_exits_0_system() {
    sigterm_finishes_the_response_in_flight_and_exits_0("system");
}

/// A client that reads nothing keeps its responses unsent past the
/// shutdown timeout: the server closes it and exits 3, not 0, so a
/// supervisor learns that requests went unanswered. An idle keep-alive
/// connection beside it is no such request.
fn exits_3_when_the_shutdown_timeout_cuts_requests_short(dispatch: &str) {
    let args = ["--dispatch", dispatch, "--shutdown-timeout", "200ms"];
    let mut server = Running::start_with_log(server_command(&args));
    let mut idle = Client::connect(server.addr);
    idle.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_response(&idle.response(false), HELLO);
    let client = slow_reader(server.addr);
    let writing = pipeline_from_thread(&client, "GET /v1/user HTTP/1.1\r\nHost: t\r\n\r\n", 2000);
    // The server has begun answering: its output waits for the client.
    let mut head = [0u8; 15];
    std::io::Read::read_exact(&mut &client.stream, &mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200 OK");
    assert_eq!(server.terminate(), Some(3));
    let log = server.rest_of_log();
    assert!(
        log.len() == 1 && log[0].ends_with("shutdown timeout: closed the connections still busy"),
        "{log:?}"
    );
    drop(client);
    // The write may end either way (the server closed the connection
    // while it was under way), but a panic in the writer is the test's.
    if let Err(panic) = writing.join() {
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn exits_3_when_the_shutdown_timeout_cuts_requests_short_local() {
    exits_3_when_the_shutdown_timeout_cuts_requests_short("local");
}

#[test]
fn exits_3_when_the_shutdown_timeout_cuts_requests_short_system() {
    exits_3_when_the_shutdown_timeout_cuts_requests_short("system");
}

/// Under a hard limit of 32 descriptors the server can hold about 25
/// connections. Of 40 clients, the rest wait in the listen backlog while
/// accept fails with EMFILE; the server must keep serving the ones it holds,
/// not spin, and pick the waiting ones up by itself once descriptors free up.
#[test]
fn survives_running_out_of_descriptors() {
    raise_open_files_limit().unwrap();
    let mut command = Command::new("sh");
    command
        .args([
            "-c",
            "ulimit -n 32 && exec \"$0\" --bind 127.0.0.1:0 --pollers 1",
            BINARY,
        ])
        .env_remove("RUST_LOG");
    // The accept pause's warnings are expected: read, not printed.
    let mut server = Running::start_with_log(command);
    assert_eq!(
        server.start_line,
        format!(
            "listening on http://{} (1 poller, dispatch local)\n",
            server.addr
        )
    );

    let mut clients: Vec<Client> = (0..40).map(|_| Client::connect(server.addr)).collect();
    for client in &mut clients {
        client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    }
    // The first ones were accepted before the limit.
    for client in &mut clients[..10] {
        assert_response(&client.response(false), HELLO);
    }
    // Watch the CPU for a second while clients wait in the backlog: a poller
    // retrying accept in a hot loop would burn about 100 ticks (a core). The
    // sleep is the observation window, not a wait for the server.
    let ticks_before = cpu_ticks(&server);
    thread::sleep(Duration::from_secs(1));
    let ticks = cpu_ticks(&server) - ticks_before;
    assert!(
        ticks < 30,
        "the server used {ticks} clock ticks in 1 s while out of descriptors"
    );

    // Closing 20 clients frees descriptors; every remaining client, accepted
    // or still waiting, must then be answered. The first ten have read their
    // response; the next ten get theirs before the close.
    for (index, mut client) in clients.drain(..20).enumerate() {
        client.close_write();
        let rest = read_until_closed(&mut client.stream);
        if index < 10 {
            assert_eq!(rest, b"");
        } else {
            assert_response(&rest, HELLO);
        }
    }
    for client in &mut clients {
        assert_response(&client.response(false), HELLO);
    }

    assert_eq!(server.terminate(), Some(0));
    let warnings = server.rest_of_log();
    // Each line is the accept pause's warning, and there was one: anything
    // else the server said is shown here, as a failure.
    let pause = "WARN  uppercut_mio_server::runtime::poller::accept] accept: \
        Too many open files (os error 24); pausing accepts for 200ms";
    assert!(
        !warnings.is_empty() && warnings.iter().all(|line| line.ends_with(pause)),
        "the server's stderr: {warnings:#?}"
    );
}

/// User and system CPU time of the process, in clock ticks.
fn cpu_ticks(process: &Running) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", process.child.id())).unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// Standard output closed before the server writes to it (a supervisor
/// that stopped reading it): the lines the server prints (the start line,
/// where `/metrics` is) must not stop it.
#[test]
fn a_closed_standard_output_does_not_stop_the_server() {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: pipe fills the two descriptors it is given.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors are new and owned here alone.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut child = Command::new(BINARY)
        .args(["--bind", &addr.to_string(), "--pollers", "1"])
        .args(["--metrics", "127.0.0.1:0"])
        .stdout(std::process::Stdio::from(write))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + common::IO_TIMEOUT;
    let stream = loop {
        match std::net::TcpStream::connect(addr) {
            Ok(stream) => break stream,
            Err(e) => {
                let exited = child.try_wait().unwrap();
                assert!(exited.is_none(), "the server exited: {exited:?} ({e})");
                assert!(std::time::Instant::now() < deadline, "{e}");
                // A polling interval while the server starts.
                thread::sleep(Duration::from_millis(5));
            }
        }
    };
    let mut client = common::Client::from_stream(stream);
    client.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    common::assert_response(&client.response(false), common::HELLO);
    // It stops as it should, when told: exit status 0, and no panic.
    // SAFETY: a signal to our own child process, not yet waited for.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(output.status.success(), "{:?}: {stderr}", output.status);
}

/// A NATS connection that was serving and drops is logged as lost, not as
/// a connect that failed.
#[test]
fn a_dropped_nats_connection_is_logged_as_lost() {
    let mut nats = common::nats::Nats::start();
    let url = nats.url();
    let args = ["--nats", url.as_str(), "--node", "a"];
    let mut command = server_command(&args);
    command.env("RUST_LOG", "info");
    let server = Running::start_with_log(command);
    server.wait_for_log("NATS: connected to");
    nats.kill();
    let lines = server.log_until("serving local routes");
    let last = lines.last().expect("a line");
    assert!(
        last.contains("NATS: lost the connection to ")
            && last.ends_with("; serving local routes and reconnecting")
            && !lines.iter().any(|line| line.contains("cannot connect")),
        "{lines:?}"
    );
}
