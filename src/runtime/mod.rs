//! What runs a server: its lifecycle, the uppercut system and its threads,
//! and the pollers (mio event loops) and the connection actors they wake.

pub(crate) mod balance;
pub(crate) mod connection;
pub(crate) mod connections;
pub(crate) mod hosting;
pub(crate) mod lifecycle;
pub(crate) mod listeners;
pub(crate) mod local_dispatch;
pub(crate) mod poller;
pub(crate) mod pool_threads;
pub(crate) mod quic;
pub(crate) mod server;
pub(crate) mod shared;
pub(crate) mod signals;
pub(crate) mod state_file;
pub(crate) mod state_tools;
pub(crate) mod system;
pub(crate) mod system_dispatch;
pub(crate) mod timeouts;
pub(crate) mod wakeup;
