//! A server (or example) run as a child process: its start line read, its
//! stderr optionally gathered line by line, and killed if the test fails
//! before it exits.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use super::IO_TIMEOUT;

/// The server binary that `cargo test` built.
pub const BINARY: &str = env!("CARGO_BIN_EXE_uppercut-mio-server");

/// The binary with `--bind 127.0.0.1:0 --pollers 1` and `args`.
pub fn server_command(args: &[&str]) -> Command {
    let mut command = Command::new(BINARY);
    command
        .args(["--bind", "127.0.0.1:0", "--pollers", "1"])
        .args(args);
    command
}

/// A running child process.
pub struct Running {
    pub child: Child,
    /// The first line it printed, newline included.
    pub start_line: String,
    /// The address after `listening on http://` in the start line.
    pub addr: SocketAddr,
    stderr: Option<mpsc::Receiver<String>>,
}

impl Running {
    /// Spawns `command` with stdout piped and reads its start line.
    pub fn start(command: Command) -> Running {
        Running::spawn(command, false)
    }

    /// As `start`, with stderr gathered for `log_until`.
    pub fn start_with_log(command: Command) -> Running {
        Running::spawn(command, true)
    }

    fn spawn(mut command: Command, log: bool) -> Running {
        command.stdout(Stdio::piped());
        if log {
            command.stderr(Stdio::piped());
        }
        let mut child = command.spawn().expect("the process starts");
        let stderr = log.then(|| {
            let (lines, stderr) = mpsc::channel();
            let errors = BufReader::new(child.stderr.take().expect("piped stderr"));
            std::thread::spawn(move || {
                for line in errors.lines().map_while(Result::ok) {
                    if lines.send(line).is_err() {
                        break;
                    }
                }
            });
            stderr
        });
        let mut start_line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut start_line)
            .expect("the start line");
        let rest = start_line.trim_end().strip_prefix("listening on ");
        let rest = rest.and_then(|rest| {
            (rest.strip_prefix("http://")).or_else(|| rest.strip_prefix("https://"))
        });
        let addr = rest
            .and_then(|rest| rest.split(' ').next())
            .and_then(|addr| addr.parse().ok());
        let Some(addr) = addr else {
            // Not left running after the test fails.
            let _ = child.kill();
            let _ = child.wait();
            panic!("unexpected start line {start_line:?}");
        };
        Running {
            child,
            start_line,
            addr,
            stderr,
        }
    }

    pub fn signal(&self, signal: i32) {
        let pid = i32::try_from(self.child.id()).expect("a pid fits");
        // SAFETY: a signal to our own child process, not yet waited for.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    }

    /// SIGTERM, then the exit code.
    pub fn terminate(&mut self) -> Option<i32> {
        self.signal(libc::SIGTERM);
        self.child.wait().expect("wait for the process").code()
    }

    /// The stderr lines up to the first that contains `needle`, which is
    /// last; fails after `IO_TIMEOUT` without one.
    pub fn log_until(&self, needle: &str) -> Vec<String> {
        let stderr = self.stderr.as_ref().expect("started with start_with_log");
        let mut lines = Vec::new();
        loop {
            let line = stderr
                .recv_timeout(IO_TIMEOUT)
                .unwrap_or_else(|_| panic!("no log line with {needle:?} after {lines:?}"));
            let found = line.contains(needle);
            lines.push(line);
            if found {
                return lines;
            }
        }
    }

    /// Every stderr line not read yet, to the end of the stream: call it
    /// once the process has exited.
    pub fn rest_of_log(&self) -> Vec<String> {
        let stderr = self.stderr.as_ref().expect("started with start_with_log");
        let mut lines = Vec::new();
        loop {
            match stderr.recv_timeout(IO_TIMEOUT) {
                Ok(line) => lines.push(line),
                Err(mpsc::RecvTimeoutError::Disconnected) => return lines,
                Err(mpsc::RecvTimeoutError::Timeout) => panic!("stderr still open after {lines:?}"),
            }
        }
    }

    /// The next stderr line that contains `needle`.
    pub fn wait_for_log(&self, needle: &str) -> String {
        self.log_until(needle).pop().unwrap_or_default()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Already reaped when the test passed; then this does nothing.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
