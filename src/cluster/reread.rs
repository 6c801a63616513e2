//! What the cluster reads from files again for each connection to NATS
//! (a key, a client certificate), as NATS' own clients do: the last good
//! copy, kept while the file cannot be read, and why it cannot, said once
//! rather than at every reconnect.

use std::sync::{Mutex, PoisonError};

use log::{info, warn};

/// The last good copy of something read from a file.
pub(crate) struct Reread<T> {
    /// What it is, for the log.
    what: &'static str,
    state: Mutex<State<T>>,
}

struct State<T> {
    last: T,
    failing: Option<String>,
}

impl<T: Clone> Reread<T> {
    /// `first`, as read at start.
    pub(crate) fn new(what: &'static str, first: T) -> Reread<T> {
        Reread {
            what,
            state: Mutex::new(State {
                last: first,
                failing: None,
            }),
        }
    }

    /// `fresh` (the file read again) when it could be read, else the last
    /// good copy.
    pub(crate) fn refresh(&self, fresh: Result<T, String>) -> T {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match fresh {
            Ok(fresh) => {
                if state.failing.take().is_some() {
                    info!("NATS: the {} reads again", self.what);
                }
                state.last = fresh;
            }
            Err(e) => {
                if state.failing.as_ref() != Some(&e) {
                    warn!("NATS: {e}; using the {} read before", self.what);
                    state.failing = Some(e);
                }
            }
        }
        state.last.clone()
    }

    /// Why the file could not be read the last time, if it could not.
    #[cfg(test)]
    fn failing(&self) -> Option<String> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.failing.clone()
    }

    /// The last good copy, not read again.
    pub(crate) fn last(&self) -> T {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.last.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_good_copy_while_reads_fail() {
        let file = Reread::new("key", 1);
        assert_eq!(file.refresh(Ok(2)), 2);
        assert_eq!(file.failing(), None);
        assert_eq!(file.refresh(Err("gone".into())), 2);
        assert_eq!(file.failing().as_deref(), Some("gone"));
        assert_eq!(file.refresh(Err("gone".into())), 2);
        assert_eq!(file.refresh(Err("still gone".into())), 2);
        assert_eq!(file.failing().as_deref(), Some("still gone"));
        assert_eq!(file.last(), 2);
        assert_eq!(file.refresh(Ok(3)), 3);
        assert_eq!(file.failing(), None);
        assert_eq!(file.last(), 3);
    }
}
