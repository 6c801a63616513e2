//! The addresses of the open WebSocket connections, so a send to one by
//! address (from an owned actor, or `Server::send`) finds its handle.
//!
//! Connections come and go, so unlike the owned actors' directory this
//! changes while the server runs: a connection registers as it opens and
//! leaves as it closes. A lookup takes a read lock; a room that keeps its
//! members' [`WsHandle`]s sends without one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use crate::websocket::handle::{MailPoster, Mailbag, WsHandle};

/// Every open WebSocket connection, by address.
#[derive(Debug, Default)]
pub(crate) struct WsRegistry {
    open: RwLock<HashMap<Arc<str>, WsHandle>>,
    next: AtomicU64,
}

/// Addresses of WebSocket connections start with this.
pub(crate) const ADDRESS_PREFIX: &str = "ws/";

impl WsRegistry {
    /// Registers a new connection, at `key` on the poller `poster` asks,
    /// with at most `limit` bytes waiting for its client.
    pub(crate) fn open(&self, key: usize, limit: usize, poster: Arc<dyn MailPoster>) -> WsHandle {
        let serial = self.next.fetch_add(1, Ordering::Relaxed);
        let handle = WsHandle {
            bag: Arc::new(Mailbag::new(key, limit, poster)),
            address: format!("{ADDRESS_PREFIX}{serial}").into(),
        };
        self.open
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(Arc::clone(&handle.address), handle.clone());
        handle
    }

    /// The connection closed: sends to it fail from now on.
    pub(crate) fn close(&self, handle: &WsHandle) {
        handle.bag.close();
        self.open
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&handle.address);
    }

    /// The open connection at `address`.
    pub(crate) fn get(&self, address: &str) -> Option<WsHandle> {
        if !address.starts_with(ADDRESS_PREFIX) {
            return None;
        }
        self.open
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(address)
            .cloned()
    }
}
