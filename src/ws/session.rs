//! A client's frames, decoded incrementally (RFC 6455 §5): bytes may stop
//! anywhere (a byte at a time works as well as a whole read), and each
//! complete message, close or broken rule is handed to the caller as an
//! [`Event`] that borrows the session's buffer. Pings are answered into
//! the output as they arrive, between the fragments of a message if need
//! be.
//!
//! The shape, for the connection that drives it:
//!
//! ```text
//! session.feed(read_bytes, &mut output, |event, output| match event {
//!     Event::Text(text) => actor.on_message(..),   // writes into output
//!     Event::Binary(bytes) => ..,
//!     Event::Close { code } => echo the close, then close the socket,
//!     Event::Fail(code) => send a close with code, then close the socket,
//! });
//! ```
//!
//! After a `Close` or a `Fail` the session ignores everything. A message
//! of one frame that is all in the bytes fed is unmasked where it lies and
//! handed over from there, with no copy (the bytes are the caller's
//! scratch, hence `&mut`). Any other message is assembled in one buffer
//! reused from message to message (given back past `KEEP_CAPACITY`), so
//! an echo allocates nothing once warm.
//!
//! With permessage-deflate agreed (`Session::with_inflate`), a message
//! whose first frame has RSV1 set is inflated as its frames arrive, into
//! the same buffer, and the limit and UTF-8 apply to what it inflates to.
//! That buffer is given back after each compressed message, so an idle
//! compressed connection holds no more than a plain one (one allocation
//! per message, of the size the last one took, against inflating that
//! costs far more).

use bytes::BytesMut;

use crate::ws::deflate::{Agreed, Inflate, InflateError, RSV1};
use crate::ws::frame::{write_frame, Opcode};
use crate::ws::utf8::Utf8Progress;

/// A message buffer larger than this is given back after its message.
const KEEP_CAPACITY: usize = 64 * 1024;

/// What the client's bytes amounted to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Event<'a> {
    /// A complete text message, valid UTF-8.
    Text(&'a str),
    /// A complete binary message.
    Binary(&'a [u8]),
    /// The client's close frame, with its code (`None` for a close
    /// without one); its reason was valid UTF-8.
    Close { code: Option<u16> },
    /// The client broke a rule: send a close with this code and end.
    Fail(u16),
}

/// Close codes for the rules broken (RFC 6455 §7.4.1).
const PROTOCOL_ERROR: u16 = 1002;
const INVALID_DATA: u16 = 1007;
const TOO_BIG: u16 = 1009;

/// Where in a frame the decoder is.
#[derive(Debug, Clone, Copy)]
enum Stage {
    /// Reading a frame head: `have` of its bytes so far.
    Head { have: usize },
    /// Reading a payload.
    Payload(Frame),
    /// A close came, or a rule was broken: nothing more is read.
    Ended,
}

/// A frame's head, once read.
#[derive(Debug, Clone, Copy)]
struct Frame {
    fin: bool,
    opcode: u8,
    mask: [u8; 4],
    /// Payload bytes still to come.
    left: u64,
    /// Payload bytes already read (for the mask's phase).
    read: u64,
}

/// The kind of the message being assembled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Binary,
}

/// One connection's decoder.
#[derive(Debug)]
pub(crate) struct Session {
    max_message: usize,
    stage: Stage,
    head: [u8; 14],
    /// The message so far (fragments joined), unmasked.
    message: Vec<u8>,
    /// Its kind while a message is open.
    kind: Option<Kind>,
    utf8: Utf8Progress,
    /// A control frame's payload (at most 125 bytes).
    control: [u8; 125],
    control_len: usize,
    /// Whole frames received, control frames included.
    frames: u64,
    /// permessage-deflate, if agreed.
    inflate: Option<Inflate>,
    /// The open message is compressed.
    compressed: bool,
    /// Its compressed bytes so far.
    wire: u64,
    /// The room the last compressed message's buffer took: reserved for
    /// the next, since that buffer is not kept between messages.
    inflated_hint: usize,
}

/// Compressed bytes are checked at the frame head too, against the limit
/// and a little more: deflate grows incompressible data by its block
/// headers, 5 bytes in 64 KiB.
fn wire_limit(max_message: usize) -> u64 {
    (max_message as u64).saturating_add(max_message as u64 / 4096 + 64)
}

/// Unmasked compressed bytes are inflated in pieces of this size.
const INFLATE_PIECE: usize = 4096;

impl Session {
    /// A session refusing messages over `max_message` bytes (1009).
    pub(crate) fn new(max_message: usize) -> Session {
        Session {
            max_message,
            stage: Stage::Head { have: 0 },
            head: [0; 14],
            message: Vec::new(),
            kind: None,
            utf8: Utf8Progress::default(),
            control: [0; 125],
            control_len: 0,
            frames: 0,
            inflate: None,
            compressed: false,
            wire: 0,
            inflated_hint: 0,
        }
    }

    /// The session of a connection that agreed to permessage-deflate.
    pub(crate) fn with_inflate(mut self, agreed: &Agreed) -> Session {
        self.inflate = Some(Inflate::new(agreed));
        self
    }

    /// Compressed bytes received and what they inflated to, since the
    /// last call (for `/metrics`).
    pub(crate) fn take_inflated(&mut self) -> (u64, u64) {
        match &mut self.inflate {
            Some(inflate) => (
                std::mem::take(&mut inflate.wire),
                std::mem::take(&mut inflate.inflated),
            ),
            None => (0, 0),
        }
    }

    /// Whole frames received so far, control frames included: a client
    /// that answers a ping, or pings, is alive though it sends no message.
    pub(crate) fn frames(&self) -> u64 {
        self.frames
    }

    /// Decodes `input`, calling `on_event` for each event with `out`, into
    /// which pongs are written too.
    pub(crate) fn feed(
        &mut self,
        mut input: &mut [u8],
        out: &mut BytesMut,
        mut on_event: impl FnMut(Event<'_>, &mut BytesMut),
    ) {
        while !input.is_empty() {
            match self.stage {
                Stage::Ended => return,
                Stage::Head { have } => {
                    let need = head_len(&self.head, have);
                    let take = (need - have).min(input.len());
                    self.head[have..have + take].copy_from_slice(&input[..take]);
                    input = &mut std::mem::take(&mut input)[take..];
                    let have = have + take;
                    self.stage = Stage::Head { have };
                    if have < 2 {
                        continue;
                    }
                    if let Err(code) = self.check_start() {
                        return self.fail(code, out, &mut on_event);
                    }
                    if have < head_len(&self.head, have) {
                        continue;
                    }
                    match self.begin_payload() {
                        Ok(frame) if frame.left == 0 => {
                            self.stage = Stage::Head { have: 0 };
                            if let Err(code) = self.end_frame(frame, out, &mut on_event) {
                                return self.fail(code, out, &mut on_event);
                            }
                        }
                        Ok(frame) if self.is_whole_in(&frame, input.len()) => {
                            let (payload, rest) =
                                std::mem::take(&mut input).split_at_mut(frame.left as usize);
                            input = rest;
                            self.stage = Stage::Head { have: 0 };
                            if let Err(code) =
                                self.whole_message(&frame, payload, out, &mut on_event)
                            {
                                return self.fail(code, out, &mut on_event);
                            }
                        }
                        Ok(frame) => self.stage = Stage::Payload(frame),
                        Err(code) => return self.fail(code, out, &mut on_event),
                    }
                }
                Stage::Payload(mut frame) => {
                    let take = frame.left.min(input.len() as u64) as usize;
                    let (chunk, rest) = std::mem::take(&mut input).split_at_mut(take);
                    input = rest;
                    if let Err(code) = self.take_payload(&mut frame, chunk) {
                        return self.fail(code, out, &mut on_event);
                    }
                    if frame.left > 0 {
                        self.stage = Stage::Payload(frame);
                        continue;
                    }
                    self.stage = Stage::Head { have: 0 };
                    if let Err(code) = self.end_frame(frame, out, &mut on_event) {
                        return self.fail(code, out, &mut on_event);
                    }
                }
            }
            if matches!(self.stage, Stage::Ended) {
                return;
            }
        }
    }

    /// The first two head bytes: the rules that need nothing more.
    fn check_start(&self) -> Result<(), u16> {
        let [first, second] = [self.head[0], self.head[1]];
        let fin = first & 0x80 != 0;
        let opcode = first & 0x0f;
        // RSV2 and RSV3 mean nothing here; RSV1 marks a compressed
        // message, on its first frame only, if permessage-deflate was
        // agreed (RFC 7692 §6).
        if first & 0x30 != 0 || second & 0x80 == 0 {
            return Err(PROTOCOL_ERROR);
        }
        if first & RSV1 != 0 && (self.inflate.is_none() || !matches!(opcode, 0x1 | 0x2)) {
            return Err(PROTOCOL_ERROR);
        }
        match opcode {
            0x0 if self.kind.is_none() => Err(PROTOCOL_ERROR),
            0x1 | 0x2 if self.kind.is_some() => Err(PROTOCOL_ERROR),
            0x0..=0x2 => Ok(()),
            // Control frames: whole, and small.
            0x8..=0xa if !fin || second & 0x7f > 125 => Err(PROTOCOL_ERROR),
            0x8..=0xa => Ok(()),
            _ => Err(PROTOCOL_ERROR),
        }
    }

    /// The head is whole: the frame it starts, or the rule it breaks.
    fn begin_payload(&mut self) -> Result<Frame, u16> {
        let head = &self.head;
        let (len, mask_at) = match head[1] & 0x7f {
            126 => (u64::from(u16::from_be_bytes([head[2], head[3]])), 4),
            127 => {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(&head[2..10]);
                let len = u64::from_be_bytes(bytes);
                // The most significant bit must be 0 (§5.2).
                if len >> 63 != 0 {
                    return Err(PROTOCOL_ERROR);
                }
                (len, 10)
            }
            len => (u64::from(len), 2),
        };
        let mut mask = [0u8; 4];
        mask.copy_from_slice(&head[mask_at..mask_at + 4]);
        let frame = Frame {
            fin: head[0] & 0x80 != 0,
            opcode: head[0] & 0x0f,
            mask,
            left: len,
            read: 0,
        };
        if frame.opcode & 0x8 == 0 {
            if frame.opcode != 0 {
                self.compressed = head[0] & RSV1 != 0;
            }
            if self.compressed {
                if frame.opcode != 0 {
                    self.message.reserve_exact(self.inflated_hint);
                }
                // What it inflates to is checked as it inflates.
                self.wire = self.wire.saturating_add(len);
                if self.wire > wire_limit(self.max_message) {
                    return Err(TOO_BIG);
                }
            } else if (self.message.len() as u64).saturating_add(len) > self.max_message as u64 {
                return Err(TOO_BIG);
            }
            if frame.opcode != 0 {
                self.kind = Some(match frame.opcode {
                    0x1 => Kind::Text,
                    _ => Kind::Binary,
                });
            }
        } else {
            self.control_len = 0;
        }
        Ok(frame)
    }

    /// `frame` is a message of its own, uncompressed, and its payload is
    /// all in the `available` bytes that follow its head.
    fn is_whole_in(&self, frame: &Frame, available: usize) -> bool {
        frame.fin
            && matches!(frame.opcode, 0x1 | 0x2)
            && !self.compressed
            && frame.left <= available as u64
    }

    /// A message of one frame, its `payload` all here: unmasked in place
    /// and handed over as it lies, without a copy into the message buffer.
    fn whole_message(
        &mut self,
        frame: &Frame,
        payload: &mut [u8],
        out: &mut BytesMut,
        on_event: &mut impl FnMut(Event<'_>, &mut BytesMut),
    ) -> Result<(), u16> {
        self.frames += 1;
        unmask(payload, frame.mask, 0);
        hand_over(self.kind.take(), payload, out, on_event)
    }

    /// Unmasks `chunk` of `frame`'s payload into the message or the
    /// control buffer; text is checked as it grows.
    fn take_payload(&mut self, frame: &mut Frame, chunk: &[u8]) -> Result<(), u16> {
        let phase = (frame.read % 4) as usize;
        frame.read += chunk.len() as u64;
        frame.left -= chunk.len() as u64;
        if frame.opcode & 0x8 != 0 {
            let start = self.control_len;
            self.control_len += chunk.len();
            let control = &mut self.control[start..self.control_len];
            control.copy_from_slice(chunk);
            unmask(control, frame.mask, phase);
            return Ok(());
        }
        if self.compressed {
            let inflated = self.inflate_chunk(chunk, frame.mask, phase);
            inflated.map_err(|code| self.inflate_failure(code))?;
        } else {
            // The frame's whole payload at once, on its first piece.
            self.message.reserve(chunk.len() + frame.left as usize);
            let start = self.message.len();
            self.message.extend_from_slice(chunk);
            unmask(&mut self.message[start..], frame.mask, phase);
        }
        if self.kind == Some(Kind::Text) && self.utf8.extend(&self.message).is_err() {
            return Err(INVALID_DATA);
        }
        Ok(())
    }

    /// Unmasks a compressed `chunk` piece by piece and inflates it onto the
    /// message.
    fn inflate_chunk(&mut self, chunk: &[u8], mask: [u8; 4], mut phase: usize) -> Result<(), u16> {
        let Some(inflate) = self.inflate.as_mut() else {
            return Err(PROTOCOL_ERROR);
        };
        let mut piece = [0u8; INFLATE_PIECE];
        for part in chunk.chunks(INFLATE_PIECE) {
            let piece = &mut piece[..part.len()];
            piece.copy_from_slice(part);
            unmask(piece, mask, phase);
            phase = (phase + part.len()) % 4;
            inflate
                .inflate(piece, &mut self.message, self.max_message)
                .map_err(inflate_code)?;
        }
        Ok(())
    }

    /// A whole frame has arrived: a control frame is acted on, a final
    /// data frame completes its message.
    fn end_frame(
        &mut self,
        frame: Frame,
        out: &mut BytesMut,
        on_event: &mut impl FnMut(Event<'_>, &mut BytesMut),
    ) -> Result<(), u16> {
        self.frames += 1;
        let control = &self.control[..self.control_len];
        match frame.opcode {
            0x9 => write_frame(out, Opcode::Pong, control),
            0xa => {}
            0x8 => {
                let code = close_code(control)?;
                self.end();
                on_event(Event::Close { code }, out);
            }
            _ if !frame.fin => {}
            _ => {
                let compressed = std::mem::take(&mut self.compressed);
                if compressed {
                    self.wire = 0;
                    if let Some(inflate) = self.inflate.as_mut() {
                        let finished = inflate.finish(&mut self.message, self.max_message);
                        finished.map_err(|e| self.inflate_failure(inflate_code(e)))?;
                    }
                    if self.kind == Some(Kind::Text) && self.utf8.extend(&self.message).is_err() {
                        return Err(INVALID_DATA);
                    }
                }
                let kind = self.kind.take();
                if kind == Some(Kind::Text) {
                    // Checked as it arrived, and just now whole.
                    self.utf8.finish(&self.message).map_err(|_| INVALID_DATA)?;
                }
                hand_over(kind, &self.message, out, on_event)?;
                self.message.clear();
                if compressed {
                    // A compressed connection is one that idles cheaply:
                    // its buffer goes, and the next message reserves as
                    // much as this one took.
                    self.inflated_hint = self.message.capacity().min(KEEP_CAPACITY);
                    self.message = Vec::new();
                } else if self.message.capacity() > KEEP_CAPACITY {
                    self.message = Vec::new();
                }
            }
        }
        Ok(())
    }

    /// The close code for a compressed message that failed to inflate
    /// with `code`: a text past the limit whose bytes within it are not
    /// UTF-8 is 1007, as it is when the same bytes come in smaller reads
    /// and the text is checked before the limit is reached, so the code
    /// does not depend on how the reads fell.
    fn inflate_failure(&mut self, code: u16) -> u16 {
        if code != TOO_BIG || self.kind != Some(Kind::Text) {
            return code;
        }
        let within = &self.message[..self.message.len().min(self.max_message)];
        match self.utf8.extend(within) {
            Ok(()) => code,
            Err(_) => INVALID_DATA,
        }
    }

    /// Ends the session on a broken rule.
    fn fail(
        &mut self,
        code: u16,
        out: &mut BytesMut,
        on_event: &mut impl FnMut(Event<'_>, &mut BytesMut),
    ) {
        self.end();
        on_event(Event::Fail(code), out);
    }

    /// Nothing more is read: the message buffer and any decompressor go.
    fn end(&mut self) {
        self.stage = Stage::Ended;
        self.message = Vec::new();
        if let Some(inflate) = self.inflate.as_mut() {
            inflate.release();
        }
    }
}

/// A whole message to the caller: text as `str` (1007 if it is not
/// UTF-8), anything else as bytes.
fn hand_over(
    kind: Option<Kind>,
    message: &[u8],
    out: &mut BytesMut,
    on_event: &mut impl FnMut(Event<'_>, &mut BytesMut),
) -> Result<(), u16> {
    match kind {
        Some(Kind::Text) => {
            let text = std::str::from_utf8(message).map_err(|_| INVALID_DATA)?;
            on_event(Event::Text(text), out);
        }
        _ => on_event(Event::Binary(message), out),
    }
    Ok(())
}

/// The close code for a message that could not be inflated.
fn inflate_code(error: InflateError) -> u16 {
    match error {
        InflateError::TooBig => TOO_BIG,
        InflateError::Corrupt => INVALID_DATA,
    }
}

/// How long a head is, given its first `have` bytes (at least 2 known
/// once `have` reaches 2).
fn head_len(head: &[u8], have: usize) -> usize {
    if have < 2 {
        return 2;
    }
    match head[1] & 0x7f {
        126 => 2 + 2 + 4,
        127 => 2 + 8 + 4,
        _ => 2 + 4,
    }
}

/// A close frame's code: none for an empty payload; a payload of one
/// byte, a code no endpoint may send, or a reason that is not UTF-8 breaks
/// the rules (§5.5.1, §7.4).
fn close_code(payload: &[u8]) -> Result<Option<u16>, u16> {
    match payload {
        [] => Ok(None),
        [_] => Err(PROTOCOL_ERROR),
        [high, low, reason @ ..] => {
            let code = u16::from_be_bytes([*high, *low]);
            if !crate::ws::close_code_is_sendable(code)
                || code == 1012
                || code == 1013
                || code == 1014
            {
                // 1012-1014 are registered since RFC 6455, but a client
                // has no cause to send them.
                return Err(PROTOCOL_ERROR);
            }
            std::str::from_utf8(reason).map_err(|_| INVALID_DATA)?;
            Ok(Some(code))
        }
    }
}

/// XORs `bytes` with `mask`, starting at `phase` into it.
fn unmask(bytes: &mut [u8], mask: [u8; 4], phase: usize) {
    let mut rotated = [0u8; 4];
    for (i, byte) in rotated.iter_mut().enumerate() {
        *byte = mask[(i + phase) % 4];
    }
    let word = u32::from_ne_bytes(rotated);
    let mut chunks = bytes.chunks_exact_mut(4);
    for chunk in &mut chunks {
        let value = u32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]) ^ word;
        chunk.copy_from_slice(&value.to_ne_bytes());
    }
    for (i, byte) in chunks.into_remainder().iter_mut().enumerate() {
        *byte ^= rotated[i];
    }
}

#[cfg(test)]
mod tests;
