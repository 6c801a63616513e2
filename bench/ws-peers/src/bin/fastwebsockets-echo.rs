//! A fastwebsockets echo server (its `upgrade` feature, over hyper 1):
//! every text and binary message back as it came, fragments collected, on
//! tokio's multi-threaded runtime (one worker per core).
//!
//!     fastwebsockets-echo 127.0.0.1:19302

use fastwebsockets::{upgrade, FragmentCollector, OpCode, WebSocketError};
use http_body_util::Empty;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

async fn echo(upgrading: upgrade::UpgradeFut) -> Result<(), WebSocketError> {
    let mut ws = FragmentCollector::new(upgrading.await?);
    loop {
        let frame = ws.read_frame().await?;
        match frame.opcode {
            OpCode::Close => return Ok(()),
            OpCode::Text | OpCode::Binary => ws.write_frame(frame).await?,
            _ => {}
        }
    }
}

async fn upgrade(mut request: Request<Incoming>) -> Result<Response<Empty<Bytes>>, WebSocketError> {
    let (response, upgrading) = upgrade::upgrade(&mut request)?;
    tokio::spawn(async move {
        let _ = echo(upgrading).await;
    });
    Ok(response)
}

#[tokio::main]
async fn main() {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:19302".into());
    let listener = TcpListener::bind(&addr).await.expect("bind");
    println!("listening on ws://{addr}/");
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let connection = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service_fn(upgrade))
                .with_upgrades();
            let _ = connection.await;
        });
    }
}
