//! Writing what the route table answers: canned responses, static files,
//! and handler responses, each into the connection's output.

use bytes::Bytes;

use crate::http::error_body::{error_body, ServerError};
use crate::http::head::ResponseOut;
use crate::http::response::CannedResponse;
use crate::http::response_fields::write_response;
use crate::http::status::ErrorStatus;
use crate::routes::handler;
use crate::routes::request::Request;
use crate::routes::table::{Reply, RouteAnswer, Routes};

/// The 20-user list served at `/v1/user`.
pub(crate) const V1_USER_JSON: &[u8] = include_bytes!("../../fixtures/v1-user.json");

impl Routes {
    /// The routes the server binary serves.
    pub fn standard() -> Routes {
        Routes::new()
            .route(
                "/",
                CannedResponse::ok("text/plain; charset=utf-8", "hello\n"),
            )
            .route(
                "/plaintext",
                CannedResponse::ok("text/plain", "Hello, World!"),
            )
            .route(
                "/json",
                CannedResponse::ok("application/json", r#"{"message":"Hello, World!"}"#),
            )
            .route(
                "/v1/user",
                CannedResponse::new(
                    200,
                    "OK",
                    &[
                        ("content-type", "application/json"),
                        ("engine", "Rust/Uppercut"),
                        ("location", "/v1/user"),
                    ],
                    Bytes::from_static(V1_USER_JSON),
                ),
            )
    }

    /// Appends the response `answer` names; `raw_head` is the head of the
    /// request it answers, or empty once that is gone (a request whose body
    /// came after it), which only drops a redirect's query.
    pub(crate) fn write(&self, answer: RouteAnswer, raw_head: &[u8], to: &mut ResponseOut<'_>) {
        if let Ok(Reply::Static(reply)) = answer {
            let written = self
                .static_site
                .as_ref()
                .is_some_and(|site| site.write(reply, raw_head, to, self.error_hook()));
            if !written {
                // Reloaded while this request's body arrived: try again.
                self.response(Err(ErrorStatus::ServiceUnavailable))
                    .write(to);
            }
            return;
        }
        self.response(answer).write(to);
    }

    /// Runs handler `index` on `request` and appends its response; returns
    /// the status.
    pub(crate) fn write_handler(
        &self,
        index: usize,
        request: &Request<'_>,
        to: &mut ResponseOut<'_>,
    ) -> u16 {
        handler::respond(self.handler_at(index), request, to, self.error_hook())
    }

    /// Appends the error response `status` with `cause`, and the checked
    /// header lines `headers`: the application's error body if it chose
    /// them, else the server's text.
    pub(crate) fn write_error(
        &self,
        to: &mut ResponseOut<'_>,
        status: u16,
        cause: Option<&str>,
        headers: &[u8],
    ) {
        let (content_type, body) = error_body(self.error_hook(), &ServerError::new(status, cause));
        write_response(to, status, Some(content_type), headers, &body);
    }

    /// The canned response `answer` names; for a handler, actor or static
    /// answer, which only their own writers can write, a 503 (the exchange
    /// never asks for those).
    pub(crate) fn response(&self, answer: RouteAnswer) -> &CannedResponse {
        match answer {
            Ok(Reply::Full(index)) => &self.canned[index].response,
            Ok(Reply::NotModified(index)) => &self.canned[index].not_modified,
            Ok(Reply::NotAllowed(index)) => &self.entries[index].not_allowed,
            Ok(Reply::Handler(..) | Reply::Actor(..) | Reply::Static(_) | Reply::WebSocket(..)) => {
                &self.errors[ErrorStatus::ServiceUnavailable as usize]
            }
            // `errors` is built from `ErrorStatus::ALL`, which lists the variants in order.
            Err(status) => &self.errors[status as usize],
        }
    }

    /// Every canned response of this table (each route's, its 304, each
    /// path's 405, and each error status's), with whether the connection
    /// may stay open after it: what the fuzz target checks output against.
    pub(crate) fn canned(&self) -> impl Iterator<Item = (&CannedResponse, bool)> {
        let routes = self
            .canned
            .iter()
            .flat_map(|route| [(&route.response, true), (&route.not_modified, true)]);
        let not_allowed = self.entries.iter().map(|entry| (&entry.not_allowed, true));
        let errors = ErrorStatus::ALL
            .iter()
            .map(|&status| (self.response(Err(status)), status.keeps_connection()));
        routes.chain(not_allowed).chain(errors)
    }
}
