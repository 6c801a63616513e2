//! The command line: the usage text, and flags parsed into a [`Config`].

use std::path::PathBuf;
use std::time::Duration;

use crate::config::{Config, Dispatch, UpstreamConfig};

pub const USAGE: &str = "\
usage: uppercut-mio-server [--bind ADDR:PORT] [--pollers N] [--dispatch local|system]
                           [--header-timeout T] [--keepalive-timeout T] [--write-timeout T]
                           [--max-connections N] [--shutdown-timeout T]
                           [--static-dir DIR [--static-max-file SIZE] [--static-max-total SIZE]
                                             [--static-dotfiles]]
                           [--upstream URL [--upstream-conns N] [--upstream-timeout T]
                                           [--upstream-queue N]]
                           [--help]

  --bind ADDR:PORT          address to listen on (default 0.0.0.0:9000)
  --pollers N               event loops, each with its own SO_REUSEPORT listener
                            (default: the number of available cores)
  --dispatch local|system   how readiness reaches connection actors: directly from
                            their poller (local, default) or through the uppercut
                            scheduler (system)
  --header-timeout T        a request (head and body) not complete in time gets 408
                            and the connection closes (default 10s)
  --keepalive-timeout T     an idle keep-alive connection is closed (default 75s)
  --write-timeout T         a client that reads nothing while its output is backed
                            up is closed (default 30s)
  --max-connections N       past N open connections, new ones are closed at once
                            (default 100000)
  --shutdown-timeout T      on SIGINT or SIGTERM, finish in-flight requests for at
                            most T, then exit (default 10s)
  --static-dir DIR          also serve every file under DIR, loaded at start and
                            again on SIGHUP, at its path under DIR; DIR/index.html
                            also at /
  --static-max-file SIZE    refuse to start if a file under DIR is larger
                            (default 16M)
  --static-max-total SIZE   refuse to start if the files under DIR add up to more
                            (default 256M)
                            SIZE: bytes, or with a K, M or G suffix (KiB, MiB, GiB)
  --static-dotfiles         also serve dotfiles (/.env, /.git/config): by default
                            any path with a component starting with . is 404
  --upstream URL            serve GET /io with the JSON that GET URL returns
                            (http://HOST:PORT/PATH), over pooled keep-alive connections
  --upstream-conns N        upstream connections per poller at most (default 32)
  --upstream-timeout T      an upstream answer later than T gets 504 (default 5s)
  --upstream-queue N        requests waiting for an upstream connection, per poller;
                            past it, 503 (default 1024)
  --help                    print this help

Durations are a number with ms, s or m: 500ms, 10s, 2m.

Logging goes through env_logger: RUST_LOG=info or RUST_LOG=debug for more.";

/// A duration written as a number and a unit: `500ms`, `10s`, `2m`.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    match unit {
        "ms" => Some(Duration::from_millis(number)),
        "s" => Some(Duration::from_secs(number)),
        "m" => number.checked_mul(60).map(Duration::from_secs),
        _ => None,
    }
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Run(Box<Config>),
    Help,
}

/// Parses the arguments after the program name; `Err` says what is wrong.
/// Both `--flag value` and `--flag=value` are accepted.
pub fn parse_args<I: IntoIterator<Item = String>>(args: I) -> Result<Command, String> {
    let mut config = Config::default();
    let mut args = args.into_iter();
    let mut upstream_url = None;
    let (mut upstream_conns, mut upstream_timeout, mut upstream_queue) = (None, None, None);
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
            "--pollers" => config.pollers = positive(&flag, &value()?)?,
            "--max-connections" => config.max_connections = positive(&flag, &value()?)?,
            "--header-timeout" => config.timeouts.header = duration(&flag, &value()?)?,
            "--keepalive-timeout" => config.timeouts.keepalive = duration(&flag, &value()?)?,
            "--write-timeout" => config.timeouts.write = duration(&flag, &value()?)?,
            "--shutdown-timeout" => config.shutdown_timeout = duration(&flag, &value()?)?,
            "--dispatch" => {
                config.dispatch = match value()?.as_str() {
                    "local" => Dispatch::Local,
                    "system" => Dispatch::System,
                    other => return Err(format!("--dispatch: not local or system: {other}")),
                };
            }
            "--static-dir" => config.static_dir = Some(PathBuf::from(value()?)),
            "--static-max-file" => config.static_limits.max_file = parse_size(&flag, &value()?)?,
            "--static-max-total" => config.static_limits.max_total = parse_size(&flag, &value()?)?,
            "--static-dotfiles" if inline_value.is_some() => {
                return Err("--static-dotfiles takes no value".into())
            }
            "--static-dotfiles" => config.static_dotfiles = true,
            "--upstream" => upstream_url = Some(value()?),
            "--upstream-conns" => upstream_conns = Some(positive(&flag, &value()?)?),
            "--upstream-timeout" => upstream_timeout = Some(duration(&flag, &value()?)?),
            "--upstream-queue" => upstream_queue = Some(positive(&flag, &value()?)?),
            _ => return Err(format!("unknown argument: {flag}")),
        }
    }
    // The pool flags may come before --upstream, so they apply at the end.
    let pool_flags =
        upstream_conns.is_some() || upstream_timeout.is_some() || upstream_queue.is_some();
    match upstream_url {
        Some(url) => {
            let mut upstream = UpstreamConfig::from_url(&url)?;
            upstream.conns = upstream_conns.unwrap_or(upstream.conns);
            upstream.timeout = upstream_timeout.unwrap_or(upstream.timeout);
            upstream.queue = upstream_queue.unwrap_or(upstream.queue);
            config.upstream = Some(upstream);
        }
        None if pool_flags => {
            return Err(
                "--upstream-conns, --upstream-timeout and --upstream-queue need --upstream".into(),
            )
        }
        None => {}
    }
    Ok(Command::Run(Box::new(config)))
}

fn positive(flag: &str, value: &str) -> Result<usize, String> {
    match value.parse() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{flag}: not a positive number: {value}")),
    }
}

fn duration(flag: &str, value: &str) -> Result<Duration, String> {
    match parse_duration(value) {
        Some(d) if !d.is_zero() => Ok(d),
        _ => Err(format!(
            "{flag}: not a duration like 500ms, 10s or 2m: {value}"
        )),
    }
}

/// A size in bytes: digits, then optionally a binary unit (`K`, `KiB`, `M`,
/// `MiB`, `G`, `GiB`, in any case).
fn parse_size(flag: &str, value: &str) -> Result<u64, String> {
    let digits_end = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let (digits, unit) = value.split_at(digits_end);
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        _ => return Err(format!("{flag}: not a size (bytes, K, M or G): {value}")),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|count| count.checked_mul(1 << shift))
        .ok_or_else(|| format!("{flag}: not a size (bytes, K, M or G): {value}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Timeouts;
    use crate::static_files::StaticLimits;

    fn parse(args: &[&str]) -> Result<Command, String> {
        parse_args(args.iter().map(|arg| arg.to_string()))
    }

    #[test]
    fn reads_flags_in_both_forms() {
        let expected = Config {
            bind: "127.0.0.1:8080".parse().unwrap(),
            pollers: 3,
            dispatch: Dispatch::System,
            ..Config::default()
        };
        let spaced = parse(&[
            "--bind",
            "127.0.0.1:8080",
            "--pollers",
            "3",
            "--dispatch",
            "system",
        ]);
        assert_eq!(spaced, Ok(Command::Run(Box::new(expected.clone()))));
        let inline = parse(&["--bind=127.0.0.1:8080", "--pollers=3", "--dispatch=system"]);
        assert_eq!(inline, Ok(Command::Run(Box::new(expected))));
        assert_eq!(parse(&[]), Ok(Command::Run(Box::default())));
        assert_eq!(parse(&["--help"]), Ok(Command::Help));
    }

    #[test]
    fn reads_limits_and_durations() {
        let args = [
            "--header-timeout=500ms",
            "--keepalive-timeout=2m",
            "--write-timeout=3s",
            "--max-connections=7",
            "--shutdown-timeout=1s",
        ];
        let Ok(Command::Run(config)) = parse(&args) else {
            panic!("{args:?} refused");
        };
        let timeouts = Timeouts {
            header: Duration::from_millis(500),
            keepalive: Duration::from_secs(120),
            write: Duration::from_secs(3),
        };
        assert_eq!(config.timeouts, timeouts);
        assert_eq!(config.max_connections, 7);
        assert_eq!(config.shutdown_timeout, Duration::from_secs(1));
    }

    #[test]
    fn reads_the_static_flags() {
        let expected = Config {
            static_dir: Some(PathBuf::from("/srv/www")),
            static_limits: StaticLimits {
                max_file: 1536 * 1024,
                max_total: 2 << 30,
            },
            ..Config::default()
        };
        let args = [
            "--static-dir",
            "/srv/www",
            "--static-max-file=1536K",
            "--static-max-total",
            "2GiB",
        ];
        let mut dotfiles = expected.clone();
        dotfiles.static_dotfiles = true;
        let with_dotfiles = [&args[..], &["--static-dotfiles"]].concat();
        assert_eq!(parse(&with_dotfiles), Ok(Command::Run(Box::new(dotfiles))));
        assert_eq!(parse(&args), Ok(Command::Run(Box::new(expected))));
        let defaults = parse(&["--static-dir=www"]);
        let Ok(Command::Run(config)) = defaults else {
            panic!("{defaults:?}");
        };
        assert_eq!(config.static_limits.max_file, 16 * 1024 * 1024);
        assert_eq!(config.static_limits.max_total, 256 * 1024 * 1024);
    }

    #[test]
    fn reads_sizes_with_binary_units() {
        for (value, bytes) in [
            ("1048576", 1 << 20),
            ("0", 0),
            ("16M", 16 << 20),
            ("256MiB", 256 << 20),
            ("3k", 3 << 10),
            ("1gib", 1 << 30),
        ] {
            assert_eq!(parse_size("--size", value), Ok(bytes), "{value}");
        }
        for value in ["", "M", "-1", "1.5M", "16 M", "16MB", "2T", "99999999999G"] {
            assert!(parse_size("--size", value).is_err(), "{value:?}");
        }
    }

    #[test]
    fn reads_the_upstream_flags() {
        let args = [
            "--upstream-conns=4",
            "--upstream=http://127.0.0.1:8081/status",
            "--upstream-timeout=250ms",
        ];
        let Ok(Command::Run(config)) = parse(&args) else {
            panic!("{args:?} refused");
        };
        let expected = UpstreamConfig {
            conns: 4,
            timeout: Duration::from_millis(250),
            ..UpstreamConfig::new(
                "127.0.0.1:8081".parse().unwrap(),
                "127.0.0.1:8081",
                "/status",
            )
        };
        assert_eq!(config.upstream, Some(expected));
        let bare = UpstreamConfig::from_url("http://127.0.0.1").unwrap();
        assert_eq!((bare.addr.port(), bare.path.as_str()), (80, "/"));
    }

    #[test]
    fn refuses_bad_flags() {
        for args in [
            &["--bind", "nowhere"][..],
            &["--pollers", "0"],
            &["--dispatch", "remote"],
            &["--static-max-file", "12X"],
            &["--static-max-total"],
            &["--pollers"],
            &["--verbose"],
            &["--header-timeout", "10"],
            &["--header-timeout", "0s"],
            &["--keepalive-timeout", "5h"],
            &["--write-timeout", "ms"],
            &["--max-connections", "-1"],
            &["--static-dotfiles=yes"],
            &["--upstream", "https://127.0.0.1/"],
            &["--upstream-conns", "2"],
            &[
                "--upstream",
                "http://127.0.0.1:80/",
                "--upstream-queue",
                "0",
            ],
        ] {
            assert!(parse(args).is_err(), "{args:?}");
        }
    }
}
