//! [`RequestId`]: a middleware that gives each request an id, the client's
//! or one of its own, which the route sees and the response carries.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::routes::middleware::{Exchange, Fields, Middleware, MAX_REQUEST_ID};
use crate::routes::request::Request;

/// The field that carries the id, both ways.
const FIELD: &str = "X-Request-Id";

/// Numbers the threads that make ids, so each counts on its own.
static THREADS: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// This thread's number (once it made an id) and how many it made.
    static MADE: Cell<Option<(u32, u64)>> = const { Cell::new(None) };
}

/// Gives every request an id: the client's `X-Request-Id` when it sends a
/// valid one (1 to 128 ASCII letters, digits and `-_.:;=+/@`), else one
/// made here. Handlers and actors read it as [`Request::request_id`]
/// (to put in their own logs, or to pass on to the services they call);
/// the response carries it as `X-Request-Id`, whatever answered (an error
/// and another middleware's early answer too, when this one ran first:
/// add it first).
///
/// A made id is `PID-START-THREAD-COUNT` in hexadecimal: the process id
/// and start second, which tell servers and restarts apart, then the
/// poller's thread and its count, so making one takes no lock, no shared
/// counter and no allocation (`1f2e-67a1b2c3-0-2a`).
///
/// ```
/// use uppercut_mio_server::{Method, RequestId, Routes};
///
/// let routes = Routes::new()
///     .handler(&[Method::Get], "/", |request, response| {
///         let id = request.request_id().unwrap_or("-");
///         response.body(format!("request {id}\n").as_bytes());
///     })
///     .wrap(RequestId::new());
/// ```
pub struct RequestId {
    /// `PID-START-`, as made ids begin.
    prefix: String,
    /// Takes the client's id rather than always making one.
    trusts_client: bool,
}

impl RequestId {
    /// Takes the client's valid id, or makes one.
    pub fn new() -> RequestId {
        let start = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        RequestId {
            prefix: format!("{:x}-{start:x}-", std::process::id()),
            trusts_client: true,
        }
    }

    /// Always makes the id, ignoring the client's: for a server that
    /// faces clients whose ids nothing should trust.
    pub fn ignore_client_ids(mut self) -> RequestId {
        self.trusts_client = false;
        self
    }

    /// A new id, `PREFIX-THREAD-COUNT`, set on `exchange`.
    fn make(&self, exchange: &mut Exchange<'_>) {
        let (thread, count) = MADE.with(|made| {
            let (thread, count) = made.get().unwrap_or_else(|| {
                // Only distinct numbers matter here, not their order.
                (THREADS.fetch_add(1, Ordering::Relaxed), 0)
            });
            made.set(Some((thread, count + 1)));
            (thread, count)
        });
        let mut id = [0u8; MAX_REQUEST_ID];
        let mut len = 0;
        let mut put = |bytes: &[u8]| {
            let end = (len + bytes.len()).min(MAX_REQUEST_ID);
            id[len..end].copy_from_slice(&bytes[..end - len]);
            len = end;
        };
        put(self.prefix.as_bytes());
        put_hex(&mut put, u64::from(thread));
        put(b"-");
        put_hex(&mut put, count);
        // Only letters, digits and `-`: always an id.
        let set = std::str::from_utf8(&id[..len]).is_ok_and(|id| exchange.set_request_id(id));
        debug_assert!(set, "a made id is valid");
    }
}

impl Default for RequestId {
    fn default() -> Self {
        RequestId::new()
    }
}

/// Writes `value` in lower-case hexadecimal through `put`.
fn put_hex(put: &mut impl FnMut(&[u8]), value: u64) {
    let mut digits = [0u8; 16];
    let mut start = digits.len();
    let mut rest = value;
    loop {
        start -= 1;
        digits[start] = b"0123456789abcdef"[(rest & 0xf) as usize];
        rest >>= 4;
        if rest == 0 {
            break;
        }
    }
    put(&digits[start..]);
}

impl Middleware for RequestId {
    fn before(&self, request: &Request<'_>, exchange: &mut Exchange<'_>) {
        let client = match self.trusts_client {
            true => request
                .header(FIELD)
                .and_then(|id| std::str::from_utf8(id).ok()),
            false => None,
        };
        if !client.is_some_and(|id| exchange.set_request_id(id)) {
            self.make(exchange);
        }
    }

    fn after(&self, request: &Request<'_>, fields: &mut Fields<'_>) {
        if let Some(id) = request.request_id() {
            // Valid by construction.
            let _ = fields.add(FIELD, id);
        }
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestId")
            .field("prefix", &self.prefix)
            .field("trusts_client", &self.trusts_client)
            .finish()
    }
}
