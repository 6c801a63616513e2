//! Handlers that may block (`Routes::blocking_handler`), run on the server's
//! pool of blocking threads: the request goes there as a [`HandlerJob`], and
//! each thread's [`HandlerRunner`] writes the handler's response into an
//! answer of its own, which comes back to the connection as an actor's does.

use std::fmt;

use uppercut::api::{AnyActor, AnySender, Envelope};

use crate::routes::actor::ActorRequest;
use crate::routes::handler::{respond_owned, Handler};

/// A request for a blocking handler, and the handler.
pub(crate) struct HandlerJob {
    pub(crate) handler: Handler,
    pub(crate) request: ActorRequest,
}

impl fmt::Debug for HandlerJob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerJob")
            .field("request", &self.request)
            .finish_non_exhaustive()
    }
}

/// A blocking thread's instance: runs the jobs it is given. A handler that
/// panics drops its request in the unwinding, which answers 502.
pub(crate) struct HandlerRunner;

impl AnyActor for HandlerRunner {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(job) = envelope.message.downcast::<HandlerJob>() {
            let HandlerJob { handler, request } = *job;
            let response = respond_owned(&handler, &request.request());
            request.respond(response);
        }
    }
}
