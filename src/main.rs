//! The `uppercut-mio-server` binary: flags, logging, the standard routes and
//! any static directory, and a graceful shutdown on SIGINT or SIGTERM.

use std::process::ExitCode;

use log::{info, warn};
use uppercut_mio_server::cli::{parse_args, start_line, version_line, Command, USAGE};
use uppercut_mio_server::server::raise_open_files_limit;
use uppercut_mio_server::{Routes, Server};

fn main() -> ExitCode {
    // Before any thread starts, so that every thread inherits the mask and the
    // signals wait for `sigwait` below instead of killing the process.
    let shutdown_signals = block_shutdown_signals();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let config = match parse_args(std::env::args().skip(1)) {
        Ok(Command::Run(config)) => config,
        Ok(Command::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::Version) => {
            println!("{}", version_line());
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("uppercut-mio-server: {message} (try --help)");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = raise_open_files_limit() {
        warn!("could not raise the open-files limit: {e}");
    }
    let mut routes = Routes::standard();
    if let Some(dir) = &config.static_dir {
        routes = match routes.with_static_dir(dir, config.static_limits) {
            Ok(routes) => routes,
            Err(e) => {
                eprintln!("uppercut-mio-server: --static-dir {}: {e}", dir.display());
                return ExitCode::FAILURE;
            }
        };
    }
    let server = match Server::start(&config, routes) {
        Ok(server) => server,
        // The error names the address or the file itself.
        Err(e) => {
            eprintln!("uppercut-mio-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", start_line(server.local_addr(), &config, None));
    let signal = wait_for(&shutdown_signals);
    info!(
        "signal {signal}: shutting down within {:?}",
        config.shutdown_timeout
    );
    if !server.shutdown(config.shutdown_timeout) {
        warn!("shutdown timeout: closed the connections still busy");
    }
    ExitCode::SUCCESS
}

fn block_shutdown_signals() -> libc::sigset_t {
    // SAFETY: plain libc calls on a sigset_t owned here.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Blocks until one of the signals in `set` arrives; returns it.
fn wait_for(set: &libc::sigset_t) -> i32 {
    let mut signal = 0;
    // SAFETY: sigwait reads the set and writes the signal number.
    while unsafe { libc::sigwait(set, &mut signal) } != 0 {}
    signal
}
