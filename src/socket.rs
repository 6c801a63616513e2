//! Socket helpers shared by connections and the upstream pool.

use std::io::{self, ErrorKind, Write};

use mio::net::TcpStream;

/// Writes from `data` until done or the socket would block; returns the count.
pub fn write_until_blocked(socket: &mut TcpStream, data: &[u8]) -> io::Result<usize> {
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
