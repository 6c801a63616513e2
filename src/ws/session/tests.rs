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
        session.feed(piece, &mut out, |event, _| {
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

#[test]
fn the_message_buffer_is_reused_and_given_back_when_large() {
    let mut session = Session::new(1 << 20);
    let mut out = BytesMut::new();
    session.feed(&frame(true, 2, &[1; 100]), &mut out, |_, _| {});
    let capacity = session.message.capacity();
    assert!(capacity >= 100);
    session.feed(&frame(true, 2, &[1; 50]), &mut out, |_, _| {});
    assert_eq!(session.message.capacity(), capacity, "kept");
    session.feed(&frame(true, 2, &[1; 70_000]), &mut out, |_, _| {});
    assert_eq!(session.message.capacity(), 0, "given back");
}

#[test]
fn every_whole_frame_is_counted_control_frames_too() {
    let mut session = Session::new(1 << 20);
    let mut out = BytesMut::new();
    let mut input = frame(false, 1, b"a");
    input.extend(frame(true, 9, b""));
    input.extend(frame(true, 10, b""));
    input.extend(frame(true, 0, b"b"));
    session.feed(&input[..input.len() - 1], &mut out, |_, _| {});
    assert_eq!(session.frames(), 3, "the last frame is not whole yet");
    session.feed(&input[input.len() - 1..], &mut out, |_, _| {});
    assert_eq!(session.frames(), 4);
}
