//! What an operator sees: the access log, and the counters behind `/metrics`
//! with the listener that serves them.

pub(crate) mod access_line;
pub(crate) mod access_log;
pub(crate) mod cluster_metrics;
pub(crate) mod metrics;
pub(crate) mod metrics_server;
pub(crate) mod metrics_text;
pub(crate) mod process_stats;
