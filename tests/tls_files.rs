//! The certificate and key files: every key format rustls reads, the one
//! line a start with a bad file prints (exit 1), the `https://` start line,
//! and SIGHUP, which reloads them for new connections, keeps the old ones
//! when the new ones are bad, and keeps sessions resumable across it.
//! `openssl s_client`, where it is installed, negotiates TLS 1.3 with ALPN
//! `http/1.1`, and TLS 1.2, and is refused TLS 1.1 and 1.0 with the
//! `protocol_version` alert.

mod common;

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::process::{server_command, Running, BINARY};
use common::tls::{client_config, client_hello, connect, Certificates};
use common::{assert_response, config, start_with, HELLO};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use uppercut_mio_server::{Config, Dispatch, Routes, TlsFiles};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tls")
        .join(name)
}

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";

/// A SEC1 EC key and a PKCS#1 RSA key serve as well as rcgen's PKCS#8.
#[test]
fn sec1_and_pkcs1_keys_serve() {
    let ca = CertificateDer::from_pem_file(fixture("ca.pem")).expect("the fixture CA");
    let versions = [&rustls::version::TLS13, &rustls::version::TLS12];
    for (cert, key) in [("ec.pem", "ec-sec1.key"), ("rsa.pem", "rsa-pkcs1.key")] {
        let config = Config {
            tls: Some(TlsFiles {
                cert: fixture(cert),
                key: fixture(key),
            }),
            ..config(Dispatch::Local)
        };
        let server = start_with(&config, Routes::standard());
        let mut client = connect(server.local_addr(), &client_config(&ca, &versions));
        client.send(GET);
        assert_response(&client.response(false), HELLO);
    }
}

/// Runs the binary with `args` and expects exit 1 and exactly `stderr`.
fn refused(args: &[&str], stderr: &str) {
    let output = Command::new(BINARY)
        .args(["--bind", "127.0.0.1:0"])
        .args(args)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{args:?}");
    assert_eq!(String::from_utf8_lossy(&output.stderr), stderr);
    assert_eq!(output.stdout, b"");
}

#[test]
fn a_bad_certificate_or_key_stops_the_start_in_one_line() {
    let certificates = Certificates::new("refusals");
    let cert = certificates.files.cert.to_str().unwrap();
    let key = certificates.files.key.to_str().unwrap();
    let missing = certificates.dir.join("missing.pem");
    let missing = missing.to_str().unwrap();
    refused(
        &["--tls-cert", missing, "--tls-key", key],
        &format!(
            "uppercut-mio-server: --tls-cert {missing}: cannot read: \
             No such file or directory (os error 2)\n"
        ),
    );
    refused(
        &["--tls-cert", cert, "--tls-key", cert],
        &format!(
            "uppercut-mio-server: --tls-key {cert}: no private key (PKCS#8, PKCS#1 or SEC1) \
             in the file\n"
        ),
    );
    refused(
        &["--tls-cert", key, "--tls-key", key],
        &format!(
            "uppercut-mio-server: --tls-cert {key}: no certificate (BEGIN CERTIFICATE) \
             in the file\n"
        ),
    );
    let other_key = fixture("ec-sec1.key");
    let other_key = other_key.to_str().unwrap();
    refused(
        &["--tls-cert", cert, "--tls-key", other_key],
        &format!(
            "uppercut-mio-server: --tls-key {other_key}: not the key of the certificate \
             in {cert}\n"
        ),
    );
}

/// SIGHUP: a new connection gets the new certificate, one made before goes
/// on with the old; a bad file then keeps the certificate in use.
#[test]
fn sighup_reloads_the_certificate_for_new_connections() {
    let certificates = Certificates::new("reload");
    let files = &certificates.files;
    let mut server = start_logging(&certificates);
    assert!(server.start_line.starts_with("listening on https://"));
    let first = certificates.client_config();
    let mut before = connect(server.addr, &first);
    before.send(GET);
    assert_response(&before.response(false), HELLO);

    let second_ca = certificates.replace("reloaded");
    server.signal(libc::SIGHUP);
    server.wait_for_log("SIGHUP: reloaded the TLS certificate");
    let versions = [&rustls::version::TLS13, &rustls::version::TLS12];
    let second = client_config(&second_ca, &versions);
    let mut after = connect(server.addr, &second);
    after.send(GET);
    assert_response(&after.response(false), HELLO);
    // The old certificate is no longer served to new connections (a fresh
    // client: one with the session of `before` would resume it, which
    // skips the certificate)...
    assert!(handshake_fails(&server, &certificates.client_config()));
    // ...and the connection made before the reload goes on.
    before.send(GET);
    assert_response(&before.response(false), HELLO);

    // A bad file: the reload fails, and the certificate in use stays.
    fs::write(&files.cert, "not a certificate").unwrap();
    server.signal(libc::SIGHUP);
    let line = server.wait_for_log("SIGHUP: TLS reload failed");
    assert!(
        line.ends_with(&format!(
            "still serving the certificate loaded before: TLS certificate {}: \
             no certificate (BEGIN CERTIFICATE) in the file",
            files.cert.display()
        )),
        "{line}"
    );
    let mut still = connect(server.addr, &second);
    still.send(GET);
    assert_response(&still.response(false), HELLO);
    assert_eq!(server.terminate(), Some(0));
}

/// Sessions outlive a SIGHUP reload: the ticketer and the session-ID
/// cache are kept, so a client that had a session before resumes it after
/// (TLS 1.3 and 1.2 by ticket, TLS 1.2 by session ID), and a reload does
/// not send every client back to a full handshake.
#[test]
fn sessions_resume_across_a_sighup_reload() {
    let certificates = Certificates::new("resume-reload");
    let mut server = start_logging(&certificates);
    let ticket = |versions: &[&'static rustls::SupportedProtocolVersion]| {
        client_config(&certificates.ca, versions)
    };
    let mut session_id = (*ticket(&[&rustls::version::TLS12])).clone();
    session_id.resumption = rustls::client::Resumption::default()
        .tls12_resumption(rustls::client::Tls12Resumption::SessionIdOnly);
    let clients = [
        ("TLS 1.3 ticket", ticket(&[&rustls::version::TLS13])),
        ("TLS 1.2 ticket", ticket(&[&rustls::version::TLS12])),
        ("TLS 1.2 session ID", std::sync::Arc::new(session_id)),
    ];
    for (name, config) in &clients {
        let mut first = connect(server.addr, config);
        // The response: by then a TLS 1.3 client has read its tickets.
        first.send(GET);
        assert_response(&first.response(false), HELLO);
        assert_eq!(
            first.stream.conn.handshake_kind(),
            Some(rustls::HandshakeKind::Full),
            "{name}"
        );
    }
    // The same files: the reload makes a new configuration all the same.
    server.signal(libc::SIGHUP);
    server.wait_for_log("SIGHUP: reloaded the TLS certificate");
    for (name, config) in &clients {
        let mut again = connect(server.addr, config);
        again.send(GET);
        assert_response(&again.response(false), HELLO);
        assert_eq!(
            again.stream.conn.handshake_kind(),
            Some(rustls::HandshakeKind::Resumed),
            "{name}"
        );
    }
    assert_eq!(server.terminate(), Some(0));
}

/// A handshake with `config` to `server` fails.
/// The binary serving HTTPS with `certificates`, its log read (at info).
fn start_logging(certificates: &Certificates) -> Running {
    let files = &certificates.files;
    let mut command = server_command(&[
        "--tls-cert",
        files.cert.to_str().unwrap(),
        "--tls-key",
        files.key.to_str().unwrap(),
    ]);
    command.env("RUST_LOG", "info");
    Running::start_with_log(command)
}

fn handshake_fails(server: &Running, config: &std::sync::Arc<rustls::ClientConfig>) -> bool {
    let socket = std::net::TcpStream::connect(server.addr).unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let session = rustls::ClientConnection::new(std::sync::Arc::clone(config), name).unwrap();
    let mut stream = rustls::StreamOwned::new(session, socket);
    loop {
        match stream.conn.complete_io(&mut stream.sock) {
            Ok(_) if !stream.conn.is_handshaking() => return false,
            Ok(_) => continue,
            Err(_) => return true,
        }
    }
}

/// `openssl s_client` against the binary: TLS 1.3 with ALPN, TLS 1.2,
/// and TLS 1.1 and 1.0 refused with `protocol_version`. Without openssl this fails under CI (which
/// installs it) and says so elsewhere.
#[test]
fn openssl_negotiates_tls13_and_tls12_and_is_refused_tls11() {
    if Command::new("openssl").arg("version").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "openssl is not installed");
        common::say_skipped("openssl is not installed: s_client not run");
        return;
    }
    let certificates = Certificates::new("openssl");
    let files = &certificates.files;
    let server = Running::start(server_command(&[
        "--tls-cert",
        files.cert.to_str().unwrap(),
        "--tls-key",
        files.key.to_str().unwrap(),
    ]));
    let connect = format!("127.0.0.1:{}", server.addr.port());
    let s_client = |args: &[&str]| {
        let output = Command::new("openssl")
            .args(["s_client", "-connect", &connect, "-servername", "localhost"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("openssl runs");
        let mut said = String::from_utf8_lossy(&output.stdout).into_owned();
        said.push_str(&String::from_utf8_lossy(&output.stderr));
        said
    };
    let tls13 = s_client(&["-tls1_3", "-alpn", "http/1.1"]);
    assert!(tls13.contains("New, TLSv1.3, Cipher is"), "{tls13}");
    assert!(tls13.contains("ALPN protocol: http/1.1"), "{tls13}");
    let tls12 = s_client(&["-tls1_2"]);
    assert!(tls12.contains("New, TLSv1.2, Cipher is"), "{tls12}");
    // Refused with the protocol_version alert (70), as RFC 5246 E.1 asks.
    for old in ["-tls1_1", "-tls1"] {
        let said = s_client(&[old, "-cipher", "DEFAULT@SECLEVEL=0"]);
        assert!(said.contains("New, (NONE), Cipher is (NONE)"), "{said}");
        assert!(said.contains("alert protocol version"), "{said}");
        assert!(said.contains("SSL alert number 70"), "{said}");
    }
}

/// `hey https://host:port/` sends the port in its SNI, which rustls warns
/// of through the `log` crate on every handshake: a flood of such
/// handshakes (these also fail) writes at most about a line a second of
/// rustls' warnings, and of the server's own reports of failed handshakes,
/// however many connections come.
#[test]
fn a_flood_of_bad_sni_handshakes_logs_a_line_a_second() {
    let certificates = Certificates::new("sni-flood");
    let files = &certificates.files;
    let mut command = server_command(&[
        "--tls-cert",
        files.cert.to_str().unwrap(),
        "--tls-key",
        files.key.to_str().unwrap(),
    ]);
    command.env_remove("RUST_LOG");
    let mut server = Running::start_with_log(command);
    let hello = client_hello(0x0303, "localhost:9000", &[]);
    let started = std::time::Instant::now();
    let mut connections = 0;
    while started.elapsed() < std::time::Duration::from_millis(1500) {
        let mut stream = std::net::TcpStream::connect(server.addr).unwrap();
        std::io::Write::write_all(&mut stream, &hello).unwrap();
        let mut answer = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stream, &mut answer);
        connections += 1;
    }
    let seconds = started.elapsed().as_secs() + 1;
    assert_eq!(server.terminate(), Some(0));
    let log = server.rest_of_log();
    let rustls = log.iter().filter(|line| line.contains(" rustls")).count();
    let ours = log
        .iter()
        .filter(|line| line.contains("TLS handshake with"))
        .count();
    assert!(connections >= 50, "only {connections} handshakes");
    assert!(
        (1..=seconds as usize + 1).contains(&rustls),
        "{rustls} rustls lines for {connections} handshakes in {seconds} s: {log:#?}"
    );
    assert!(
        (1..=seconds as usize + 1).contains(&ours),
        "{ours} lines of ours for {connections} handshakes in {seconds} s: {log:#?}"
    );
    assert_eq!(rustls + ours, log.len(), "{log:#?}");
    assert!(
        log.iter().any(|line| line.contains("Illegal SNI hostname")),
        "{log:#?}"
    );
}
