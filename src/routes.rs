//! The route table: exact request paths to canned responses, built once at
//! start and shared by every connection, plus the canned error responses.

use std::collections::HashMap;

use bytes::Bytes;

use crate::request::Method;
use crate::response::{CannedResponse, ErrorStatus};

/// The 20-user list served at `/v1/user`.
pub const V1_USER_JSON: &[u8] = include_bytes!("../fixtures/v1-user.json");

/// Which response answers a request: a route, or an error status.
pub type RouteAnswer = Result<usize, ErrorStatus>;

#[derive(Debug, Clone)]
pub struct Routes {
    by_path: HashMap<Box<[u8]>, usize>,
    responses: Vec<CannedResponse>,
    errors: Vec<CannedResponse>,
    #[cfg(feature = "fault-injection")]
    panic_path: Option<Box<[u8]>>,
}

impl Default for Routes {
    fn default() -> Self {
        Routes::new()
    }
}

impl Routes {
    /// A table with no routes: every path answers 404.
    pub fn new() -> Routes {
        Routes {
            by_path: HashMap::new(),
            responses: Vec::new(),
            errors: ErrorStatus::ALL
                .iter()
                .map(|status| status.canned())
                .collect(),
            #[cfg(feature = "fault-injection")]
            panic_path: None,
        }
    }

    /// Test builds only: a request for `path` panics inside the connection
    /// actor, to show that a panic closes that connection and no other.
    #[cfg(feature = "fault-injection")]
    pub fn panic_at(mut self, path: &str) -> Routes {
        self.panic_path = Some(path.as_bytes().into());
        self
    }

    /// Serves `response` to GET and HEAD at exactly `path` (no query).
    /// A later route for the same path replaces the earlier one.
    pub fn route(mut self, path: &str, response: CannedResponse) -> Routes {
        match self.by_path.get(path.as_bytes()) {
            Some(&index) => self.responses[index] = response,
            None => {
                self.by_path
                    .insert(path.as_bytes().into(), self.responses.len());
                self.responses.push(response);
            }
        }
        self
    }

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

    pub fn answer(&self, method: Method, path: &[u8]) -> RouteAnswer {
        #[cfg(feature = "fault-injection")]
        if self.panic_path.as_deref() == Some(path) {
            panic!("fault injection: a request for a panicking route");
        }
        match (self.by_path.get(path), method) {
            (None, _) => Err(ErrorStatus::NotFound),
            (Some(_), Method::Other) => Err(ErrorStatus::MethodNotAllowed),
            (Some(&index), Method::Get | Method::Head) => Ok(index),
        }
    }

    pub fn response(&self, answer: RouteAnswer) -> &CannedResponse {
        match answer {
            Ok(index) => &self.responses[index],
            // `errors` is built from `ErrorStatus::ALL`, which lists the variants in order.
            Err(status) => &self.errors[status as usize],
        }
    }
}
