//! TLS to NATS servers (`tls://` URLs, or a server that requires it):
//! rustls, as the HTTPS side uses, trusting `--nats-ca`'s certificates or
//! else the system's (the PEM bundle Debian, Ubuntu, Fedora and Alpine
//! keep), and presenting `--nats-tls-cert`'s certificate to a server that
//! verifies its clients. The roots are read once; a configuration is made
//! again with the certificate read again for each connection
//! (`Cluster::tls`).

use std::path::Path;
use std::sync::Arc;

use rustls::crypto::ring;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

use crate::config::TlsFiles;
use crate::tls::{read_certs, read_key};

/// Where systems keep the certificates they trust.
const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
];

/// The certificates in `ca`, or the system's, as the roots TLS trusts.
pub(crate) fn roots(ca: Option<&Path>) -> Result<Arc<RootCertStore>, String> {
    let mut roots = RootCertStore::empty();
    let bundle = match ca {
        Some(ca) => ca.to_path_buf(),
        None => SYSTEM_BUNDLES
            .iter()
            .map(Path::new)
            .find(|path| path.exists())
            .ok_or(
                "no system certificate bundle; name the certificates to trust (ClusterConfig::ca)",
            )?
            .to_path_buf(),
    };
    let certs = CertificateDer::pem_file_iter(&bundle)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("NATS CA file {}: {e}", bundle.display()))?;
    let (added, _ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(format!(
            "NATS CA file {}: no certificate in it",
            bundle.display()
        ));
    }
    Ok(Arc::new(roots))
}

/// A client configuration trusting `roots`, and presenting the
/// certificate in `client`, if given (read from its files now).
pub(crate) fn client_config(
    roots: &Arc<RootCertStore>,
    client: Option<&TlsFiles>,
) -> Result<Arc<ClientConfig>, String> {
    let builder = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(Arc::clone(roots));
    let config = match client {
        None => builder.with_no_client_auth(),
        Some(files) => {
            let certs = read_certs(&files.cert).map_err(|e| format!("NATS client {e}"))?;
            let key = read_key(&files.key).map_err(|e| format!("NATS client {e}"))?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| format!("NATS client TLS key {}: {e}", files.key.display()))?
        }
    };
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::tests::fixture;

    /// A client certificate that cannot be presented is refused with the
    /// file and the reason; a pair that can, is taken.
    #[test]
    fn client_certificates_are_read_or_refused_with_the_file() {
        let ca = roots(Some(&fixture("ca.pem"))).unwrap();
        let files = |cert: &str, key: &str| TlsFiles {
            cert: fixture(cert),
            key: fixture(key),
        };
        let paired = files("ec.pem", "ec-sec1.key");
        let config = client_config(&ca, Some(&paired)).unwrap();
        assert!(config.client_auth_cert_resolver.has_certs());
        let plain = client_config(&ca, None).unwrap();
        assert!(!plain.client_auth_cert_resolver.has_certs());
        let missing = files("none.pem", "ec-sec1.key");
        let error = client_config(&ca, Some(&missing)).unwrap_err();
        assert!(
            error.starts_with(&format!(
                "NATS client TLS certificate {}: cannot read",
                missing.cert.display()
            )),
            "{error}"
        );
        let mismatched = files("ec.pem", "rsa-pkcs1.key");
        let error = client_config(&ca, Some(&mismatched)).unwrap_err();
        assert!(
            error.starts_with(&format!(
                "NATS client TLS key {}: ",
                mismatched.key.display()
            )),
            "{error}"
        );
    }
}
