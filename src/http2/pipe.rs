//! The `h2` crate wants an `AsyncRead + AsyncWrite`; the poller owns the
//! socket. A [`Pipe`] is the two in-memory buffers between them: the
//! connection puts what it read into the input and takes what `h2` wrote
//! from the output, once per wake, so one wake is one read and one write
//! however many streams it served (handing `h2` the socket made it write
//! once per frame).
//!
//! `h2` has no runtime here: the session polls it with a waker that only
//! raises a flag ([`Flag`]). A poll that returns `Pending` after something
//! woke the flag is polled again, so a stream that queued data while
//! another was polled is not left waiting for the next read.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The buffers between the connection and `h2`.
#[derive(Debug, Default)]
pub(crate) struct Buffers {
    /// What was read from the client, not yet taken by `h2`.
    pub(crate) input: BytesMut,
    /// What `h2` wrote, not yet taken by the connection.
    pub(crate) output: BytesMut,
    /// The client ended its side: a read past the input is the end.
    pub(crate) ended: bool,
    /// A write was refused since the output was last taken: `h2` has more
    /// to write once it is.
    pub(crate) refused: bool,
}

/// Output the pipe holds before it refuses more: with the socket's own
/// backlog bounded by the connection, what a client that reads nothing
/// costs is bounded too, however large the windows it grants.
pub(crate) const OUTPUT_LIMIT: usize = 256 * 1024;

/// `h2`'s end of the buffers. Cloning shares them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Pipe {
    buffers: Arc<Mutex<Buffers>>,
}

impl Pipe {
    /// The buffers, for the connection.
    pub(crate) fn buffers(&self) -> MutexGuard<'_, Buffers> {
        self.buffers.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl AsyncRead for Pipe {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut buffers = self.buffers();
        if buffers.input.is_empty() {
            // Polled again after the next read; nothing to register.
            return match buffers.ended {
                true => Poll::Ready(Ok(())),
                false => Poll::Pending,
            };
        }
        let len = buffers.input.len().min(buf.remaining());
        buf.put_slice(&buffers.input[..len]);
        buffers.input.advance(len);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Pipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut buffers = self.buffers();
        let room = OUTPUT_LIMIT.saturating_sub(buffers.output.len());
        if room == 0 {
            // Polled again once the connection took the output.
            buffers.refused = true;
            return Poll::Pending;
        }
        let len = data.len().min(room);
        buffers.output.extend_from_slice(&data[..len]);
        Poll::Ready(Ok(len))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A waker that raises a flag: something `h2` polled wants polling again.
#[derive(Debug, Default)]
pub(crate) struct Flag(AtomicBool);

impl Flag {
    /// A waker raising this flag.
    pub(crate) fn waker(self: &Arc<Self>) -> Waker {
        Waker::from(Arc::clone(self))
    }

    /// Lowers the flag; whether it was raised.
    pub(crate) fn take(&self) -> bool {
        self.0.swap(false, Ordering::AcqRel)
    }
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
}
