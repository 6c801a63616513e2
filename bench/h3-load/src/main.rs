//! h3-load: the HTTP/3 load client of `bench/run --h3`.
//!
//! Load: `h3-load -c CONNS -m STREAMS -d SECONDS [--insecure] URL` opens CONNS
//! QUIC connections (spread over up to 64 client sockets), runs STREAMS
//! requests at a time on each (a closed loop: each stream's next GET starts
//! when its last response has ended) for SECONDS, then lets the requests in
//! flight end. It prints one JSON line: every request answered (`requests`,
//! those after the deadline too, so that a server's CPU over the whole run
//! divides by all it served), `rps` over the time from the first request to
//! the last answer, latency percentiles in µs, failed requests (`errors`),
//! answers that were not 2xx, and the mean body length.
//!
//! Idle: `h3-load --idle N [--insecure] URL` opens N connections, does one GET
//! on each, prints `{"ready": N, ...}`, and holds them open (a PING every 5 s
//! keeps each alive) until its standard input closes or it gets SIGTERM or
//! SIGINT; then it prints how many were still open and closes them.
//!
//! Ready: `h3-load --wait-ready SECONDS URL` tries one GET every 100 ms until
//! one is answered (exit 0) or the time is up (exit 1).
//!
//! The client offers AES-128-GCM first, as browsers do, so every server
//! picks the same cipher. `--insecure` takes any certificate (the bench's is
//! self-signed) but still checks the handshake's signature with it.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

const USAGE: &str =
    "usage: h3-load [-c CONNS] [-m STREAMS] [-d SECONDS] [--insecure] [--sni NAME] URL
       h3-load --idle N [--insecure] [--sni NAME] URL
       h3-load --wait-ready SECONDS [--insecure] [--sni NAME] URL";

/// Client sockets a run spreads its connections over, at most.
const MAX_ENDPOINTS: usize = 64;
/// Handshakes the idle mode has under way at once.
const IDLE_HANDSHAKES: usize = 64;
/// How long past the load's end a request may take before it counts as failed.
const LATE: Duration = Duration::from_secs(10);

type SendRequest = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

#[derive(Debug)]
struct Options {
    conns: usize,
    streams: usize,
    seconds: f64,
    insecure: bool,
    sni: Option<String>,
    idle: Option<usize>,
    wait_ready: Option<f64>,
    url: String,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        conns: 16,
        streams: 16,
        seconds: 10.0,
        insecure: false,
        sni: None,
        idle: None,
        wait_ready: None,
        url: String::new(),
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match arg.as_str() {
            "-c" => o.conns = number(&value("-c")?, "-c")?,
            "-m" => o.streams = number(&value("-m")?, "-m")?,
            "-d" => o.seconds = seconds(&value("-d")?, "-d")?,
            "--idle" => o.idle = Some(number(&value("--idle")?, "--idle")?),
            "--wait-ready" => {
                o.wait_ready = Some(seconds(&value("--wait-ready")?, "--wait-ready")?)
            }
            "--sni" => o.sni = Some(value("--sni")?),
            "--insecure" | "-k" => o.insecure = true,
            "-h" | "--help" => return Err(String::new()),
            other if other.starts_with('-') => return Err(format!("unknown option {other}")),
            other if o.url.is_empty() => o.url = other.to_string(),
            other => return Err(format!("one URL only, got {other} too")),
        }
    }
    if o.url.is_empty() {
        return Err("no URL".into());
    }
    if o.idle.is_some() && o.wait_ready.is_some() {
        return Err("--idle and --wait-ready are two modes: choose one".into());
    }
    Ok(o)
}

fn number(text: &str, name: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{name}: a whole number above 0, got {text}")),
    }
}

fn seconds(text: &str, name: &str) -> Result<f64, String> {
    match text.trim_end_matches('s').parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() => Ok(s),
        _ => Err(format!("{name}: seconds above 0, got {text}")),
    }
}

/// Where to connect, the name the handshake asks for, and the URI each
/// request carries.
struct Target {
    addr: SocketAddr,
    server_name: String,
    uri: http::Uri,
}

async fn target(o: &Options) -> Result<Target, String> {
    let uri: http::Uri = o.url.parse().map_err(|e| format!("{}: {e}", o.url))?;
    if uri.scheme_str() != Some("https") {
        return Err(format!("{}: HTTP/3 needs an https:// URL", o.url));
    }
    let host = uri.host().ok_or_else(|| format!("{}: no host", o.url))?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(443);
    let addr = match host.parse::<IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, port),
        Err(_) => tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| format!("{host}: {e}"))?
            .next()
            .ok_or_else(|| format!("{host}: no address"))?,
    };
    // A certificate names hosts, and SNI cannot carry an address: for an
    // address the handshake asks for localhost, the bench certificate's name.
    let server_name = o.sni.clone().unwrap_or_else(|| {
        if host.parse::<IpAddr>().is_ok() {
            "localhost".into()
        } else {
            host.clone()
        }
    });
    Ok(Target {
        addr,
        server_name,
        uri,
    })
}

// ---------------------------------------------------------------- TLS

/// ring's suites with AES-128-GCM first (then AES-256-GCM and ChaCha20), the
/// order browsers offer.
// ring, as the server under test uses (rustls marks it deprecated from 0.23.48 on
// for its lack of post-quantum key exchange; every server here gets X25519).
#[allow(deprecated)]
fn provider() -> Arc<CryptoProvider> {
    let mut provider = rustls::crypto::ring::default_provider();
    let rank = |s: &rustls::SupportedCipherSuite| match s.suite() {
        rustls::CipherSuite::TLS13_AES_128_GCM_SHA256 => 0,
        rustls::CipherSuite::TLS13_AES_256_GCM_SHA384 => 1,
        _ => 2,
    };
    provider.cipher_suites.sort_by_key(rank);
    Arc::new(provider)
}

/// Takes any certificate, but checks that the handshake was signed with the
/// key of the certificate the server sent.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn client_config(
    insecure: bool,
    keep_alive: Option<Duration>,
) -> Result<quinn::ClientConfig, String> {
    if !insecure {
        return Err("only --insecure is supported: the bench's certificate is self-signed".into());
    }
    let provider = provider();
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let crypto =
        quinn::crypto::rustls::QuicClientConfig::try_from(tls).map_err(|e| e.to_string())?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    transport.keep_alive_interval(keep_alive);
    config.transport_config(Arc::new(transport));
    Ok(config)
}

// ---------------------------------------------------------------- connections

struct Client {
    endpoints: Vec<quinn::Endpoint>,
    config: quinn::ClientConfig,
    target: Arc<Target>,
}

impl Client {
    fn new(
        o: &Options,
        target: Target,
        conns: usize,
        keep_alive: Option<Duration>,
    ) -> Result<Self, String> {
        let config = client_config(o.insecure, keep_alive)?;
        let bind: SocketAddr = if target.addr.is_ipv4() {
            "0.0.0.0:0".parse().unwrap()
        } else {
            "[::]:0".parse().unwrap()
        };
        let endpoints = (0..conns.clamp(1, MAX_ENDPOINTS))
            .map(|_| quinn::Endpoint::client(bind).map_err(|e| format!("client socket: {e}")))
            .collect::<Result<_, _>>()?;
        Ok(Client {
            endpoints,
            config,
            target: Arc::new(target),
        })
    }

    /// A QUIC connection and HTTP/3 on it; the HTTP/3 connection's driver
    /// runs as a task of its own until the connection ends.
    async fn connect(&self, i: usize) -> Result<(quinn::Connection, SendRequest), String> {
        let endpoint = &self.endpoints[i % self.endpoints.len()];
        let conn = endpoint
            .connect_with(
                self.config.clone(),
                self.target.addr,
                &self.target.server_name,
            )
            .map_err(|e| format!("connect: {e}"))?
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
            .await
            .map_err(|e| format!("HTTP/3 set-up: {e}"))?;
        tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        Ok((conn, send))
    }

    async fn close(&self) {
        for endpoint in &self.endpoints {
            endpoint.close(0u32.into(), b"done");
        }
        for endpoint in &self.endpoints {
            let _ = tokio::time::timeout(Duration::from_secs(2), endpoint.wait_idle()).await;
        }
    }
}

/// One GET: its status and the length of its body.
async fn get(send: &mut SendRequest, uri: &http::Uri) -> Result<(u16, usize), String> {
    let request = http::Request::get(uri.clone()).body(()).unwrap();
    let mut stream = send
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    stream.finish().await.map_err(|e| e.to_string())?;
    let response = stream.recv_response().await.map_err(|e| e.to_string())?;
    let mut body = 0;
    while let Some(chunk) = stream.recv_data().await.map_err(|e| e.to_string())? {
        body += chunk.remaining();
    }
    Ok((response.status().as_u16(), body))
}

// ---------------------------------------------------------------- load

#[derive(Default)]
struct Tally {
    latencies_us: Vec<u32>,
    errors: u64,
    non_2xx: u64,
    body_bytes: u64,
    first_error: Option<String>,
    last_answer: Option<Instant>,
}

impl Tally {
    fn error(&mut self, e: String) {
        self.errors += 1;
        self.first_error.get_or_insert(e);
    }

    fn add(&mut self, other: Tally) {
        self.latencies_us.extend(other.latencies_us);
        self.errors += other.errors;
        self.non_2xx += other.non_2xx;
        self.body_bytes += other.body_bytes;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.last_answer = self.last_answer.max(other.last_answer);
    }
}

/// One stream's closed loop until the deadline. A connection that fails
/// ends the loop: each of its streams counts one error.
async fn stream_loop(mut send: SendRequest, uri: Arc<Target>, deadline: Instant) -> Tally {
    let mut tally = Tally::default();
    // A request still unanswered this long after the deadline has failed.
    let give_up = tokio::time::Instant::from_std(deadline + LATE);
    while Instant::now() < deadline {
        let start = Instant::now();
        let answer = tokio::time::timeout_at(give_up, get(&mut send, &uri.uri))
            .await
            .unwrap_or_else(|_| Err(format!("no answer {} s after the end", LATE.as_secs())));
        match answer {
            Ok((status, body)) => {
                let now = Instant::now();
                tally
                    .latencies_us
                    .push((now - start).as_micros().min(u32::MAX as u128) as u32);
                tally.last_answer = Some(now);
                tally.body_bytes += body as u64;
                if !(200..300).contains(&status) {
                    tally.non_2xx += 1;
                }
            }
            Err(e) => {
                tally.error(e);
                break;
            }
        }
    }
    tally
}

async fn load(o: &Options, target: Target) -> Result<String, String> {
    let client = Client::new(o, target, o.conns, None)?;
    let mut connections = Vec::with_capacity(o.conns);
    let mut handshakes = Vec::new();
    for i in 0..o.conns {
        let client = &client;
        handshakes.push(async move { client.connect(i).await });
    }
    let mut tally = Tally::default();
    for result in join_all(handshakes).await {
        match result {
            Ok(conn) => connections.push(conn),
            Err(e) => tally.error(e),
        }
    }
    if connections.is_empty() {
        return Err(format!(
            "no connection: {}",
            tally.first_error.unwrap_or_default()
        ));
    }
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(o.seconds);
    let mut tasks = Vec::new();
    for (_, send) in &connections {
        for _ in 0..o.streams {
            tasks.push(tokio::spawn(stream_loop(
                send.clone(),
                client.target.clone(),
                deadline,
            )));
        }
    }
    for task in tasks {
        match task.await {
            Ok(t) => tally.add(t),
            Err(e) => tally.error(format!("task: {e}")),
        }
    }
    let end = tally.last_answer.unwrap_or_else(Instant::now);
    for (conn, _) in &connections {
        conn.close(0u32.into(), b"done");
    }
    drop(connections);
    client.close().await;

    let seconds = (end - start).as_secs_f64().max(1e-9);
    let mut lat = tally.latencies_us;
    lat.sort_unstable();
    let requests = lat.len();
    let pct = |p: f64| -> u32 {
        if lat.is_empty() {
            0
        } else {
            lat[(((requests as f64) * p).ceil() as usize).clamp(1, requests) - 1]
        }
    };
    let error = tally
        .first_error
        .map(|e| format!(", \"first_error\": {}", json_string(&e)))
        .unwrap_or_default();
    Ok(format!(
        "{{\"requests\": {requests}, \"seconds\": {seconds:.3}, \"rps\": {:.1}, \"p50_us\": {}, \
         \"p90_us\": {}, \"p99_us\": {}, \"max_us\": {}, \"errors\": {}, \"non_2xx\": {}, \
         \"body_bytes\": {:.1}, \"connections\": {}, \"streams\": {}{error}}}",
        requests as f64 / seconds,
        pct(0.50),
        pct(0.90),
        pct(0.99),
        lat.last().copied().unwrap_or(0),
        tally.errors,
        tally.non_2xx,
        if requests > 0 {
            tally.body_bytes as f64 / requests as f64
        } else {
            0.0
        },
        o.conns,
        o.streams,
    ))
}

/// Runs the futures at once on this task and returns their outputs in order.
async fn join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, slot) in futures.iter_mut().zip(out.iter_mut()) {
            if slot.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *slot = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().map(|v| v.unwrap()).collect()
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

// ---------------------------------------------------------------- idle and ready

async fn idle(o: &Options, target: Target, n: usize) -> Result<(), String> {
    use tokio::io::AsyncReadExt;
    let client = Client::new(o, target, n, Some(Duration::from_secs(5)))?;
    let mut held = Vec::with_capacity(n);
    let mut errors = 0u64;
    let mut first_error = None;
    let mut next = 0;
    while next < n {
        let batch: Vec<_> = (next..(next + IDLE_HANDSHAKES).min(n))
            .map(|i| {
                let client = &client;
                async move {
                    let (conn, mut send) = client.connect(i).await?;
                    let (status, _) = get(&mut send, &client.target.uri).await?;
                    if !(200..300).contains(&status) {
                        return Err(format!("status {status}"));
                    }
                    Ok::<_, String>((conn, send))
                }
            })
            .collect();
        next += batch.len();
        for result in join_all(batch).await {
            match result {
                Ok(held_conn) => held.push(held_conn),
                Err(e) => {
                    errors += 1;
                    first_error.get_or_insert(e);
                }
            }
        }
    }
    let error = first_error
        .map(|e| format!(", \"first_error\": {}", json_string(&e)))
        .unwrap_or_default();
    println!("{{\"ready\": {}, \"errors\": {errors}{error}}}", held.len());

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| e.to_string())?;
    let mut stdin = tokio::io::stdin();
    let mut sink = [0u8; 256];
    let stdin_closed = async { while matches!(stdin.read(&mut sink).await, Ok(n) if n > 0) {} };
    tokio::select! {
        _ = stdin_closed => {}
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    let open = held
        .iter()
        .filter(|(c, _)| c.close_reason().is_none())
        .count();
    println!("{{\"open\": {open}}}");
    for (conn, _) in &held {
        conn.close(0u32.into(), b"done");
    }
    drop(held);
    client.close().await;
    Ok(())
}

async fn wait_ready(o: &Options, target: Target, within: f64) -> Result<(), String> {
    let client = Client::new(o, target, 1, None)?;
    let deadline = Instant::now() + Duration::from_secs_f64(within);
    let mut last = String::from("no try");
    while Instant::now() < deadline {
        let attempt = async {
            let (conn, mut send) = client.connect(0).await?;
            let answer = get(&mut send, &client.target.uri).await;
            conn.close(0u32.into(), b"ready");
            answer
        };
        match tokio::time::timeout(Duration::from_secs(1), attempt).await {
            Ok(Ok((status, _))) if (200..300).contains(&status) => {
                client.close().await;
                return Ok(());
            }
            Ok(Ok((status, _))) => last = format!("status {status}"),
            Ok(Err(e)) => last = e,
            Err(_) => last = "no answer within 1 s".into(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("not ready within {within} s: {last}"))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let o = match parse_args(&args) {
        Ok(o) => o,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return;
        }
        Err(e) => {
            eprintln!("h3-load: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    // One thread: bench/run pins the load to one CPU.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = runtime.block_on(async {
        let target = target(&o).await?;
        if let Some(n) = o.idle {
            idle(&o, target, n).await
        } else if let Some(s) = o.wait_ready {
            wait_ready(&o, target, s).await
        } else {
            println!("{}", load(&o, target).await?);
            Ok(())
        }
    });
    if let Err(e) = result {
        eprintln!("h3-load: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_the_load_flags() {
        let o = parse_args(&args(
            "-c 8 -m 4 -d 3 --insecure https://127.0.0.1:1/plaintext",
        ))
        .unwrap();
        assert_eq!(
            (o.conns, o.streams, o.seconds, o.insecure),
            (8, 4, 3.0, true)
        );
        assert_eq!(o.url, "https://127.0.0.1:1/plaintext");
        assert!(parse_args(&args("-c 0 https://x/")).is_err());
        assert!(parse_args(&args("-c")).is_err());
        assert!(parse_args(&args("--idle 5 --wait-ready 2 https://x/")).is_err());
        assert!(parse_args(&args("https://x/ https://y/")).is_err());
        assert_eq!(
            parse_args(&args("--idle 5 https://x/")).unwrap().idle,
            Some(5)
        );
    }

    #[test]
    fn offers_aes_128_first() {
        let p = provider();
        assert_eq!(
            p.cipher_suites[0].suite(),
            rustls::CipherSuite::TLS13_AES_128_GCM_SHA256
        );
    }

    #[test]
    fn escapes_json() {
        assert_eq!(json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }
}
