//! JSON validation (RFC 8259) without building anything: the upstream's body
//! is passed on exactly as sent, but only once it is known to be JSON.
//!
//! serde_json parses it into [`IgnoredAny`], which keeps nothing: the
//! field's parser rather than one of our own, cheaper per byte than the
//! validator it replaced (docs/performance.md has both counts). It keeps
//! track of nesting in a buffer rather than by recursing, so no depth of
//! nesting can overflow the stack, and the upstream's answer is bounded.

use serde::de::IgnoredAny;

/// Whether `text` is one JSON value, with optional whitespace around it.
pub(crate) fn is_valid(text: &[u8]) -> bool {
    serde_json::from_slice::<IgnoredAny>(text).is_ok()
}

#[cfg(test)]
mod tests {
    use super::is_valid;

    #[test]
    fn accepts_json() {
        for text in [
            r#"{"status": 200, "msg": "Good Luck!"}"#,
            r#" [1, -2.5e+3, 0, true, false, null, "\u00e9\n", {}, []] "#,
            "\"\"",
            "0",
            r#"{"a":{"b":[{"c":"d"}]}}"#,
            "\"é\"",
        ] {
            assert!(is_valid(text.as_bytes()), "{text}");
        }
        assert!(is_valid(crate::routes::responses::V1_USER_JSON));
        // Nesting costs a byte of heap per level, not a stack frame.
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        assert!(is_valid(deep.as_bytes()));
    }

    #[test]
    fn refuses_what_is_not() {
        for text in [
            "",
            "{",
            "[1,]",
            "{\"a\"}",
            "{\"a\":1,}",
            "01",
            "1.",
            "-",
            "+1",
            "tru",
            "nul",
            "\"\\x\"",
            "\"\\u12\"",
            "\"open",
            "{} {}",
            "[1 2]",
            "'a'",
            "\"tab\there\"",
        ] {
            assert!(!is_valid(text.as_bytes()), "{text:?}");
        }
        let unclosed = "[".repeat(200) + &"]".repeat(199);
        assert!(!is_valid(unclosed.as_bytes()));
    }
}
