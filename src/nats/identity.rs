//! Proving who the client is with a key, as NATS' decentralized auth
//! asks: an NKEY user seed (`--nats-nkey FILE`), or a `.creds` file
//! (`--nats-creds FILE`: a user JWT and the seed that signs for it, as
//! `nsc` writes them). The server's `INFO` carries a nonce; the client's
//! `CONNECT` answers with the nonce signed by the seed (`sig`, ed25519,
//! base64url without padding) and the public key (`nkey`) or the JWT
//! (`jwt`). The seed never leaves this module, and is never logged. The
//! cluster reads the file again for each connection (`Cluster::identity`).
//!
//! Seed decoding and signing are the `nkeys` crate's, the NATS project's
//! own (async-nats uses it): a seed's encoding (a prefix, base32 and a
//! checksum) is not worth writing again.

use std::fmt;
use std::path::Path;

use base64::Engine;
use nkeys::{KeyPair, KeyPairType};

use crate::nats::info::Credentials;

/// A key the client signs the server's nonce with, and the JWT that
/// vouches for it when it came from a `.creds` file.
#[derive(Clone)]
pub(crate) struct Identity {
    key: KeyPair,
    jwt: Option<String>,
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The public key only: the seed is a secret.
        f.debug_struct("Identity")
            .field("nkey", &self.key.public_key())
            .field("jwt", &self.jwt.is_some())
            .finish()
    }
}

impl Identity {
    /// Reads a `.creds` file: the first armored block is the user JWT,
    /// the second the user's NKEY seed.
    pub(crate) fn from_creds_file(path: &Path) -> Result<Identity, String> {
        let text = read(path)?;
        let blocks = armored_blocks(&text);
        let (Some(jwt), Some(seed)) = (blocks.first(), blocks.get(1)) else {
            return Err(format!(
                "{}: not a .creds file (a user JWT and an NKEY seed, each between \
                 -----BEGIN ...----- and ------END ...------ lines)",
                path.display()
            ));
        };
        if jwt.split('.').count() != 3 {
            return Err(format!("{}: the first block is not a JWT", path.display()));
        }
        Ok(Identity {
            key: KeyPair::from_seed(seed)
                .map_err(|e| format!("not an NKEY seed: {e}"))
                .and_then(user_key)
                .map_err(|e| format!("{}: {e}", path.display()))?,
            jwt: Some(jwt.to_string()),
        })
    }

    /// Reads a file holding an NKEY user seed (`SU...`), alone or among
    /// other lines (as `nk -gen user -pubout` or `nsc` write it): the
    /// first word that decodes as a seed.
    pub(crate) fn from_seed_file(path: &Path) -> Result<Identity, String> {
        let text = read(path)?;
        let key = text
            .split_whitespace()
            .find_map(|word| KeyPair::from_seed(word).ok())
            .ok_or_else(|| format!("{}: no NKEY seed (SU...) in it", path.display()))?;
        Ok(Identity {
            key: user_key(key).map_err(|e| format!("{}: {e}", path.display()))?,
            jwt: None,
        })
    }

    /// Answers the server's `nonce` in `credentials`: the signature, and
    /// the JWT (from a `.creds` file) or else the public key.
    pub(crate) fn answer(&self, nonce: &str, credentials: &mut Credentials) -> Result<(), String> {
        let signature = self
            .key
            .sign(nonce.as_bytes())
            .map_err(|e| format!("signing the nonce: {e}"))?;
        credentials.sig = Some(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(signature));
        match &self.jwt {
            Some(jwt) => credentials.jwt = Some(jwt.clone()),
            None => credentials.nkey = Some(self.key.public_key()),
        }
        Ok(())
    }
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// `key` if it is a user's; other kinds (an account's, an operator's)
/// are refused, since a NATS server would refuse them.
fn user_key(key: KeyPair) -> Result<KeyPair, String> {
    match key.key_pair_type() {
        KeyPairType::User => Ok(key),
        other => Err(format!(
            "the seed is a {other:?} key's, not a user's (SU...)"
        )),
    }
}

/// The contents of each armored block in `text`: the one line between a
/// `-----BEGIN ...-----` line and an `------END ...------` line (blank
/// lines aside).
fn armored_blocks(text: &str) -> Vec<&str> {
    let mut lines = text.lines().map(str::trim).filter(|line| !line.is_empty());
    let mut blocks = Vec::new();
    while let Some(line) = lines.next() {
        if !line.starts_with("-----BEGIN ") {
            continue;
        }
        if let (Some(body), Some(end)) = (lines.next(), lines.next()) {
            if end.starts_with("------END ") {
                blocks.push(body);
            }
        }
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(jwt: &str, seed: &str) -> String {
        format!(
            "-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n\
             ************************* IMPORTANT *************************\n\
             NKEY Seed printed below can be used to sign and prove identity.\n\n\
             -----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n\n\
             *************************************************************\n"
        )
    }

    fn file(name: &str, text: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("identity-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_creds_file_answers_with_its_jwt_and_a_signature_the_public_key_verifies() {
        let user = KeyPair::new_user();
        let path = file("a.creds", &creds("aaa.bbb.ccc", &user.seed().unwrap()));
        let identity = Identity::from_creds_file(&path).unwrap();
        let mut credentials = Credentials::default();
        identity.answer("nonce-1", &mut credentials).unwrap();
        assert_eq!(credentials.jwt.as_deref(), Some("aaa.bbb.ccc"));
        assert_eq!(credentials.nkey, None);
        let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(credentials.sig.unwrap())
            .unwrap();
        user.verify(b"nonce-1", &sig).unwrap();
        assert!(user.verify(b"nonce-2", &sig).is_err());
        let debug = format!("{identity:?}");
        assert!(debug.contains(&user.public_key()), "{debug}");
        assert!(!debug.contains(&user.seed().unwrap()), "{debug}");
    }

    #[test]
    fn a_seed_file_answers_with_the_public_key() {
        let user = KeyPair::new_user();
        let seed = user.seed().unwrap();
        let text = format!("# Seed and public key\n{seed}\n{}\n", user.public_key());
        let path = file("user.nk", &text);
        let identity = Identity::from_seed_file(&path).unwrap();
        let mut credentials = Credentials::default();
        identity.answer("xyz", &mut credentials).unwrap();
        assert_eq!(credentials.nkey, Some(user.public_key()));
        assert_eq!(credentials.jwt, None);
        let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(credentials.sig.unwrap())
            .unwrap();
        user.verify(b"xyz", &sig).unwrap();
    }

    #[test]
    fn files_that_are_not_credentials_are_refused_with_the_reason() {
        let account = KeyPair::new_account().seed().unwrap();
        let user = KeyPair::new_user().seed().unwrap();
        let cases = [
            ("empty.creds", String::new(), "not a .creds file"),
            (
                "one.creds",
                creds("a.b.c", "").replace(
                    "-----BEGIN USER NKEY SEED-----\n\n------END USER NKEY SEED------",
                    "",
                ),
                "not a .creds file",
            ),
            ("notjwt.creds", creds("plain", &user), "not a JWT"),
            (
                "noend.creds",
                creds("a.b.c", &user).replace("------END NATS USER JWT------", ""),
                "not a .creds file",
            ),
            (
                "twolines.creds",
                creds("a.b.c", &user).replace("a.b.c", "a.b.c\nd.e.f"),
                "not a .creds file",
            ),
            (
                "badseed.creds",
                creds("a.b.c", "SUXXXX"),
                "not an NKEY seed",
            ),
            ("account.creds", creds("a.b.c", &account), "not a user's"),
        ];
        for (name, text, says) in cases {
            let err = Identity::from_creds_file(&file(name, &text)).unwrap_err();
            assert!(err.contains(says), "{name}: {err}");
        }
        for (name, text, says) in [
            ("none.nk", "no seed here".to_string(), "no NKEY seed"),
            ("account.nk", account.clone(), "not a user's"),
        ] {
            let err = Identity::from_seed_file(&file(name, &text)).unwrap_err();
            assert!(err.contains(says), "{name}: {err}");
        }
        let missing = Identity::from_seed_file(Path::new("/nonexistent/user.nk")).unwrap_err();
        assert!(missing.contains("/nonexistent/user.nk"), "{missing}");
    }
}
