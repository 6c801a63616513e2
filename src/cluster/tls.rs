//! TLS to NATS servers (`tls://` URLs, or a server that requires it):
//! rustls, as the HTTPS side uses, trusting `--nats-ca`'s certificates or
//! else the system's (the PEM bundle Debian, Ubuntu, Fedora and Alpine
//! keep).

use std::path::Path;
use std::sync::Arc;

use rustls::crypto::ring;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

/// Where systems keep the certificates they trust.
const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
];

/// A client configuration trusting the certificates in `ca`, or the
/// system's.
pub(crate) fn client_config(ca: Option<&Path>) -> Result<Arc<ClientConfig>, String> {
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
    let config = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}
