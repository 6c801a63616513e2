//! Typed requests: a JSON or form body, the query string and the path
//! parameters read into a type of the route's with serde, each refusing
//! what does not fit with a [`Rejection`] that names the status and why.
//!
//! Nothing here runs unless a route asks: a handler that reads its request
//! by hand pays nothing for it. The values are read where they lie in the
//! request's bytes, so a type may borrow from them (`&'a str` fields) when
//! nothing needed decoding.

use std::borrow::Cow;
use std::fmt;
use std::vec;

use serde::de::value::{BorrowedStrDeserializer, CowStrDeserializer, Error as ValueError};
use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, Visitor};
use serde::Deserialize;

use crate::http::head::reason_phrase;
use crate::http::response_fields::ResponseError;
use crate::routes::request::Request;

/// Why a route refuses a request: a status (400 to 599) and a cause in one
/// line. What [`Request::json`], [`Request::query_params`], [`Request::form`] and
/// [`Request::params`] return for a request that does not fit, and what a
/// route returns for its own refusals (`Rejection::new(404, "no user 7")`).
///
/// A handler writes it with [`Response::reject`](crate::Response::reject),
/// an actor with [`ActorResponse::rejection`](crate::ActorResponse::rejection),
/// and a [`Routes::json_handler`](crate::Routes::json_handler) returns it:
/// the body is the application's ([`Routes::error_body`](crate::Routes::error_body)),
/// told the cause, else the server's text, `400 Bad Request: cause`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    status: u16,
    cause: String,
}

impl Rejection {
    /// A refusal with this status and cause. A status outside 400 to 599
    /// is not a refusal: it becomes 500, with the cause kept.
    pub fn new(status: u16, cause: impl Into<String>) -> Rejection {
        let status = match status {
            400..=599 => status,
            _ => 500,
        };
        Rejection {
            status,
            cause: cause.into(),
        }
    }

    /// The status, 400 to 599.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Why, in one line.
    pub fn cause(&self) -> &str {
        &self.cause
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let reason = reason_phrase(self.status);
        write!(f, "{} {reason}: {}", self.status, self.cause)
    }
}

impl std::error::Error for Rejection {}

/// A response a route built wrong (a status or a field the server refuses)
/// is the server's fault: 500, saying why. So `?` works on
/// [`Response::set_status`](crate::Response::set_status),
/// [`ActorResponse::with_status`](crate::ActorResponse::with_status) and
/// their kin in a route that returns a `Rejection`.
impl From<ResponseError> for Rejection {
    fn from(error: ResponseError) -> Rejection {
        Rejection::new(500, format!("the route's response: {error}"))
    }
}

/// The media types [`Request::json`] takes: `application/json`, and any
/// `application/...+json` (RFC 6839).
fn is_json(media_type: &str) -> bool {
    let Some(subtype) = strip_prefix_ignore_case(media_type, "application/") else {
        return false;
    };
    subtype.eq_ignore_ascii_case("json")
        || (subtype.len() > 5 && subtype[subtype.len() - 5..].eq_ignore_ascii_case("+json"))
}

fn strip_prefix_ignore_case<'s>(text: &'s str, prefix: &str) -> Option<&'s str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

const FORM: &str = "application/x-www-form-urlencoded";

impl<'a> Request<'a> {
    /// The JSON body as a `T`. Refuses with 415 Unsupported Media Type
    /// unless `Content-Type` says `application/json` (or another
    /// `application/...+json`), and with 400 Bad Request, saying what serde
    /// found, a body that is not a `T`. The body is already within the
    /// server's body limit (past it the request got 413 before the route
    /// ran); [`Request::json_within`] sets a lower one for this route.
    ///
    /// ```
    /// use serde::{Deserialize, Serialize};
    /// use uppercut_mio_server::{Method, Routes};
    ///
    /// #[derive(Deserialize)]
    /// struct Greet<'a> {
    ///     name: &'a str,
    /// }
    ///
    /// #[derive(Serialize)]
    /// struct Greeting {
    ///     message: String,
    /// }
    ///
    /// let routes = Routes::new().handler(&[Method::Post], "/greet", |request, response| {
    ///     match request.json::<Greet>() {
    ///         Ok(greet) => response.json(&Greeting { message: format!("Hello, {}!", greet.name) }),
    ///         Err(rejection) => response.reject(rejection),
    ///     }
    /// });
    /// ```
    pub fn json<T: Deserialize<'a>>(&self) -> Result<T, Rejection> {
        self.media_type(is_json, "application/json")?;
        serde_json::from_slice(self.body())
            .map_err(|e| Rejection::new(400, format!("JSON body: {e}")))
    }

    /// As [`Request::json`], refusing a body over `limit` bytes with 413
    /// Payload Too Large.
    pub fn json_within<T: Deserialize<'a>>(&self, limit: usize) -> Result<T, Rejection> {
        self.media_type(is_json, "application/json")?;
        self.within(limit)?;
        self.json()
    }

    /// Every pair of the query string, as a `T` (`?name=Ann&age=7` into a
    /// struct with those fields, numbers parsed), percent-decoded with `+` as a space;
    /// no query reads as an empty one. A query that is not a `T` (a field
    /// missing, a number that does not parse) is refused with 400 Bad
    /// Request, saying why.
    ///
    /// ```
    /// use serde::Deserialize;
    /// use uppercut_mio_server::{Method, Routes};
    ///
    /// #[derive(Deserialize)]
    /// struct Page {
    ///     offset: u32,
    ///     #[serde(default)]
    ///     limit: Option<u32>,
    /// }
    ///
    /// let routes = Routes::new().json_handler(&[Method::Get], "/items", |request| {
    ///     let page: Page = request.query_params()?;
    ///     Ok((page.offset, page.limit.unwrap_or(20)))
    /// });
    /// ```
    pub fn query_params<T: Deserialize<'a>>(&self) -> Result<T, Rejection> {
        serde_urlencoded::from_str(self.query().unwrap_or_default())
            .map_err(|e| Rejection::new(400, format!("query string: {e}")))
    }

    /// The `application/x-www-form-urlencoded` body as a `T`, read as
    /// [`Request::query_params`] reads the query. Refuses with 415 Unsupported
    /// Media Type unless `Content-Type` says that type, and with 400 Bad
    /// Request a body that is not a `T`.
    pub fn form<T: Deserialize<'a>>(&self) -> Result<T, Rejection> {
        self.media_type(|media_type| media_type.eq_ignore_ascii_case(FORM), FORM)?;
        serde_urlencoded::from_bytes(self.body())
            .map_err(|e| Rejection::new(400, format!("form body: {e}")))
    }

    /// As [`Request::form`], refusing a body over `limit` bytes with 413
    /// Payload Too Large.
    pub fn form_within<T: Deserialize<'a>>(&self, limit: usize) -> Result<T, Rejection> {
        self.media_type(|media_type| media_type.eq_ignore_ascii_case(FORM), FORM)?;
        self.within(limit)?;
        self.form()
    }

    /// Every path parameter of the route (`/users/{id}`), as a `T`, each decoded
    /// as [`Request::param`] decodes it: a struct takes them by name, a
    /// tuple in order, and a lone value (`u32`, `String`) the one parameter
    /// of a route that has one. Numbers, booleans and enums of unit
    /// variants parse from the text. A value that does not parse is refused
    /// with 404 Not Found, as the path names nothing the route serves.
    ///
    /// ```
    /// use serde::Deserialize;
    /// use uppercut_mio_server::{Method, Rejection, Routes};
    ///
    /// #[derive(Deserialize)]
    /// struct Member {
    ///     team: String,
    ///     id: u32,
    /// }
    ///
    /// let routes = Routes::new()
    ///     .json_handler(&[Method::Get], "/teams/{team}/members/{id}", |request| {
    ///         let member: Member = request.params()?;
    ///         Ok(format!("{} of {}", member.id, member.team))
    ///     })
    ///     .json_handler(&[Method::Get], "/users/{id}", |request| {
    ///         let id: u32 = request.params()?;
    ///         match id {
    ///             7 => Ok("Ann"),
    ///             _ => Err(Rejection::new(404, format!("no user {id}"))),
    ///         }
    ///     });
    /// ```
    pub fn params<T: Deserialize<'a>>(&self) -> Result<T, Rejection> {
        T::deserialize(PathParts(self.path_params().collect()))
            .map_err(|e| Rejection::new(404, format!("path: {e}")))
    }

    /// Refuses a request whose `Content-Type` is not one `accepts` takes.
    fn media_type(&self, accepts: impl Fn(&str) -> bool, expected: &str) -> Result<(), Rejection> {
        let value = self.header("Content-Type").unwrap_or_default();
        let value = String::from_utf8_lossy(value);
        let media_type = value.split(';').next().unwrap_or_default().trim();
        if accepts(media_type) {
            return Ok(());
        }
        let got = match media_type {
            "" => "none".to_string(),
            other => format!("{other:?}"),
        };
        Err(Rejection::new(
            415,
            format!("expected Content-Type: {expected}, got {got}"),
        ))
    }

    /// Refuses a body over `limit` bytes.
    fn within(&self, limit: usize) -> Result<(), Rejection> {
        match self.body().len() {
            len if len > limit => Err(Rejection::new(
                413,
                format!("the body is {len} bytes, over this route's limit of {limit}"),
            )),
            _ => Ok(()),
        }
    }
}

/// One path parameter: its name, and its value decoded (`None` when that is
/// not UTF-8).
type Param<'a> = (&'a str, Option<Cow<'a, str>>);

/// The route's path parameters, in the pattern's order, read as a map, a
/// sequence, or the one value.
struct PathParts<'a>(Vec<Param<'a>>);

impl<'a> PathParts<'a> {
    /// The one parameter, for a type that reads a single value.
    fn single(self) -> Result<Value<'a>, ValueError> {
        let count = self.0.len();
        match <[Param<'a>; 1]>::try_from(self.0) {
            Ok([(name, value)]) => Ok(Value { name, value }),
            Err(_) => Err(de::Error::custom(format!(
                "the route has {count} path parameters, so it reads them into a struct or a tuple"
            ))),
        }
    }
}

/// Hands each method that reads one value to the route's one parameter.
macro_rules! to_single {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
                self.single()?.$method(visitor)
            }
        )*
    };
}

impl<'de> Deserializer<'de> for PathParts<'de> {
    type Error = ValueError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        self.deserialize_map(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        visitor.visit_map(ParamMap {
            params: self.0.into_iter(),
            value: None,
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ValueError> {
        self.deserialize_map(visitor)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        visitor.visit_seq(ParamSeq(self.0.into_iter()))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, ValueError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, ValueError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ValueError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ValueError> {
        visitor.visit_unit()
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ValueError> {
        self.single()?.deserialize_enum(name, variants, visitor)
    }

    to_single! {
        deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
        deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char deserialize_str
        deserialize_string deserialize_bytes deserialize_byte_buf deserialize_option
        deserialize_identifier deserialize_ignored_any
    }
}

/// The parameters by name.
struct ParamMap<'a> {
    params: vec::IntoIter<Param<'a>>,
    /// The value of the name just read.
    value: Option<Value<'a>>,
}

impl<'de> de::MapAccess<'de> for ParamMap<'de> {
    type Error = ValueError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, ValueError> {
        let Some((name, value)) = self.params.next() else {
            return Ok(None);
        };
        self.value = Some(Value { name, value });
        seed.deserialize(BorrowedStrDeserializer::new(name))
            .map(Some)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<S::Value, ValueError> {
        match self.value.take() {
            Some(value) => seed.deserialize(value),
            None => Err(de::Error::custom("a value without its name")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.params.len())
    }
}

/// The parameters in order.
struct ParamSeq<'a>(vec::IntoIter<Param<'a>>);

impl<'de> de::SeqAccess<'de> for ParamSeq<'de> {
    type Error = ValueError;

    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, ValueError> {
        match self.0.next() {
            Some((name, value)) => seed.deserialize(Value { name, value }).map(Some),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

/// One parameter's value, which reads as text or parses as the type asks.
struct Value<'a> {
    name: &'a str,
    value: Option<Cow<'a, str>>,
}

impl Value<'_> {
    fn text(&self) -> Result<&str, ValueError> {
        self.value
            .as_deref()
            .ok_or_else(|| de::Error::custom(format!("`{}` is not UTF-8 once decoded", self.name)))
    }

    fn invalid(&self, what: &str) -> ValueError {
        let text = self.value.as_deref().unwrap_or_default();
        de::Error::custom(format!("`{}` = {text:?} is not a valid {what}", self.name))
    }
}

/// Reads the value as a number or a boolean, parsed from its text.
macro_rules! parse_value {
    ($($method:ident $visit:ident $type:ty,)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
                match self.text()?.parse::<$type>() {
                    Ok(value) => visitor.$visit(value),
                    Err(_) => Err(self.invalid(stringify!($type))),
                }
            }
        )*
    };
}

impl<'de> Deserializer<'de> for Value<'de> {
    type Error = ValueError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        match self.value {
            Some(Cow::Borrowed(text)) => visitor.visit_borrowed_str(text),
            Some(Cow::Owned(text)) => visitor.visit_string(text),
            None => Err(self.invalid("string")),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ValueError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ValueError> {
        let Some(text) = self.value else {
            return Err(de::Error::custom(format!(
                "`{}` is not UTF-8 once decoded",
                self.name
            )));
        };
        let text: CowStrDeserializer<'_, ValueError> = text.into_deserializer();
        text.deserialize_enum(name, variants, visitor)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        let mut chars = self.text()?.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => visitor.visit_char(c),
            _ => Err(self.invalid("char")),
        }
    }

    parse_value! {
        deserialize_bool visit_bool bool,
        deserialize_i8 visit_i8 i8,
        deserialize_i16 visit_i16 i16,
        deserialize_i32 visit_i32 i32,
        deserialize_i64 visit_i64 i64,
        deserialize_i128 visit_i128 i128,
        deserialize_u8 visit_u8 u8,
        deserialize_u16 visit_u16 u16,
        deserialize_u32 visit_u32 u32,
        deserialize_u64 visit_u64 u64,
        deserialize_u128 visit_u128 u128,
        deserialize_f32 visit_f32 f32,
        deserialize_f64 visit_f64 f64,
    }

    serde::forward_to_deserialize_any! {
        str string bytes byte_buf unit unit_struct seq tuple tuple_struct map struct
        identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::method::Method;

    fn request<'a>(head: &'a [u8], body: &'a [u8], query: Option<&'a [u8]>) -> Request<'a> {
        Request::new(Method::Post, b"/x", query, head, body)
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Greet<'a> {
        name: &'a str,
        #[serde(default)]
        times: u8,
    }

    const JSON: &[u8] =
        b"POST /x HTTP/1.1\r\nContent-Type: Application/JSON; charset=utf-8\r\n\r\n";

    #[test]
    fn reads_json_of_the_json_media_types() {
        let body = br#"{"name":"Ann","times":2}"#;
        let greet = request(JSON, body, None).json::<Greet>();
        assert_eq!(
            greet,
            Ok(Greet {
                name: "Ann",
                times: 2
            })
        );
        let problem = b"POST /x HTTP/1.1\r\ncontent-type: application/problem+json\r\n\r\n";
        assert!(request(problem, body, None).json::<Greet>().is_ok());
        for media_type in ["text/json", "application/jsonx", "application/+json"] {
            assert!(!is_json(media_type), "{media_type}");
        }
    }

    #[test]
    fn refuses_json_with_the_status_and_cause() {
        let text = b"POST /x HTTP/1.1\r\nContent-Type: text/plain\r\n\r\n";
        let refused = request(text, b"{}", None).json::<Greet>().unwrap_err();
        assert_eq!(refused.status(), 415);
        assert_eq!(
            refused.cause(),
            r#"expected Content-Type: application/json, got "text/plain""#
        );
        let none = request(b"POST /x HTTP/1.1\r\n\r\n", b"{}", None);
        let refused = none.json::<Greet>().unwrap_err();
        assert_eq!(
            refused.to_string(),
            "415 Unsupported Media Type: expected Content-Type: application/json, got none"
        );
        let refused = request(JSON, br#"{"times":1}"#, None)
            .json::<Greet>()
            .unwrap_err();
        assert_eq!(
            (refused.status(), refused.cause()),
            (400, "JSON body: missing field `name` at line 1 column 11")
        );
        let body = br#"{"name":"Ann"}"#;
        let refused = request(JSON, body, None)
            .json_within::<Greet>(10)
            .unwrap_err();
        assert_eq!(
            (refused.status(), refused.cause()),
            (413, "the body is 14 bytes, over this route's limit of 10")
        );
        assert!(request(JSON, body, None).json_within::<Greet>(14).is_ok());
    }

    #[test]
    fn reads_queries_and_forms() {
        let r = request(b"", b"", Some(b"name=J%C3%BCrgen+K&times=3"));
        #[derive(Debug, Deserialize, PartialEq)]
        struct Owned {
            name: String,
            times: u8,
        }
        let expected = Owned {
            name: "Jürgen K".into(),
            times: 3,
        };
        assert_eq!(r.query_params::<Owned>(), Ok(expected));
        let refused = request(b"", b"", None).query_params::<Owned>().unwrap_err();
        assert_eq!(
            (refused.status(), refused.cause()),
            (400, "query string: missing field `name`")
        );
        let form = b"POST /x HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n\r\n";
        let greet = request(form, b"name=Ann", None).form::<Greet>();
        assert_eq!(
            greet,
            Ok(Greet {
                name: "Ann",
                times: 0
            })
        );
        let refused = request(JSON, b"name=Ann", None)
            .form::<Greet>()
            .unwrap_err();
        assert_eq!(refused.status(), 415);
        let refused = request(form, b"name=Ann&times=x", None)
            .form::<Greet>()
            .unwrap_err();
        assert_eq!(refused.status(), 400);
        assert!(refused.cause().starts_with("form body: "), "{refused}");
        let refused = request(form, b"name=Ann", None).form_within::<Greet>(3);
        assert_eq!(refused.map_err(|r| r.status()), Err(413));
    }

    #[test]
    fn rejections_keep_refusal_statuses() {
        assert_eq!(Rejection::new(409, "taken").status(), 409);
        assert_eq!(Rejection::new(200, "fine?").status(), 500);
        assert_eq!(
            Rejection::new(99, "").to_string(),
            "500 Internal Server Error: "
        );
        let wrong = Rejection::from(ResponseError::InvalidStatus(99));
        assert_eq!(
            (wrong.status(), wrong.cause()),
            (
                500,
                "the route's response: 99 is not the status of a final response (200 to 599)"
            )
        );
    }
}
