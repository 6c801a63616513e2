//! Request methods: the ones a route can take, the others this server knows
//! (405 where no route takes them), and the rest, which it does not
//! implement anywhere (501, RFC 9110 §9.1).

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

    /// Whether this server knows the method a request line names: the
    /// methods of RFC 9110 §9 and PATCH (RFC 5789). A route can take some
    /// of them, and a path without one answers 405 listing those it takes;
    /// any other method is implemented nowhere here, so it gets 501 on
    /// every path. Methods are case-sensitive: `get` is not GET.
    pub(crate) fn is_known(name: &str) -> bool {
        Method::parse(name) != Method::Other || matches!(name, "CONNECT" | "TRACE")
    }

    /// The method a request line names; methods are case-sensitive.
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
