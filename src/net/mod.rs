//! What every mio event loop here stands on, the pollers' and the upstream
//! pool's alike: a slab whose keys are tokens, the socket write loop, and
//! which accept errors mean the process is out of resources.

pub(crate) mod slab;
pub(crate) mod socket;
