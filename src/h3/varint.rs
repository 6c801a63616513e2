//! QUIC's variable-length integers (RFC 9000 §16), which every HTTP/3
//! frame, stream type and setting is written in: the two high bits of the
//! first byte give the length (1, 2, 4 or 8 bytes), the rest is the value,
//! most significant byte first.

/// The largest value a varint holds (2^62 - 1).
pub(crate) const MAX: u64 = (1 << 62) - 1;

/// Reads the varint at the start of `input`: its value and its length, or
/// `None` when `input` ends before it does.
pub(crate) fn read(input: &[u8]) -> Option<(u64, usize)> {
    let first = *input.first()?;
    let len = 1usize << (first >> 6);
    let bytes = input.get(..len)?;
    let mut value = u64::from(first & 0x3f);
    for &byte in &bytes[1..] {
        value = value << 8 | u64::from(byte);
    }
    Some((value, len))
}

/// The bytes `value` takes as a varint (at most [`MAX`]).
pub(crate) fn len(value: u64) -> usize {
    match value {
        0..=63 => 1,
        64..=16_383 => 2,
        16_384..=1_073_741_823 => 4,
        _ => 8,
    }
}

/// Appends `value` (at most [`MAX`]) as a varint in its shortest form.
pub(crate) fn put(out: &mut Vec<u8>, value: u64) {
    debug_assert!(value <= MAX);
    let len = len(value);
    let tag = (len.trailing_zeros() as u64) << (8 * len - 2);
    let bytes = (value | tag).to_be_bytes();
    out.extend_from_slice(&bytes[8 - len..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The examples of RFC 9000 §A.1.
    #[test]
    fn reads_and_writes_the_rfc_examples() {
        let examples: [(&[u8], u64); 5] = [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
            (&[0x40, 0x25], 37),
        ];
        for (bytes, value) in examples {
            assert_eq!(read(bytes), Some((value, bytes.len())));
        }
        for (bytes, value) in &examples[..4] {
            let mut out = Vec::new();
            put(&mut out, *value);
            assert_eq!(&out[..], *bytes, "{value} in its shortest form");
        }
    }

    #[test]
    fn a_cut_varint_is_not_read() {
        assert_eq!(read(&[]), None);
        assert_eq!(read(&[0x7b]), None);
        assert_eq!(read(&[0x9d, 0x7f, 0x3e]), None);
    }

    #[test]
    fn each_length_boundary_round_trips() {
        for value in [0, 63, 64, 16_383, 16_384, 1_073_741_823, 1_073_741_824, MAX] {
            let mut out = Vec::new();
            put(&mut out, value);
            assert_eq!(out.len(), len(value));
            assert_eq!(read(&out), Some((value, out.len())));
        }
    }
}
