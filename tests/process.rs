//! The binary as a process: its start line, bad flags, SIGTERM with a
//! response in flight, and running out of file descriptors.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Duration;

use common::{assert_response, read_until_closed, Client};
use socket2::{Domain, Socket, Type};
use uppercut_mio_server::raise_open_files_limit;

const BINARY: &str = env!("CARGO_BIN_EXE_uppercut-mio-server");
const HELLO: &str = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
    Content-Type: text/plain; charset=utf-8\r\nContent-Length: 6\r\nDate: {date}\r\n\r\nhello\n";

/// A server process, killed if the test fails before it exits.
struct Process {
    child: Child,
    addr: SocketAddr,
}

impl Process {
    /// Runs `command` (which execs the binary) and reads its start line.
    fn start(mut command: Command, dispatch: &str) -> Process {
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .expect("the server starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .strip_prefix("listening on http://")
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or_else(|| panic!("unexpected start line {line:?}"));
        assert_eq!(
            line,
            format!("listening on http://{addr} (1 pollers, dispatch {dispatch})\n")
        );
        Process {
            addr: addr.parse().unwrap(),
            child,
        }
    }

    fn binary(dispatch: &str) -> Process {
        let mut command = Command::new(BINARY);
        command.args([
            "--bind",
            "127.0.0.1:0",
            "--pollers",
            "1",
            "--dispatch",
            dispatch,
        ]);
        Process::start(command, dispatch)
    }

    fn terminate(&self) {
        // SAFETY: sends a signal to our own child process.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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

fn sigterm_finishes_the_response_in_flight_and_exits_0(dispatch: &str) {
    let mut server = Process::binary(dispatch);
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&server.addr.into()).unwrap();
    let mut client = Client::from_stream(TcpStream::from(socket));
    let batch = "GET /v1/user HTTP/1.1\r\nHost: t\r\n\r\n".repeat(2000);
    let mut writer = client.stream.try_clone().unwrap();
    let writing = thread::spawn(move || writer.write_all(batch.as_bytes()));
    let first = client.response(false);

    server.terminate();
    writing.join().unwrap().expect("all requests sent");
    for _ in 1..2000 {
        assert_eq!(client.response(false).len(), first.len());
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

/// Under a hard limit of 32 descriptors the server can hold about 25
/// connections. Of 40 clients, the rest wait in the listen backlog while
/// accept fails with EMFILE; the server must keep serving the ones it holds,
/// not spin, and pick the waiting ones up by itself once descriptors free up.
/// It says so on stderr, which the test reads rather than pass on to the
/// test output, where warnings meant to be there would look like failures.
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
        .env_remove("RUST_LOG")
        .stderr(Stdio::piped());
    let mut server = Process::start(command, "local");
    let mut stderr = server.child.stderr.take().unwrap();
    // Drained as it comes, so the server never blocks on a full pipe.
    let warnings = thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).map(|_| text)
    });

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

    server.terminate();
    assert_eq!(server.child.wait().unwrap().code(), Some(0));
    let warnings = warnings.join().unwrap().expect("stderr reads");
    // Each line is the accept pause's warning, and there was one: anything
    // else the server said is shown here, as a failure.
    let pause = "WARN  uppercut_mio_server::runtime::poller::accept] accept: \
        Too many open files (os error 24); pausing accepts for 200ms";
    assert!(
        !warnings.is_empty() && warnings.lines().all(|line| line.ends_with(pause)),
        "the server's stderr:\n{warnings}"
    );
}

/// User and system CPU time of the process, in clock ticks.
fn cpu_ticks(process: &Process) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", process.child.id())).unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}
