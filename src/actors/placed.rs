//! Placed actors (`Routes::spawn_placed`): durable actors that belong to
//! no server. A name has one activation in the cluster, on whichever
//! server a message found it free, and every other server forwards that
//! name's messages there. The placement itself (leases in JetStream, the
//! activations, forwarding) is the cluster's (`cluster::placement`); the
//! directory reaches it through this trait, as it reaches other servers
//! through `remote::Remote`.

use uppercut::api::Envelope;

use crate::actors::context::RunContext;

/// Where placed names' messages go.
pub(crate) trait Placement: Send + Sync {
    /// Whether `name` is a placed actor's (a placed kind, or `KIND/ID`).
    fn places(&self, name: &str) -> bool;

    /// Hands `envelope` to `name`'s activation: here if this server holds
    /// it, at its holder if another does, or here after taking it if
    /// nobody does. `forwarded`: it came from another server that took
    /// this one for the holder, and is not forwarded again (a request is
    /// answered 503 if this server is not the holder).
    fn deliver(&self, name: &str, envelope: Envelope, forwarded: bool, context: &RunContext<'_>);
}

/// The placed name an address template gives for `request`: each
/// `{param}` of `template` (`cart/{id}`) replaced by that path
/// parameter's value. A value that cannot be part of a name (a state key
/// takes letters, digits, `-`, `_`, `=` and `.`) is refused, saying why.
pub(crate) fn name_for(
    template: &str,
    request: &crate::routes::request::Request<'_>,
) -> Result<String, String> {
    let mut name = String::with_capacity(template.len() + 16);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        name.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            return Err(format!("address template {template:?}: an unclosed {{"));
        };
        let param = &rest[open + 1..open + close];
        let value = request
            .param(param)
            .ok_or_else(|| format!("no path parameter {param:?}"))?;
        let valid = !value.is_empty()
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_=.".contains(&b))
            && !value.starts_with('.')
            && !value.ends_with('.');
        if !valid {
            return Err(format!(
                "{param} {value:?} is not a name: use letters, digits, '-', '_', '=' and '.'"
            ));
        }
        name.push_str(&value);
        rest = &rest[open + close + 1..];
    }
    name.push_str(rest);
    Ok(name)
}
