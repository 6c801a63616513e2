//! Path patterns: routes such as `/users/{id}` or `/teams/{team}/members/{id}`,
//! where each `{name}` matches one whole, non-empty segment, and the names
//! a handler or actor reads back with `Request::param`.
//!
//! A pattern is matched against the same normal form as exact routes (the
//! path percent-decoded, dot segments removed: `http::percent`), so an
//! encoded slash never splits a segment (it names no route at all), and a
//! value is handed out decoded. Only whole segments are parameters: `/a{b}`
//! or `/{a}{b}` would need a rule for where one value ends, and every
//! router the field has draws the line at segments too.
//!
//! Two patterns *overlap* when some path matches both: they have as many
//! segments, and at each one both are the same literal or at least one is
//! a parameter (`/users/{id}` and `/users/{name}`; `/a/{x}/c` and
//! `/a/b/{y}`). Which should answer `/a/b/c` would be a guess, so
//! `Server::start` refuses overlapping patterns, naming both. Patterns
//! that differ only in method are the same route.

use std::fmt;
use std::sync::Arc;

/// One segment of a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(Box<[u8]>),
    Param,
}

/// The parameter names of a pattern, with the segment each one is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathParams {
    /// (name, segment index counting from the first after the root).
    names: Box<[(Box<str>, usize)]>,
}

impl PathParams {
    /// The parameters `names` says, each with its segment index (another
    /// server's route's, as it sent them).
    pub(crate) fn from_pairs(names: Vec<(Box<str>, usize)>) -> PathParams {
        PathParams {
            names: names.into_boxed_slice(),
        }
    }

    /// Each name with its segment index.
    pub(crate) fn pairs(&self) -> impl Iterator<Item = (&str, usize)> {
        self.names.iter().map(|(name, segment)| (&**name, *segment))
    }

    /// The segment index `name` stands for.
    pub(crate) fn segment_of(&self, name: &str) -> Option<usize> {
        self.names
            .iter()
            .find(|(known, _)| &**known == name)
            .map(|(_, segment)| *segment)
    }
}

/// A route path with parameters.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct PathPattern {
    segments: Box<[Segment]>,
    params: Arc<PathParams>,
    /// As written, for errors.
    source: Box<str>,
}

/// Why a path cannot be a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PatternError(pub(crate) String);

impl PathPattern {
    /// `path` as a pattern, if it has a `{` at all: `None` for a plain
    /// path; an error for a brace that is not a whole `{name}` segment, an
    /// empty or repeated name.
    pub(crate) fn parse(path: &str) -> Option<Result<PathPattern, PatternError>> {
        if !path.contains(['{', '}']) {
            return None;
        }
        Some(PathPattern::parse_segments(path))
    }

    fn parse_segments(path: &str) -> Result<PathPattern, PatternError> {
        let error = |why: &str| Err(PatternError(format!("route path {path:?}: {why}")));
        let Some(rest) = path.strip_prefix('/') else {
            return error("a path starts with /");
        };
        let mut segments = Vec::new();
        let mut names: Vec<(Box<str>, usize)> = Vec::new();
        for (index, segment) in rest.split('/').enumerate() {
            match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(name) if name.is_empty() || name.contains(['{', '}']) => {
                    return error("a parameter is {name}, with a name");
                }
                Some(name) if names.iter().any(|(known, _)| &**known == name) => {
                    return error(&format!("parameter {{{name}}} appears twice"));
                }
                Some(name) => {
                    names.push((name.into(), index));
                    segments.push(Segment::Param);
                }
                None if segment.contains(['{', '}']) => {
                    return error("a parameter takes a whole segment, as /users/{id}");
                }
                None => segments.push(Segment::Literal(segment.as_bytes().into())),
            }
        }
        Ok(PathPattern {
            segments: segments.into(),
            params: Arc::new(PathParams {
                names: names.into(),
            }),
            source: path.into(),
        })
    }

    /// Whether `path` (in normal form, starting with `/`) matches.
    pub(crate) fn matches(&self, path: &[u8]) -> bool {
        let Some(rest) = path.strip_prefix(b"/") else {
            return false;
        };
        let mut parts = rest.split(|&b| b == b'/');
        for segment in self.segments.iter() {
            match (segment, parts.next()) {
                (Segment::Literal(literal), Some(part)) if **literal == *part => {}
                (Segment::Param, Some(part)) if !part.is_empty() => {}
                _ => return false,
            }
        }
        parts.next().is_none()
    }

    /// Whether some path matches both patterns (but for the same pattern
    /// with the same names, which is one route).
    pub(crate) fn overlaps(&self, other: &PathPattern) -> bool {
        self.segments.len() == other.segments.len()
            && self
                .segments
                .iter()
                .zip(other.segments.iter())
                .all(|pair| match pair {
                    (Segment::Literal(a), Segment::Literal(b)) => a == b,
                    _ => true,
                })
    }

    /// The same segments and names: the same route.
    pub(crate) fn same_route(&self, other: &PathPattern) -> bool {
        self.segments == other.segments && self.params == other.params
    }

    pub(crate) fn params(&self) -> &Arc<PathParams> {
        &self.params
    }

    pub(crate) fn source(&self) -> &str {
        &self.source
    }
}

impl fmt::Debug for PathPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PathPattern({})", self.source)
    }
}

/// Segment `index` (counting from the first after the root) of `path`.
pub(crate) fn segment(path: &[u8], index: usize) -> Option<&[u8]> {
    path.strip_prefix(b"/")?.split(|&b| b == b'/').nth(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(path: &str) -> PathPattern {
        PathPattern::parse(path).unwrap().unwrap()
    }

    #[test]
    fn matches_whole_non_empty_segments() {
        let users = pattern("/users/{id}");
        assert!(users.matches(b"/users/7"));
        assert!(users.matches("/users/Jürgen".as_bytes()));
        assert!(!users.matches(b"/users/"));
        assert!(!users.matches(b"/users"));
        assert!(!users.matches(b"/users/7/posts"));
        assert!(!users.matches(b"/teams/7"));
        let nested = pattern("/teams/{team}/members/{id}");
        assert!(nested.matches(b"/teams/a/members/b"));
        assert!(!nested.matches(b"/teams/a/owners/b"));
        assert_eq!(nested.params().segment_of("id"), Some(3));
        assert_eq!(nested.params().segment_of("team"), Some(1));
        assert_eq!(nested.params().segment_of("nope"), None);
        assert_eq!(segment(b"/teams/a/members/b", 3), Some(&b"b"[..]));
    }

    #[test]
    fn plain_paths_are_not_patterns_and_bad_braces_are_refused() {
        assert!(PathPattern::parse("/users/7").is_none());
        for bad in [
            "/users/{}",
            "/users/{a}{b}",
            "/users/x{id}",
            "/users/{id",
            "/{a}/{a}",
            "users/{id}",
        ] {
            assert!(matches!(PathPattern::parse(bad), Some(Err(_))), "{bad}");
        }
    }

    #[test]
    fn overlapping_patterns_are_those_one_path_can_match() {
        let overlapping = [
            ("/users/{id}", "/users/{name}"),
            ("/a/{x}/c", "/a/b/{y}"),
            ("/{a}", "/{b}"),
        ];
        for (a, b) in overlapping {
            assert!(pattern(a).overlaps(&pattern(b)), "{a} {b}");
        }
        let apart = [
            ("/users/{id}", "/users/{id}/posts"),
            ("/users/{id}", "/teams/{id}"),
            ("/a/{x}/c", "/a/{y}/d"),
        ];
        for (a, b) in apart {
            assert!(!pattern(a).overlaps(&pattern(b)), "{a} {b}");
        }
        assert!(pattern("/users/{id}").same_route(&pattern("/users/{id}")));
        assert!(!pattern("/users/{id}").same_route(&pattern("/users/{name}")));
    }

    /// Errors and `Debug` name the pattern as it was written.
    #[test]
    fn a_pattern_names_itself_as_written() {
        let nested = pattern("/teams/{team}/members/{id}");
        assert_eq!(nested.source(), "/teams/{team}/members/{id}");
        assert_eq!(
            format!("{nested:?}"),
            "PathPattern(/teams/{team}/members/{id})"
        );
        let pairs: Vec<_> = nested.params().pairs().collect();
        assert_eq!(pairs, [("team", 1), ("id", 3)]);
        let sent = PathParams::from_pairs(vec![("team".into(), 1), ("id".into(), 3)]);
        assert_eq!(&sent, &**nested.params());
    }
}
