//! Socket helpers: the write loop connections and the upstream pool share,
//! and which accept errors mean the process is out of resources.

use std::io::{self, ErrorKind, Write};

/// Writes from `data` until done or the socket would block; returns the count.
pub(crate) fn write_until_blocked(socket: &mut impl Write, data: &[u8]) -> io::Result<usize> {
    let mut written = 0;
    while written < data.len() {
        match socket.write(&data[written..]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(len) => written += len,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(written)
}

/// Errors that mean the process or system is out of descriptors or memory:
/// accepting again at once would fail again.
pub(crate) fn is_out_of_resources(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// A socket that answers each write as scripted: `Ok(n)` takes up to n
    /// bytes, an error kind fails that call.
    struct MockSocket {
        script: VecDeque<Result<usize, ErrorKind>>,
        written: Vec<u8>,
    }

    impl MockSocket {
        fn new(script: &[Result<usize, ErrorKind>]) -> MockSocket {
            MockSocket {
                script: script.iter().cloned().collect(),
                written: Vec::new(),
            }
        }
    }

    impl Write for MockSocket {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            match self.script.pop_front() {
                Some(Ok(n)) => {
                    let n = n.min(buf.len());
                    self.written.extend_from_slice(&buf[..n]);
                    Ok(n)
                }
                Some(Err(kind)) => Err(kind.into()),
                None => Err(ErrorKind::WouldBlock.into()),
            }
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn writes_through_short_writes_and_interruptions_until_blocked() {
        let mut socket = MockSocket::new(&[Ok(3), Err(ErrorKind::Interrupted), Ok(2)]);
        assert_eq!(write_until_blocked(&mut socket, b"hello world").unwrap(), 5);
        assert_eq!(socket.written, b"hello");
        let mut socket = MockSocket::new(&[Ok(100)]);
        assert_eq!(write_until_blocked(&mut socket, b"all").unwrap(), 3);
        assert_eq!(write_until_blocked(&mut socket, b"").unwrap(), 0);
        // Done means no write of nothing after (a socket answers that 0,
        // which would read as WriteZero).
        let mut socket = MockSocket::new(&[Ok(3), Ok(3)]);
        assert_eq!(write_until_blocked(&mut socket, b"abc").unwrap(), 3);
        assert_eq!(socket.script.len(), 1);
    }

    #[test]
    fn out_of_descriptors_or_memory_is_out_of_resources() {
        for errno in [libc::EMFILE, libc::ENFILE, libc::ENOBUFS, libc::ENOMEM] {
            assert!(is_out_of_resources(&io::Error::from_raw_os_error(errno)));
        }
        for errno in [libc::ECONNABORTED, libc::EAGAIN, libc::EINTR] {
            assert!(!is_out_of_resources(&io::Error::from_raw_os_error(errno)));
        }
        assert!(!is_out_of_resources(&ErrorKind::OutOfMemory.into()));
    }

    #[test]
    fn a_zero_write_or_a_reset_is_an_error() {
        let mut socket = MockSocket::new(&[Ok(1), Ok(0)]);
        let error = write_until_blocked(&mut socket, b"abc").unwrap_err();
        assert_eq!(error.kind(), ErrorKind::WriteZero);
        let mut socket = MockSocket::new(&[Err(ErrorKind::ConnectionReset)]);
        let error = write_until_blocked(&mut socket, b"abc").unwrap_err();
        assert_eq!(error.kind(), ErrorKind::ConnectionReset);
    }
}
