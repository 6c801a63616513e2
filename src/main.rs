//! The `uppercut-mio-server` binary: flags, logging, the standard routes and
//! any static directory (reloaded on SIGHUP), and a graceful shutdown on
//! SIGINT or SIGTERM.

use std::process::ExitCode;
use std::sync::Arc;

use log::{info, warn};
use uppercut_mio_server::cli::{parse_args, start_line, version_line, Command, USAGE};
use uppercut_mio_server::server::raise_open_files_limit;
use uppercut_mio_server::{Routes, Server, StaticSite};

fn main() -> ExitCode {
    // Before any thread starts, so that every thread inherits the mask and the
    // signals wait for `sigwait` below instead of killing the process.
    let signals = block_signals();
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
    let mut site = None;
    if let Some(dir) = &config.static_dir {
        let loaded = match StaticSite::load(dir, config.static_limits, config.static_dotfiles) {
            Ok(loaded) => Arc::new(loaded),
            Err(e) => {
                eprintln!("uppercut-mio-server: --static-dir {}: {e}", dir.display());
                return ExitCode::FAILURE;
            }
        };
        let skipped = loaded.summary().skipped_dotfiles;
        if skipped > 0 {
            warn!(
                "--static-dir {}: not serving {skipped} dotfiles or dot-directories \
                 (names starting with '.'); --static-dotfiles serves them",
                dir.display()
            );
        }
        routes = routes.with_static_site(Arc::clone(&loaded));
        site = Some(loaded);
    }
    let server = match Server::start(&config, routes) {
        Ok(server) => server,
        // The error names the address or the file itself.
        Err(e) => {
            eprintln!("uppercut-mio-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let files = site.as_ref().map(|site| site.summary().files);
    println!("{}", start_line(server.local_addr(), &config, files));
    if let Some(addr) = server.metrics_addr() {
        println!("metrics at http://{addr}/metrics");
    }
    let signal = loop {
        match wait_for(&signals) {
            libc::SIGHUP => reload(site.as_deref()),
            signal => break signal,
        }
    };
    info!(
        "signal {signal}: shutting down within {:?}",
        config.shutdown_timeout
    );
    if !server.shutdown(config.shutdown_timeout) {
        warn!("shutdown timeout: closed the connections still busy");
    }
    ExitCode::SUCCESS
}

/// SIGHUP: reads the static directory again, here in the thread that waits
/// for signals, off every request path. A failed reload keeps the files
/// already served.
fn reload(site: Option<&StaticSite>) {
    let Some(site) = site else {
        info!("SIGHUP: no --static-dir to reload");
        return;
    };
    match site.reload() {
        Ok(summary) => info!(
            "SIGHUP: reloaded {} static files, {} bytes, from {}",
            summary.files,
            summary.bytes,
            site.dir().display()
        ),
        Err(e) => warn!(
            "SIGHUP: reload failed, still serving the files loaded before: --static-dir {}: {e}",
            site.dir().display()
        ),
    }
}

/// Blocks SIGINT and SIGTERM (shutdown) and SIGHUP (reload) in this thread
/// and every thread started after, so they reach only `wait_for`.
fn block_signals() -> libc::sigset_t {
    // SAFETY: plain libc calls on a sigset_t owned here.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
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
