//! The `uppercut-mio-server` binary: flags, logging, the standard routes and
//! any static directory.

use std::process::ExitCode;

use uppercut_mio_server::config::{parse_args, Command, USAGE};
use uppercut_mio_server::server::raise_open_files_limit;
use uppercut_mio_server::{Routes, Server};

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let config = match parse_args(std::env::args().skip(1)) {
        Ok(Command::Run(config)) => config,
        Ok(Command::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("uppercut-mio-server: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = raise_open_files_limit() {
        log::warn!("could not raise the open-files limit: {e}");
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
        Err(e) => {
            eprintln!("uppercut-mio-server: cannot listen on {}: {e}", config.bind);
            return ExitCode::FAILURE;
        }
    };
    println!(
        "listening on http://{} ({} pollers, dispatch {})",
        server.local_addr(),
        config.pollers,
        config.dispatch.name()
    );
    server.join();
    ExitCode::SUCCESS
}
