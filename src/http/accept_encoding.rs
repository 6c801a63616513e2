//! `Accept-Encoding` (RFC 9110 §12.5.3), read for the one choice this server
//! makes with it: a precompressed gzip copy of a static file, or the file as
//! it is. Nothing here allocates; a request's fields are taken one at a
//! time, as a list split over several lines means the same as one line.
//!
//! The rules, with weights in thousandths:
//!
//! - codings are tokens compared without case; `x-gzip` is `gzip`
//!   (RFC 9110 §8.4.1.3);
//! - an entry's weight is `;q=` and a qvalue (`0`, `0.5`, `1.000`; the
//!   parameter name in any case, whitespace around the `;`); `q=0` means
//!   "not acceptable"; an entry with any other parameter, or a malformed
//!   weight, is ignored rather than guessed at;
//! - `*` stands for every coding the field does not name;
//! - a coding named twice counts by its first entry.
//!
//! gzip is chosen when its weight (its own, else `*`'s) is above 0 and not
//! below identity's; identity competes only when the field weighs it (by
//! name, or by `*`), since a client that says `gzip;q=0.5` alone has said
//! nothing to prefer the uncompressed file. Without the field, or with an
//! empty one, the file goes as it is, as nginx sends it.

/// What a request's `Accept-Encoding` fields say of gzip and identity.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AcceptEncoding {
    gzip: Option<u16>,
    identity: Option<u16>,
    any: Option<u16>,
}

impl AcceptEncoding {
    /// Takes in the value of one `Accept-Encoding` field.
    pub(crate) fn add(&mut self, value: &[u8]) {
        for entry in value.split(|&b| b == b',') {
            let Some((coding, weight)) = parse_entry(entry) else {
                continue;
            };
            let slot =
                if coding.eq_ignore_ascii_case(b"gzip") || coding.eq_ignore_ascii_case(b"x-gzip") {
                    &mut self.gzip
                } else if coding.eq_ignore_ascii_case(b"identity") {
                    &mut self.identity
                } else if coding == b"*" {
                    &mut self.any
                } else {
                    continue;
                };
            slot.get_or_insert(weight);
        }
    }

    /// Whether the gzip copy is the better answer (see the module doc).
    pub(crate) fn prefers_gzip(&self) -> bool {
        let gzip = self.gzip.or(self.any).unwrap_or(0);
        let identity = self.identity.or(self.any).unwrap_or(0);
        gzip > 0 && gzip >= identity
    }
}

/// One list entry, `coding [ OWS ";" OWS "q=" qvalue ]` with OWS around it:
/// the coding and its weight in thousandths (1000 without one). `None` for
/// an empty entry or one that breaks the grammar.
fn parse_entry(entry: &[u8]) -> Option<(&[u8], u16)> {
    let entry = entry.trim_ascii();
    let (coding, params) = match entry.iter().position(|&b| b == b';') {
        Some(at) => (entry[..at].trim_ascii_end(), Some(&entry[at + 1..])),
        None => (entry, None),
    };
    if coding.is_empty() || !coding.iter().all(|&b| is_tchar(b)) {
        return None;
    }
    let Some(params) = params else {
        return Some((coding, 1000));
    };
    let weight = params.trim_ascii_start();
    let value = weight
        .strip_prefix(b"q=")
        .or_else(|| weight.strip_prefix(b"Q="))?;
    Some((coding, qvalue(value)?))
}

/// `( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )`, in thousandths.
fn qvalue(text: &[u8]) -> Option<u16> {
    let (whole, fraction) = match text.iter().position(|&b| b == b'.') {
        Some(at) => (&text[..at], &text[at + 1..]),
        None => (text, &b""[..]),
    };
    if fraction.len() > 3 || !fraction.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let thousandths = fraction
        .iter()
        .chain(std::iter::repeat(&b'0'))
        .take(3)
        .fold(0u16, |value, &digit| value * 10 + u16::from(digit - b'0'));
    match whole {
        b"0" => Some(thousandths),
        b"1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

/// `tchar` of RFC 9110 §5.6.2, or `*`, which a coding may be here.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefers_gzip(fields: &[&str]) -> bool {
        let mut accept = AcceptEncoding::default();
        for field in fields {
            accept.add(field.as_bytes());
        }
        accept.prefers_gzip()
    }

    #[test]
    fn chooses_gzip_when_the_client_takes_it() {
        for fields in [
            &["gzip"][..],
            &["gzip, deflate, br"],
            &["br;q=1.0, gzip;q=0.8, *;q=0.1"],
            &["GZIP"],
            &["x-gzip"],
            &["gzip;q=0.5"],
            &["gzip ; Q=0.001"],
            &["*"],
            &["*;q=0.5"],
            &["identity;q=0, gzip"],
            &["identity;q=0.5, gzip;q=0.5"],
            &["gzip;q=1"],
            &["gzip;q=1.000"],
            &["deflate", "gzip"],
            &[", ,gzip,"],
            &["gzip, gzip;q=0"],
        ] {
            assert!(prefers_gzip(fields), "{fields:?}");
        }
    }

    #[test]
    fn sends_the_file_as_it_is_otherwise() {
        for fields in [
            &[][..],
            &[""],
            &["br"],
            &["identity"],
            &["gzip;q=0"],
            &["gzip;q=0.000"],
            &["*;q=0"],
            &["gzip;q=0, *"],
            &["*, gzip;q=0"],
            &["gzip;q=0.5, identity"],
            &["gzip;q=0.2, *;q=0.5"],
            &["gzip;q=1.5"],
            &["gzip;q=0.1234"],
            &["gzip;q="],
            &["gzip;q=.5"],
            &["gzip;level=9"],
            &["gzip;q=0.5;x=1"],
            &["gz ip"],
            &["gzip\"", "br"],
            &["gzip;q=0", "gzip"],
        ] {
            assert!(!prefers_gzip(fields), "{fields:?}");
        }
    }
}
