//! Connections are dealt evenly over the pollers, whatever the kernel's
//! `SO_REUSEPORT` hash does: counted per poller once every connection has
//! been accepted and has answered a request, never by timing.

mod common;

use std::time::Duration;

use common::{assert_response, config, start_with, wait_for_open, Client, HELLO, HELLO_CLOSE};
use uppercut_mio_server::config::Timeouts;
use uppercut_mio_server::raise_open_files_limit;
use uppercut_mio_server::{Config, Dispatch, Routes, Server};

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
const POLLERS: usize = 8;

fn eight_pollers(dispatch: Dispatch) -> Config {
    Config {
        pollers: POLLERS,
        ..config(dispatch)
    }
}

/// Opens `count` keep-alive connections at once (so the pollers accept them
/// concurrently), then completes a request on each: by then every one has
/// been accepted, counted and adopted by the poller that answers it.
fn open_and_use(server: &Server, count: usize) -> Vec<Client> {
    let mut clients: Vec<Client> = (0..count)
        .map(|_| Client::connect(server.local_addr()))
        .collect();
    for client in &mut clients {
        client.send(GET);
    }
    for client in &mut clients {
        assert_response(&client.response(false), HELLO);
    }
    clients
}

/// The targets: no poller holds more than one connection more than another,
/// so the busiest holds at most 1.1 times the mean from 10 per poller up.
fn assert_balanced(counts: &[usize], count: usize) {
    assert_eq!(counts.len(), POLLERS, "{counts:?}");
    assert_eq!(counts.iter().sum::<usize>(), count, "{counts:?}");
    let most = *counts.iter().max().unwrap();
    let least = *counts.iter().min().unwrap();
    assert!(most - least <= 1, "{count} connections dealt as {counts:?}");
    if count >= 10 * POLLERS {
        assert!(
            most as f64 <= 1.1 * count as f64 / POLLERS as f64,
            "{count} connections dealt as {counts:?}"
        );
    }
}

fn balanced_at(dispatch: Dispatch, count: usize) {
    let server = start_with(&eight_pollers(dispatch), Routes::standard());
    let clients = open_and_use(&server, count);
    assert_balanced(&server.connections_per_poller(), count);
    drop(clients);
}

fn ten_connections_split_within_one(dispatch: Dispatch) {
    balanced_at(dispatch, 10);
}

fn a_hundred_and_twenty_eight_connections_split_evenly(dispatch: Dispatch) {
    balanced_at(dispatch, 128);
}

fn a_thousand_connections_split_evenly(dispatch: Dispatch) {
    raise_open_files_limit().expect("open-files limit");
    balanced_at(dispatch, 1000);
}

/// Connections that closed are no longer counted, and the next ones fill
/// the pollers they left: after 8 of 16 close, the count is 8 (once the
/// closes have reached the pollers, which in `system` dispatch is a notice
/// away), and 8 more make it exactly two on every poller again.
fn closed_connections_leave_room(dispatch: Dispatch) {
    // A poller may learn of a close at its next sweep: sweep often.
    let config = Config {
        timeouts: Timeouts {
            sweep: Duration::from_millis(50),
            ..Timeouts::default()
        },
        ..eight_pollers(dispatch)
    };
    let server = start_with(&config, Routes::standard());
    let mut first = open_and_use(&server, 16);
    assert_balanced(&server.connections_per_poller(), 16);
    for client in &mut first[..8] {
        client.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        assert_response(&client.response(false), HELLO_CLOSE);
        client.assert_closed();
    }
    wait_for_open(&server, 8);
    let second = open_and_use(&server, 8);
    assert_eq!(server.connections_per_poller(), vec![2; POLLERS]);
    drop((first, second));
}

/// Pollers that block in `poll` for an hour: a socket handed to one must wake
/// it, or its requests wait for the sweep and the client's read times out.
/// With eight pollers and 64 connections made one after another, nearly every
/// connection after the first eight lands on a poller holding more than
/// another, so most of them are handed over.
fn handed_off_connections_answer(dispatch: Dispatch) {
    let config = Config {
        timeouts: Timeouts {
            sweep: Duration::from_secs(3600),
            ..Timeouts::default()
        },
        ..eight_pollers(dispatch)
    };
    let server = start_with(&config, Routes::standard());
    let mut clients = Vec::new();
    for _ in 0..64 {
        let mut client = Client::connect(server.local_addr());
        client.send(GET);
        assert_response(&client.response(false), HELLO);
        clients.push(client);
    }
    assert_balanced(&server.connections_per_poller(), 64);
    for client in &mut clients {
        client.send(GET);
    }
    for client in &mut clients {
        assert_response(&client.response(false), HELLO);
    }
    // The drain reaches handed-off connections too, without a sweep.
    assert!(server.shutdown(Duration::from_secs(15)), "drain timed out");
    for client in &mut clients {
        client.assert_closed();
    }
}

in_both_modes!(
    ten_connections_split_within_one,
    a_hundred_and_twenty_eight_connections_split_evenly,
    a_thousand_connections_split_evenly,
    closed_connections_leave_room,
    handed_off_connections_answer,
);
