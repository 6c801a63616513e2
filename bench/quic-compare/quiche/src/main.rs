//! N requests over one QUIC connection through quiche, client and server
//! in one process, datagrams handed over in memory. The server's work runs
//! inside `server_side` (callgrind --toggle-collect=*server_side*).
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

struct Server {
    conn: Option<quiche::Connection>,
    config: quiche::Config,
    body: Vec<u8>,
    pending: Vec<(u64, usize)>,
}

fn config(server: bool) -> quiche::Config {
    let mut c = quiche::Config::new(quiche::PROTOCOL_VERSION).unwrap();
    if server {
        c.load_cert_chain_from_pem_file(&format!("{}/cert.pem", dir())).unwrap();
        c.load_priv_key_from_pem_file(&format!("{}/key.pem", dir())).unwrap();
    } else {
        c.verify_peer(false);
    }
    c.set_application_protos(&[b"h3"]).unwrap();
    c.set_max_idle_timeout(30_000);
    c.set_max_recv_udp_payload_size(1350);
    c.set_max_send_udp_payload_size(1350);
    c.set_initial_max_data(10_000_000);
    c.set_initial_max_stream_data_bidi_local(1_000_000);
    c.set_initial_max_stream_data_bidi_remote(1_000_000);
    c.set_initial_max_stream_data_uni(1_000_000);
    c.set_initial_max_streams_bidi(100);
    c.set_initial_max_streams_uni(100);
    c
}

#[inline(never)]
fn server_side(s: &mut Server, input: &mut VecDeque<Vec<u8>>, out: &mut VecDeque<Vec<u8>>, local: SocketAddr, client: SocketAddr) {
    let mut buf = [0u8; 1500];
    while let Some(mut d) = input.pop_front() {
        if s.conn.is_none() {
            let hdr = quiche::Header::from_slice(&mut d, quiche::MAX_CONN_ID_LEN).unwrap();
            let scid = quiche::ConnectionId::from_vec(vec![7; 16]);
            s.conn = Some(quiche::accept(&scid, Some(&hdr.dcid), local, client, &mut s.config).unwrap());
        }
        let conn = s.conn.as_mut().unwrap();
        let _ = conn.recv(&mut d, quiche::RecvInfo { from: client, to: local });
    }
    let Some(conn) = s.conn.as_mut() else { return };
    let readable: Vec<u64> = conn.readable().collect();
    for id in readable {
        loop {
            match conn.stream_recv(id, &mut buf) {
                Ok((_, fin)) => if fin { s.pending.push((id, 0)); break },
                Err(_) => break,
            }
        }
    }
    s.pending.retain_mut(|(id, written)| {
        while *written < s.body.len() {
            match conn.stream_send(*id, &s.body[*written..], true) { Ok(0) | Err(_) => break, Ok(n) => *written += n }
        }
        *written < s.body.len()
    });
    loop {
        match conn.send(&mut buf) {
            Ok((n, _)) => out.push_back(buf[..n].to_vec()),
            Err(_) => break,
        }
    }
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let server_addr: SocketAddr = "127.0.0.1:4433".parse().unwrap();
    let client_addr: SocketAddr = "127.0.0.1:5555".parse().unwrap();
    let mut server = Server { conn: None, config: config(true), body: vec![b'x'; 1000], pending: Vec::new() };
    let mut cconfig = config(false);
    let scid = quiche::ConnectionId::from_vec(vec![9; 16]);
    let mut cconn = quiche::connect(Some("localhost"), &scid, client_addr, server_addr, &mut cconfig).unwrap();
    let now0 = Instant::now();
    let mut to_server: VecDeque<Vec<u8>> = VecDeque::new();
    let mut to_client: VecDeque<Vec<u8>> = VecDeque::new();
    let request = vec![b'r'; 40];
    let (mut done, mut started, mut next_id) = (0usize, 0usize, 0u64);
    let mut open: Vec<(u64, usize)> = Vec::new();
    let mut buf = [0u8; 1500];
    let mut rounds = 0;
    while done < n {
        rounds += 1;
        assert!(rounds < 1_000_000, "stuck at {done}");
        while let Some(mut d) = to_client.pop_front() {
            let _ = cconn.recv(&mut d, quiche::RecvInfo { from: server_addr, to: client_addr });
        }
        if cconn.is_established() {
            while open.len() < 10 && started < n {
                cconn.stream_send(next_id, &request, true).unwrap();
                open.push((next_id, 0));
                next_id += 4;
                started += 1;
            }
            open.retain_mut(|(id, got)| {
                let mut fin = false;
                while let Ok((len, f)) = cconn.stream_recv(*id, &mut buf) { *got += len; if f { fin = true; break } }
                if fin { assert_eq!(*got, 1000); done += 1; false } else { true }
            });
        }
        loop {
            match cconn.send(&mut buf) { Ok((len, _)) => to_server.push_back(buf[..len].to_vec()), Err(_) => break }
        }
        server_side_all(&mut server, &mut to_server, &mut to_client, server_addr, client_addr);
    }
    eprintln!("quiche: {n} requests, {rounds} rounds, {:?}", now0.elapsed());
}

#[inline(never)]
fn server_side_all(s: &mut Server, input: &mut VecDeque<Vec<u8>>, out: &mut VecDeque<Vec<u8>>, local: SocketAddr, client: SocketAddr) {
    server_side(s, input, out, local, client);
}

/// Where cert.pem and key.pem are (run.sh makes them).
fn dir() -> String {
    std::env::var("CERT_DIR").unwrap_or_else(|_| ".".into())
}
