//! Request methods: the ones a route can take, and the rest (CONNECT, TRACE,
//! any other token), which no route takes: 405 listing what the path takes,
//! or 404 where nothing is. A method this server does not know is answered
//! as nginx answers it, not with RFC 9110 §9.1's 501: the request's framing
//! is known, so the connection and the requests pipelined behind it live.

/// A request method. Methods without a variant of their own (CONNECT,
/// TRACE, extension methods) are `Other`: no route can take them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// GET.
    Get,
    /// HEAD: answered as GET, without the body.
    Head,
    /// POST.
    Post,
    /// PUT.
    Put,
    /// DELETE.
    Delete,
    /// PATCH.
    Patch,
    /// OPTIONS.
    Options,
    /// Any other method.
    Other,
}

impl Method {
    /// The methods a route can take, in the order an `Allow` header lists them.
    pub const ROUTABLE: [Method; 7] = [
        Method::Get,
        Method::Head,
        Method::Post,
        Method::Put,
        Method::Delete,
        Method::Patch,
        Method::Options,
    ];

    /// The method as the request line spells it (`Other` has no spelling
    /// of its own, and reads `OTHER`).
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Patch => "PATCH",
            Method::Options => "OPTIONS",
            Method::Other => "OTHER",
        }
    }

    /// The method a request line names; methods are case-sensitive (`get`
    /// is `Other`).
    pub(crate) fn parse(name: &str) -> Method {
        match name {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "PATCH" => Method::Patch,
            "OPTIONS" => Method::Options,
            _ => Method::Other,
        }
    }
}
