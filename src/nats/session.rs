//! One client session with a NATS server, without a socket: the caller
//! puts what it read into [`Session::input`], takes [`Event`]s out, and
//! writes what [`Session::output`] holds.
//!
//! A session opens as the protocol says: the server's `INFO`
//! ([`Event::Info`]: the caller starts TLS here if the URL or the server
//! asks for it), then the client's `CONNECT`, its subscriptions and a
//! `PING` ([`Session::connect`]); the server's `PONG` to that `PING`
//! means it took all of them ([`Event::Ready`]). Server `PING`s are
//! answered as they come. [`Session::keepalive`] pings a quiet server and
//! says when two pings went unanswered, as the official clients do: a
//! server that stopped (or a path that dropped) is found without waiting
//! for TCP.

use bytes::{BufMut, BytesMut};

use crate::nats::info::{connect_json, Credentials, ServerInfo, DEFAULT_MAX_PAYLOAD};
use crate::nats::proto::{self, Msg, ProtoError, ServerOp};

/// Where the session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Waiting for the server's `INFO`.
    AwaitInfo,
    /// `INFO` came; the caller has not sent `CONNECT` yet (TLS may be
    /// starting).
    Greeted,
    /// `CONNECT` and `PING` sent; waiting for the `PONG`.
    AwaitPong,
    /// Connected: messages flow.
    Ready,
}

/// What came from the server.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// The server's `INFO`: call [`Session::connect`] (after TLS, if
    /// needed).
    Info(ServerInfo),
    /// The server took the `CONNECT` and the subscriptions.
    Ready,
    /// A message for a subscription.
    Msg(Msg),
    /// `-ERR`, with the server's text. Most close the connection (the
    /// server says so by closing it); a permissions violation does not.
    ServerError(String),
}

/// Why a session cannot go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionError {
    /// The bytes were not the protocol.
    Protocol(ProtoError),
    /// The `INFO` could not be read.
    Info(String),
    /// Two pings went unanswered.
    Stale,
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionError::Protocol(e) => write!(f, "the server sent {e}"),
            SessionError::Info(e) => write!(f, "{e}"),
            SessionError::Stale => f.write_str("two pings went unanswered"),
        }
    }
}

/// Pings a quiet server may leave unanswered before the session is stale.
const MAX_PINGS_OUT: u32 = 2;

/// One session's state and buffers.
#[derive(Debug)]
pub(crate) struct Session {
    phase: Phase,
    info: Option<ServerInfo>,
    input: BytesMut,
    output: BytesMut,
    /// Our `PING`s not yet answered.
    pings_out: u32,
    /// `PONG`s owed to keepalive `PING`s sent before the one `subscribe`
    /// awaits.
    pongs_owed: u32,
    /// When anything last came from the server, in ms.
    heard_ms: u64,
}

impl Session {
    /// A session for a connection just made, at `now_ms`.
    pub(crate) fn new(now_ms: u64) -> Session {
        Session {
            phase: Phase::AwaitInfo,
            info: None,
            input: BytesMut::new(),
            output: BytesMut::new(),
            pings_out: 0,
            pongs_owed: 0,
            heard_ms: now_ms,
        }
    }

    pub(crate) fn phase(&self) -> Phase {
        self.phase
    }

    /// The server's `INFO`, once it came.
    pub(crate) fn info(&self) -> Option<&ServerInfo> {
        self.info.as_ref()
    }

    /// The largest payload (headers included) the server takes.
    pub(crate) fn max_payload(&self) -> usize {
        self.info
            .as_ref()
            .map_or(DEFAULT_MAX_PAYLOAD, |info| info.max_payload)
    }

    /// Where the caller puts what it read.
    pub(crate) fn input(&mut self) -> &mut BytesMut {
        &mut self.input
    }

    /// What the caller must write, in order.
    pub(crate) fn output(&mut self) -> &mut BytesMut {
        &mut self.output
    }

    /// How many bytes the caller has still to write.
    pub(crate) fn output_len(&self) -> usize {
        self.output.len()
    }

    /// Something came from the server at `now_ms`.
    pub(crate) fn heard(&mut self, now_ms: u64) {
        self.heard_ms = now_ms;
    }

    /// The next thing the server said, if a whole one is in the input.
    pub(crate) fn poll_event(&mut self) -> Result<Option<Event>, SessionError> {
        loop {
            // A message may be as large as max_payload, plus its headers'
            // share (counted in it) and nothing else.
            let limit = self.max_payload();
            let Some(op) = proto::parse(&mut self.input, limit).map_err(SessionError::Protocol)?
            else {
                return Ok(None);
            };
            match op {
                ServerOp::Info(json) => {
                    let info = ServerInfo::parse(&json).map_err(SessionError::Info)?;
                    self.info = Some(info.clone());
                    if self.phase == Phase::AwaitInfo {
                        self.phase = Phase::Greeted;
                        return Ok(Some(Event::Info(info)));
                    }
                    // Later INFOs update the cluster's view; nothing to do.
                }
                ServerOp::Ping => self.output.put_slice(proto::PONG),
                ServerOp::Pong => {
                    if self.phase == Phase::AwaitPong && self.pongs_owed > 0 {
                        self.pongs_owed -= 1;
                        continue;
                    }
                    if self.phase == Phase::AwaitPong {
                        self.phase = Phase::Ready;
                        self.pings_out = 0;
                        return Ok(Some(Event::Ready));
                    }
                    self.pings_out = self.pings_out.saturating_sub(1);
                }
                ServerOp::Ok => {}
                ServerOp::Err(text) => return Ok(Some(Event::ServerError(text))),
                ServerOp::Msg(msg) => return Ok(Some(Event::Msg(msg))),
            }
        }
    }

    /// Writes `CONNECT` as `name` with `credentials`, then what
    /// `subscribe` writes (the subscriptions, every one of them again on a
    /// new connection), then the `PING` whose `PONG` makes it ready.
    pub(crate) fn connect(
        &mut self,
        name: &str,
        credentials: &Credentials,
        tls: bool,
        subscribe: impl FnOnce(&mut BytesMut),
    ) {
        proto::write_connect(&mut self.output, &connect_json(name, credentials, tls));
        subscribe(&mut self.output);
        self.output.put_slice(proto::PING);
        self.phase = Phase::AwaitPong;
    }

    /// Once ready: writes what `subscribe` writes (more subscriptions),
    /// then a `PING` whose `PONG` says the server took them: the session
    /// awaits it as it awaited the first, and says [`Event::Ready`] again.
    pub(crate) fn subscribe(&mut self, subscribe: impl FnOnce(&mut BytesMut)) {
        subscribe(&mut self.output);
        self.output.put_slice(proto::PING);
        self.phase = Phase::AwaitPong;
        self.pongs_owed = std::mem::take(&mut self.pings_out);
    }

    /// At `now_ms`, with the server quiet for `interval_ms`: pings it, or
    /// says it is stale when two pings went unanswered.
    pub(crate) fn keepalive(&mut self, now_ms: u64, interval_ms: u64) -> Result<(), SessionError> {
        if self.phase != Phase::Ready || now_ms.saturating_sub(self.heard_ms) < interval_ms {
            return Ok(());
        }
        if self.pings_out >= MAX_PINGS_OUT {
            return Err(SessionError::Stale);
        }
        self.pings_out += 1;
        // The next ping waits another interval.
        self.heard_ms = now_ms;
        self.output.put_slice(proto::PING);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(session: &mut Session, bytes: &[u8]) -> Vec<Event> {
        session.input().extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(event) = session.poll_event().unwrap() {
            events.push(event);
        }
        events
    }

    #[test]
    fn subscriptions_made_later_are_ready_at_their_own_pong() {
        let mut session = Session::new(0);
        feed(&mut session, b"INFO {\"headers\":true}\r\n");
        session.connect("a", &Credentials::default(), false, |_| {});
        assert_eq!(feed(&mut session, b"PONG\r\n"), vec![Event::Ready]);
        session.output().clear();
        // A keepalive PING is out when the subscriptions go.
        session.keepalive(10_000, 2_000).unwrap();
        session.subscribe(|out| proto::write_sub(out, b"y", None, 7));
        assert_eq!(&session.output()[..], b"PING\r\nSUB y 7\r\nPING\r\n");
        assert_eq!(session.phase(), Phase::AwaitPong);
        // The keepalive's PONG first: not yet.
        assert_eq!(feed(&mut session, b"PONG\r\n"), vec![]);
        assert_eq!(session.phase(), Phase::AwaitPong);
        assert_eq!(feed(&mut session, b"PONG\r\n"), vec![Event::Ready]);
        assert_eq!(session.phase(), Phase::Ready);
        // Nothing is owed any more: a later ping is answered as usual.
        assert_eq!(feed(&mut session, b"PONG\r\n"), vec![]);
        assert_eq!(session.phase(), Phase::Ready);
    }

    #[test]
    fn opens_as_the_protocol_says() {
        let mut session = Session::new(0);
        let events = feed(
            &mut session,
            b"INFO {\"max_payload\":64,\"headers\":true}\r\nPI",
        );
        assert!(matches!(&events[..], [Event::Info(info)] if info.max_payload == 64));
        assert_eq!(session.phase(), Phase::Greeted);
        session.connect("a", &Credentials::default(), false, |out| {
            proto::write_sub(out, b"x", None, 1)
        });
        let written = String::from_utf8(session.output().split().to_vec()).unwrap();
        assert!(written.starts_with("CONNECT {"), "{written}");
        assert!(written.ends_with("}\r\nSUB x 1\r\nPING\r\n"), "{written}");
        // The server's PING is answered; its PONG makes the session ready.
        assert_eq!(feed(&mut session, b"NG\r\nPONG\r\n"), vec![Event::Ready]);
        assert_eq!(&session.output()[..], b"PONG\r\n");
        // A message exactly at max_payload is; one byte past it is not.
        let at = format!("MSG x 1 64\r\n{}\r\n", "m".repeat(64));
        let events = feed(&mut session, at.as_bytes());
        assert!(
            matches!(&events[..], [Event::Msg(msg)] if msg.payload.len() == 64),
            "{events:?}"
        );
        session.input().extend_from_slice(b"MSG x 1 65\r\n");
        assert!(matches!(
            session.poll_event(),
            Err(SessionError::Protocol(ProtoError::TooLarge(65)))
        ));
    }

    /// A session made ready at time 0, its output empty.
    fn ready() -> Session {
        let mut session = Session::new(0);
        feed(&mut session, b"INFO {}\r\n");
        session.connect("a", &Credentials::default(), false, |_| {});
        feed(&mut session, b"PONG\r\n");
        session.output().clear();
        session
    }

    /// A minute of a link with nothing to say, the clock stepped a
    /// millisecond at a time: with a 2 s interval it pings at 2 s, 4 s,
    /// … 60 s exactly, the server answering each at once; while the
    /// server is heard from every 1.5 s, never; a server that answers
    /// nothing is pinged at 2 s and 4 s and stale at 6 s exactly.
    #[test]
    fn a_minute_of_keepalive_on_an_idle_link() {
        let mut session = ready();
        let mut pinged = Vec::new();
        for now_ms in 0..=60_000 {
            assert_eq!(session.keepalive(now_ms, 2_000), Ok(()));
            if !session.output().is_empty() {
                assert_eq!(&session.output().split()[..], b"PING\r\n");
                pinged.push(now_ms);
                session.heard(now_ms);
                assert!(feed(&mut session, b"PONG\r\n").is_empty());
            }
        }
        assert_eq!(pinged, (1..=30).map(|n| n * 2_000).collect::<Vec<u64>>());

        let mut session = ready();
        for now_ms in 0..=60_000 {
            if now_ms % 1_500 == 0 {
                session.heard(now_ms);
            }
            assert_eq!(session.keepalive(now_ms, 2_000), Ok(()));
            assert!(session.output().is_empty(), "pinged at {now_ms} ms");
        }

        let mut session = ready();
        let mut pinged = Vec::new();
        let stale = (0..=60_000).find(|&now_ms| match session.keepalive(now_ms, 2_000) {
            Ok(()) => {
                if !session.output().is_empty() {
                    session.output().clear();
                    pinged.push(now_ms);
                }
                false
            }
            Err(e) => {
                assert_eq!(e, SessionError::Stale);
                true
            }
        });
        assert_eq!(pinged, [2_000, 4_000]);
        assert_eq!(stale, Some(6_000));
    }

    #[test]
    fn a_quiet_server_is_pinged_then_stale() {
        let mut session = Session::new(0);
        feed(&mut session, b"INFO {}\r\n");
        session.connect("a", &Credentials::default(), false, |_| {});
        feed(&mut session, b"PONG\r\n");
        session.output().clear();
        assert_eq!(session.keepalive(500, 1000), Ok(()));
        assert!(session.output().is_empty(), "not quiet long enough");
        assert_eq!(session.keepalive(1000, 1000), Ok(()));
        assert_eq!(&session.output().split()[..], b"PING\r\n");
        // Answered: the count goes back down.
        feed(&mut session, b"PONG\r\n");
        session.heard(1500);
        assert_eq!(session.keepalive(2500, 1000), Ok(()));
        assert_eq!(session.keepalive(3500, 1000), Ok(()));
        assert_eq!(session.keepalive(4500, 1000), Err(SessionError::Stale));
    }
}
