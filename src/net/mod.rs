//! What every mio event loop here stands on, the pollers' and the upstream
//! pool's alike: the socket write loop, and which accept errors mean the
//! process is out of resources. (Connections are kept by token in the
//! `slab` crate's slab, tokio's own.)

pub(crate) mod client_hello;
pub(crate) mod socket;
pub(crate) mod transport;
