//! HTTP/3 (RFC 9114) and QPACK (RFC 9204) as bytes, on the ground floor
//! beside `http/` and `ws/`: QUIC's varints, frames, the settings, stream
//! types, and QPACK with a dynamic table of capacity zero (the server says
//! so in its SETTINGS, so clients send only static references and
//! literals). No socket and no QUIC: `http3/` drives these over the QUIC
//! streams quinn-proto gives it.

pub(crate) mod frame;
pub(crate) mod huffman;
pub(crate) mod qpack;
pub(crate) mod static_table;
pub(crate) mod varint;

/// Unidirectional stream types (RFC 9114 §6.2, RFC 9204 §4.2).
pub(crate) const CONTROL_STREAM: u64 = 0x0;
pub(crate) const PUSH_STREAM: u64 = 0x1;
pub(crate) const QPACK_ENCODER_STREAM: u64 = 0x2;
pub(crate) const QPACK_DECODER_STREAM: u64 = 0x3;

/// A connection or stream error of HTTP/3, by its code (RFC 9114 §8.1,
/// RFC 9204 §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum H3Error {
    /// `H3_NO_ERROR`.
    NoError,
    /// `H3_INTERNAL_ERROR`.
    Internal,
    /// `H3_STREAM_CREATION_ERROR`.
    StreamCreation,
    /// `H3_CLOSED_CRITICAL_STREAM`.
    ClosedCriticalStream,
    /// `H3_FRAME_UNEXPECTED`.
    FrameUnexpected,
    /// `H3_FRAME_ERROR`.
    Frame,
    /// `H3_EXCESSIVE_LOAD`.
    ExcessiveLoad,
    /// `H3_SETTINGS_ERROR`.
    Settings,
    /// `H3_MISSING_SETTINGS`.
    MissingSettings,
    /// `H3_REQUEST_REJECTED`.
    RequestRejected,
    /// `H3_REQUEST_INCOMPLETE`.
    RequestIncomplete,
    /// `H3_MESSAGE_ERROR`.
    Message,
    /// `QPACK_DECOMPRESSION_FAILED`.
    QpackDecompression,
    /// `QPACK_ENCODER_STREAM_ERROR`.
    QpackEncoderStream,
}

impl H3Error {
    /// The code on the wire.
    pub(crate) fn code(self) -> u64 {
        match self {
            H3Error::NoError => 0x100,
            H3Error::Internal => 0x102,
            H3Error::StreamCreation => 0x103,
            H3Error::ClosedCriticalStream => 0x104,
            H3Error::FrameUnexpected => 0x105,
            H3Error::Frame => 0x106,
            H3Error::ExcessiveLoad => 0x107,
            H3Error::Settings => 0x109,
            H3Error::MissingSettings => 0x10a,
            H3Error::RequestRejected => 0x10b,
            H3Error::RequestIncomplete => 0x10d,
            H3Error::Message => 0x10e,
            H3Error::QpackDecompression => 0x200,
            H3Error::QpackEncoderStream => 0x201,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes on the wire, as RFC 9114 §8.1 and RFC 9204 §6 number them:
    /// a client reads the reason for a reset or a close by them.
    #[test]
    fn each_error_has_its_rfc_code() {
        let codes = [
            (H3Error::NoError, 0x100),
            (H3Error::Internal, 0x102),
            (H3Error::StreamCreation, 0x103),
            (H3Error::ClosedCriticalStream, 0x104),
            (H3Error::FrameUnexpected, 0x105),
            (H3Error::Frame, 0x106),
            (H3Error::ExcessiveLoad, 0x107),
            (H3Error::Settings, 0x109),
            (H3Error::MissingSettings, 0x10a),
            (H3Error::RequestRejected, 0x10b),
            (H3Error::RequestIncomplete, 0x10d),
            (H3Error::Message, 0x10e),
            (H3Error::QpackDecompression, 0x200),
            (H3Error::QpackEncoderStream, 0x201),
        ];
        for (error, code) in codes {
            assert_eq!(error.code(), code, "{error:?}");
        }
    }
}
