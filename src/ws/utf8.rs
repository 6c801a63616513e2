//! UTF-8 checked as it arrives: a message may end a read (or a fragment)
//! in the middle of a character, but bytes that can start no valid text
//! fail at once, not when the message ends (RFC 6455 §8.1 lets a server
//! fail fast, and the Autobahn suite expects it).

/// How far a growing buffer is known to be valid.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Utf8Progress {
    valid_up_to: usize,
}

/// The bytes so far can never be valid UTF-8, whatever follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Invalid;

impl Utf8Progress {
    /// Checks what was appended to `text` since the last call: an error
    /// once no continuation can make it valid.
    pub(crate) fn extend(&mut self, text: &[u8]) -> Result<(), Invalid> {
        match std::str::from_utf8(&text[self.valid_up_to..]) {
            Ok(_) => {
                self.valid_up_to = text.len();
                Ok(())
            }
            Err(e) => {
                self.valid_up_to += e.valid_up_to();
                match e.error_len() {
                    // A character cut at the end: more may complete it.
                    None => Ok(()),
                    Some(_) => Err(Invalid),
                }
            }
        }
    }

    /// The text is complete: valid only if no character was left open.
    pub(crate) fn finish(&mut self, text: &[u8]) -> Result<(), Invalid> {
        let complete = self.valid_up_to == text.len();
        self.valid_up_to = 0;
        match complete {
            true => Ok(()),
            false => Err(Invalid),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_may_be_cut_between_parts() {
        let text = "κόσμε".as_bytes();
        let mut progress = Utf8Progress::default();
        for end in 1..=text.len() {
            assert_eq!(progress.extend(&text[..end]), Ok(()), "{end}");
        }
        assert_eq!(progress.finish(text), Ok(()));
    }

    #[test]
    fn fails_as_soon_as_no_continuation_can_help() {
        let mut progress = Utf8Progress::default();
        // 0xF4 0x90 starts a code point above U+10FFFF: fail at the
        // second byte, not at the end.
        assert_eq!(progress.extend(&[b'a', 0xf4]), Ok(()));
        assert_eq!(progress.extend(&[b'a', 0xf4, 0x90]), Err(Invalid));
        let mut progress = Utf8Progress::default();
        assert_eq!(progress.extend(&[0xff]), Err(Invalid));
    }

    #[test]
    fn an_open_character_at_the_end_is_invalid() {
        let mut progress = Utf8Progress::default();
        assert_eq!(progress.extend(&[0xce]), Ok(()));
        assert_eq!(progress.finish(&[0xce]), Err(Invalid));
        // And the progress starts over for the next message.
        assert_eq!(progress.extend(b"ok"), Ok(()));
        assert_eq!(progress.finish(b"ok"), Ok(()));
    }
}
