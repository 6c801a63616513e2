//! The `uppercut-mio-server` binary: flags, logging and the standard routes;
//! the server itself loads the static directory, reloads it on SIGHUP and
//! drains on SIGINT or SIGTERM.

use std::process::ExitCode;

use log::warn;
use uppercut_mio_server::cli::{parse_args, start_line, version_line, Command, USAGE};
use uppercut_mio_server::{raise_open_files_limit, Routes, Server};

fn main() -> ExitCode {
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
    let server = match Server::start(&config, Routes::standard()) {
        Ok(server) => server,
        // The error names the address, the directory or the file itself.
        Err(e) => {
            eprintln!("uppercut-mio-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let files = server.static_site().map(|site| site.summary().files);
    println!("{}", start_line(server.local_addr(), &config, files));
    if let Some(addr) = server.metrics_addr() {
        println!("metrics at http://{addr}/metrics");
    }
    server.run_until_signal();
    ExitCode::SUCCESS
}
