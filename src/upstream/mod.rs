//! The pooled keep-alive connections to the `--upstream` service behind
//! `GET /io`, why an upstream answer can fail, and the JSON check on it.

pub(crate) mod failure;
pub(crate) mod json;
pub(crate) mod pool;
