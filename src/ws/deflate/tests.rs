use super::*;

/// The answer `config` gives to the offers in `header` (one
/// `Sec-WebSocket-Extensions` value), if any.
fn answer(config: &WsDeflate, header: &str) -> Option<String> {
    negotiate(config, std::iter::once(header.as_bytes())).map(|(_, answer)| answer)
}

const SHARED: &str = "permessage-deflate; server_no_context_takeover; client_no_context_takeover";

#[test]
fn the_default_answers_each_offer_without_context_takeover() {
    let shared = WsDeflate::default();
    let cases: &[(&str, Option<&str>)] = &[
        ("permessage-deflate", Some(SHARED)),
        ("permessage-deflate; client_max_window_bits", Some(SHARED)),
        ("Permessage-Deflate ; Client_No_Context_Takeover", Some(SHARED)),
        ("permessage-deflate; server_no_context_takeover", Some(SHARED)),
        (
            "permessage-deflate; server_max_window_bits=10",
            Some("permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10"),
        ),
        (
            "permessage-deflate; server_max_window_bits=\"8\"",
            Some("permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=8"),
        ),
        ("permessage-deflate; client_max_window_bits=9", Some(SHARED)),
        // Declined: unknown, repeated, valueless or bad values.
        ("permessage-deflate; mux", None),
        ("permessage-deflate; server_max_window_bits", None),
        ("permessage-deflate; server_max_window_bits=16", None),
        ("permessage-deflate; server_max_window_bits=7", None),
        ("permessage-deflate; server_max_window_bits=010", None),
        ("permessage-deflate; client_max_window_bits=abc", None),
        ("permessage-deflate; client_no_context_takeover=1", None),
        ("permessage-deflate; client_no_context_takeover; client_no_context_takeover", None),
        ("permessage-deflate; server_max_window_bits=10; server_max_window_bits=11", None),
        // Other extensions are not ours to answer.
        ("x-webkit-deflate-frame", None),
        ("", None),
        // The first offer that can be honoured wins.
        (
            "permessage-deflate; bogus, permessage-deflate; server_max_window_bits=12, permessage-deflate",
            Some("permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=12"),
        ),
        ("foo; a=\"x,y\", permessage-deflate", Some(SHARED)),
    ];
    for (offer, expected) in cases {
        assert_eq!(answer(&shared, offer).as_deref(), *expected, "{offer:?}");
    }
}

#[test]
fn context_takeover_is_kept_unless_the_client_gives_it_up() {
    let takeover = WsDeflate::context_takeover();
    let cases: &[(&str, &str)] = &[
        ("permessage-deflate", "permessage-deflate"),
        (
            "permessage-deflate; server_no_context_takeover",
            "permessage-deflate; server_no_context_takeover",
        ),
        (
            "permessage-deflate; client_no_context_takeover",
            "permessage-deflate; client_no_context_takeover",
        ),
        (
            "permessage-deflate; client_max_window_bits",
            "permessage-deflate",
        ),
    ];
    for (offer, expected) in cases {
        assert_eq!(
            answer(&takeover, offer).as_deref(),
            Some(*expected),
            "{offer:?}"
        );
    }
}

#[test]
fn smaller_windows_are_asked_for_only_as_the_rfc_lets() {
    let small = WsDeflate {
        server_max_window_bits: 10,
        client_max_window_bits: 11,
        ..WsDeflate::context_takeover()
    };
    let cases: &[(&str, &str)] = &[
        // The server may always name its own window; the client's only
        // when offered.
        (
            "permessage-deflate",
            "permessage-deflate; server_max_window_bits=10",
        ),
        (
            "permessage-deflate; client_max_window_bits",
            "permessage-deflate; server_max_window_bits=10; client_max_window_bits=11",
        ),
        (
            "permessage-deflate; client_max_window_bits=9",
            "permessage-deflate; server_max_window_bits=10",
        ),
        (
            "permessage-deflate; server_max_window_bits=9",
            "permessage-deflate; server_max_window_bits=9",
        ),
    ];
    for (offer, expected) in cases {
        assert_eq!(
            answer(&small, offer).as_deref(),
            Some(*expected),
            "{offer:?}"
        );
    }
    let (agreed, _) = negotiate(
        &small,
        std::iter::once(&b"permessage-deflate; client_max_window_bits"[..]),
    )
    .unwrap();
    assert_eq!((agreed.server_bits, agreed.client_bits), (10, 11));
    // A window of 8 is compressed with zlib's 9, whose matches reach back
    // no further than 250 bytes.
    let (agreed, _) = negotiate(
        &small,
        std::iter::once(&b"permessage-deflate; server_max_window_bits=8"[..]),
    )
    .unwrap();
    assert_eq!(agreed.server_bits, 9);
}

#[test]
fn several_header_fields_are_read_in_order() {
    let values = [
        &b"foo"[..],
        &b"permessage-deflate; server_max_window_bits=11"[..],
    ];
    let (_, answer) = negotiate(&WsDeflate::default(), values.into_iter()).unwrap();
    assert!(answer.ends_with("server_max_window_bits=11"), "{answer}");
}

/// A server frame's first byte and payload.
fn parse_frame(bytes: &[u8]) -> (u8, &[u8]) {
    let (len, at) = match bytes[1] {
        126 => (u16::from_be_bytes([bytes[2], bytes[3]]) as usize, 4),
        127 => (
            u64::from_be_bytes(bytes[2..10].try_into().unwrap()) as usize,
            10,
        ),
        len => (len as usize, 2),
    };
    assert_eq!(bytes.len(), at + len, "one frame");
    (bytes[0], &bytes[at..])
}

fn agreed(config: &WsDeflate) -> Agreed {
    negotiate(
        config,
        std::iter::once(&b"permessage-deflate; client_max_window_bits"[..]),
    )
    .unwrap()
    .0
}

/// What the client's decompressor makes of one message's payload.
fn inflate_payload(inflate: &mut Inflate, payload: &[u8]) -> Vec<u8> {
    let mut message = Vec::new();
    inflate.inflate(payload, &mut message, 1 << 20).unwrap();
    inflate.finish(&mut message, 1 << 20).unwrap();
    message
}

fn json(n: usize) -> Vec<u8> {
    let mut text = String::new();
    let mut i = 0;
    while text.len() < n {
        text.push_str(&format!(
            "{{\"id\":{i},\"name\":\"user{i}\",\"online\":true}},"
        ));
        i += 1;
    }
    text.truncate(n);
    text.into_bytes()
}

#[test]
fn messages_round_trip_with_rsv1_and_without_the_trailer() {
    for config in [WsDeflate::default(), WsDeflate::context_takeover()] {
        let agreed = agreed(&config);
        let mut deflate = Deflate::new(&agreed);
        // The peer's side: the same agreement read the other way.
        let mut inflate = Inflate::new(&Agreed {
            client_takeover: agreed.server_takeover,
            ..agreed
        });
        let message = json(1024);
        let mut sizes = Vec::new();
        for _ in 0..3 {
            let mut out = BytesMut::new();
            deflate.write(&mut out, Opcode::Text, &message);
            let (first, payload) = parse_frame(&out);
            assert_eq!(first, 0x80 | 0x40 | 0x1, "FIN, RSV1, text");
            assert!(!payload.ends_with(&TRAILER));
            assert_eq!(inflate_payload(&mut inflate, payload), message);
            sizes.push(payload.len());
        }
        assert!(sizes[0] < message.len() / 2, "{sizes:?}");
        match config.server_context_takeover {
            // Each message alone: the same bytes each time.
            false => assert!(sizes.iter().all(|&s| s == sizes[0]), "{sizes:?}"),
            // Later ones refer back to the first.
            true => assert!(sizes[1] < sizes[0] / 2, "{sizes:?}"),
        }
        assert_eq!(deflate.plain, 3 * 1024);
        assert_eq!(deflate.wire, sizes.iter().sum::<usize>() as u64);
        assert_eq!(deflate.holds_state(), config.server_context_takeover);
        assert_eq!(inflate.holds_state(), config.server_context_takeover);
    }
}

#[test]
fn short_and_incompressible_messages_go_as_they_are() {
    let mut deflate = Deflate::new(&agreed(&WsDeflate::default()));
    let mut out = BytesMut::new();
    deflate.write(&mut out, Opcode::Binary, &[7; 63]);
    assert_eq!(parse_frame(&out), (0x82, &[7; 63][..]));
    // Bytes deflate cannot shrink (a xorshift sequence).
    let mut x = 0x2545_f491_u32;
    let noise: Vec<u8> = (0..300)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    let mut out = BytesMut::new();
    deflate.write(&mut out, Opcode::Binary, &noise);
    assert_eq!(parse_frame(&out), (0x82, &noise[..]));
    assert_eq!((deflate.plain, deflate.wire), (0, 0));
}

#[test]
fn heads_of_every_length_encoding_come_out_right() {
    let mut deflate = Deflate::new(&agreed(&WsDeflate::default()));
    let mut inflate = Inflate::new(&agreed(&WsDeflate::default()));
    // Compressible to under 126 bytes, to under 64 KiB, and over 64 KiB.
    for message in [vec![b'a'; 200], json(2000), json(300_000)] {
        let mut out = BytesMut::new();
        out.extend_from_slice(b"before");
        deflate.write(&mut out, Opcode::Binary, &message);
        assert_eq!(&out[..6], b"before");
        let (first, payload) = parse_frame(&out[6..]);
        assert_eq!(first, 0xc2);
        assert_eq!(inflate_payload(&mut inflate, payload), message);
    }
}

#[test]
fn a_room_compresses_once_for_members_that_agreed_alike() {
    let message = json(1024);
    let cache = DeflateCache::default();
    let agreed = agreed(&WsDeflate::default());
    let (mut a, mut b) = (Deflate::new(&agreed), Deflate::new(&agreed));
    let (mut out_a, mut out_b) = (BytesMut::new(), BytesMut::new());
    a.write_shared(&mut out_a, Opcode::Text, &message, &cache);
    let (key, cached) = cache.0.get().expect("compressed once");
    assert_eq!(*key, agreed.compressor_key());
    b.write_shared(&mut out_b, Opcode::Text, &message, &cache);
    assert_eq!(out_a, out_b);
    assert_eq!(&parse_frame(&out_a).1, &cached.as_ref().unwrap());
    // Another window compresses for itself, and still reads right.
    let other = Agreed {
        server_bits: 10,
        ..agreed
    };
    let mut c = Deflate::new(&other);
    let mut out_c = BytesMut::new();
    c.write_shared(&mut out_c, Opcode::Text, &message, &cache);
    let mut inflate = Inflate::new(&agreed);
    assert_eq!(
        inflate_payload(&mut inflate, parse_frame(&out_c).1),
        message
    );
}

/// `len` zeros, compressed as a client would send them.
fn zeros_compressed(len: usize) -> Vec<u8> {
    let mut compressor = Compress::new(Compression::new(9), false);
    let mut out = BytesMut::new();
    assert!(deflate(&mut compressor, &vec![0; len], &mut out));
    out.to_vec()
}

#[test]
fn a_decompression_bomb_stops_at_the_limit() {
    // A megabyte of zeros in about a kilobyte, against a 10,000-byte limit.
    let bomb = zeros_compressed(1 << 20);
    assert!(bomb.len() < 2048, "{}", bomb.len());
    let mut inflate = Inflate::new(&agreed(&WsDeflate::default()));
    let mut message = Vec::new();
    assert_eq!(
        inflate.inflate(&bomb, &mut message, 10_000),
        Err(InflateError::TooBig)
    );
    assert!(message.capacity() <= 10_001, "{}", message.capacity());
    // Exactly at the limit is fine.
    let fits = zeros_compressed(10_000);
    let mut inflate = Inflate::new(&agreed(&WsDeflate::default()));
    let mut message = Vec::new();
    inflate.inflate(&fits, &mut message, 10_000).unwrap();
    inflate.finish(&mut message, 10_000).unwrap();
    assert_eq!(message, vec![0; 10_000]);
}

#[test]
fn a_message_split_anywhere_inflates_the_same() {
    let message = json(5000);
    let compressed = zeros_compressed(0);
    assert!(!compressed.is_empty());
    let mut compressor = Compress::new(Compression::new(6), false);
    let mut payload = BytesMut::new();
    assert!(deflate(&mut compressor, &message, &mut payload));
    for step in [1, 7, 100, payload.len()] {
        let mut inflate = Inflate::new(&agreed(&WsDeflate::default()));
        let mut out = Vec::new();
        for piece in payload.chunks(step) {
            inflate.inflate(piece, &mut out, 1 << 20).unwrap();
        }
        inflate.finish(&mut out, 1 << 20).unwrap();
        assert_eq!(out, message, "in pieces of {step}");
    }
}

#[test]
fn corrupt_data_is_refused() {
    let mut inflate = Inflate::new(&agreed(&WsDeflate::default()));
    let mut message = Vec::new();
    // BTYPE 11 is reserved.
    assert_eq!(
        inflate.inflate(&[0xff, 0xff, 0xff], &mut message, 1000),
        Err(InflateError::Corrupt)
    );
}
