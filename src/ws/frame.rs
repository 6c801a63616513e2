//! The frames a server writes (RFC 6455 §5.2): final, unmasked, the
//! shortest length encoding. Written straight into the connection's
//! output, so a message costs no buffer of its own.

use bytes::BytesMut;

/// A frame's opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Opcode {
    Text = 0x1,
    Binary = 0x2,
    Close = 0x8,
    Ping = 0x9,
    Pong = 0xa,
}

/// Appends a final, unmasked frame carrying `payload`.
pub(crate) fn write_frame(out: &mut BytesMut, opcode: Opcode, payload: &[u8]) {
    write_head(out, 0x80 | opcode as u8, payload.len());
    out.extend_from_slice(payload);
}

/// Appends a frame head: `first` (FIN, RSV1 and the opcode) and the
/// shortest encoding of `len`.
pub(crate) fn write_head(out: &mut BytesMut, first: u8, len: usize) {
    let (head, head_len) = frame_head(first, len);
    out.extend_from_slice(&head[..head_len]);
}

/// A frame head and how many of its bytes are used.
pub(crate) fn frame_head(first: u8, len: usize) -> ([u8; 10], usize) {
    let mut head = [0u8; 10];
    head[0] = first;
    if len < 126 {
        head[1] = len as u8;
        (head, 2)
    } else if let Ok(len) = u16::try_from(len) {
        head[1] = 126;
        head[2..4].copy_from_slice(&len.to_be_bytes());
        (head, 4)
    } else {
        head[1] = 127;
        head[2..10].copy_from_slice(&(len as u64).to_be_bytes());
        (head, 10)
    }
}

/// How long the head of a frame carrying `len` bytes is.
pub(crate) fn head_len(len: usize) -> usize {
    match len {
        0..=125 => 2,
        126..=0xffff => 4,
        _ => 10,
    }
}

/// Appends a close frame with `code` and `reason` (at most 123 bytes, so
/// the frame stays a control frame's 125).
pub(crate) fn write_close(out: &mut BytesMut, code: u16, reason: &[u8]) {
    let reason = &reason[..reason.len().min(123)];
    let mut payload = [0u8; 125];
    payload[..2].copy_from_slice(&code.to_be_bytes());
    payload[2..2 + reason.len()].copy_from_slice(reason);
    write_frame(out, Opcode::Close, &payload[..2 + reason.len()]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_take_the_shortest_encoding() {
        let mut out = BytesMut::new();
        write_frame(&mut out, Opcode::Text, b"hi");
        assert_eq!(&out[..], b"\x81\x02hi");
        for (len, head) in [
            (125, vec![0x82, 125]),
            (126, vec![0x82, 126, 0, 126]),
            (65535, vec![0x82, 126, 255, 255]),
            (65536, vec![0x82, 127, 0, 0, 0, 0, 0, 1, 0, 0]),
        ] {
            let mut out = BytesMut::new();
            write_frame(&mut out, Opcode::Binary, &vec![0; len]);
            assert_eq!(&out[..head.len()], &head[..], "{len}");
            assert_eq!(out.len(), head.len() + len);
        }
    }

    #[test]
    fn a_close_carries_its_code_and_a_reason_cut_to_fit() {
        let mut out = BytesMut::new();
        write_close(&mut out, 1001, b"bye");
        assert_eq!(&out[..], b"\x88\x05\x03\xe9bye");
        let mut out = BytesMut::new();
        write_close(&mut out, 1000, &[b'x'; 200]);
        assert_eq!(out[1], 125);
    }
}
