//! HTTPS: the rustls server configuration built from the certificate and
//! key files (`Config::tls`; `--tls-cert` and `--tls-key`), and the one new
//! connections use, which SIGHUP replaces.
//!
//! rustls is the field's TLS for Rust servers, and its `ServerConnection` is
//! sans-I/O, so a connection actor drives it from its poller with no thread
//! or runtime of its own (`runtime/connection/transport.rs`). The crypto
//! provider is `ring`: it builds with a C compiler alone, where rustls'
//! default (`aws-lc-rs`) needs cmake and more on a fresh machine, and the
//! handshake and record costs it adds are in `docs/performance.md`.
//!
//! TLS 1.3 and 1.2 only (rustls has nothing older), AEAD suites only, in
//! the server's order; ALPN offers `http/1.1`;
//! sessions resume by ticket (a ticketer kept across reloads, so a reload
//! does not end every client's session) and by session ID (an in-memory
//! cache); SNI is accepted, and one certificate serves every name.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::crypto::ring;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ProducesTickets, ServerSessionMemoryCache, StoresServerSessions};
use rustls::version::{TLS12, TLS13};
use rustls::{ServerConfig, ServerConnection};

use crate::config::TlsFiles;

/// Sessions kept for resumption by session ID.
const SESSION_CACHE: usize = 4096;

/// Why the certificate or the key cannot serve. It names the files, not
/// the flags that gave them: a program other than the binary has none.
#[derive(Debug)]
pub(crate) enum TlsError {
    /// The certificate file: unreadable, not PEM, or holding no certificate.
    Cert { path: PathBuf, reason: String },
    /// The key file: unreadable, not PEM, or holding no private key.
    Key { path: PathBuf, reason: String },
    /// The key is not the certificate's, or rustls refused them.
    Pair { key: PathBuf, reason: String },
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::Cert { path, reason } => {
                write!(f, "TLS certificate {}: {reason}", path.display())
            }
            TlsError::Key { path, reason } => write!(f, "TLS key {}: {reason}", path.display()),
            TlsError::Pair { key, reason } => write!(f, "TLS key {}: {reason}", key.display()),
        }
    }
}

impl std::error::Error for TlsError {}

/// What stays the same across reloads: the resumption state.
struct Resumption {
    tickets: Arc<dyn ProducesTickets>,
    sessions: Arc<dyn StoresServerSessions>,
}

/// The configuration new TLS connections are made with.
pub(crate) struct TlsAcceptor {
    /// ALPN offers `h2`.
    http2: bool,
    files: TlsFiles,
    resumption: Resumption,
    current: RwLock<Arc<ServerConfig>>,
    /// With HTTP/3: what new QUIC connections are made with.
    quic: Option<Quic>,
}

/// HTTP/3's QUIC configuration: the same certificate and key, TLS 1.3
/// alone with ALPN `h3`, and what stays across reloads (the key of the
/// address-validation tokens, which every poller's endpoint shares, and
/// the transport's limits).
struct Quic {
    token_key: Arc<::ring::hkdf::Prk>,
    transport: Arc<quinn_proto::TransportConfig>,
    current: RwLock<Arc<quinn_proto::ServerConfig>>,
}

impl TlsAcceptor {
    /// Reads the certificate and key in `files`; with `http2`, ALPN offers
    /// `h2` before `http/1.1`.
    pub(crate) fn new(files: &TlsFiles, http2: bool) -> Result<TlsAcceptor, TlsError> {
        let tickets = ring::Ticketer::new().map_err(|e| TlsError::Pair {
            key: files.key.clone(),
            reason: format!("cannot make session tickets: {e}"),
        })?;
        let resumption = Resumption {
            tickets,
            sessions: ServerSessionMemoryCache::new(SESSION_CACHE),
        };
        let config = server_config(files, &resumption, http2)?;
        Ok(TlsAcceptor {
            http2,
            files: files.clone(),
            resumption,
            current: RwLock::new(config),
            quic: None,
        })
    }

    /// Serves HTTP/3 too, with `transport`'s limits.
    pub(crate) fn with_quic(
        mut self,
        transport: quinn_proto::TransportConfig,
    ) -> Result<TlsAcceptor, TlsError> {
        let mut secret = [0u8; 32];
        ring::default_provider()
            .secure_random
            .fill(&mut secret)
            .map_err(|e| TlsError::Pair {
                key: self.files.key.clone(),
                reason: format!("no randomness for QUIC's tokens: {e:?}"),
            })?;
        let salt = ::ring::hkdf::Salt::new(::ring::hkdf::HKDF_SHA256, &[]);
        let token_key = Arc::new(salt.extract(&secret));
        let transport = Arc::new(transport);
        let config = quic_config(&self.files, &self.resumption, &token_key, &transport)?;
        self.quic = Some(Quic {
            token_key,
            transport,
            current: RwLock::new(config),
        });
        Ok(self)
    }

    /// The QUIC configuration new HTTP/3 connections use, with HTTP/3 on.
    pub(crate) fn quic(&self) -> Option<Arc<quinn_proto::ServerConfig>> {
        let quic = self.quic.as_ref()?;
        Some(Arc::clone(
            &quic.current.read().unwrap_or_else(|e| e.into_inner()),
        ))
    }

    /// A session for a connection just accepted, with the configuration
    /// current now.
    pub(crate) fn session(&self) -> Result<ServerConnection, rustls::Error> {
        let config = Arc::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()));
        ServerConnection::new(config)
    }

    /// SIGHUP: reads the files again; connections made from now on use them.
    /// An error keeps the configuration in use.
    pub(crate) fn reload(&self) -> Result<(), TlsError> {
        let config = server_config(&self.files, &self.resumption, self.http2)?;
        if let Some(quic) = &self.quic {
            let config = quic_config(
                &self.files,
                &self.resumption,
                &quic.token_key,
                &quic.transport,
            )?;
            *quic.current.write().unwrap_or_else(|e| e.into_inner()) = config;
        }
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = config;
        Ok(())
    }

    /// The files it reads.
    pub(crate) fn files(&self) -> &TlsFiles {
        &self.files
    }
}

impl fmt::Debug for TlsAcceptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsAcceptor")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

/// The server configuration for the certificate and key in `files`.
fn server_config(
    files: &TlsFiles,
    resumption: &Resumption,
    http2: bool,
) -> Result<Arc<ServerConfig>, TlsError> {
    let certs = read_certs(&files.cert)?;
    let key = read_key(&files.key)?;
    let provider = Arc::new(ring::default_provider());
    let pair = |e: rustls::Error| TlsError::Pair {
        key: files.key.clone(),
        reason: match e {
            rustls::Error::InconsistentKeys(_) => {
                format!("not the key of the certificate in {}", files.cert.display())
            }
            other => other.to_string(),
        },
    };
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&TLS13, &TLS12])
        .map_err(pair)?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(pair)?;
    // HTTP/2 first where it is on (RFC 9113 §3.2), else HTTP/1.1 alone.
    config.alpn_protocols = match http2 {
        true => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        false => vec![b"http/1.1".to_vec()],
    };
    // The server's order of cipher suites (rustls': AES-256-GCM, then
    // AES-128-GCM and ChaCha20-Poly1305), not the client's: no client can
    // talk it down to a weaker suite it happens to list first.
    config.ignore_client_order = true;
    config.ticketer = Arc::clone(&resumption.tickets);
    config.session_storage = Arc::clone(&resumption.sessions);
    Ok(Arc::new(config))
}

/// The QUIC configuration for the certificate and key in `files`: TLS 1.3
/// alone (QUIC has no other), ALPN `h3`, the session tickets of TCP's
/// connections, no early data.
fn quic_config(
    files: &TlsFiles,
    resumption: &Resumption,
    token_key: &Arc<::ring::hkdf::Prk>,
    transport: &Arc<quinn_proto::TransportConfig>,
) -> Result<Arc<quinn_proto::ServerConfig>, TlsError> {
    let certs = read_certs(&files.cert)?;
    let key = read_key(&files.key)?;
    let pair = |reason: String| TlsError::Pair {
        key: files.key.clone(),
        reason,
    };
    let provider = Arc::new(ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&TLS13])
        .map_err(|e| pair(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| pair(e.to_string()))?;
    config.alpn_protocols = vec![b"h3".to_vec()];
    config.ignore_client_order = true;
    config.ticketer = Arc::clone(&resumption.tickets);
    config.session_storage = Arc::clone(&resumption.sessions);
    let crypto = quinn_proto::crypto::rustls::QuicServerConfig::try_from(config)
        .map_err(|e| pair(e.to_string()))?;
    let token_key: Arc<dyn quinn_proto::crypto::HandshakeTokenKey> = token_key.clone();
    let mut server = quinn_proto::ServerConfig::new(Arc::new(crypto), token_key);
    server.transport_config(Arc::clone(transport));
    Ok(Arc::new(server))
}

/// Every certificate in the PEM file at `path`, in order.
pub(crate) fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let error = |reason: String| TlsError::Cert {
        path: path.to_path_buf(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| error(pem_reason(e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| error(pem_reason(e)))?;
    match certs.is_empty() {
        true => Err(error(
            "no certificate (BEGIN CERTIFICATE) in the file".into(),
        )),
        false => Ok(certs),
    }
}

/// The first private key in the PEM file at `path`.
pub(crate) fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| TlsError::Key {
        path: path.to_path_buf(),
        reason: match e {
            rustls::pki_types::pem::Error::NoItemsFound => {
                "no private key (PKCS#8, PKCS#1 or SEC1) in the file".into()
            }
            other => pem_reason(other),
        },
    })
}

/// A PEM error as the reason a file cannot serve.
fn pem_reason(error: rustls::pki_types::pem::Error) -> String {
    match error {
        rustls::pki_types::pem::Error::Io(e) => format!("cannot read: {e}"),
        rustls::pki_types::pem::Error::NoItemsFound => "nothing of the kind in the file".into(),
        other => format!("not valid PEM: {other}"),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A file of `tests/fixtures/tls`.
    pub(crate) fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/tls")
            .join(name)
    }

    /// `Debug` (in a `Server`'s) names the files it reads, and nothing of
    /// the key; `files` gives them back.
    #[test]
    fn an_acceptor_names_its_files() {
        let files = TlsFiles {
            cert: fixture("ec.pem"),
            key: fixture("ec-sec1.key"),
        };
        let acceptor = TlsAcceptor::new(&files, false).expect("the fixture serves");
        assert_eq!(acceptor.files(), &files);
        assert_eq!(
            format!("{acceptor:?}"),
            format!("TlsAcceptor {{ files: {files:?}, .. }}")
        );
    }
}
