//! Integrity: every byte and the order of every message, on each path
//! where bytes cross a thread or wait for a socket, with sizes from one
//! byte to past the output high-water mark, readers that stall, and
//! senders on other pollers; in both dispatch modes, plain and over TLS.
//!
//! A short run here; `scripts/integrity.sh` runs the same tests for
//! minutes, over many seeds (`INTEGRITY_SEED`, `INTEGRITY_ROUNDS`).

mod common;

use std::sync::Arc;

use common::integrity::{
    client_frame, message, read_frame, rounds, seed, sizes, upgrade, Expected, Pace, Reader, Rng,
    Transport, Window,
};
use common::{start_with, wait_for_open};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{Dispatch, Message, Outgoing, Routes, WebSocket, WsContext, WsHandle};

/// The largest message a run sends: three times the high-water mark.
const MAX: usize = 200_000;
/// How far talkers may run ahead of the slowest member: well inside the
/// outbound limit (the 16 MiB message limit and 1 MiB), which would cut
/// the member off.
const WINDOW: u64 = 4 << 20;

/// What the room's members and talkers tell it.
#[derive(Debug)]
enum ToRoom {
    Join(WsHandle),
    Say(Outgoing),
}

/// Relays each message to every member through its handle: the mail of
/// connections on every poller, sent from whichever thread runs the room.
#[derive(Default)]
struct Room {
    members: Vec<WsHandle>,
}

impl AnyActor for Room {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        match envelope.message.downcast::<ToRoom>().map(|m| *m) {
            Ok(ToRoom::Join(member)) => {
                // Said to the member itself: its client knows it joined.
                assert!(member.send_text("joined"));
                self.members.push(member);
            }
            Ok(ToRoom::Say(message)) => {
                for member in &self.members {
                    assert!(member.send(message.clone()), "{member:?} took the message");
                }
            }
            Err(_) => {}
        }
    }
}

/// A member joins the room and only listens.
struct Member;

impl WebSocket for Member {
    fn on_open(&mut self, context: &mut WsContext<'_>) {
        let me = context.handle();
        context.send_to("room", ToRoom::Join(me));
    }

    fn on_message(&mut self, _message: Message<'_>, _context: &mut WsContext<'_>) {}
}

/// A talker says each of its messages to the room, and hears nothing.
struct Talker;

impl WebSocket for Talker {
    fn on_message(&mut self, message: Message<'_>, context: &mut WsContext<'_>) {
        if let Message::Text(text) = message {
            context.send_to("room", ToRoom::Say(Outgoing::text(text)));
        }
    }
}

/// Reads frames until every stream's messages came, checking each; the
/// frames are final text frames.
fn listen(mut reader: Reader, mut expected: Expected, window: (Arc<Window>, usize), name: String) {
    while expected.remaining() > 0 {
        let frame = read_frame(&mut reader);
        assert_eq!(frame.head, 0x81, "{name}: a final text frame");
        expected.check(&frame.payload, &name);
        window.0.received(window.1, frame.payload.len());
    }
}

/// A room whose members sit on both pollers, two of them reading slowly,
/// hears two talkers (one on each poller) through the room's mail: each
/// member gets every message of each talker, whole and in order.
fn room_mail_arrives_intact(dispatch: Dispatch, tls: bool) {
    let seed = seed();
    let transport = Transport::new(tls, &format!("room-{}-{tls}", dispatch.name()));
    let routes = Routes::new()
        .spawn("room", Room::default())
        .websocket("/chat", |_| Member)
        .websocket("/talk", |_| Talker);
    let server = start_with(&transport.config(dispatch), routes);
    let paces = [Pace::Fast, Pace::SLOW, Pace::Fast, Pace::SLOW];
    let members: Vec<Reader> = paces
        .iter()
        .map(|&pace| {
            let mut member = transport.connect(&server, pace);
            upgrade(&mut member, "/chat");
            let joined = read_frame(&mut member);
            assert_eq!(joined.payload, b"joined");
            member
        })
        .collect();
    let mut talkers: Vec<Reader> = (0..2)
        .map(|_| {
            let mut talker = transport.connect(&server, Pace::Fast);
            upgrade(&mut talker, "/talk");
            talker
        })
        .collect();
    wait_for_open(&server, 6);
    assert_eq!(server.connections_per_poller(), vec![3, 3], "both pollers");
    let mut rng = Rng::new(seed);
    let streams: Vec<Vec<usize>> = (0..2)
        .map(|_| sizes(&mut rng, 150 * rounds(), MAX))
        .collect();
    let window = Window::new(members.len(), WINDOW);
    let listeners: Vec<_> = members
        .into_iter()
        .enumerate()
        .map(|(i, member)| {
            let expected = Expected::new(streams.clone(), seed);
            let name = format!("member {i} ({:?})", paces[i]);
            let window = (Arc::clone(&window), i);
            std::thread::spawn(move || listen(member, expected, window, name))
        })
        .collect();
    let speakers: Vec<_> = talkers
        .drain(..)
        .zip(streams)
        .enumerate()
        .map(|(stream, (mut talker, sizes))| {
            let window = Arc::clone(&window);
            std::thread::spawn(move || {
                let mut rng = Rng::new(stream as u64);
                for (seq, len) in sizes.into_iter().enumerate() {
                    let text = message(stream as u32, seq as u32, len);
                    let mask = rng.next().to_le_bytes();
                    window.before_send(len);
                    talker.send(&client_frame(
                        1,
                        &text,
                        [mask[0], mask[1], mask[2], mask[3]],
                    ));
                }
                talker
            })
        })
        .collect();
    let _talkers: Vec<Reader> = speakers.into_iter().map(|t| t.join().unwrap()).collect();
    for listener in listeners {
        if let Err(panic) = listener.join() {
            std::panic::resume_unwind(panic);
        }
    }
}

fn room_mail_arrives_intact_plain(dispatch: Dispatch) {
    room_mail_arrives_intact(dispatch, false);
}

fn room_mail_arrives_intact_over_tls(dispatch: Dispatch) {
    room_mail_arrives_intact(dispatch, true);
}

in_both_modes!(
    room_mail_arrives_intact_plain,
    room_mail_arrives_intact_over_tls
);
