//! Socket helpers: the write loop connections and the upstream pool share,
//! and which accept errors mean the process is out of resources.

use std::io::{self, ErrorKind, Write};

use mio::net::TcpStream;

/// Writes from `data` until done or the socket would block; returns the count.
pub(crate) fn write_until_blocked(socket: &mut TcpStream, data: &[u8]) -> io::Result<usize> {
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
