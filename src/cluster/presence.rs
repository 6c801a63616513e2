//! One name, one node: a server finds out at join whether another live
//! server already uses its node name, and one of the two stands down.
//!
//! Two servers with one name would each take half of what is sent to
//! `name@node`, and each would drop the other's room messages as its own
//! (a topic's message from one's own node is not handed on again): a
//! room split in silence. So poller 0's link subscribes to the node's
//! presence subject (`PREFIX.n.NODE`, no queue group) and, each time it is
//! ready, publishes its [`Claim`] there with its own answer subject as the
//! reply. Whoever else holds the subject answers with its claim, and both
//! judge the pair with [`Claim::outranks`]; the one outranked stands down.
//!
//! Why two servers started in the same second cannot both win: each
//! subscribes before it publishes, so of the two probes at least one is
//! published after the other server's subscription, and that server hears
//! it and answers; the prober hears the answer. Both then hold the same
//! two claims (each judges an exchange against the claim it sent in it,
//! not against what it says of itself by then) and judge them the same
//! way, and the order is total. A probe nobody else holds the subject of
//! is answered by NATS itself ("no responders"), which says nothing.
//!
//! The probe's window opens when NATS answers the `PING` sent after it
//! (it has then handed the probe to every other subscriber) and closes a
//! moment later; a rival slower than that is still heard later, and the
//! newer of the two then leaves the cluster instead of refusing to start.
//! Until the name is held, poller 0 subscribes to nothing of the node's
//! and the other pollers do not connect, so nothing sent to the node is
//! taken by a server that may not keep its name.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long after NATS took the probe other servers' answers are waited
/// for before the name is taken as this server's.
pub(crate) const WINDOW_MS: u64 = 250;
/// How long NATS may take to answer the probe's `PING` before the
/// connection is dropped (and made again).
pub(crate) const ECHO_TIMEOUT_MS: u64 = 2_000;

/// The first line of every claim, so that nothing else is taken for one.
const MAGIC: &str = "upc-node 1";

/// What one server says of itself under its node name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claim {
    /// This process's nonce (fresh at each start).
    pub(crate) nonce: u64,
    /// When the process joined, in ms since the Unix epoch.
    pub(crate) started_ms: u64,
    /// It has held the name (its probe's window closed unopposed).
    pub(crate) joined: bool,
    pub(crate) pid: u32,
    pub(crate) host: String,
    /// Where it listens (its first listener), for the operator.
    pub(crate) listen: String,
}

impl Claim {
    /// The claim as its message's payload.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut text = String::with_capacity(128);
        let _ = write!(
            text,
            "{MAGIC}\nnonce {:x}\nstarted {}\njoined {}\npid {}\nhost {}\nlisten {}\n",
            self.nonce,
            self.started_ms,
            u8::from(self.joined),
            self.pid,
            one_line(&self.host),
            one_line(&self.listen),
        );
        text.into_bytes()
    }

    /// A claim from a message's payload; `None` for anything that is not
    /// one whole (a field missing or unreadable).
    pub(crate) fn decode(payload: &[u8]) -> Option<Claim> {
        let text = std::str::from_utf8(payload).ok()?;
        let mut lines = text.lines();
        if lines.next()? != MAGIC {
            return None;
        }
        let (mut nonce, mut started, mut joined, mut pid) = (None, None, None, None);
        let (mut host, mut listen) = (None, None);
        for line in lines {
            let (key, value) = line.split_once(' ').unwrap_or((line, ""));
            match key {
                "nonce" => nonce = u64::from_str_radix(value, 16).ok(),
                "started" => started = value.parse().ok(),
                "joined" => {
                    joined = match value {
                        "0" => Some(false),
                        "1" => Some(true),
                        _ => None,
                    }
                }
                "pid" => pid = value.parse().ok(),
                "host" => host = Some(value.to_string()),
                "listen" => listen = Some(value.to_string()),
                // A later version's field.
                _ => {}
            }
        }
        Some(Claim {
            nonce: nonce?,
            started_ms: started?,
            joined: joined?,
            pid: pid?,
            host: host?,
            listen: listen?,
        })
    }

    /// Whether this claim keeps the name over `other`'s: one that has
    /// held it over one still asking, then the server up longer, then the
    /// smaller nonce. A total order, so both servers of a pair judge
    /// alike.
    pub(crate) fn outranks(&self, other: &Claim) -> bool {
        let rank = |claim: &Claim| (!claim.joined, claim.started_ms, claim.nonce);
        rank(self) < rank(other)
    }

    /// The server behind the claim, for an operator.
    pub(crate) fn describe(&self) -> String {
        format!(
            "host {}, pid {}, listening on {}, started {} ms after the epoch",
            self.host, self.pid, self.listen, self.started_ms
        )
    }
}

/// `text` with no line breaks, so a field stays one line.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

/// Where the node's name stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Not known yet: the first connect is under way, or the probe's
    /// window is open.
    Pending,
    /// The first connect failed: the server serves local routes and asks
    /// once NATS is reached.
    Unreachable,
    /// The name is this server's.
    Joined,
    /// Another server keeps the name: this one has left the cluster.
    Taken(String),
}

/// The verdict, as every thread of the server sees it: set by poller 0's
/// link, waited on by `Server::start`, read by the other links each
/// round.
pub(crate) struct Presence {
    verdict: Mutex<Verdict>,
    changed: Condvar,
    /// `Verdict::Taken`, read each round without the lock.
    taken: AtomicBool,
}

impl Presence {
    pub(crate) fn new() -> Presence {
        Presence {
            verdict: Mutex::new(Verdict::Pending),
            changed: Condvar::new(),
            taken: AtomicBool::new(false),
        }
    }

    /// Moves the verdict on: `Taken` is final, `Joined` follows anything
    /// but it, `Unreachable` only follows `Pending`.
    pub(crate) fn set(&self, verdict: Verdict) {
        let mut now = self.verdict.lock().unwrap_or_else(|e| e.into_inner());
        let moves = match (&*now, &verdict) {
            (Verdict::Taken(_), _) => false,
            (_, Verdict::Taken(_)) | (_, Verdict::Joined) => true,
            (Verdict::Pending, Verdict::Unreachable) => true,
            _ => false,
        };
        if moves {
            if let Verdict::Taken(_) = verdict {
                self.taken.store(true, Ordering::Release);
            }
            *now = verdict;
            self.changed.notify_all();
        }
    }

    pub(crate) fn verdict(&self) -> Verdict {
        self.verdict
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The name has been this server's.
    pub(crate) fn joined(&self) -> bool {
        self.verdict() == Verdict::Joined
    }

    /// Another server keeps the name.
    pub(crate) fn is_taken(&self) -> bool {
        self.taken.load(Ordering::Acquire)
    }

    /// Waits while the verdict is pending, at most `timeout`; the verdict
    /// then.
    pub(crate) fn wait(&self, timeout: Duration) -> Verdict {
        let until = Instant::now() + timeout;
        let mut now = self.verdict.lock().unwrap_or_else(|e| e.into_inner());
        while *now == Verdict::Pending {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            now = match self.changed.wait_timeout(now, left) {
                Ok((guard, _)) => guard,
                Err(e) => e.into_inner().0,
            };
        }
        now.clone()
    }
}

/// Poller 0's probe of its name on one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probe {
    /// Sent at this time; NATS has not said it took it yet.
    Sent { at_ms: u64 },
    /// Taken by NATS: the window closes at this time.
    Back { until_ms: u64 },
}

impl Probe {
    /// When the probe next needs its link: its echo's timeout, or the
    /// window's end.
    pub(crate) fn deadline_ms(self) -> u64 {
        match self {
            Probe::Sent { at_ms } => at_ms + ECHO_TIMEOUT_MS,
            Probe::Back { until_ms } => until_ms,
        }
    }

    /// NATS took the probe (answered the `PING` after it).
    pub(crate) fn echoed(self, now_ms: u64) -> Probe {
        match self {
            Probe::Sent { .. } => Probe::Back {
                until_ms: now_ms + WINDOW_MS,
            },
            back => back,
        }
    }
}

/// What a server says when it stands down for `other`.
pub(crate) fn taken_message(node: &str, other: &Claim) -> String {
    format!(
        "node name {node:?} is taken: another server in the cluster uses it ({}); give each server its own --node",
        other.describe()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(nonce: u64, started_ms: u64, joined: bool) -> Claim {
        Claim {
            nonce,
            started_ms,
            joined,
            pid: 4242,
            host: "box".into(),
            listen: "127.0.0.1:9000".into(),
        }
    }

    #[test]
    fn a_claim_reads_back_as_written() {
        let written = claim(0xdead_beef_0000_0001, 1_765_000_000_123, true);
        let bytes = written.encode();
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            "upc-node 1\nnonce deadbeef00000001\nstarted 1765000000123\njoined 1\npid 4242\nhost box\nlisten 127.0.0.1:9000\n"
        );
        assert_eq!(Claim::decode(&bytes), Some(written));
        let mut broken = claim(1, 2, false);
        broken.host = "a\nb".into();
        assert_eq!(Claim::decode(&broken.encode()).unwrap().host, "a b");
    }

    #[test]
    fn anything_but_a_whole_claim_is_none() {
        let whole = String::from_utf8(claim(1, 2, false).encode()).unwrap();
        assert!(Claim::decode(whole.as_bytes()).is_some());
        assert_eq!(Claim::decode(b""), None);
        assert_eq!(Claim::decode(b"\xff\xfe"), None);
        assert_eq!(
            Claim::decode(whole.replace("upc-node 1", "upc-node 2").as_bytes()),
            None
        );
        for field in ["nonce", "started", "joined", "pid", "host", "listen"] {
            let without: String = whole
                .lines()
                .filter(|line| !line.starts_with(field))
                .map(|line| format!("{line}\n"))
                .collect();
            assert_eq!(Claim::decode(without.as_bytes()), None, "{field}");
        }
        for bad in ["nonce xyz", "started -1", "joined 2", "pid x"] {
            let (field, _) = bad.split_once(' ').unwrap();
            let line = whole.lines().find(|l| l.starts_with(field)).unwrap();
            let text = whole.replace(line, bad);
            assert_eq!(Claim::decode(text.as_bytes()), None, "{bad}");
        }
        let later = format!("{whole}zone eu-1\n");
        assert!(Claim::decode(later.as_bytes()).is_some(), "a later field");
    }

    #[test]
    fn a_refusal_names_the_other_server() {
        let other = claim(1, 1_765_000_000_123, true);
        assert_eq!(
            taken_message("web-1", &other),
            "node name \"web-1\" is taken: another server in the cluster uses it (host box, \
             pid 4242, listening on 127.0.0.1:9000, started 1765000000123 ms after the epoch); \
             give each server its own --node"
        );
    }

    #[test]
    fn the_name_goes_to_the_holder_then_the_elder_then_the_smaller_nonce() {
        let holder = claim(9, 500, true);
        let elder = claim(9, 100, false);
        let younger = claim(1, 200, false);
        assert!(holder.outranks(&elder), "a holder over an elder asking");
        assert!(!elder.outranks(&holder));
        assert!(elder.outranks(&younger), "started first");
        assert!(!younger.outranks(&elder));
        let twin = claim(2, 100, false);
        assert!(twin.outranks(&elder), "the same ms: the smaller nonce");
        assert!(!elder.outranks(&twin));
        let old_holder = claim(7, 100, true);
        assert!(old_holder.outranks(&holder), "two holders: the elder");
        assert!(!holder.outranks(&old_holder));
        assert!(!holder.outranks(&holder), "no claim outranks itself");
    }

    #[test]
    fn taken_is_final_and_unreachable_only_follows_pending() {
        let presence = Presence::new();
        assert_eq!(presence.verdict(), Verdict::Pending);
        assert!(!presence.joined());
        presence.set(Verdict::Unreachable);
        assert_eq!(presence.verdict(), Verdict::Unreachable);
        assert!(!presence.joined(), "not reached is not held");
        presence.set(Verdict::Joined);
        assert!(presence.joined());
        presence.set(Verdict::Unreachable);
        assert_eq!(
            presence.verdict(),
            Verdict::Joined,
            "a later failed connect"
        );
        assert!(!presence.is_taken());
        presence.set(Verdict::Taken("x".into()));
        assert!(presence.is_taken());
        assert!(!presence.joined(), "taken is not held");
        presence.set(Verdict::Joined);
        presence.set(Verdict::Taken("y".into()));
        assert_eq!(presence.verdict(), Verdict::Taken("x".into()));
    }

    #[test]
    fn waiting_ends_at_a_verdict_or_the_timeout() {
        let presence = std::sync::Arc::new(Presence::new());
        assert_eq!(presence.wait(Duration::from_millis(1)), Verdict::Pending);
        let setter = std::sync::Arc::clone(&presence);
        let thread = std::thread::spawn(move || setter.set(Verdict::Joined));
        assert_eq!(presence.wait(Duration::from_secs(60)), Verdict::Joined);
        thread.join().unwrap();
        let started = Instant::now();
        assert_eq!(presence.wait(Duration::from_secs(60)), Verdict::Joined);
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no wait once set"
        );
    }

    #[test]
    fn a_probe_waits_for_its_echo_then_for_the_window() {
        let sent = Probe::Sent { at_ms: 1_000 };
        assert_eq!(sent.deadline_ms(), 1_000 + ECHO_TIMEOUT_MS);
        let back = sent.echoed(1_010);
        assert_eq!(
            back,
            Probe::Back {
                until_ms: 1_010 + WINDOW_MS
            }
        );
        assert_eq!(back.deadline_ms(), 1_010 + WINDOW_MS);
        assert_eq!(back.echoed(1_100), back, "a second echo moves nothing");
    }
}
