//! Command-line configuration: the flags, their defaults, and the usage text.

use std::net::SocketAddr;
use std::thread;

pub const USAGE: &str = "\
usage: uppercut-mio-server [--bind ADDR:PORT] [--pollers N] [--dispatch local|system] [--help]

  --bind ADDR:PORT          address to listen on (default 0.0.0.0:9000)
  --pollers N               event loops, each with its own SO_REUSEPORT listener
                            (default: the number of available cores)
  --dispatch local|system   how readiness reaches connection actors: directly from
                            their poller (local, default) or through the uppercut
                            scheduler (system)
  --help                    print this help

Logging goes through env_logger: RUST_LOG=info or RUST_LOG=debug for more.";

/// How a poller's readiness events reach connection actors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dispatch {
    Local,
    System,
}

impl Dispatch {
    pub fn name(self) -> &'static str {
        match self {
            Dispatch::Local => "local",
            Dispatch::System => "system",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub bind: SocketAddr,
    pub pollers: usize,
    pub dispatch: Dispatch,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: SocketAddr::from(([0, 0, 0, 0], 9000)),
            pollers: thread::available_parallelism().map_or(1, usize::from),
            dispatch: Dispatch::Local,
        }
    }
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Run(Config),
    Help,
}

/// Parses the arguments after the program name; `Err` says what is wrong.
/// Both `--flag value` and `--flag=value` are accepted.
pub fn parse_args<I: IntoIterator<Item = String>>(args: I) -> Result<Command, String> {
    let mut config = Config::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline_value) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_string(), Some(value.to_string())),
            None => (arg, None),
        };
        if flag == "--help" || flag == "-h" {
            return Ok(Command::Help);
        }
        let mut value = || {
            inline_value
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--bind" => {
                let value = value()?;
                config.bind = value
                    .parse()
                    .map_err(|_| format!("--bind: not an ADDR:PORT: {value}"))?;
            }
            "--pollers" => {
                let value = value()?;
                config.pollers = match value.parse() {
                    Ok(n) if n > 0 => n,
                    _ => return Err(format!("--pollers: not a positive number: {value}")),
                };
            }
            "--dispatch" => {
                config.dispatch = match value()?.as_str() {
                    "local" => Dispatch::Local,
                    "system" => Dispatch::System,
                    other => return Err(format!("--dispatch: not local or system: {other}")),
                };
            }
            _ => return Err(format!("unknown argument: {flag}")),
        }
    }
    Ok(Command::Run(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Command, String> {
        parse_args(args.iter().map(|arg| arg.to_string()))
    }

    #[test]
    fn reads_flags_in_both_forms() {
        let expected = Config {
            bind: "127.0.0.1:8080".parse().unwrap(),
            pollers: 3,
            dispatch: Dispatch::System,
        };
        let spaced = parse(&[
            "--bind",
            "127.0.0.1:8080",
            "--pollers",
            "3",
            "--dispatch",
            "system",
        ]);
        assert_eq!(spaced, Ok(Command::Run(expected.clone())));
        let inline = parse(&["--bind=127.0.0.1:8080", "--pollers=3", "--dispatch=system"]);
        assert_eq!(inline, Ok(Command::Run(expected)));
        assert_eq!(parse(&[]), Ok(Command::Run(Config::default())));
        assert_eq!(parse(&["--help"]), Ok(Command::Help));
    }

    #[test]
    fn refuses_bad_flags() {
        for args in [
            &["--bind", "nowhere"][..],
            &["--pollers", "0"],
            &["--dispatch", "remote"],
            &["--pollers"],
            &["--verbose"],
        ] {
            assert!(parse(args).is_err(), "{args:?}");
        }
    }
}
