//! The durability bookkeeping of one durable actor: which changes are
//! durable, which write is in flight, and which answers wait for which
//! change.
//!
//! Each change to the state is an *epoch*. An answer depends on every
//! change made before it was given, so it is held until the newest epoch
//! at that moment is durable, and leaves at once when that epoch already
//! is. At most one write is in flight: changes made meanwhile are not
//! written one by one, but together by the next write, which writes the
//! state as it is then (the newest epoch). So a busy actor pays one write
//! per round trip to the store, not one per message, and the store's own
//! group commit (the embedded file's one transaction for every write that
//! arrived while the last one committed; JetStream's pipelined acks) does
//! the same across actors. A failed write fails every answer held, and the
//! changes since the last durable epoch are undone by the caller.

use std::collections::VecDeque;

/// The epochs and the held answers `A` of one actor.
#[derive(Debug)]
pub(crate) struct Book<A> {
    /// The newest change's epoch (0: the state as loaded).
    latest: u64,
    /// The newest epoch the store has made durable.
    durable: u64,
    /// The epoch of the write in flight, if one is.
    in_flight: Option<u64>,
    /// Answers, in the order given, each with the epoch it waits for.
    held: VecDeque<(u64, A)>,
}

impl<A> Default for Book<A> {
    fn default() -> Self {
        Book {
            latest: 0,
            durable: 0,
            in_flight: None,
            held: VecDeque::new(),
        }
    }
}

impl<A> Book<A> {
    /// The state changed.
    pub(crate) fn changed(&mut self) {
        self.latest += 1;
    }

    /// An answer given now: back at once when every change so far is
    /// durable, else held until it is.
    pub(crate) fn answer(&mut self, answer: A) -> Option<A> {
        if self.latest == self.durable {
            return Some(answer);
        }
        self.held.push_back((self.latest, answer));
        None
    }

    /// The write to start now, if one is due (changes not yet durable,
    /// and no write in flight): the epoch it makes durable, which is the
    /// newest. The caller writes the state as it is now.
    pub(crate) fn next_write(&mut self) -> Option<u64> {
        if self.in_flight.is_some() || self.latest == self.durable {
            return None;
        }
        self.in_flight = Some(self.latest);
        self.in_flight
    }

    /// The write in flight, of `epoch`, is durable: the answers it lets
    /// go, in the order they were given.
    pub(crate) fn committed(&mut self, epoch: u64) -> Vec<A> {
        self.in_flight = None;
        self.durable = self.durable.max(epoch);
        let mut released = Vec::new();
        while self.held.front().is_some_and(|&(e, _)| e <= self.durable) {
            released.extend(self.held.pop_front().map(|(_, answer)| answer));
        }
        released
    }

    /// The write in flight failed: the changes since the last durable
    /// epoch are lost (the caller puts the durable state back), and every
    /// answer held depended on them.
    pub(crate) fn failed(&mut self) -> Vec<A> {
        self.in_flight = None;
        self.latest = self.durable;
        self.held.drain(..).map(|(_, answer)| answer).collect()
    }

    /// Every change is durable and nothing waits.
    #[cfg(test)]
    pub(crate) fn is_clean(&self) -> bool {
        self.latest == self.durable && self.held.is_empty()
    }

    /// Answers held now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_with_nothing_pending_leaves_at_once() {
        let mut book = Book::default();
        assert_eq!(book.answer(1), Some(1));
        assert_eq!(book.next_write(), None, "nothing to write");
        assert!(book.is_clean());
    }

    #[test]
    fn an_answer_waits_for_the_change_before_it() {
        let mut book = Book::default();
        book.changed();
        assert_eq!(book.answer("a"), None);
        assert_eq!(book.held(), 1);
        assert_eq!(book.next_write(), Some(1));
        assert_eq!(book.next_write(), None, "one write in flight");
        assert_eq!(book.committed(1), vec!["a"]);
        assert!(book.is_clean());
    }

    #[test]
    fn changes_during_a_write_go_together_in_the_next() {
        let mut book = Book::default();
        book.changed();
        assert_eq!(book.answer(1), None);
        assert_eq!(book.next_write(), Some(1));
        // Three more messages while the first write is in flight.
        for answer in [2, 3, 4] {
            book.changed();
            assert_eq!(book.answer(answer), None);
            assert_eq!(book.next_write(), None);
        }
        // A read after them waits for them too.
        assert_eq!(book.answer(5), None);
        assert_eq!(book.committed(1), vec![1]);
        assert_eq!(book.next_write(), Some(4), "one write for the three");
        assert_eq!(book.committed(4), vec![2, 3, 4, 5]);
        assert!(book.is_clean());
    }

    #[test]
    fn a_read_during_a_write_waits_for_it() {
        let mut book = Book::default();
        book.changed();
        assert_eq!(book.next_write(), Some(1));
        assert_eq!(book.answer("read"), None, "it saw the unwritten change");
        assert_eq!(book.committed(1), vec!["read"]);
    }

    #[test]
    fn a_failed_write_fails_every_held_answer_and_forgets_the_changes() {
        let mut book = Book::default();
        book.changed();
        assert_eq!(book.answer(1), None);
        assert_eq!(book.next_write(), Some(1));
        book.changed();
        assert_eq!(book.answer(2), None);
        assert_eq!(book.failed(), vec![1, 2]);
        assert!(book.is_clean(), "back at the durable state");
        assert_eq!(book.next_write(), None);
        // And it goes on from there.
        book.changed();
        assert_eq!(book.next_write(), Some(1));
        assert_eq!(book.answer(3), None);
        assert_eq!(book.committed(1), vec![3]);
    }

    #[test]
    fn only_answers_up_to_the_durable_epoch_leave() {
        let mut book = Book::default();
        book.changed();
        assert_eq!(book.answer('a'), None);
        assert_eq!(book.next_write(), Some(1));
        book.changed();
        assert_eq!(book.answer('b'), None);
        assert_eq!(book.committed(1), vec!['a']);
        assert_eq!(book.held(), 1);
        assert!(!book.is_clean());
    }
}
