//! NATS server URLs: `nats://host:port`, `tls://host:port` (TLS from the
//! start of the session), with a user and password
//! (`nats://ann:secret@host`) or a token (`nats://s3cr3t@host`) in them.
//! The port defaults to 4222; a bare `host:port` means `nats://`.

use std::fmt;

use crate::nats::info::Credentials;

/// The port a NATS server listens on unless told otherwise.
pub(crate) const DEFAULT_PORT: u16 = 4222;

/// One server to connect to.
#[derive(Clone, PartialEq, Eq)]
pub struct NatsUrl {
    /// `tls://`: the session must go on in TLS.
    pub(crate) tls: bool,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) credentials: Credentials,
}

impl NatsUrl {
    /// Reads one URL.
    pub fn parse(url: &str) -> Result<NatsUrl, String> {
        let url = url.trim();
        let (tls, rest) = match url.split_once("://") {
            Some(("nats", rest)) => (false, rest),
            Some(("tls", rest)) => (true, rest),
            Some((scheme, _)) => {
                return Err(format!(
                    "{url:?}: the scheme must be nats:// or tls://, not {scheme}://"
                ))
            }
            None => (false, url),
        };
        let rest = rest.trim_end_matches('/');
        let (userinfo, hostport) = match rest.rsplit_once('@') {
            Some((userinfo, hostport)) => (Some(userinfo), hostport),
            None => (None, rest),
        };
        let (host, port) = split_host_port(hostport)
            .ok_or_else(|| format!("{url:?}: expected host[:port], as nats://127.0.0.1:4222"))?;
        let mut credentials = Credentials::default();
        match userinfo.map(|info| info.split_once(':')) {
            None => {}
            Some(Some((user, pass))) => {
                credentials.user = Some(decode(user));
                credentials.pass = Some(decode(pass));
            }
            Some(None) => credentials.token = userinfo.map(decode),
        }
        Ok(NatsUrl {
            tls,
            host,
            port,
            credentials,
        })
    }

    /// Reads a comma-separated list of URLs.
    pub fn parse_list(urls: &str) -> Result<Vec<NatsUrl>, String> {
        let urls: Vec<NatsUrl> = urls
            .split(',')
            .filter(|url| !url.trim().is_empty())
            .map(NatsUrl::parse)
            .collect::<Result<_, _>>()?;
        if urls.is_empty() {
            return Err("no NATS server URL".into());
        }
        Ok(urls)
    }

    /// `host:port`, to connect to.
    pub(crate) fn authority(&self) -> String {
        match self.host.contains(':') {
            true => format!("[{}]:{}", self.host, self.port),
            false => format!("{}:{}", self.host, self.port),
        }
    }
}

/// Shown without the password or token.
impl fmt::Display for NatsUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls { "tls" } else { "nats" };
        let who = match (&self.credentials.user, &self.credentials.token) {
            (Some(user), _) => format!("{user}:***@"),
            (None, Some(_)) => "***@".to_string(),
            (None, None) => String::new(),
        };
        write!(f, "{scheme}://{who}{}", self.authority())
    }
}

impl fmt::Debug for NatsUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NatsUrl({self})")
    }
}

fn split_host_port(hostport: &str) -> Option<(String, u16)> {
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let port = match after {
            "" => None,
            after => Some(after.strip_prefix(':')?),
        };
        (host, port)
    } else {
        match hostport.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (hostport, None),
        }
    };
    if host.is_empty() || host.contains(['/', '@', ' ']) {
        return None;
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(port) => port.parse().ok().filter(|&p| p != 0)?,
    };
    Some((host.to_string(), port))
}

/// Percent-decodes `text` (a password may hold `@` or `:` that way).
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
        match (
            bytes[at],
            bytes.get(at + 1).copied().and_then(hex),
            bytes.get(at + 2).copied().and_then(hex),
        ) {
            (b'%', Some(high), Some(low)) => {
                out.push(high << 4 | low);
                at += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_schemes_hosts_ports_and_credentials() {
        let url = NatsUrl::parse("nats://127.0.0.1:4333").unwrap();
        assert_eq!(
            (url.tls, url.host.as_str(), url.port),
            (false, "127.0.0.1", 4333)
        );
        let url = NatsUrl::parse("tls://ann:p%40ss@nats.example:4443").unwrap();
        assert!(url.tls);
        assert_eq!(url.credentials.user.as_deref(), Some("ann"));
        assert_eq!(url.credentials.pass.as_deref(), Some("p@ss"));
        assert_eq!(url.to_string(), "tls://ann:***@nats.example:4443");
        let url = NatsUrl::parse("s3cr3t@localhost").unwrap();
        assert_eq!(url.credentials.token.as_deref(), Some("s3cr3t"));
        assert_eq!(url.port, DEFAULT_PORT);
        assert_eq!(url.to_string(), "nats://***@localhost:4222");
        let url = NatsUrl::parse("nats://[::1]:5222").unwrap();
        assert_eq!(url.authority(), "[::1]:5222");
        let list = NatsUrl::parse_list("nats://a:1, nats://b:2").unwrap();
        assert_eq!(list.len(), 2);
    }

    #[test]
    fn refuses_what_is_not_a_nats_url() {
        for bad in [
            "http://a:1",
            "nats://",
            "nats://a:0",
            "nats://a:x",
            "nats://a b:1",
            "",
        ] {
            assert!(NatsUrl::parse_list(bad).is_err(), "{bad:?}");
        }
    }
}
