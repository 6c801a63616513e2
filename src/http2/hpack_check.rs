//! Tells whether a client's header blocks decompress (RFC 7541), without
//! decoding them into fields: `h2` decodes them, and answers every failure
//! to with `GOAWAY PROTOCOL_ERROR`, where RFC 9113 §4.3 asks for
//! `COMPRESSION_ERROR`; nor does its error say that it was one. So the
//! session reads each block first (`session::FrameWatch`) through a
//! [`Check`], which keeps what decoding needs of the dynamic table (each
//! entry's name and value lengths, not the bytes), and learns of a block
//! that does not decompress before `h2` sees it.
//!
//! A decoding error is what RFC 7541 calls one, as `h2` finds it: index 0,
//! an index past both tables, an integer longer than `h2` takes, a string
//! or representation cut off by the end of the block, a dynamic table size
//! update above the limit the server set (`SETTINGS_HEADER_TABLE_SIZE`, 4096)
//! or after a field, and a Huffman code holding EOS or padded other than
//! with up to seven 1 bits. A name or value `h2` refuses once decoded (upper
//! case, a control byte, an unknown pseudo-field) is no decoding error: the
//! block decompresses, and `h2` answers as before.

use std::collections::VecDeque;

/// The dynamic table's largest size: the server's `SETTINGS_HEADER_TABLE_SIZE`,
/// the default, which `h2` keeps.
pub(crate) const TABLE_LIMIT: usize = 4096;

/// The names of the static table (RFC 7541 Appendix A), by index from 1.
const STATIC_NAMES: [&str; 61] = [
    ":authority",
    ":method",
    ":method",
    ":path",
    ":path",
    ":scheme",
    ":scheme",
    ":status",
    ":status",
    ":status",
    ":status",
    ":status",
    ":status",
    ":status",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "accept",
    "access-control-allow-origin",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "content-disposition",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-range",
    "content-type",
    "cookie",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "link",
    "location",
    "max-forwards",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "refresh",
    "retry-after",
    "server",
    "set-cookie",
    "strict-transport-security",
    "transfer-encoding",
    "user-agent",
    "vary",
    "via",
    "www-authenticate",
];

/// The bit length of each symbol's Huffman code, symbols 0 to 255 and EOS
/// (256) (RFC 7541 Appendix B). The code is canonical: codes of one length
/// are consecutive, in symbol order, each length's first following the
/// last of the shorter ones; so the lengths alone are the code.
const CODE_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

/// The longest code, in bits.
const LONGEST: usize = 30;

/// The canonical code, per length: how many codes have it, the first of
/// them, and where they start among the symbols sorted by (length, symbol).
struct Canonical {
    count: [u32; LONGEST + 1],
    first: [u32; LONGEST + 1],
    start: [u16; LONGEST + 1],
    /// Whether the symbol at each sorted place is EOS.
    eos_at: u16,
}

const fn canonical() -> Canonical {
    let mut count = [0u32; LONGEST + 1];
    let mut symbol = 0;
    while symbol < 257 {
        count[CODE_LENGTHS[symbol] as usize] += 1;
        symbol += 1;
    }
    let mut first = [0u32; LONGEST + 1];
    let mut start = [0u16; LONGEST + 1];
    let (mut code, mut place) = (0u32, 0u16);
    let mut len = 1;
    while len <= LONGEST {
        first[len] = code;
        start[len] = place;
        code = (code + count[len]) << 1;
        place += count[len] as u16;
        len += 1;
    }
    // EOS is the last symbol, and its length the longest: the last place.
    Canonical {
        count,
        first,
        start,
        eos_at: 256,
    }
}

const CODE: Canonical = canonical();

/// Why a header block does not decompress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Undecodable {
    /// Index 0, or past the static and dynamic tables.
    Index,
    /// An integer longer than five octets.
    Integer,
    /// A representation or string cut off by the end of the block.
    Truncated,
    /// A dynamic table size update above the limit, or after a field.
    TableSize,
    /// A Huffman code holding EOS, or padded other than with up to seven
    /// 1 bits.
    Huffman,
}

/// What decoding a client's header blocks needs to know: the dynamic
/// table's entries, as their name and value lengths.
#[derive(Debug)]
pub(crate) struct Check {
    /// Newest first.
    entries: VecDeque<(u32, u32)>,
    size: usize,
    max_size: usize,
}

impl Default for Check {
    fn default() -> Self {
        Check {
            entries: VecDeque::new(),
            size: 0,
            max_size: TABLE_LIMIT,
        }
    }
}

impl Check {
    /// Reads the next header block whole, as the client's decoder state
    /// stands, and moves that state as decoding it would.
    pub(crate) fn block(&mut self, mut block: &[u8]) -> Result<(), Undecodable> {
        let mut fields = false;
        while let Some(&first) = block.first() {
            if first & 0x80 != 0 {
                let index = integer(&mut block, 7)?;
                self.name_len(index)?;
                fields = true;
            } else if first & 0xe0 == 0x20 {
                if fields {
                    return Err(Undecodable::TableSize);
                }
                let size = integer(&mut block, 5)?;
                if size > TABLE_LIMIT {
                    return Err(Undecodable::TableSize);
                }
                self.max_size = size;
                self.evict_to(size);
            } else {
                // Literal: with incremental indexing (01), never indexed
                // (0001) or without indexing (0000).
                let indexing = first & 0x40 != 0;
                let prefix = if indexing { 6 } else { 4 };
                let index = integer(&mut block, prefix)?;
                let name = match index {
                    0 => string(&mut block)?,
                    index => self.name_len(index)?,
                };
                let value = string(&mut block)?;
                if indexing {
                    self.insert(name, value);
                }
                fields = true;
            }
        }
        Ok(())
    }

    /// The length of the name at `index` (from 1) of both tables.
    fn name_len(&self, index: usize) -> Result<usize, Undecodable> {
        match index {
            0 => Err(Undecodable::Index),
            1..=61 => Ok(STATIC_NAMES[index - 1].len()),
            _ => self
                .entries
                .get(index - 62)
                .map(|&(name, _)| name as usize)
                .ok_or(Undecodable::Index),
        }
    }

    fn insert(&mut self, name: usize, value: usize) {
        let size = name + value + 32;
        if size > self.max_size {
            // Larger than the table: it empties the table, and is not kept.
            self.evict_to(0);
            return;
        }
        self.evict_to(self.max_size - size);
        self.entries.push_front((name as u32, value as u32));
        self.size += size;
    }

    /// Evicts the oldest entries until the table holds at most `size`.
    fn evict_to(&mut self, size: usize) {
        while self.size > size {
            let Some((name, value)) = self.entries.pop_back() else {
                break;
            };
            self.size -= name as usize + value as usize + 32;
        }
    }
}

/// Reads an integer with a `prefix`-bit prefix (RFC 7541 §5.1) from the
/// start of `input`, as `h2` does: at most five octets.
fn integer(input: &mut &[u8], prefix: u32) -> Result<usize, Undecodable> {
    let (&first, mut rest) = input.split_first().ok_or(Undecodable::Truncated)?;
    let max = (1usize << prefix) - 1;
    let mut value = usize::from(first) & max;
    if value < max {
        *input = rest;
        return Ok(value);
    }
    for octets in 2..=5 {
        let (&byte, after) = rest.split_first().ok_or(Undecodable::Truncated)?;
        rest = after;
        value += usize::from(byte & 0x7f) << (7 * (octets - 2));
        if byte & 0x80 == 0 {
            *input = rest;
            return Ok(value);
        }
    }
    Err(Undecodable::Integer)
}

/// Reads a string literal (RFC 7541 §5.2) from the start of `input`: its
/// length once decoded.
fn string(input: &mut &[u8]) -> Result<usize, Undecodable> {
    let huffman = input.first().is_some_and(|&first| first & 0x80 != 0);
    let len = integer(input, 7)?;
    if len > input.len() {
        return Err(Undecodable::Truncated);
    }
    let (raw, rest) = input.split_at(len);
    *input = rest;
    match huffman {
        true => huffman_len(raw),
        false => Ok(len),
    }
}

/// The length of the Huffman-coded string `raw` once decoded, if it is
/// one: no EOS in it, and at most seven bits of padding, all 1.
fn huffman_len(raw: &[u8]) -> Result<usize, Undecodable> {
    let mut decoded = 0;
    // The bits of the code being read, and how many.
    let (mut code, mut len) = (0u32, 0usize);
    for &byte in raw {
        for shift in (0..8).rev() {
            code = code << 1 | u32::from(byte >> shift & 1);
            len += 1;
            let place = code.wrapping_sub(CODE.first[len]);
            if place < CODE.count[len] {
                if CODE.start[len] + place as u16 == CODE.eos_at {
                    return Err(Undecodable::Huffman);
                }
                decoded += 1;
                (code, len) = (0, 0);
            } else if len == LONGEST {
                // Unreachable for a complete code, kept for safety: no
                // code is longer.
                return Err(Undecodable::Huffman);
            }
        }
    }
    // Padding: the first bits of EOS, which are all 1, fewer than eight.
    match len < 8 && code == (1 << len) - 1 {
        true => Ok(decoded),
        false => Err(Undecodable::Huffman),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(text: &str) -> Vec<u8> {
        let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
            .collect()
    }

    /// RFC 7541 Appendix C.3 and C.4: three requests on one connection,
    /// without and with Huffman coding; the table's size after each.
    #[test]
    fn the_rfc_s_request_examples_decompress_and_fill_the_table_alike() {
        let plain = [
            "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            "8286 84be 5808 6e6f 2d63 6163 6865",
            "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        ];
        let huffman = [
            "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
            "8286 84be 5886 a8eb 1064 9cbf",
            "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        ];
        for blocks in [plain, huffman] {
            let mut check = Check::default();
            let mut sizes = Vec::new();
            for block in blocks {
                assert_eq!(check.block(&hex(block)), Ok(()), "{block}");
                sizes.push((check.entries.len(), check.size));
            }
            assert_eq!(sizes, [(1, 57), (2, 110), (3, 164)]);
        }
    }

    /// RFC 7541 C.6: responses with Huffman coding and a 256-byte table,
    /// which evicts.
    #[test]
    fn entries_are_evicted_as_the_rfc_s_example_does() {
        let mut check = Check::default();
        // A size update to 256 first, then C.6.1 to C.6.3.
        let blocks = [
            "3fe1 01 4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 \
             82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
            "4883 640e ffc1 c0bf",
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad \
             94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 \
             3160 65c0 03ed 4ee5 b106 3d50 07",
        ];
        let mut sizes = Vec::new();
        for block in blocks {
            assert_eq!(check.block(&hex(block)), Ok(()), "{block}");
            sizes.push((check.entries.len(), check.size));
        }
        assert_eq!(sizes, [(4, 222), (4, 222), (3, 215)]);
    }

    #[test]
    fn index_zero_and_past_the_tables_do_not_decompress() {
        let mut check = Check::default();
        assert_eq!(check.block(&[0x80]), Err(Undecodable::Index));
        assert_eq!(check.block(&[0x82, 0xbe]), Err(Undecodable::Index));
        // A literal whose name is index 62, with the dynamic table empty.
        assert_eq!(check.block(&[0x7e, 0x01, b'x']), Err(Undecodable::Index));
        assert_eq!(check.block(&[0x82, 0xbd]), Ok(()), "61, the last static");
        // One entry: 62 is it, 63 is past.
        assert_eq!(check.block(&[0x40, 0x01, b'a', 0x01, b'b']), Ok(()));
        assert_eq!(check.block(&[0xbe]), Ok(()));
        assert_eq!(check.block(&[0xbf]), Err(Undecodable::Index));
        assert_eq!(check.block(&[0x7e, 0x01, b'c']), Ok(()), "its name");
    }

    #[test]
    fn table_size_updates_only_first_and_within_the_limit() {
        let mut check = Check::default();
        // 4096: 31 + 4065 (0xfe1 as 7-bit groups: 0xe1 0x1f).
        assert_eq!(check.block(&[0x3f, 0xe1, 0x1f, 0x82]), Ok(()));
        assert_eq!(
            check.block(&[0x3f, 0xe2, 0x1f]),
            Err(Undecodable::TableSize)
        );
        assert_eq!(check.block(&[0x82, 0x20]), Err(Undecodable::TableSize));
        // Two at the start are fine; a block of one alone too.
        assert_eq!(check.block(&[0x20, 0x3f, 0x01, 0x82]), Ok(()));
        assert_eq!(check.block(&[0x20]), Ok(()));
    }

    #[test]
    fn a_smaller_table_evicts_and_keeps_to_its_size() {
        let mut check = Check::default();
        // Two entries of 34 bytes each.
        let entry = |name: u8| [0x40, 0x01, name, 0x01, b'v'];
        assert_eq!(check.block(&entry(b'a')), Ok(()));
        assert_eq!(check.block(&entry(b'b')), Ok(()));
        assert_eq!((check.entries.len(), check.size), (2, 68));
        // Down to 40: the older goes; 62 is the newer, 63 gone.
        assert_eq!(check.block(&[0x3f, 0x09, 0xbe]), Ok(()));
        assert_eq!((check.entries.len(), check.size), (1, 34));
        assert_eq!(check.block(&[0xbf]), Err(Undecodable::Index));
        // A third evicts the second; one larger than the table empties it.
        assert_eq!(check.block(&entry(b'c')), Ok(()));
        assert_eq!((check.entries.len(), check.size), (1, 34));
        // 1 + 8 + 32 = 41 bytes, one past the table.
        assert_eq!(
            check.block(&[0x40, 0x01, b'd', 0x08, 1, 2, 3, 4, 5, 6, 7, 8]),
            Ok(())
        );
        assert_eq!((check.entries.len(), check.size), (0, 0));
        assert_eq!(check.block(&[0xbe]), Err(Undecodable::Index));
    }

    #[test]
    fn integers_take_at_most_five_octets_and_must_end() {
        let mut check = Check::default();
        // 0x7f then four continuations, the last ending: a large index.
        let five = [0xff, 0x80, 0x80, 0x80, 0x01];
        assert_eq!(check.block(&five), Err(Undecodable::Index));
        let six = [0xff, 0x80, 0x80, 0x80, 0x81, 0x01];
        assert_eq!(check.block(&six), Err(Undecodable::Integer));
        assert_eq!(check.block(&[0xff, 0x80]), Err(Undecodable::Truncated));
    }

    #[test]
    fn strings_cut_off_do_not_decompress() {
        let mut check = Check::default();
        assert_eq!(
            check.block(&[0x04, 0x03, b'a', b'b']),
            Err(Undecodable::Truncated)
        );
        assert_eq!(check.block(&[0x04]), Err(Undecodable::Truncated));
        assert_eq!(
            check.block(&[0x00, 0x01, b'a']),
            Err(Undecodable::Truncated)
        );
    }

    #[test]
    fn huffman_strings_need_valid_codes_and_padding() {
        // "a" is 00011: padded with 111, fine; with 000, or a whole byte
        // of 1s, not.
        assert_eq!(huffman_len(&[0b0001_1111]), Ok(1));
        assert_eq!(huffman_len(&[0b0001_1000]), Err(Undecodable::Huffman));
        assert_eq!(huffman_len(&[0b0001_1111, 0xff]), Err(Undecodable::Huffman));
        // EOS (thirty 1s) inside the string.
        assert_eq!(huffman_len(&[0xff; 4]), Err(Undecodable::Huffman));
        assert_eq!(huffman_len(&[]), Ok(0));
        // "www.example.com" (RFC 7541 C.4.1).
        assert_eq!(huffman_len(&hex("f1e3 c2e5 f23a 6ba0 ab90 f4ff")), Ok(15));
        let mut check = Check::default();
        assert_eq!(check.block(&[0x04, 0x81, 0x18]), Err(Undecodable::Huffman));
    }

    /// Every symbol's code, made from the lengths, decodes to one symbol;
    /// the codes fill the code space exactly (a complete prefix code).
    #[test]
    fn the_lengths_make_a_complete_code() {
        let kraft: f64 = CODE_LENGTHS
            .iter()
            .map(|&l| 0.5f64.powi(i32::from(l)))
            .sum();
        assert_eq!(kraft, 1.0);
        let mut sorted: Vec<usize> = (0..257).collect();
        sorted.sort_by_key(|&s| (CODE_LENGTHS[s], s));
        assert_eq!(sorted[256], 256, "EOS is last");
        for (symbol, &len) in CODE_LENGTHS.iter().enumerate().take(256) {
            let len = usize::from(len);
            let place = sorted.iter().position(|&s| s == symbol).unwrap();
            let code = CODE.first[len] + (place as u32 - u32::from(CODE.start[len]));
            // The code, then 1s to a whole number of octets.
            let padded = len.div_ceil(8) * 8;
            let bits = u64::from(code) << (padded - len) | ((1u64 << (padded - len)) - 1);
            let raw: Vec<u8> = (0..padded / 8)
                .rev()
                .map(|k| (bits >> (8 * k)) as u8)
                .collect();
            assert_eq!(huffman_len(&raw), Ok(1), "symbol {symbol}");
        }
    }
}
