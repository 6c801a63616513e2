//! JSON validation (RFC 8259) without building anything: the upstream's body
//! is passed on exactly as sent, but only once it is known to be JSON.

/// Nesting deeper than this is refused rather than risking the stack.
const MAX_DEPTH: usize = 128;

/// Whether `text` is one JSON value, with optional whitespace around it.
pub(crate) fn is_valid(text: &[u8]) -> bool {
    let mut parser = Parser { text, pos: 0 };
    parser.skip_whitespace();
    parser.value(0) && {
        parser.skip_whitespace();
        parser.pos == text.len()
    }
}

struct Parser<'a> {
    text: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let matched = self.peek() == Some(byte);
        self.pos += usize::from(matched);
        matched
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn value(&mut self, depth: usize) -> bool {
        match self.peek() {
            Some(b'{') if depth < MAX_DEPTH => self.container(b'}', depth, true),
            Some(b'[') if depth < MAX_DEPTH => self.container(b']', depth, false),
            Some(b'"') => self.string(),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => false,
        }
    }

    /// An object (members are `"key": value`) or an array.
    fn container(&mut self, close: u8, depth: usize, object: bool) -> bool {
        self.pos += 1;
        self.skip_whitespace();
        if self.eat(close) {
            return true;
        }
        loop {
            if object {
                if !self.string() {
                    return false;
                }
                self.skip_whitespace();
                if !self.eat(b':') {
                    return false;
                }
                self.skip_whitespace();
            }
            if !self.value(depth + 1) {
                return false;
            }
            self.skip_whitespace();
            if self.eat(close) {
                return true;
            }
            if !self.eat(b',') {
                return false;
            }
            self.skip_whitespace();
        }
    }

    fn string(&mut self) -> bool {
        if !self.eat(b'"') {
            return false;
        }
        while let Some(byte) = self.peek() {
            self.pos += 1;
            match byte {
                b'"' => return true,
                b'\\' => {
                    let valid = match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => 1,
                        Some(b'u') => 5,
                        _ => return false,
                    };
                    let escape = self.text.get(self.pos..self.pos + valid);
                    let hex_ok = escape.is_some_and(|e| e[1..].iter().all(u8::is_ascii_hexdigit));
                    if !hex_ok {
                        return false;
                    }
                    self.pos += valid;
                }
                0x00..=0x1f => return false,
                _ => {}
            }
        }
        false
    }

    fn literal(&mut self, word: &[u8]) -> bool {
        let matched = self.text[self.pos..].starts_with(word);
        self.pos += if matched { word.len() } else { 0 };
        matched
    }

    fn number(&mut self) -> bool {
        self.eat(b'-');
        if !self.eat(b'0') && !self.digits() {
            return false;
        }
        if self.eat(b'.') && !self.digits() {
            return false;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if !self.eat(b'+') {
                self.eat(b'-');
            }
            return self.digits();
        }
        true
    }

    /// One or more digits.
    fn digits(&mut self) -> bool {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        self.pos > start
    }
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
        ] {
            assert!(is_valid(text.as_bytes()), "{text}");
        }
        assert!(is_valid(crate::routes::responses::V1_USER_JSON));
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
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(!is_valid(deep.as_bytes()));
    }
}
