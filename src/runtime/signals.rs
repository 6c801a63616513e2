//! The signals a server answers: SIGINT and SIGTERM (drain, then stop),
//! SIGHUP (reload the static directory) and SIGUSR1 (reopen the access log,
//! logrotate's convention, as for nginx). The server's threads start with
//! them blocked, so that they are taken by `wait` in the thread that runs
//! [`Server::run_until_signal`](crate::Server::run_until_signal), instead
//! of killing the process wherever they land.

/// What a signal asks of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// SIGINT or SIGTERM: shut down gracefully.
    Stop(i32),
    /// SIGHUP: reload.
    Reload,
    /// SIGUSR1: reopen the access log.
    Reopen,
}

/// The set of signals the server answers.
fn server_signals() -> libc::sigset_t {
    // SAFETY: plain libc calls on a sigset_t owned here.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        set
    }
}

/// Blocks the server's signals in this thread, and so in every thread it
/// starts, until dropped, when the thread's previous mask comes back.
pub(crate) struct Blocked {
    previous: libc::sigset_t,
}

/// Blocks the server's signals in this thread, and so in every thread it
/// starts from now on; returns the mask before.
pub(crate) fn block() -> libc::sigset_t {
    let set = server_signals();
    // SAFETY: pthread_sigmask reads `set` and writes `previous`.
    unsafe {
        let mut previous: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut previous);
        previous
    }
}

impl Blocked {
    pub(crate) fn here() -> Blocked {
        Blocked { previous: block() }
    }

    /// Waits for one of the server's signals, which stay blocked here.
    pub(crate) fn wait(&self) -> Signal {
        let set = server_signals();
        let mut signal = 0;
        // SAFETY: sigwait reads the set and writes the signal number.
        while unsafe { libc::sigwait(&set, &mut signal) } != 0 {}
        match signal {
            libc::SIGHUP => Signal::Reload,
            libc::SIGUSR1 => Signal::Reopen,
            other => Signal::Stop(other),
        }
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved in `here`.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.previous, std::ptr::null_mut());
        }
    }
}

impl std::fmt::Debug for Blocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Blocked")
    }
}
