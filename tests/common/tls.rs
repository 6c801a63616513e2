//! TLS for the tests: certificates made at test time with rcgen (a CA, and
//! an ECDSA P-256 certificate for `localhost` it signs), written as PEM
//! files the server reads, and rustls clients that trust that CA.

use std::fs;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::crypto::ring;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use uppercut_mio_server::TlsFiles;

use super::{Client, IO_TIMEOUT};

/// `cert` as PEM.
pub fn pem(cert: &CertificateDer<'_>) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(cert.as_ref());
    let lines: Vec<&str> = encoded
        .as_bytes()
        .chunks(64)
        .map(|line| std::str::from_utf8(line).unwrap())
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    )
}

/// A TLS client's stream.
pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// A certificate and key on disk, and the CA that signed the certificate.
pub struct Certificates {
    pub dir: PathBuf,
    pub files: TlsFiles,
    pub ca: CertificateDer<'static>,
}

impl Certificates {
    /// A fresh CA and a certificate for `localhost`, in a directory of their
    /// own named after `name` (unique per test and process).
    pub fn new(name: &str) -> Certificates {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("tls-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("a directory for the certificates");
        let ca = new_ca(name);
        let files = TlsFiles {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        };
        let certificates = Certificates {
            dir,
            files,
            ca: ca.der().clone(),
        };
        certificates.write_leaf(&ca);
        certificates
    }

    /// Writes a new certificate and key for `localhost`, signed by a new CA
    /// (the one returned), over the files.
    pub fn replace(&self, name: &str) -> CertificateDer<'static> {
        let ca = new_ca(name);
        self.write_leaf(&ca);
        ca.der().clone()
    }

    fn write_leaf(&self, ca: &CertifiedIssuer<'static, KeyPair>) {
        let key = KeyPair::generate().expect("a key");
        let params = CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        let cert = params.signed_by(&key, ca).expect("a certificate");
        // The chain: the server's certificate, then its issuer's.
        fs::write(&self.files.cert, cert.pem() + &ca.pem()).expect("write the certificate");
        fs::write(&self.files.key, key.serialize_pem()).expect("write the key");
    }

    /// The CA's certificate, as PEM (for clients that read a file).
    pub fn ca_pem(&self) -> String {
        pem(&self.ca)
    }

    /// A client configuration that trusts this CA, offering `http/1.1`.
    pub fn client_config(&self) -> Arc<ClientConfig> {
        client_config(
            &self.ca,
            &[&rustls::version::TLS13, &rustls::version::TLS12],
        )
    }
}

impl Drop for Certificates {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A CA named after `name`.
fn new_ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, format!("test CA {name}"));
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("a key")).expect("a CA")
}

/// A client configuration trusting `ca`, for `versions`, offering
/// `http/1.1`.
pub fn client_config(
    ca: &CertificateDer<'static>,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(ca.clone()).expect("the CA is a trust anchor");
    let mut config = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_protocol_versions(versions)
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// A TLS connection to `addr` as `localhost`, handshake done.
pub fn connect(addr: SocketAddr, config: &Arc<ClientConfig>) -> Client<TlsStream> {
    let socket = TcpStream::connect(addr).expect("connect");
    socket.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    socket.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    socket.set_nodelay(true).unwrap();
    let name = ServerName::try_from("localhost").expect("a name");
    let session = ClientConnection::new(Arc::clone(config), name).expect("a session");
    let mut stream = StreamOwned::new(session, socket);
    while stream.conn.is_handshaking() {
        stream
            .conn
            .complete_io(&mut stream.sock)
            .expect("the handshake completes");
    }
    Client::over(stream)
}

/// A ClientHello record, made by hand (record version 3.1): client version
/// `version`, server name `name`, the extensions `more` (each its type and
/// data), two TLS 1.0 suites and nothing else, so rustls reads it but
/// cannot complete a handshake with it.
pub fn client_hello(version: u16, name: &str, more: &[(u16, &[u8])]) -> Vec<u8> {
    let mut sni = (name.len() as u16 + 3).to_be_bytes().to_vec();
    sni.push(0); // host_name
    sni.extend_from_slice(&(name.len() as u16).to_be_bytes());
    sni.extend_from_slice(name.as_bytes());
    let mut extensions = vec![(0x0000, &sni[..])];
    extensions.extend_from_slice(more);
    let mut fields = Vec::new();
    for (kind, data) in extensions {
        fields.extend_from_slice(&kind.to_be_bytes());
        fields.extend_from_slice(&(data.len() as u16).to_be_bytes());
        fields.extend_from_slice(data);
    }
    let mut hello = version.to_be_bytes().to_vec();
    hello.extend_from_slice(&[0x5a; 32]); // random
    hello.extend_from_slice(b"\x00\x00\x04\x00\x2f\x00\x35\x01\x00"); // no id, suites, null
    hello.extend_from_slice(&(fields.len() as u16).to_be_bytes());
    hello.extend_from_slice(&fields);
    let mut record = b"\x16\x03\x01".to_vec();
    record.extend_from_slice(&(hello.len() as u16 + 4).to_be_bytes());
    record.push(0x01);
    record.extend_from_slice(&(hello.len() as u32).to_be_bytes()[1..]);
    record.extend_from_slice(&hello);
    record
}
