//! QPACK (RFC 9204) with a dynamic table of capacity zero: the server
//! announces `SETTINGS_QPACK_MAX_TABLE_CAPACITY` 0 and
//! `SETTINGS_QPACK_BLOCKED_STREAMS` 0, so a client may refer only to the
//! static table and to literals, no field section can block, and neither
//! side needs the encoder or decoder streams' instructions (RFC 9204
//! §3.2.3: with capacity 0 an encoder sends none). What a client sends on
//! its encoder stream that would insert anything is a connection error.
//!
//! The server's own field sections use the static table where a field is
//! in it (whole, or by name) and plain literals otherwise, never Huffman.

use super::huffman::{self, HuffmanError};
use super::static_table::STATIC;

/// Why a field section cannot be decoded: `QPACK_DECOMPRESSION_FAILED`
/// (RFC 9204 §6), or past the size the server takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QpackError {
    /// Malformed, or referring to a dynamic table the server never gave.
    Decompression,
    /// The decoded fields' size passes the limit (`MAX_FIELD_SECTION_SIZE`).
    TooLarge,
}

/// A decoded field section: each field's name and value, in order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Fields {
    pub(crate) fields: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The size RFC 9114 §4.2.2 counts for a field: its name and value and 32.
pub(crate) fn field_size(name: &[u8], value: &[u8]) -> usize {
    name.len() + value.len() + 32
}

/// Reads a prefixed integer (RFC 7541 §5.1) whose prefix is the low
/// `bits` bits of `input[0]`: the value and the bytes it took.
fn read_int(input: &[u8], bits: u32) -> Result<(u64, usize), QpackError> {
    let mask = ((1u16 << bits) - 1) as u8;
    let first = input.first().ok_or(QpackError::Decompression)? & mask;
    if first < mask {
        return Ok((u64::from(first), 1));
    }
    let mut value = u64::from(mask);
    let mut shift = 0u32;
    for (at, &byte) in input.iter().enumerate().skip(1) {
        // 62 bits is more than any field's length or index can be.
        if shift > 56 {
            return Err(QpackError::Decompression);
        }
        value += u64::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            return Ok((value, at + 1));
        }
    }
    Err(QpackError::Decompression)
}

/// Writes `value` as a prefixed integer in the low `bits` bits of a first
/// byte whose high bits are `flags`.
fn put_int(out: &mut Vec<u8>, flags: u8, bits: u32, value: u64) {
    let mask = ((1u16 << bits) - 1) as u8;
    if value < u64::from(mask) {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | mask);
    let mut rest = value - u64::from(mask);
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Reads a string literal whose `H` bit is bit `bits` of `input[0]` and
/// whose length has the `bits` bits below it; appends it to `out` (at most
/// `limit` bytes) and returns the bytes it took.
fn read_string(
    input: &[u8],
    bits: u32,
    out: &mut Vec<u8>,
    limit: usize,
) -> Result<usize, QpackError> {
    let huffman = input.first().ok_or(QpackError::Decompression)? >> bits & 1 == 1;
    let (len, at) = read_int(input, bits)?;
    let end = usize::try_from(len)
        .ok()
        .and_then(|len| at.checked_add(len))
        .ok_or(QpackError::Decompression)?;
    let bytes = input.get(at..end).ok_or(QpackError::Decompression)?;
    if huffman {
        huffman::decode(bytes, out, limit).map_err(|e| match e {
            HuffmanError::TooLong => QpackError::TooLarge,
            HuffmanError::Malformed => QpackError::Decompression,
        })?;
    } else {
        if bytes.len() > limit {
            return Err(QpackError::TooLarge);
        }
        out.extend_from_slice(bytes);
    }
    Ok(end)
}

/// The static table's entry `index`.
fn entry(index: u64) -> Result<(&'static [u8], &'static [u8]), QpackError> {
    usize::try_from(index)
        .ok()
        .and_then(|index| STATIC.get(index))
        .copied()
        .ok_or(QpackError::Decompression)
}

/// Decodes the field section `block` (a HEADERS frame's payload), whose
/// fields may add up to `limit` (RFC 9114 §4.2.2's size).
pub(crate) fn decode(block: &[u8], limit: usize) -> Result<Fields, QpackError> {
    // The prefix: Required Insert Count 0 (no dynamic table), then the
    // base's sign and delta, which mean nothing without one.
    let (required, at) = read_int(block, 8)?;
    if required != 0 {
        return Err(QpackError::Decompression);
    }
    let (_, used) = read_int(block.get(at..).ok_or(QpackError::Decompression)?, 7)?;
    let mut rest = &block[at + used..];
    let mut fields = Fields::default();
    let mut size = 0usize;
    while let Some(&first) = rest.first() {
        let (name, value, used) = if first & 0x80 != 0 {
            // Indexed field line; T (0x40) set for the static table.
            if first & 0x40 == 0 {
                return Err(QpackError::Decompression);
            }
            let (index, used) = read_int(rest, 6)?;
            let (name, value) = entry(index)?;
            (name.to_vec(), value.to_vec(), used)
        } else if first & 0x40 != 0 {
            // Literal with name reference; T is 0x10.
            if first & 0x10 == 0 {
                return Err(QpackError::Decompression);
            }
            let (index, used) = read_int(rest, 4)?;
            let (name, _) = entry(index)?;
            let mut value = Vec::new();
            let room = limit.saturating_sub(size + field_size(name, b""));
            let end = read_string(&rest[used..], 7, &mut value, room)?;
            (name.to_vec(), value, used + end)
        } else if first & 0x20 != 0 {
            // Literal with literal name: H is 0x08, the length 3 bits.
            let mut name = Vec::new();
            let room = limit.saturating_sub(size + 32);
            let used = read_string(rest, 3, &mut name, room)?;
            let mut value = Vec::new();
            let room = room.saturating_sub(name.len());
            let end = read_string(&rest[used..], 7, &mut value, room)?;
            (name, value, used + end)
        } else {
            // Post-base forms (0001, 0000): the dynamic table only.
            return Err(QpackError::Decompression);
        };
        size += field_size(&name, &value);
        if size > limit {
            return Err(QpackError::TooLarge);
        }
        fields.fields.push((name, value));
        rest = &rest[used..];
    }
    Ok(fields)
}

/// Appends the field section of `fields` to `out`: the prefix (no
/// dynamic table), then each field from the static table whole where it
/// is there, by its name where that is, else as a plain literal.
pub(crate) fn encode<'a>(
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(&[0, 0]);
    for (name, value) in fields {
        let mut by_name = None;
        let mut whole = None;
        for (index, (n, v)) in STATIC.iter().enumerate() {
            if *n == name {
                by_name.get_or_insert(index);
                if *v == value {
                    whole = Some(index);
                    break;
                }
            }
        }
        match (whole, by_name) {
            (Some(index), _) => put_int(out, 0xc0, 6, index as u64),
            (None, Some(index)) => {
                put_int(out, 0x50, 4, index as u64);
                put_int(out, 0, 7, value.len() as u64);
                out.extend_from_slice(value);
            }
            (None, None) => {
                put_int(out, 0x20, 3, name.len() as u64);
                out.extend_from_slice(name);
                put_int(out, 0, 7, value.len() as u64);
                out.extend_from_slice(value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(fields: &Fields) -> Vec<(&str, &str)> {
        fields
            .fields
            .iter()
            .map(|(n, v)| {
                (
                    std::str::from_utf8(n).unwrap_or("?"),
                    std::str::from_utf8(v).unwrap_or("?"),
                )
            })
            .collect()
    }

    /// RFC 9204 Appendix B.1: a literal with a static name reference
    /// (`:path` = `/index.html`), no dynamic table.
    #[test]
    fn decodes_the_rfc_literal_with_name_reference() {
        let block = [
            0x00, 0x00, 0x51, 0x0b, 0x2f, 0x69, 0x6e, 0x64, 0x65, 0x78, 0x2e, 0x68, 0x74, 0x6d,
            0x6c,
        ];
        let fields = decode(&block, 1024).unwrap();
        assert_eq!(pairs(&fields), [(":path", "/index.html")]);
        let mut out = Vec::new();
        encode([(&b":path"[..], &b"/index.html"[..])], &mut out);
        assert_eq!(out, block, "the server writes it the same way");
    }

    /// A request as clients send it: indexed static fields, a Huffman
    /// literal value with a static name, a Huffman literal name.
    #[test]
    fn decodes_indexed_huffman_and_literal_names() {
        let mut block = vec![0x00, 0x00];
        // :method GET (17), :scheme https (23), :path / (1).
        block.extend_from_slice(&[0xc0 | 17, 0xc0 | 23, 0xc0 | 1]);
        // :authority (0) = "www.example.com", Huffman (RFC 7541 C.4.1).
        block.extend_from_slice(&[0x50, 0x80 | 12]);
        block.extend_from_slice(&[
            0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
        ]);
        // custom-key: custom-value, both Huffman (RFC 7541 C.6... C.4.3).
        block.extend_from_slice(&[0x28 | 0x07, 0x01]);
        block.extend_from_slice(&[0x25, 0xa8, 0x49, 0xe9, 0x5b, 0xa9, 0x7d, 0x7f]);
        block.extend_from_slice(&[0x80 | 9]);
        block.extend_from_slice(&[0x25, 0xa8, 0x49, 0xe9, 0x5b, 0xb8, 0xe8, 0xb4, 0xbf]);
        let fields = decode(&block, 1024).unwrap();
        assert_eq!(
            pairs(&fields),
            [
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/"),
                (":authority", "www.example.com"),
                ("custom-key", "custom-value"),
            ]
        );
    }

    #[test]
    fn round_trips_what_the_server_writes() {
        let fields: [(&[u8], &[u8]); 5] = [
            (b":status", b"200"),
            (b":status", b"418"),
            (b"content-type", b"text/plain"),
            (b"x-long-name-not-in-the-table", &[b'v'; 300]),
            (b"server", b"uppercut-mio-server"),
        ];
        let mut out = Vec::new();
        encode(fields, &mut out);
        assert_eq!(&out[..3], &[0x00, 0x00, 0xc0 | 25], ":status 200 by index");
        let decoded = decode(&out, 4096).unwrap();
        let expected: Vec<(Vec<u8>, Vec<u8>)> = fields
            .iter()
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect();
        assert_eq!(decoded.fields, expected);
    }

    #[test]
    fn refuses_the_dynamic_table_and_malformed_blocks() {
        let refused: [&[u8]; 9] = [
            // Required Insert Count 1.
            &[0x01, 0x00],
            // Indexed from the dynamic table (T clear).
            &[0x00, 0x00, 0x80],
            // Post-base indexed, and post-base name reference.
            &[0x00, 0x00, 0x10],
            &[0x00, 0x00, 0x00],
            // Literal with a dynamic name reference.
            &[0x00, 0x00, 0x40, 0x00],
            // Static index 99, past the table.
            &[0x00, 0x00, 0xff, 0x24],
            // A literal longer than the block.
            &[0x00, 0x00, 0x51, 0x0b, b'/'],
            // No prefix.
            &[0x00],
            // An integer that never ends.
            &[0x00, 0x00, 0xff, 0xff, 0xff],
        ];
        for block in refused {
            assert_eq!(
                decode(block, 1024),
                Err(QpackError::Decompression),
                "{block:02x?}"
            );
        }
    }

    /// The limit counts each field's name, value and 32 (RFC 9114 §4.2.2).
    #[test]
    fn a_section_past_the_limit_is_too_large() {
        let mut out = Vec::new();
        encode([(&b"x-a"[..], &[b'v'; 100][..])], &mut out);
        assert!(decode(&out, 3 + 100 + 32).is_ok());
        assert_eq!(decode(&out, 3 + 100 + 31), Err(QpackError::TooLarge));
        let mut two = Vec::new();
        encode(
            [(&b":path"[..], &b"/"[..]), (&b":path"[..], &b"/"[..])],
            &mut two,
        );
        assert!(decode(&two, 2 * 38).is_ok());
        assert_eq!(decode(&two, 2 * 38 - 1), Err(QpackError::TooLarge));
    }
}
