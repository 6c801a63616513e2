//! The listening sockets: one per poller, sharing a port through
//! SO_REUSEPORT, the first bound exclusively; and the open-files limit every
//! connection counts against.

use std::io;
use std::net::SocketAddr;

use log::info;
use mio::net::TcpListener;
use socket2::{Domain, Socket, Type};

const LISTEN_BACKLOG: i32 = 4096;

/// A non-blocking listener with SO_REUSEPORT, so the kernel spreads incoming
/// connections over the pollers' listeners.
pub(crate) fn reuseport_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into()).map_err(|e| bind_error(e, addr))?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(TcpListener::from_std(socket.into()))
}

/// The first listener: bound and listening *without* SO_REUSEPORT, which
/// fails with EADDRINUSE if anything listens on `addr` (whether or not it set
/// SO_REUSEPORT), and only then given SO_REUSEPORT so that the pollers' other
/// listeners can join it. There is no window between a check and the bind:
/// the bind is the check, and `listen` checks again, so of two servers
/// starting at once only one gets the port. (SO_REUSEADDR keeps connections
/// in TIME_WAIT from a previous run from blocking a restart.) What remains
/// open is deliberate sharing: a program of the same user that itself sets
/// SO_REUSEPORT may still join the group, as SO_REUSEPORT intends.
pub(crate) fn exclusive_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into()).map_err(|e| bind_error(e, addr))?;
    socket
        .listen(LISTEN_BACKLOG)
        .map_err(|e| bind_error(e, addr))?;
    socket.set_reuse_port(true)?;
    Ok(TcpListener::from_std(socket.into()))
}

/// A bind or listen error, of the same kind, worded to name the address.
fn bind_error(error: io::Error, addr: SocketAddr) -> io::Error {
    let reason = match error.kind() {
        io::ErrorKind::AddrInUse => "address already in use".to_string(),
        _ => error.to_string(),
    };
    io::Error::new(error.kind(), format!("cannot listen on {addr}: {reason}"))
}

/// Raises the open-files soft limit to the hard limit: every connection is a
/// descriptor. Returns the limit now in force.
pub fn raise_open_files_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(io::Error::last_os_error());
        }
        limit = raised;
    }
    info!("open-files limit: {}", limit.rlim_cur);
    Ok(limit.rlim_cur)
}

/// A non-blocking UDP socket on `addr` for HTTP/3, with SO_REUSEPORT so
/// every poller has one on the same port; the first (`exclusive`) is bound
/// before it sets SO_REUSEPORT, as [`exclusive_listener`] is, so that a
/// port another program holds is an error rather than a share.
pub(crate) fn reuseport_udp(addr: SocketAddr, exclusive: bool) -> io::Result<mio::net::UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, None)?;
    if !exclusive {
        socket.set_reuse_port(true)?;
    }
    socket.set_nonblocking(true)?;
    // Room for bursts of datagrams between two rounds of the poller.
    let _ = socket.set_recv_buffer_size(4 << 20);
    let _ = socket.set_send_buffer_size(4 << 20);
    socket.bind(&addr.into()).map_err(|e| bind_error(e, addr))?;
    if exclusive {
        socket.set_reuse_port(true)?;
    }
    Ok(mio::net::UdpSocket::from_std(socket.into()))
}
