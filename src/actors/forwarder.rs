//! What keeps an owned actor reachable at its uppercut address: a forwarder
//! spawned into the uppercut system there, which passes every envelope it
//! gets (from actors uppercut runs, or a remote system) to the actor the
//! server owns, as any thread without a poller does.

use std::sync::Arc;

use log::debug;
use uppercut::api::{AnyActor, AnySender, Envelope};

use crate::actors::directory::Directory;

/// Forwards to the owned actor at the same address.
pub(crate) struct Forwarder {
    pub(crate) address: String,
    pub(crate) directory: Arc<Directory>,
}

impl AnyActor for Forwarder {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if self
            .directory
            .deliver_foreign(&self.address, envelope)
            .is_err()
        {
            debug!(
                "forwarder at {}: the server owns nothing there",
                self.address
            );
        }
    }
}
