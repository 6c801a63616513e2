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
