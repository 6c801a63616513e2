use super::*;

/// A client frame: `fin`, `opcode`, masked with a fixed key.
fn frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x9a, 0x01, 0x7c, 0xe3];
    let mut bytes = vec![u8::from(fin) << 7 | opcode];
    match payload.len() {
        len if len < 126 => bytes.push(0x80 | len as u8),
        len if len <= 0xffff => {
            bytes.push(0x80 | 126);
            bytes.extend_from_slice(&(len as u16).to_be_bytes());
        }
        len => {
            bytes.push(0x80 | 127);
            bytes.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    bytes.extend_from_slice(&mask);
    bytes.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    bytes
}

/// What a session makes of `input` fed in pieces of `step` bytes: the
/// events (owned), and the output.
fn decode(input: &[u8], step: usize, max: usize) -> (Vec<String>, Vec<u8>) {
    let mut session = Session::new(max);
    let mut out = BytesMut::new();
    let mut events = Vec::new();
    for piece in input.chunks(step.max(1)) {
        session.feed(&mut piece.to_vec(), &mut out, |event, _| {
            events.push(format!("{event:?}"))
        });
    }
    (events, out.to_vec())
}

/// The same events and output whether fed whole or a byte at a time.
fn events(input: &[u8]) -> (Vec<String>, Vec<u8>) {
    let whole = decode(input, input.len(), 1 << 20);
    for step in [1, 2, 3, 7] {
        assert_eq!(decode(input, step, 1 << 20), whole, "in pieces of {step}");
    }
    whole
}

#[test]
fn messages_arrive_whole_however_the_bytes_are_cut() {
    let mut input = frame(true, 1, "héllo".as_bytes());
    input.extend(frame(true, 2, &[0, 1, 2, 255]));
    input.extend(frame(true, 1, b""));
    input.extend(frame(true, 2, &[7; 300]));
    input.extend(frame(true, 2, &[8; 70_000]));
    let (events, out) = events(&input);
    assert_eq!(events.len(), 5);
    assert_eq!(events[0], r#"Text("héllo")"#);
    assert_eq!(events[1], "Binary([0, 1, 2, 255])");
    assert_eq!(events[2], r#"Text("")"#);
    assert!(events[3].starts_with("Binary([7, 7"));
    assert!(events[4].starts_with("Binary([8, 8"));
    assert!(out.is_empty());
}

#[test]
fn fragments_join_with_pings_answered_between_them() {
    let mut input = frame(false, 1, b"Hel");
    input.extend(frame(true, 9, b"are you there"));
    input.extend(frame(false, 0, "lo κ".as_bytes()));
    input.extend(frame(true, 10, b"unsolicited pong"));
    input.extend(frame(true, 0, "όσμε".as_bytes()));
    let (events, out) = events(&input);
    assert_eq!(events, [r#"Text("Hello κόσμε")"#]);
    assert_eq!(out, b"\x8a\x0dare you there");
}

#[test]
fn broken_framing_rules_close_with_1002() {
    let unmasked = b"\x81\x02hi".to_vec();
    let mut reserved = frame(true, 1, b"hi");
    reserved[0] |= 0x40;
    let bad_opcode = frame(true, 3, b"");
    let long_ping = frame(true, 9, &[0; 126]);
    let fragmented_ping = frame(false, 9, b"");
    let lone_continuation = frame(true, 0, b"x");
    let mut text_in_text = frame(false, 1, b"a");
    text_in_text.extend(frame(true, 1, b"b"));
    let mut huge = vec![0x82, 0x80 | 127, 0x80, 0, 0, 0, 0, 0, 0, 1];
    huge.extend_from_slice(&[0; 4]);
    for input in [
        unmasked,
        reserved,
        bad_opcode,
        long_ping,
        fragmented_ping,
        lone_continuation,
        text_in_text,
        huge,
    ] {
        assert_eq!(events(&input).0, ["Fail(1002)"], "{input:?}");
    }
}

#[test]
fn invalid_utf8_fails_fast_with_1007() {
    // The first fragment already holds a byte no text can contain: the
    // failure comes before the message ends.
    let first = frame(false, 1, &[b'o', b'k', 0xff]);
    assert_eq!(events(&first).0, ["Fail(1007)"]);
    // A character cut between fragments is fine.
    let mut cut = frame(false, 1, &[0xce]);
    cut.extend(frame(true, 0, &[0xba]));
    assert_eq!(events(&cut).0, [r#"Text("κ")"#]);
    // One left open at the end is not.
    let open = frame(true, 1, &[b'a', 0xce]);
    assert_eq!(events(&open).0, ["Fail(1007)"]);
}

#[test]
fn messages_over_the_limit_close_with_1009() {
    let whole = frame(true, 2, &[0; 101]);
    assert_eq!(decode(&whole, 1000, 100).0, ["Fail(1009)"]);
    let mut joined = frame(false, 2, &[0; 60]);
    joined.extend(frame(true, 0, &[0; 41]));
    assert_eq!(decode(&joined, 1000, 100).0, ["Fail(1009)"]);
    let fits = frame(true, 2, &[0; 100]);
    assert_eq!(decode(&fits, 1, 100).0.len(), 1);
}

#[test]
fn a_close_reports_its_code_and_ends_the_session() {
    let mut input = frame(true, 8, &[0x03, 0xe8, b'b', b'y', b'e']);
    input.extend(frame(true, 1, b"ignored"));
    assert_eq!(events(&input).0, ["Close { code: Some(1000) }"]);
    assert_eq!(events(&frame(true, 8, b"")).0, ["Close { code: None }"]);
    assert_eq!(
        events(&frame(true, 8, &[0x0f, 0xa0])).0,
        ["Close { code: Some(4000) }"]
    );
    for bad in [
        &[0x03][..],
        &[0x03, 0xed],
        &[0x03, 0xe7],
        &[0x03, 0xee],
        &[0x0b, 0xb8 - 1],
    ] {
        assert_eq!(events(&frame(true, 8, bad)).0, ["Fail(1002)"], "{bad:?}");
    }
    assert_eq!(
        events(&frame(true, 8, &[0x03, 0xe8, 0xff])).0,
        ["Fail(1007)"]
    );
}

/// Feeds `input` to `session` in two reads, cut `at` bytes in.
fn feed_cut(session: &mut Session, input: &[u8], at: usize) {
    let mut out = BytesMut::new();
    let (first, second) = input.split_at(at);
    session.feed(&mut first.to_vec(), &mut out, |_, _| {});
    session.feed(&mut second.to_vec(), &mut out, |_, _| {});
}

#[test]
fn the_message_buffer_is_reused_and_given_back_when_large() {
    // Cut inside the payload: the message is assembled in the buffer.
    let mut session = Session::new(1 << 20);
    feed_cut(&mut session, &frame(true, 2, &[1; 100]), 20);
    let capacity = session.message.capacity();
    assert!(capacity >= 100);
    feed_cut(&mut session, &frame(true, 2, &[1; 50]), 20);
    assert_eq!(session.message.capacity(), capacity, "kept");
    feed_cut(&mut session, &frame(true, 2, &[1; KEEP_CAPACITY]), 20);
    assert_eq!(
        session.message.capacity(),
        KEEP_CAPACITY,
        "kept at the limit"
    );
    feed_cut(&mut session, &frame(true, 2, &[1; 70_000]), 20);
    assert_eq!(session.message.capacity(), 0, "given back");
}

#[test]
fn a_message_cut_across_reads_reserves_its_whole_length_at_once_and_a_ping_nothing() {
    let mut session = Session::new(1 << 20);
    let mut out = BytesMut::new();
    let mut ping = frame(true, 9, &[5; 100]);
    session.feed(&mut ping[..50], &mut out, |_, _| {});
    assert_eq!(
        session.message.capacity(),
        0,
        "a control frame is not a message"
    );
    session.feed(&mut ping[50..], &mut out, |_, _| {});
    let mut input = frame(true, 2, &[3; 5000]);
    session.feed(&mut input[..100], &mut out, |_, _| {});
    assert!(
        session.message.capacity() >= 5000,
        "one allocation for the whole message"
    );
}

#[test]
fn a_message_all_in_one_read_is_handed_over_where_it_lies() {
    let mut session = Session::new(1 << 20);
    let mut out = BytesMut::new();
    let payload: Vec<u8> = (0..16_384u32).map(|i| (i % 251) as u8).collect();
    let mut input = frame(true, 2, &payload);
    input.extend(frame(true, 1, "héllo".as_bytes()));
    let mut seen = Vec::new();
    session.feed(&mut input, &mut out, |event, _| match event {
        Event::Binary(bytes) => seen.push(bytes.to_vec()),
        Event::Text(text) => seen.push(text.as_bytes().to_vec()),
        other => panic!("{other:?}"),
    });
    assert_eq!(seen, [payload, "héllo".as_bytes().to_vec()]);
    assert_eq!(
        session.message.capacity(),
        0,
        "no copy into the message buffer"
    );
    assert_eq!(session.frames(), 2);
}

#[test]
fn every_whole_frame_is_counted_control_frames_too() {
    let mut session = Session::new(1 << 20);
    let mut out = BytesMut::new();
    let mut input = frame(false, 1, b"a");
    input.extend(frame(true, 9, b""));
    input.extend(frame(true, 10, b""));
    input.extend(frame(true, 0, b"b"));
    let last = input.len() - 1;
    session.feed(&mut input[..last], &mut out, |_, _| {});
    assert_eq!(session.frames(), 3, "the last frame is not whole yet");
    session.feed(&mut input[last..], &mut out, |_, _| {});
    assert_eq!(session.frames(), 4);
}

/// permessage-deflate as the default agreement has it.
fn deflate_agreed() -> crate::ws::deflate::Agreed {
    let config = crate::ws::deflate::WsDeflate::default();
    crate::ws::deflate::negotiate(&config, std::iter::once(&b"permessage-deflate"[..]))
        .unwrap()
        .0
}

/// `message` compressed as a client sends it: sync-flushed, trailer off.
fn compressed(message: &[u8]) -> Vec<u8> {
    use flate2::{Compress, Compression, FlushCompress};
    let mut compressor = Compress::new(Compression::new(6), false);
    let mut out = Vec::with_capacity(message.len() + 64);
    compressor
        .compress_vec(message, &mut out, FlushCompress::Sync)
        .unwrap();
    assert!(out.ends_with(&[0, 0, 0xff, 0xff]));
    out.truncate(out.len() - 4);
    out
}

/// What a deflate session makes of `input` in pieces of `step`.
fn decode_deflate(input: &[u8], step: usize, max: usize) -> (Vec<String>, Session) {
    let mut session = Session::new(max).with_inflate(&deflate_agreed());
    let mut out = BytesMut::new();
    let mut events = Vec::new();
    for piece in input.chunks(step.max(1)) {
        session.feed(&mut piece.to_vec(), &mut out, |event, _| {
            events.push(format!("{event:?}"))
        });
    }
    (events, session)
}

#[test]
fn a_compressed_message_gives_its_buffer_back_and_the_next_reserves_its_size() {
    // Larger than the 512 bytes inflating reserves at the least.
    let text = "κόσμε, ".repeat(200);
    let mut input = frame(true, 1, &compressed(text.as_bytes()));
    input[0] |= 0x40;
    let twice = [input.clone(), input].concat();
    let (events, session) = decode_deflate(&twice, 7, 1 << 20);
    assert_eq!(
        events,
        [format!("Text({text:?})"), format!("Text({text:?})")]
    );
    assert_eq!(session.message.capacity(), 0, "nothing kept while idle");
    assert!(
        session.inflated_hint >= text.len(),
        "{}",
        session.inflated_hint
    );
    // The next compressed message reserves that much at its head.
    let mut session = session;
    let mut head = twice[..10].to_vec();
    session.feed(&mut head, &mut BytesMut::new(), |_, _| {});
    assert!(session.message.capacity() >= session.inflated_hint);
}

#[test]
fn compressed_messages_inflate_however_the_bytes_are_cut() {
    let text = "κόσμε, ".repeat(40);
    let mut whole = frame(true, 1, &compressed(text.as_bytes()));
    whole[0] |= 0x40;
    // The same text in three fragments: RSV1 on the first only.
    let payload = compressed(text.as_bytes());
    let (a, rest) = payload.split_at(3);
    let (b, c) = rest.split_at(rest.len() / 2);
    let mut fragmented = frame(false, 1, a);
    fragmented[0] |= 0x40;
    fragmented.extend(frame(true, 9, b"ping"));
    fragmented.extend(frame(false, 0, b));
    fragmented.extend(frame(true, 0, c));
    // And a plain message after them.
    fragmented.extend(frame(true, 1, b"plain"));
    for step in [1, 2, 5, 1000] {
        let (events, session) = decode_deflate(&whole, step, 1 << 20);
        assert_eq!(
            events,
            [format!("Text({text:?})")],
            "whole, in pieces of {step}"
        );
        let (events, session_2) = decode_deflate(&fragmented, step, 1 << 20);
        assert_eq!(
            events,
            [format!("Text({text:?})"), r#"Text("plain")"#.to_string()],
            "fragmented, in pieces of {step}"
        );
        // Between messages, no decompressor is held.
        for session in [session, session_2] {
            assert!(!session.inflate.as_ref().unwrap().holds_state());
        }
    }
}

#[test]
fn rsv1_where_it_has_no_meaning_is_a_protocol_error() {
    let mut ping = frame(true, 9, b"");
    ping[0] |= 0x40;
    let mut continuation = frame(false, 2, &compressed(b"abc"));
    continuation[0] |= 0x40;
    let mut second = frame(true, 0, b"");
    second[0] |= 0x40;
    continuation.extend(second);
    let mut rsv2 = frame(true, 2, b"");
    rsv2[0] |= 0x20;
    for input in [ping, continuation, rsv2] {
        assert_eq!(
            decode_deflate(&input, 1000, 1 << 20).0,
            ["Fail(1002)"],
            "{input:?}"
        );
    }
    // Without the extension agreed, RSV1 on a message is one too.
    let mut message = frame(true, 1, &compressed(b"hi"));
    message[0] |= 0x40;
    assert_eq!(events(&message).0, ["Fail(1002)"]);
}

#[test]
fn the_limit_holds_on_what_a_message_inflates_to() {
    let zeros = compressed(&[0; 100_000]);
    assert!(zeros.len() < 1000);
    let mut bomb = frame(true, 2, &zeros);
    bomb[0] |= 0x40;
    let (events, session) = decode_deflate(&bomb, 1000, 10_000);
    assert_eq!(events, ["Fail(1009)"]);
    assert!(!session.inflate.as_ref().unwrap().holds_state());
    // Across fragments too, and at exactly the limit it is whole.
    let payload = compressed(&[0; 10_000]);
    let (a, b) = payload.split_at(payload.len() / 2);
    let mut fits = frame(false, 2, a);
    fits[0] |= 0x40;
    fits.extend(frame(true, 0, b));
    assert_eq!(decode_deflate(&fits, 7, 10_000).0.len(), 1);
    assert_eq!(decode_deflate(&fits, 7, 9_999).0, ["Fail(1009)"]);
}

#[test]
fn inflated_text_must_be_utf8_and_corrupt_data_is_1007() {
    let mut bad_text = frame(true, 1, &compressed(&[b'a', 0xff, b'b']));
    bad_text[0] |= 0x40;
    assert_eq!(decode_deflate(&bad_text, 1000, 1 << 20).0, ["Fail(1007)"]);
    let mut corrupt = frame(true, 2, &[0xff, 0xff, 0xff]);
    corrupt[0] |= 0x40;
    assert_eq!(decode_deflate(&corrupt, 1000, 1 << 20).0, ["Fail(1007)"]);
}
