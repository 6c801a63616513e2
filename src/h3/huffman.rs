//! The Huffman code of HPACK (RFC 7541 Appendix B), which QPACK uses for
//! string literals too (RFC 9204 §4.1.2): decoding only, since the server
//! writes its literals plain (the `H` bit clear), which every decoder
//! accepts.
//!
//! The code is canonical: codes of one length are consecutive, in symbol
//! order, and each length's first code follows the last of the length
//! before, shifted. So the lengths alone (the table's facts) give every
//! code, and decoding reads one bit at a time against each length's first
//! code and count, with no tree.

/// The code length of each byte value (RFC 7541 Appendix B); EOS (256) is
/// 30 bits of ones.
const LENGTHS: [u8; 256] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, // 0x00
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, // 0x10
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, // 0x20
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, // 0x30
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, // 0x40
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, // 0x50
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, // 0x60
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, // 0x70
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, // 0x80
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, // 0x90
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, // 0xa0
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, // 0xb0
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, // 0xc0
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, // 0xd0
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, // 0xe0
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, // 0xf0
];

/// EOS's code length; no code is longer.
const EOS_LEN: usize = 30;

/// For each length: the first code of that length, how many codes have
/// it, and where its symbols start in `symbols`.
struct Canonical {
    first: [u32; EOS_LEN + 1],
    count: [u16; EOS_LEN + 1],
    offset: [u16; EOS_LEN + 1],
    /// The symbols, by length and then by value (EOS, 256, last).
    symbols: [u16; 257],
}

const fn canonical() -> Canonical {
    let mut count = [0u16; EOS_LEN + 1];
    let mut symbol = 0;
    while symbol < 256 {
        count[LENGTHS[symbol] as usize] += 1;
        symbol += 1;
    }
    count[EOS_LEN] += 1;
    let mut first = [0u32; EOS_LEN + 1];
    let mut offset = [0u16; EOS_LEN + 1];
    let mut code = 0u32;
    let mut at = 0u16;
    let mut len = 1;
    while len <= EOS_LEN {
        first[len] = code;
        offset[len] = at;
        code = (code + count[len] as u32) << 1;
        at += count[len];
        len += 1;
    }
    let mut symbols = [0u16; 257];
    let mut filled = offset;
    let mut symbol = 0;
    while symbol < 257 {
        let len = if symbol == 256 {
            EOS_LEN
        } else {
            LENGTHS[symbol] as usize
        };
        symbols[filled[len] as usize] = symbol as u16;
        filled[len] += 1;
        symbol += 1;
    }
    Canonical {
        first,
        count,
        offset,
        symbols,
    }
}

static CODE: Canonical = canonical();

/// Why a Huffman string cannot be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HuffmanError {
    /// EOS inside the string, or padding longer than 7 bits or not all
    /// ones (RFC 7541 §5.2).
    Malformed,
    /// The decoded string would pass the limit given.
    TooLong,
}

/// Appends the decoding of `input` to `out`, which may grow to `limit`
/// bytes at most.
pub(crate) fn decode(input: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), HuffmanError> {
    let mut code = 0u32;
    let mut len = 0usize;
    // Whether the bits since the last symbol are all ones (valid padding).
    let mut ones = true;
    for &byte in input {
        for shift in (0..8).rev() {
            let bit = u32::from(byte >> shift & 1);
            code = code << 1 | bit;
            len += 1;
            ones &= bit == 1;
            let index = code.wrapping_sub(CODE.first[len]);
            if index < u32::from(CODE.count[len]) {
                let symbol = CODE.symbols[usize::from(CODE.offset[len]) + index as usize];
                if symbol == 256 {
                    return Err(HuffmanError::Malformed);
                }
                if out.len() >= limit {
                    return Err(HuffmanError::TooLong);
                }
                out.push(symbol as u8);
                code = 0;
                len = 0;
                ones = true;
            } else if len == EOS_LEN {
                return Err(HuffmanError::Malformed);
            }
        }
    }
    match len <= 7 && ones {
        true => Ok(()),
        false => Err(HuffmanError::Malformed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(input: &[u8]) -> Result<Vec<u8>, HuffmanError> {
        let mut out = Vec::new();
        decode(input, &mut out, 1024).map(|()| out)
    }

    /// The Huffman-coded strings of RFC 7541 Appendix C.4 and C.6.
    #[test]
    fn decodes_the_rfc_examples() {
        let examples: [(&[u8], &[u8]); 6] = [
            (
                &[
                    0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
                ],
                b"www.example.com",
            ),
            (&[0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf], b"no-cache"),
            (
                &[0x25, 0xa8, 0x49, 0xe9, 0x5b, 0xa9, 0x7d, 0x7f],
                b"custom-key",
            ),
            (
                &[0x25, 0xa8, 0x49, 0xe9, 0x5b, 0xb8, 0xe8, 0xb4, 0xbf],
                b"custom-value",
            ),
            (&[0x64, 0x02], b"302"),
            (
                &[
                    0xd0, 0x7a, 0xbe, 0x94, 0x10, 0x54, 0xd4, 0x44, 0xa8, 0x20, 0x05, 0x95, 0x04,
                    0x0b, 0x81, 0x66, 0xe0, 0x82, 0xa6, 0x2d, 0x1b, 0xff,
                ],
                b"Mon, 21 Oct 2013 20:13:21 GMT",
            ),
        ];
        for (input, text) in examples {
            assert_eq!(decoded(input).as_deref(), Ok(text));
        }
    }

    /// The codes the lengths give are the table's: spot checks of its
    /// first, last and a few between (code as hex in Appendix B).
    #[test]
    fn the_canonical_codes_are_the_tables() {
        let code_of = |symbol: usize| {
            let len = if symbol == 256 {
                EOS_LEN
            } else {
                usize::from(LENGTHS[symbol])
            };
            let rank = (usize::from(CODE.offset[len])..)
                .zip(&CODE.symbols[usize::from(CODE.offset[len])..])
                .find(|(_, &s)| usize::from(s) == symbol)
                .map(|(at, _)| at - usize::from(CODE.offset[len]))
                .unwrap_or(usize::MAX);
            (CODE.first[len] + rank as u32, len)
        };
        assert_eq!(code_of(0), (0x1ff8, 13));
        assert_eq!(code_of(b'0'.into()), (0x0, 5));
        assert_eq!(code_of(b'a'.into()), (0x3, 5));
        assert_eq!(code_of(b'{'.into()), (0x7ffe, 15));
        assert_eq!(code_of(255), (0x3ffffee, 26));
        assert_eq!(code_of(256), (0x3fffffff, 30));
    }

    #[test]
    fn refuses_bad_padding_and_eos() {
        // 'a' (00011) then three bits of padding that are not all ones.
        assert_eq!(decoded(&[0b0001_1010]), Err(HuffmanError::Malformed));
        // 'a' then a whole byte of ones: padding past 7 bits.
        assert_eq!(decoded(&[0b0001_1111, 0xff]), Err(HuffmanError::Malformed));
        // EOS, 30 ones, then two bits of padding.
        assert_eq!(
            decoded(&[0xff, 0xff, 0xff, 0xff]),
            Err(HuffmanError::Malformed)
        );
        assert_eq!(decoded(&[]), Ok(Vec::new()));
        let mut out = Vec::new();
        assert_eq!(
            decode(&[0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf], &mut out, 3),
            Err(HuffmanError::TooLong)
        );
    }
}
