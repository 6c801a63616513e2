//! Integrity of WebSocket mail: every byte and the order of every
//! message, on each path by which bytes reach a WebSocket client from
//! another thread (a room's broadcast through `WsHandle`s, `send_to` a
//! `ws/N` address from another connection's actor, `Server::send` to it,
//! `WsHandle::send` from a thread of the program's own), with sizes from
//! one byte to past the output high-water mark, readers that stall, and
//! senders on other pollers; in both dispatch modes, plain and over TLS.
//! HTTP's paths are `tests/integrity_http.rs`.
//!
//! A short run here; `scripts/integrity.sh` runs the same tests for
//! minutes, over many seeds (`INTEGRITY_SEED`, `INTEGRITY_ROUNDS`).

mod common;

use std::sync::{mpsc, Arc};

use common::integrity::{
    client_frame, message, read_frame, rounds, seed, sizes, upgrade, Expected, Pace, Reader, Rng,
    Transport, Window,
};
use common::integrity_ws::{listen, relay_command, text_message, Deliver, Relay, Target, ToFeeder};
use common::{start_with, wait_for_open, Failures};
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
/// A handle that refuses is reported to the test thread.
struct Room {
    members: Vec<WsHandle>,
    failures: Failures,
}

impl AnyActor for Room {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        match envelope.message.downcast::<ToRoom>().map(|m| *m) {
            Ok(ToRoom::Join(member)) => {
                // Said to the member itself: its client knows it joined.
                if !member.send_text("joined") {
                    self.failures
                        .report(format!("the room could not tell {member:?} it joined"));
                }
                self.members.push(member);
            }
            Ok(ToRoom::Say(message)) => {
                for member in &self.members {
                    if !member.send(message.clone()) {
                        self.failures
                            .report(format!("{member:?} did not take the room's message"));
                    }
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
        context.send_to("room", ToRoom::Join(me)).unwrap();
    }

    fn on_message(&mut self, _message: Message<'_>, _context: &mut WsContext<'_>) {}
}

/// A talker says each of its messages to the room, and hears nothing.
struct Talker;

impl WebSocket for Talker {
    fn on_message(&mut self, message: Message<'_>, context: &mut WsContext<'_>) {
        if let Message::Text(text) = message {
            context
                .send_to("room", ToRoom::Say(Outgoing::text(text)))
                .unwrap();
        }
    }
}

/// A room whose members sit on both pollers, two of them reading slowly,
/// hears two talkers (one on each poller) through the room's mail: each
/// member gets every message of each talker, whole and in order.
fn room_mail_arrives_intact(dispatch: Dispatch, tls: bool) {
    let seed = seed();
    let transport = Transport::new(tls, &format!("room-{}-{tls}", dispatch.name()));
    let failures = Failures::default();
    let room = Room {
        members: Vec::new(),
        failures: failures.clone(),
    };
    let routes = Routes::new()
        .spawn("room", room)
        .websocket("/chat", |_| Member)
        .websocket("/talk", |_| Talker);
    let server = start_with(&transport.config(dispatch), routes);
    let paces = [Pace::Fast, Pace::SLOW, Pace::Fast, Pace::SLOW];
    let members: Vec<Reader> = paces
        .iter()
        .map(|&pace| {
            let mut member = transport.connect(&server, pace);
            upgrade(&mut member, "/chat");
            let joined = failures.during(|| read_frame(&mut member));
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
            std::thread::spawn(move || listen(member, expected, Some(window), name))
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
    let _talkers: Vec<Reader> = speakers.into_iter().map(|t| failures.join(t)).collect();
    for listener in listeners {
        failures.join(listener);
    }
}

fn room_mail_arrives_intact_plain(dispatch: Dispatch) {
    room_mail_arrives_intact(dispatch, false);
}

fn room_mail_arrives_intact_over_tls(dispatch: Dispatch) {
    room_mail_arrives_intact(dispatch, true);
}

/// The check itself: every stream's messages, in order, interleaved in
/// any way the room may relay them, are all taken. Messages of a few
/// bytes, so that the two streams' next messages are often the same
/// length: the check once credited a message to the wrong stream when
/// both streams' next ones were the same bytes, and failed on the message
/// after.
#[test]
fn the_check_takes_any_interleaving_of_the_streams() {
    for seed in 0..100 {
        let mut rng = Rng::new(seed);
        let streams: Vec<Vec<usize>> = (0..2).map(|_| sizes(&mut rng, 150, 4)).collect();
        let mut expected = Expected::new(streams.clone(), seed);
        let mut sent = vec![0; streams.len()];
        while expected.remaining() > 0 {
            let stream = rng.below(streams.len() as u64) as usize;
            let Some(&len) = streams[stream].get(sent[stream]) else {
                continue;
            };
            let got = common::integrity::message(stream as u32, sent[stream] as u32, len);
            expected.check(&got, &format!("seed {seed}"));
            sent[stream] += 1;
        }
    }
}

in_both_modes!(
    room_mail_arrives_intact_plain,
    room_mail_arrives_intact_over_tls
);

/// The streams each target hears, by who sends them.
const RELAYED: [usize; 2] = [0, 1];
const BY_SERVER_SEND: usize = 2;
const BY_HANDLE: usize = 3;

/// Two targets, one on each poller, both reading slowly, are mailed four
/// streams at once: one from a relay on each poller (`send_to` a `ws/N`
/// address: the target's `on_mail` writes it, so one of the two crosses
/// pollers), one through `Server::send` to their addresses from a test
/// thread, and one through their `WsHandle`s from another test thread.
/// Each target gets every message of every stream, whole and in order.
fn mail_from_every_sender_arrives_intact(dispatch: Dispatch, tls: bool) {
    let seed = seed();
    let transport = Transport::new(tls, &format!("mail-{}-{tls}", dispatch.name()));
    let (feeder, opened) = mpsc::channel();
    let routes = Routes::new()
        .websocket("/target", move |_| Target {
            feeder: feeder.clone(),
        })
        .websocket("/relay", |_| Relay::default());
    let server = start_with(&transport.config(dispatch), routes);
    // Opened one after another, each pair splits over the two pollers.
    let mut targets = Vec::new();
    let mut addresses = Vec::new();
    for _ in 0..2 {
        let mut target = transport.connect(&server, Pace::SLOW);
        upgrade(&mut target, "/target");
        let address = read_frame(&mut target).payload;
        addresses.push(String::from_utf8(address).expect("an address"));
        targets.push(target);
    }
    let mut by_handle: Vec<WsHandle> = (0..2)
        .map(|_| match opened.recv_timeout(common::IO_TIMEOUT) {
            Ok(ToFeeder::Opened(handle)) => handle,
            other => panic!("a target's handle, not {other:?}"),
        })
        .collect();
    by_handle.sort_by_key(|handle| addresses.iter().position(|a| a == handle.address()));
    let relays: Vec<Reader> = RELAYED
        .iter()
        .map(|_| {
            let mut relay = transport.connect(&server, Pace::Fast);
            upgrade(&mut relay, "/relay");
            let to = format!("to {}", addresses.join(" "));
            relay.send(&client_frame(1, to.as_bytes(), [1, 2, 3, 4]));
            relay
        })
        .collect();
    wait_for_open(&server, 4);
    assert_eq!(server.connections_per_poller(), vec![2, 2], "both pollers");
    let mut rng = Rng::new(seed);
    let streams: Vec<Vec<usize>> = (0..4)
        .map(|_| sizes(&mut rng, 40 * rounds(), MAX))
        .collect();
    let window = Window::new(targets.len(), WINDOW);
    let listeners: Vec<_> = targets
        .into_iter()
        .enumerate()
        .map(|(i, target)| {
            let expected = Expected::new(streams.clone(), seed);
            let name = format!(
                "target {i} (streams 0 and 1 by send_to, {BY_SERVER_SEND} by Server::send, \
                 {BY_HANDLE} by WsHandle::send)"
            );
            let window = (Arc::clone(&window), i);
            std::thread::spawn(move || listen(target, expected, Some(window), name))
        })
        .collect();
    std::thread::scope(|scope| {
        for (relay, stream) in relays.into_iter().zip(RELAYED) {
            let (sizes, window) = (&streams[stream], &window);
            scope.spawn(move || {
                let mut relay = relay;
                let mut rng = Rng::new(seed ^ stream as u64);
                for (seq, &len) in sizes.iter().enumerate() {
                    let mask = rng.next().to_le_bytes();
                    window.before_send(len);
                    let command = relay_command(stream, seq, len);
                    relay.send(&client_frame(
                        1,
                        command.as_bytes(),
                        [mask[0], mask[1], mask[2], mask[3]],
                    ));
                }
            });
        }
        let (sizes, window, by_handle) = (&streams[BY_HANDLE], &window, &by_handle);
        scope.spawn(move || {
            for (seq, &len) in sizes.iter().enumerate() {
                let outgoing = text_message(BY_HANDLE, seq, len);
                window.before_send(len);
                for handle in by_handle {
                    assert!(handle.send(outgoing.clone()), "{handle:?} took the message");
                }
            }
        });
        // This thread, meanwhile, through the server (which stays here:
        // it is not shared between threads).
        for (seq, &len) in streams[BY_SERVER_SEND].iter().enumerate() {
            let outgoing = text_message(BY_SERVER_SEND, seq, len);
            window.before_send(len);
            for address in &addresses {
                server
                    .send(address, Envelope::of(Deliver(outgoing.clone())))
                    .expect("a local address takes mail");
            }
        }
    });
    for listener in listeners {
        if let Err(panic) = listener.join() {
            std::panic::resume_unwind(panic);
        }
    }
}

fn mail_from_every_sender_arrives_intact_plain(dispatch: Dispatch) {
    mail_from_every_sender_arrives_intact(dispatch, false);
}

fn mail_from_every_sender_arrives_intact_over_tls(dispatch: Dispatch) {
    mail_from_every_sender_arrives_intact(dispatch, true);
}

in_both_modes!(
    mail_from_every_sender_arrives_intact_plain,
    mail_from_every_sender_arrives_intact_over_tls
);
