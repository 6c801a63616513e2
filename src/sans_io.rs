//! The request stream without sockets, for the fuzz target and the property
//! tests: exactly the bytes-in, bytes-out path a connection actor drives.
//! Not needed to run a server.

pub use crate::http::date::{format_imf_fixdate, DATE_LEN};
pub use crate::request_stream::{RequestStream, OUTPUT_HIGH_WATER};

use bytes::BytesMut;

use crate::http::head::{Persistence, ResponseOut};
use crate::routes::Routes;

/// Every whole response (head and body) that the canned routes of `routes`
/// and the error statuses can write on `date`, once for each `Connection`
/// header it may carry. A HEAD request gets the head alone. Static files,
/// handler and actor routes are not among them.
pub fn canned_responses(routes: &Routes, date: &[u8; DATE_LEN]) -> Vec<Vec<u8>> {
    let mut all = Vec::new();
    for (response, keeps) in routes.canned() {
        let persistences: &[Persistence] = match keeps {
            true => &[
                Persistence::KeepAlive,
                Persistence::KeepAliveHttp10,
                Persistence::Close,
            ],
            // Framing errors always close.
            false => &[Persistence::Close],
        };
        for &persistence in persistences {
            let mut out = BytesMut::new();
            response.write(&mut ResponseOut::new(&mut out, date, persistence, false));
            all.push(out.to_vec());
        }
    }
    all
}
