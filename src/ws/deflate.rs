//! permessage-deflate (RFC 7692): the offer a client makes in
//! `Sec-WebSocket-Extensions` and the server's answer, and each message
//! compressed or inflated with raw DEFLATE (flate2's zlib-rs backend).
//!
//! Two ways to hold the zlib state, chosen per direction:
//!
//! - **No context takeover** (the default both ways): every message is
//!   compressed or inflated on its own, so the state is only needed while
//!   one message is being handled. A thread keeps a few compressors and
//!   decompressors and lends one out per message (uWebSockets' shared
//!   compressor): an idle connection holds no zlib state at all. A
//!   decompressor lent to a message whose frames span several reads stays
//!   with its connection until the message ends.
//! - **Context takeover**: each message may refer back to the ones before
//!   (smaller messages on the wire when they repeat themselves), so each
//!   connection keeps its own window per direction for its whole life:
//!   about 300 KiB to compress at 15 window bits, 40 KiB to inflate,
//!   allocated at the first message that needs them.
//!
//! A compressed message is deflated with a sync flush and sent without the
//! flush's trailing `00 00 ff ff`; an inflated one gets the trailer back
//! (§7.2.1, §7.2.2). Inflating stops as soon as the output would pass the
//! message limit, so a small frame that inflates to gigabytes costs no more
//! than the limit.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::OnceLock;

use bytes::{Bytes, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use crate::ws::frame::{frame_head, head_len, write_frame, write_head, Opcode};

/// permessage-deflate as a server offers it, for every WebSocket route
/// (`Config::ws_deflate`, `--ws-deflate`) or one
/// (`Routes::websocket_with_deflate`). The defaults keep no zlib state on
/// an idle connection; see `docs/websocket.md` for the trade.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WsDeflate {
    /// zlib's level, 0 (stored) to 9 (smallest); 1 (the fastest) unless
    /// set: a message is compressed while its client waits.
    pub level: u32,
    /// Keep the server's compression window from message to message (its
    /// messages refer back to earlier ones), unless the client asks
    /// otherwise: a compressor per connection. Off unless set: every
    /// message is compressed on its own with a compressor the thread
    /// shares.
    pub server_context_takeover: bool,
    /// Let the client keep its window from message to message: a
    /// decompressor per connection. Off unless set: the answer says
    /// `client_no_context_takeover`, and the thread's decompressors serve
    /// every connection.
    pub client_context_takeover: bool,
    /// The largest window the server compresses with, 8 to 15 (15 unless
    /// set): smaller saves memory with context takeover, at some ratio.
    /// Answered as `server_max_window_bits` when under 15.
    pub server_max_window_bits: u8,
    /// The largest window the client may compress with, 8 to 15 (15 unless
    /// set), answered as `client_max_window_bits` when the client offered
    /// that parameter (else the client's is up to 15).
    pub client_max_window_bits: u8,
    /// Messages shorter than this are sent uncompressed (64 bytes unless
    /// set): deflate's own overhead rarely pays below it.
    pub threshold: usize,
}

impl Default for WsDeflate {
    fn default() -> WsDeflate {
        WsDeflate {
            level: 1,
            server_context_takeover: false,
            client_context_takeover: false,
            server_max_window_bits: 15,
            client_max_window_bits: 15,
            threshold: 64,
        }
    }
}

impl WsDeflate {
    /// Both directions keep their window between messages (as Node's `ws`
    /// does by default): fewer bytes on the wire for repetitive messages,
    /// a compressor and a decompressor per connection.
    pub fn context_takeover() -> WsDeflate {
        WsDeflate {
            server_context_takeover: true,
            client_context_takeover: true,
            ..WsDeflate::default()
        }
    }
}

/// What one connection agreed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Agreed {
    /// The server keeps its window between messages.
    pub(crate) server_takeover: bool,
    /// The client keeps its window between messages.
    pub(crate) client_takeover: bool,
    /// The window the server compresses with, 9 to 15 (a client's 8 is
    /// honoured with 9: zlib's matches reach back at most the window less
    /// 262 bytes, 250 at 9 bits).
    pub(crate) server_bits: u8,
    /// The window to inflate with, 9 to 15.
    pub(crate) client_bits: u8,
    pub(crate) level: u8,
    pub(crate) threshold: usize,
}

impl Agreed {
    /// What a shared compressor is looked up by, and a room's cached
    /// compressed message is keyed by.
    fn compressor_key(&self) -> u16 {
        u16::from(self.server_bits) << 8 | u16::from(self.level)
    }
}

/// The extension's token.
const NAME: &[u8] = b"permessage-deflate";

/// Picks the first of the client's permessage-deflate offers (in
/// `Sec-WebSocket-Extensions` values, in order) that `config` can honour:
/// what was agreed, and the answer's value. An offer with an unknown,
/// repeated or invalid parameter is declined (§7); other extensions are
/// ignored.
pub(crate) fn negotiate<'a>(
    config: &WsDeflate,
    values: impl Iterator<Item = &'a [u8]>,
) -> Option<(Agreed, String)> {
    for value in values {
        for element in split_unquoted(value, b',') {
            let mut parts = split_unquoted(element, b';');
            let name = parts.next().map(<[u8]>::trim_ascii).unwrap_or_default();
            if !name.eq_ignore_ascii_case(NAME) {
                continue;
            }
            if let Some(accepted) = accept(config, parts) {
                return Some(accepted);
            }
        }
    }
    None
}

/// One offer's parameters, as far as they were understood.
#[derive(Debug, Default)]
struct Offer {
    server_no_context_takeover: bool,
    client_no_context_takeover: bool,
    server_max_window_bits: Option<u8>,
    /// Present (with its value, if it had one).
    client_max_window_bits: Option<Option<u8>>,
}

/// The answer to one offer, or `None` to decline it.
fn accept<'a>(
    config: &WsDeflate,
    params: impl Iterator<Item = &'a [u8]>,
) -> Option<(Agreed, String)> {
    let mut offer = Offer::default();
    for param in params {
        let (name, value) = match param.iter().position(|&b| b == b'=') {
            Some(at) => (
                param[..at].trim_ascii(),
                Some(unquote(param[at + 1..].trim_ascii())?),
            ),
            None => (param.trim_ascii(), None),
        };
        let name = name.to_ascii_lowercase();
        match (name.as_slice(), value) {
            (b"server_no_context_takeover", None) if !offer.server_no_context_takeover => {
                offer.server_no_context_takeover = true;
            }
            (b"client_no_context_takeover", None) if !offer.client_no_context_takeover => {
                offer.client_no_context_takeover = true;
            }
            (b"server_max_window_bits", Some(value)) if offer.server_max_window_bits.is_none() => {
                offer.server_max_window_bits = Some(window_bits(&value)?);
            }
            (b"client_max_window_bits", value) if offer.client_max_window_bits.is_none() => {
                offer.client_max_window_bits = Some(match value {
                    Some(value) => Some(window_bits(&value)?),
                    None => None,
                });
            }
            _ => return None,
        }
    }
    let server_takeover = config.server_context_takeover && !offer.server_no_context_takeover;
    let client_takeover = config.client_context_takeover && !offer.client_no_context_takeover;
    let mut answer = String::from("permessage-deflate");
    if !server_takeover {
        answer.push_str("; server_no_context_takeover");
    }
    if !client_takeover {
        answer.push_str("; client_no_context_takeover");
    }
    // The server may always name a smaller window than the one it could
    // use; when the client named one, it must answer one no larger.
    let server_limit = config.server_max_window_bits.clamp(8, 15);
    let server_bits = match offer.server_max_window_bits {
        Some(offered) => Some(offered.min(server_limit)),
        None if server_limit < 15 => Some(server_limit),
        None => None,
    };
    if let Some(bits) = server_bits {
        let _ = write!(answer, "; server_max_window_bits={bits}");
    }
    // Only answered when offered (§7.1.2.2), and only to ask for less.
    let client_limit = config.client_max_window_bits.clamp(8, 15);
    let client_bits = match offer.client_max_window_bits {
        Some(offered) if client_limit < offered.unwrap_or(15) => Some(client_limit),
        _ => None,
    };
    if let Some(bits) = client_bits {
        let _ = write!(answer, "; client_max_window_bits={bits}");
    }
    let agreed = Agreed {
        server_takeover,
        client_takeover,
        server_bits: server_bits.unwrap_or(15).max(9),
        client_bits: client_bits.unwrap_or(15).max(9),
        level: config.level.min(9) as u8,
        threshold: config.threshold,
    };
    Some((agreed, answer))
}

/// A window size: 8 to 15, in decimal without a leading zero.
fn window_bits(value: &[u8]) -> Option<u8> {
    match value {
        [digit @ b'8'..=b'9'] => Some(digit - b'0'),
        [b'1', digit @ b'0'..=b'5'] => Some(10 + digit - b'0'),
        _ => None,
    }
}

/// A parameter's value: a token as it is, a quoted string unquoted;
/// `None` if it is neither.
fn unquote(value: &[u8]) -> Option<Vec<u8>> {
    let is_tchar = |b: &u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b);
    match value {
        [b'"', inner @ .., b'"'] => {
            let mut out = Vec::with_capacity(inner.len());
            let mut bytes = inner.iter();
            while let Some(&b) = bytes.next() {
                match b {
                    b'\\' => out.push(*bytes.next()?),
                    b'"' => return None,
                    b => out.push(b),
                }
            }
            Some(out)
        }
        _ if !value.is_empty() && value.iter().all(is_tchar) => Some(value.to_vec()),
        _ => None,
    }
}

/// Splits `value` at each `separator` outside a quoted string.
fn split_unquoted(value: &[u8], separator: u8) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(value);
    std::iter::from_fn(move || {
        let bytes = rest?;
        let mut quoted = false;
        let mut escaped = false;
        for (i, &b) in bytes.iter().enumerate() {
            match b {
                _ if escaped => escaped = false,
                b'\\' if quoted => escaped = true,
                b'"' => quoted = !quoted,
                b if b == separator && !quoted => {
                    rest = Some(&bytes[i + 1..]);
                    return Some(&bytes[..i]);
                }
                _ => {}
            }
        }
        rest = None;
        Some(bytes)
    })
}

/// The sync flush's empty stored block, stripped from every message sent
/// and put back after every message received.
const TRAILER: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// Spare decompressors and compressors a thread keeps for connections
/// without context takeover. More than this are dropped when returned.
const SPARE_INFLATERS: usize = 8;
const SPARE_DEFLATERS: usize = 4;

thread_local! {
    static INFLATERS: RefCell<Vec<Decompress>> = const { RefCell::new(Vec::new()) };
    static DEFLATERS: RefCell<Vec<(u16, Compress)>> = const { RefCell::new(Vec::new()) };
}

// The spares are reached with `try_with`: a connection may be dropped
// while its thread is ending, after they are gone; it then makes or drops
// its own.

/// A decompressor ready for a new message: the thread's spare, or a new one.
fn lend_inflater() -> Decompress {
    INFLATERS
        .try_with(|spares| spares.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_else(|| Decompress::new(false))
}

/// Takes back a decompressor lent for one message.
fn return_inflater(mut inflater: Decompress) {
    inflater.reset(false);
    let _ = INFLATERS.try_with(|spares| {
        let mut spares = spares.borrow_mut();
        if spares.len() < SPARE_INFLATERS {
            spares.push(inflater);
        }
    });
}

fn new_compressor(agreed: &Agreed) -> Compress {
    Compress::new_with_window_bits(
        Compression::new(u32::from(agreed.level)),
        false,
        agreed.server_bits,
    )
}

/// Runs `f` with a compressor of the thread's for `agreed`'s window and
/// level, reset afterwards for the next message.
fn with_shared_compressor<T>(agreed: &Agreed, f: impl FnOnce(&mut Compress) -> T) -> T {
    let key = agreed.compressor_key();
    let spare = DEFLATERS
        .try_with(|spares| {
            let mut spares = spares.borrow_mut();
            let at = spares.iter().position(|(k, _)| *k == key)?;
            Some(spares.swap_remove(at).1)
        })
        .ok()
        .flatten();
    let mut compressor = spare.unwrap_or_else(|| new_compressor(agreed));
    let result = f(&mut compressor);
    compressor.reset();
    let _ = DEFLATERS.try_with(|spares| {
        let mut spares = spares.borrow_mut();
        if spares.len() < SPARE_DEFLATERS {
            spares.push((key, compressor));
        }
    });
    result
}

/// Why a compressed message could not be taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InflateError {
    /// It inflates past the message limit (1009).
    TooBig,
    /// It is not valid DEFLATE data (1007).
    Corrupt,
}

/// The receiving side of one connection's agreement: its decompressor,
/// held only while a message is open unless the client takes its context
/// over.
#[derive(Debug)]
pub(crate) struct Inflate {
    takeover: bool,
    bits: u8,
    inflater: Option<Decompress>,
    /// Compressed bytes taken and what they inflated to, for `/metrics`.
    pub(crate) wire: u64,
    pub(crate) inflated: u64,
}

impl Inflate {
    pub(crate) fn new(agreed: &Agreed) -> Inflate {
        Inflate {
            takeover: agreed.client_takeover,
            bits: agreed.client_bits,
            inflater: None,
            wire: 0,
            inflated: 0,
        }
    }

    /// Whether it holds a decompressor now.
    #[cfg(test)]
    pub(crate) fn holds_state(&self) -> bool {
        self.inflater.is_some()
    }

    /// Inflates `input`, part of a compressed message, onto `message`,
    /// which may not grow past `max` bytes.
    pub(crate) fn inflate(
        &mut self,
        input: &[u8],
        message: &mut Vec<u8>,
        max: usize,
    ) -> Result<(), InflateError> {
        self.wire += input.len() as u64;
        let before = message.len();
        let result = self.run(input, message, max);
        self.inflated += (message.len() - before) as u64;
        result
    }

    fn run(
        &mut self,
        mut input: &[u8],
        message: &mut Vec<u8>,
        max: usize,
    ) -> Result<(), InflateError> {
        let (takeover, bits) = (self.takeover, self.bits);
        let inflater = self.inflater.get_or_insert_with(|| match takeover {
            true => Decompress::new_with_window_bits(false, bits),
            false => lend_inflater(),
        });
        // One byte past the limit is room enough to know it was passed.
        let most = max.saturating_add(1);
        loop {
            if message.len() > max {
                return Err(InflateError::TooBig);
            }
            if message.len() == message.capacity() {
                // Half again, so the buffer a connection keeps between
                // messages is not much larger than its messages.
                let grow = (message.capacity() / 2).max(512).min(most - message.len());
                message.reserve_exact(grow);
            }
            let (in_before, out_before) = (inflater.total_in(), inflater.total_out());
            let status = inflater
                .decompress_vec(input, message, FlushDecompress::None)
                .map_err(|_| InflateError::Corrupt)?;
            let consumed = (inflater.total_in() - in_before) as usize;
            let moved = consumed > 0 || inflater.total_out() > out_before;
            input = &input[consumed..];
            if status == Status::StreamEnd {
                // A block marked final ends this DEFLATE stream (§7.2.3.4
                // allows one); what follows starts a new one.
                inflater.reset(false);
                continue;
            }
            if message.len() > max {
                return Err(InflateError::TooBig);
            }
            // With room left, the inflater stopped for want of input.
            if message.len() < message.capacity() {
                if input.is_empty() {
                    return Ok(());
                }
                if !moved {
                    return Err(InflateError::Corrupt);
                }
            }
        }
    }

    /// The message's last frame has been inflated: the trailer the sender
    /// stripped goes in, and a decompressor lent for this message goes
    /// back.
    pub(crate) fn finish(&mut self, message: &mut Vec<u8>, max: usize) -> Result<(), InflateError> {
        let result = self.inflate(&TRAILER, message, max);
        self.wire -= TRAILER.len() as u64;
        if !self.takeover {
            self.release();
        }
        result
    }

    /// The connection is done with messages: its decompressor goes (back
    /// to the thread, if it was lent).
    pub(crate) fn release(&mut self) {
        if let Some(inflater) = self.inflater.take() {
            if !self.takeover {
                return_inflater(inflater);
            }
        }
    }
}

impl Drop for Inflate {
    fn drop(&mut self) {
        self.release();
    }
}

/// A message's compressed form, made once and shared by every member of a
/// room that agreed to the same window and level (without context
/// takeover, a message compresses the same for all of them).
#[derive(Debug, Default)]
pub(crate) struct DeflateCache(OnceLock<(u16, Option<Bytes>)>);

impl DeflateCache {
    /// The compressed form's length, once made (if it was worth sending).
    pub(crate) fn compressed_len(&self) -> Option<usize> {
        self.0.get()?.1.as_ref().map(Bytes::len)
    }
}

/// The sending side of one connection's agreement.
#[derive(Debug)]
pub(crate) struct Deflate {
    agreed: Agreed,
    /// The connection's own compressor, with context takeover.
    own: Option<Compress>,
    /// Payload bytes given to the compressor and the bytes it made, for
    /// `/metrics`.
    pub(crate) plain: u64,
    pub(crate) wire: u64,
}

impl Deflate {
    pub(crate) fn new(agreed: &Agreed) -> Deflate {
        Deflate {
            agreed: *agreed,
            own: None,
            plain: 0,
            wire: 0,
        }
    }

    /// Whether it holds a compressor now.
    #[cfg(test)]
    pub(crate) fn holds_state(&self) -> bool {
        self.own.is_some()
    }

    /// Writes a data message into `out`: compressed unless it is below the
    /// threshold, or (without context takeover) compressing did not make
    /// it smaller.
    pub(crate) fn write(&mut self, out: &mut BytesMut, opcode: Opcode, payload: &[u8]) {
        if payload.len() < self.agreed.threshold {
            return write_frame(out, opcode, payload);
        }
        let wire = match self.agreed.server_takeover {
            true => {
                let agreed = self.agreed;
                let own = self.own.get_or_insert_with(|| new_compressor(&agreed));
                write_deflated(out, opcode, payload, own, false)
            }
            false => with_shared_compressor(&self.agreed, |compressor| {
                write_deflated(out, opcode, payload, compressor, true)
            }),
        };
        if let Some(wire) = wire {
            self.plain += payload.len() as u64;
            self.wire += wire as u64;
        }
    }

    /// As [`Deflate::write`], for a message that may go to many
    /// connections: without context takeover its compressed form is made
    /// once, by the first connection that writes it, and copied by the
    /// rest that agreed to the same window and level.
    pub(crate) fn write_shared(
        &mut self,
        out: &mut BytesMut,
        opcode: Opcode,
        payload: &[u8],
        cache: &DeflateCache,
    ) {
        if self.agreed.server_takeover || payload.len() < self.agreed.threshold {
            return self.write(out, opcode, payload);
        }
        let key = self.agreed.compressor_key();
        let (cached_key, compressed) = cache.0.get_or_init(|| {
            let compressed = with_shared_compressor(&self.agreed, |compressor| {
                let mut into = BytesMut::new();
                let deflated = deflate(compressor, payload, &mut into);
                (deflated && into.len() < payload.len()).then(|| into.freeze())
            });
            (key, compressed)
        });
        match compressed {
            _ if *cached_key != key => self.write(out, opcode, payload),
            Some(compressed) => {
                write_head(out, 0x80 | RSV1 | opcode as u8, compressed.len());
                out.extend_from_slice(compressed);
                self.plain += payload.len() as u64;
                self.wire += compressed.len() as u64;
            }
            None => write_frame(out, opcode, payload),
        }
    }
}

/// The bit a compressed message's first frame carries (RSV1).
pub(crate) const RSV1: u8 = 0x40;

/// Writes `payload` compressed as one frame; with `or_plain`, writes it as
/// it is instead when compressing did not make it smaller. The compressed
/// length, if it was sent compressed.
fn write_deflated(
    out: &mut BytesMut,
    opcode: Opcode,
    payload: &[u8],
    compressor: &mut Compress,
    or_plain: bool,
) -> Option<usize> {
    let start = out.len();
    // Room for the head a payload this long would need: deflate rarely
    // grows data by more than its block headers.
    let room = head_len(payload.len() + 16);
    out.resize(start + room, 0);
    let deflated = deflate(compressor, payload, out);
    let len = out.len() - start - room;
    if !deflated || (or_plain && len >= payload.len()) {
        out.truncate(start);
        write_frame(out, opcode, payload);
        return None;
    }
    let (head, head_len) = frame_head(0x80 | RSV1 | opcode as u8, len);
    if head_len < room {
        out.copy_within(start + room.., start + head_len);
        out.truncate(start + head_len + len);
    } else if head_len > room {
        // Deflate grew it past a length encoding's edge.
        out.resize(start + head_len + len, 0);
        out.copy_within(start + room..start + room + len, start + head_len);
    }
    out[start..start + head_len].copy_from_slice(&head[..head_len]);
    Some(len)
}

/// Compresses `payload` as one message onto `out`, sync-flushed, without
/// the flush's trailer; false if zlib refused (which it does only when
/// misused, never for the data).
fn deflate(compressor: &mut Compress, mut payload: &[u8], out: &mut BytesMut) -> bool {
    let start = out.len();
    let mut written = start;
    out.resize(start + payload.len() + payload.len() / 64 + 32, 0);
    loop {
        let (in_before, out_before) = (compressor.total_in(), compressor.total_out());
        let status = compressor.compress(payload, &mut out[written..], FlushCompress::Sync);
        payload = &payload[(compressor.total_in() - in_before) as usize..];
        written += (compressor.total_out() - out_before) as usize;
        if status.is_err() {
            out.truncate(start);
            return false;
        }
        // Done when the input is used up and the flush had room to finish.
        if payload.is_empty() && written < out.len() {
            break;
        }
        let len = out.len();
        out.resize(len + len / 2 + 64, 0);
    }
    out.truncate(written);
    if out[start..].ends_with(&TRAILER) {
        out.truncate(written - TRAILER.len());
    }
    true
}

#[cfg(test)]
mod tests;
