//! A tokio-tungstenite echo server: every text and binary message back as
//! it came, on tokio's multi-threaded runtime (one worker per core).
//!
//!     tungstenite-echo 127.0.0.1:19301

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

#[tokio::main]
async fn main() {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:19301".into());
    let listener = TcpListener::bind(&addr).await.expect("bind");
    println!("listening on ws://{addr}/");
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                return;
            };
            while let Some(Ok(message)) = ws.next().await {
                match message {
                    Message::Text(_) | Message::Binary(_) => {
                        if ws.send(message).await.is_err() {
                            return;
                        }
                    }
                    Message::Close(_) => return,
                    _ => {}
                }
            }
        });
    }
}
