//! The command line as the library parses it: every flag, every refusal with
//! its exact one-line message, durations, sizes and the start line.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::time::Duration;

use uppercut_mio_server::cli::{
    parse_args, parse_duration, start_line, version_line, Command, USAGE,
};
use uppercut_mio_server::config::{Timeouts, UpstreamConfig};
use uppercut_mio_server::AccessLogTarget;
use uppercut_mio_server::{Config, Dispatch, StaticLimits};

fn parse(args: &[&str]) -> Result<Command, String> {
    parse_args(args.iter().map(|arg| arg.to_string()))
}

fn config(args: &[&str]) -> Config {
    match parse(args) {
        Ok(Command::Run(config)) => *config,
        other => panic!("{args:?}: {other:?}"),
    }
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
    assert_eq!(
        parse(&["--pollers", "2", "--version"]),
        Ok(Command::Version)
    );
    assert_eq!(parse(&["-V"]), Ok(Command::Version));
}

#[test]
fn the_version_line_names_the_crate_version() {
    assert_eq!(
        version_line(),
        format!("uppercut-mio-server {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn resolves_a_host_name_for_bind() {
    let bind = config(&["--bind", "localhost:9000"]).bind;
    assert!(bind.ip().is_loopback(), "{bind}");
    assert_eq!(bind.port(), 9000);
    assert_eq!(
        config(&["--bind=[::1]:80"]).bind,
        "[::1]:80".parse().unwrap()
    );
}

#[test]
fn reads_limits_and_durations() {
    let config = config(&[
        "--header-timeout=500ms",
        "--keepalive-timeout=2m",
        "--write-timeout=1.5s",
        "--max-connections=7",
        "--shutdown-timeout=0",
        "--upstream=http://127.0.0.1:80/",
        "--upstream-timeout=1h",
    ]);
    let timeouts = Timeouts {
        header: Duration::from_millis(500),
        keepalive: Duration::from_secs(120),
        write: Duration::from_millis(1500),
        ..Timeouts::default()
    };
    assert_eq!(config.timeouts, timeouts);
    assert_eq!(config.max_connections, 7);
    assert_eq!(config.shutdown_timeout, Duration::ZERO);
    assert_eq!(config.upstream.unwrap().timeout, Duration::from_secs(3600));
}

#[test]
fn parses_every_duration_form() {
    for (text, expected) in [
        ("0", Duration::ZERO),
        ("0s", Duration::ZERO),
        ("500ms", Duration::from_millis(500)),
        ("1.5s", Duration::from_millis(1500)),
        ("0.25ms", Duration::from_micros(250)),
        ("10s", Duration::from_secs(10)),
        ("2m", Duration::from_secs(120)),
        ("1.5m", Duration::from_secs(90)),
        ("1h", Duration::from_secs(3600)),
        ("0.001s", Duration::from_millis(1)),
    ] {
        assert_eq!(parse_duration(text), Some(expected), "{text}");
    }
    for text in [
        "",
        "10",
        "1.5",
        "s",
        ".5s",
        "5.s",
        "1..5s",
        "1.5.s",
        "-1s",
        "1d",
        "1 s",
        "1S",
        "5sec",
        "99999999999999999999h",
    ] {
        assert_eq!(parse_duration(text), None, "{text:?}");
    }
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
    let defaults = config(&["--static-dir=www"]);
    assert_eq!(defaults.static_limits.max_file, 16 * 1024 * 1024);
    assert_eq!(defaults.static_limits.max_total, 256 * 1024 * 1024);
}

#[test]
fn pins_only_when_asked() {
    assert!(!config(&["--pollers", "8"]).pin);
    let pinned = Config {
        pollers: 8,
        pin: true,
        ..Config::default()
    };
    assert_eq!(
        parse(&["--pollers", "8", "--pin"]),
        Ok(Command::Run(Box::new(pinned)))
    );
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
        let flag = format!("--static-max-file={value}");
        let limits = config(&["--static-dir=d", &flag]).static_limits;
        assert_eq!(limits.max_file, bytes, "{value}");
    }
    for value in ["", "M", "-1", "1.5M", "16 M", "16MB", "2T", "99999999999G"] {
        let flag = format!("--static-max-file={value}");
        assert_eq!(
            parse(&["--static-dir=d", &flag]),
            Err(format!(
                "--static-max-file: not a size (bytes, K, M or G): {value}"
            ))
        );
    }
}

#[test]
fn reads_the_body_limit_as_a_size() {
    assert_eq!(config(&[]).max_body, 1 << 20);
    for (value, bytes) in [("0", 0), ("16", 16), ("64K", 64 << 10), ("2MiB", 2 << 20)] {
        assert_eq!(config(&["--max-body", value]).max_body, bytes, "{value}");
    }
    assert_eq!(config(&["--max-body=1g"]).max_body, 1 << 30);
    for value in ["", "1.5M", "-1", "16MB", "99999999999G"] {
        assert_eq!(
            parse(&[&format!("--max-body={value}")]),
            Err(format!(
                "--max-body: not a size (bytes, K, M or G): {value}"
            ))
        );
    }
    assert_eq!(
        parse(&["--max-body"]),
        Err("--max-body needs a value".into())
    );
    let help = USAGE
        .lines()
        .find(|line| line.contains("--max-body SIZE  "));
    assert_eq!(
        help,
        Some("  --max-body SIZE           a request body over SIZE gets 413 (default 1M)")
    );
}

#[test]
fn websocket_compression_is_off_unless_a_flag_asks() {
    use uppercut_mio_server::WsDeflate;
    assert_eq!(config(&[]).ws_deflate, None);
    assert_eq!(
        config(&["--ws-deflate"]).ws_deflate,
        Some(WsDeflate::default())
    );
    let takeover = config(&["--ws-deflate-takeover"]).ws_deflate.unwrap();
    assert!(takeover.server_context_takeover && takeover.client_context_takeover);
    assert!(USAGE.contains("  --ws-deflate              offer permessage-deflate"));
}

#[test]
fn reads_the_websocket_message_limit_as_a_size() {
    assert_eq!(config(&[]).ws_max_message, 16 << 20);
    assert_eq!(
        config(&["--ws-max-message", "64K"]).ws_max_message,
        64 << 10
    );
    assert_eq!(
        parse(&["--ws-max-message=1.5M"]),
        Err("--ws-max-message: not a size (bytes, K, M or G): 1.5M".into())
    );
}

#[test]
fn reads_the_upstream_flags() {
    let config = config(&[
        "--upstream-conns=4",
        "--upstream=http://127.0.0.1:8081/status",
        "--upstream-timeout=250ms",
    ]);
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
fn reads_header_fields_in_order_with_their_values_trimmed() {
    let config = config(&[
        "--header",
        "Strict-Transport-Security:  max-age=63072000 ",
        "--header=X-Content-Type-Options:nosniff",
    ]);
    assert_eq!(
        config.headers,
        [
            (
                "Strict-Transport-Security".to_string(),
                "max-age=63072000".to_string()
            ),
            ("X-Content-Type-Options".into(), "nosniff".into()),
        ]
    );
}

#[test]
fn reads_cors_origins_and_the_request_id_flag() {
    let plain = config(&[]);
    assert!(plain.cors.is_empty() && !plain.request_id);
    let config = config(&[
        "--cors",
        "https://app.example",
        "--cors=http://localhost:3000",
        "--request-id",
    ]);
    assert_eq!(
        config.cors,
        ["https://app.example", "http://localhost:3000"]
    );
    assert!(config.request_id);
}

#[test]
fn reads_the_access_log_flag() {
    assert_eq!(config(&[]).access_log, None);
    assert_eq!(
        config(&["--access-log", "-"]).access_log,
        Some(AccessLogTarget::Stdout)
    );
    assert_eq!(
        config(&["--access-log=/var/log/a.log"]).access_log,
        Some(AccessLogTarget::File(PathBuf::from("/var/log/a.log")))
    );
    assert_eq!(config(&["--access-log=-"]).log_name, None);
    assert_eq!(
        config(&["--log-name", "web-1", "--access-log=-"]).log_name,
        Some("web-1".to_string())
    );
    assert_eq!(
        parse(&["--log-name=a b", "--access-log=-"]),
        Err("--log-name \"a b\": use printable ASCII without spaces".into())
    );
    assert_eq!(
        parse(&["--log-name=web-1"]),
        Err("--log-name needs --access-log".into())
    );
}

#[test]
fn refuses_bad_flags_in_one_line_that_says_why() {
    let durations = "use 0, 500ms, 1.5s, 2m or 1h";
    for (args, message) in [
        (
            &["--bind", "nowhere"][..],
            "--bind: not an ADDR:PORT or HOST:PORT: nowhere".to_string(),
        ),
        (
            &["--bind", "localhost:http"],
            "--bind: not an ADDR:PORT or HOST:PORT: localhost:http".into(),
        ),
        (
            &["--bind", "no-such-host.invalid:80"],
            "--bind: cannot resolve no-such-host.invalid:80".into(),
        ),
        (
            &["--pollers", "0"],
            "--pollers: not a positive number: 0".into(),
        ),
        (
            &["--dispatch", "remote"],
            "--dispatch: not local or system: remote".into(),
        ),
        (
            &["--static-max-total"],
            "--static-max-total needs a value".into(),
        ),
        (&["--pollers"], "--pollers needs a value".into()),
        (
            &["--cors", "https://app.example/"],
            "--cors: not an origin (https://app.example, http://localhost:3000) or *: \
             https://app.example/"
                .into(),
        ),
        (
            &["--cors", "app.example"],
            "--cors: not an origin (https://app.example, http://localhost:3000) or *: app.example"
                .into(),
        ),
        (&["--request-id=yes"], "--request-id takes no value".into()),
        (
            &["--header", "X-Frame-Options DENY"],
            "--header: not NAME: VALUE: X-Frame-Options DENY".into(),
        ),
        (
            &["--header", "Content-Length: 1"],
            "--header: the server writes the Content-Length header of each response itself".into(),
        ),
        (
            &["--header", "Content-Type: text/html"],
            "--header: the server writes the Content-Type header of each response itself".into(),
        ),
        (
            &["--header", "X Y: 1"],
            "--header: \"X Y\" is not a valid header field name".into(),
        ),
        (
            &["--header", "X-Y: a\u{7f}b"],
            "--header: the value of the X-Y header has a control character (CR, LF, NUL ...)"
                .into(),
        ),
        (&["--verbose"], "unknown flag: --verbose".into()),
        (
            &["--header-timeout", "10"],
            format!("--header-timeout: not a duration: 10 ({durations})"),
        ),
        (
            &["--header-timeout", "0s"],
            "--header-timeout: must be more than 0: 0s".into(),
        ),
        (
            &["--keepalive-timeout", "0"],
            "--keepalive-timeout: must be more than 0: 0".into(),
        ),
        (
            &["--keepalive-timeout", "5d"],
            format!("--keepalive-timeout: not a duration: 5d ({durations})"),
        ),
        (
            &["--write-timeout", "ms"],
            format!("--write-timeout: not a duration: ms ({durations})"),
        ),
        (
            &["--shutdown-timeout", "1,5s"],
            format!("--shutdown-timeout: not a duration: 1,5s ({durations})"),
        ),
        (
            &["--max-connections", "-1"],
            "--max-connections: not a positive number: -1".into(),
        ),
        (
            &["--upstream", "https://127.0.0.1/"],
            "--upstream: only http:// URLs are supported: https://127.0.0.1/".into(),
        ),
        (
            &["--upstream-conns", "2"],
            "--upstream-conns, --upstream-timeout and --upstream-queue need --upstream".into(),
        ),
        (
            &[
                "--upstream",
                "http://127.0.0.1:80/",
                "--upstream-queue",
                "0",
            ],
            "--upstream-queue: not a positive number: 0".into(),
        ),
        (
            &[
                "--upstream",
                "http://127.0.0.1:80/",
                "--upstream-timeout",
                "0",
            ],
            "--upstream-timeout: must be more than 0: 0".into(),
        ),
        (
            &["--static-max-file", "1M"],
            "--static-max-file needs --static-dir".into(),
        ),
        (
            &["--static-max-total=1G"],
            "--static-max-total needs --static-dir".into(),
        ),
        (
            &["--static-dotfiles"],
            "--static-dotfiles needs --static-dir".into(),
        ),
        (
            &["--static-dir=www", "--static-dotfiles=yes"],
            "--static-dotfiles takes no value".into(),
        ),
        (&["--pin=yes"], "--pin takes no value".into()),
        (
            &["--access-log="],
            "--access-log needs a path, or - for stdout".into(),
        ),
    ] {
        assert_eq!(parse(args), Err(message), "{args:?}");
    }
}

#[test]
fn takes_any_bytes_for_a_path_and_refuses_them_elsewhere_in_one_line() {
    let not_utf8 = |prefix: &str| {
        let mut bytes = prefix.as_bytes().to_vec();
        bytes.extend_from_slice(b"caf\xe9");
        OsString::from_vec(bytes)
    };
    let config = match parse_args([not_utf8("--static-dir=")]) {
        Ok(Command::Run(config)) => config,
        other => panic!("{other:?}"),
    };
    let dir = PathBuf::from(OsString::from_vec(b"caf\xe9".to_vec()));
    assert_eq!(config.static_dir, Some(dir));
    assert_eq!(
        parse_args([OsString::from("--pollers"), not_utf8("")]),
        Err("--pollers: not UTF-8: caf\u{FFFD}".into())
    );
    assert_eq!(
        parse(&["--pollers=2", "www"]),
        Err("unexpected argument: www".into())
    );
    assert_eq!(parse(&["-x"]), Err("unknown flag: -x".into()));
}

#[test]
fn the_start_line_names_the_static_directory_and_the_upstream() {
    let addr = "127.0.0.1:9000".parse().unwrap();
    let plain = config(&["--pollers=2"]);
    assert_eq!(
        start_line(addr, &plain, None),
        "listening on http://127.0.0.1:9000 (2 pollers, dispatch local)"
    );
    let full = config(&[
        "--pollers=2",
        "--static-dir=./public",
        "--upstream=http://127.0.0.1:8080/status",
    ]);
    assert_eq!(
        start_line(addr, &full, Some(12)),
        "listening on http://127.0.0.1:9000 (2 pollers, dispatch local, \
         static ./public: 12 files, upstream http://127.0.0.1:8080/status)"
    );
    let one = config(&["--pollers=1", "--dispatch=system", "--static-dir=www"]);
    assert_eq!(
        start_line(addr, &one, Some(1)),
        "listening on http://127.0.0.1:9000 (1 poller, dispatch system, static www: 1 file)"
    );
}

#[test]
fn bind_repeats_and_bind_tls_adds_tls_listeners() {
    use uppercut_mio_server::Listener;
    let at = |s: &str| s.parse::<std::net::SocketAddr>().unwrap();
    let tls = ["--tls-cert", "c.pem", "--tls-key", "k.pem"];
    // One --bind: the server's bind, as ever; TLS with a certificate.
    let one = config(&["--bind", "127.0.0.1:1"]);
    assert_eq!((one.bind, one.listeners.len()), (at("127.0.0.1:1"), 0));
    // Several: each plain, or each TLS with a certificate.
    let two = config(&["--bind", "127.0.0.1:1", "--bind", "127.0.0.1:2"]);
    assert_eq!(
        two.listeners,
        [
            Listener {
                addr: at("127.0.0.1:1"),
                tls: false
            },
            Listener {
                addr: at("127.0.0.1:2"),
                tls: false
            }
        ]
    );
    let mut args = vec!["--bind", "127.0.0.1:1", "--bind", "127.0.0.1:2"];
    args.extend(tls);
    assert!(config(&args).listeners.iter().all(|l| l.tls));
    // --bind-tls: those TLS, the --bind ones (or the default) plain.
    let mut args = vec!["--bind", "127.0.0.1:1", "--bind-tls", "127.0.0.1:3"];
    args.extend(tls);
    assert_eq!(
        config(&args).listeners,
        [
            Listener {
                addr: at("127.0.0.1:1"),
                tls: false
            },
            Listener {
                addr: at("127.0.0.1:3"),
                tls: true
            }
        ]
    );
    let mut args = vec!["--bind-tls", "127.0.0.1:3"];
    args.extend(tls);
    assert_eq!(
        config(&args).listeners,
        [
            Listener {
                addr: at("0.0.0.0:9000"),
                tls: false
            },
            Listener {
                addr: at("127.0.0.1:3"),
                tls: true
            }
        ]
    );
    assert_eq!(
        parse_args(["--bind-tls", "127.0.0.1:3"]).err().as_deref(),
        Some("--bind-tls needs --tls-cert and --tls-key")
    );
}

#[test]
fn reads_the_nats_key_and_certificate_flags_and_refuses_them_without_nats() {
    let cluster = |args: &[&str]| {
        let mut all = vec!["--nats", "nats://127.0.0.1:4222", "--node", "a"];
        all.extend_from_slice(args);
        config(&all).cluster.unwrap()
    };
    let plain = cluster(&[]);
    assert_eq!((plain.creds, plain.nkey), (None, None));
    let creds = cluster(&["--nats-creds", "/etc/u.creds"]);
    assert_eq!(creds.creds, Some(PathBuf::from("/etc/u.creds")));
    assert_eq!(creds.nkey, None);
    let nkey = cluster(&["--nats-nkey=/etc/u.nk"]);
    assert_eq!(nkey.nkey, Some(PathBuf::from("/etc/u.nk")));
    assert_eq!(nkey.creds, None);
    assert_eq!(
        parse(&[
            "--nats=127.0.0.1",
            "--nats-creds=a.creds",
            "--nats-nkey=a.nk"
        ]),
        Err("--nats-creds and --nats-nkey: give one of them".to_string())
    );
    let mutual = cluster(&["--nats-tls-cert=c.pem", "--nats-tls-key=k.pem"]);
    assert_eq!(
        mutual.client_cert,
        Some(uppercut_mio_server::TlsFiles {
            cert: PathBuf::from("c.pem"),
            key: PathBuf::from("k.pem")
        })
    );
    assert_eq!(plain.client_cert, None);
    for half in ["--nats-tls-cert=c.pem", "--nats-tls-key=k.pem"] {
        assert_eq!(
            parse(&["--nats=127.0.0.1", half]),
            Err("--nats-tls-cert and --nats-tls-key go together".to_string()),
            "{half}"
        );
    }
    for flag in [
        "--nats-creds=a.creds",
        "--nats-nkey=a.nk",
        "--nats-tls-cert=c.pem",
        "--nats-tls-key=k.pem",
    ] {
        assert_eq!(
            parse(&[flag]),
            Err(
                "--node, --nats-ca, --nats-tls-cert, --nats-tls-key, --nats-creds, \
                 --nats-nkey, --nats-prefix and --nats-buffer need --nats"
                    .to_string()
            ),
            "{flag}"
        );
    }
    assert!(USAGE.contains("  --nats-creds FILE         authenticate with the user JWT"));
}
