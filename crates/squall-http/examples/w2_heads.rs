//! Parses the two heads of a W2 exchange through `squall serve` (the request and the
//! route's answer, byte for byte as they cross the wire) N times each: the parser's
//! instructions per request/response, measured with
//! `valgrind --tool=callgrind target/release/examples/w2_heads 100000` minus a run with
//! a smaller N (docs/HTTP.md, "Figures").

use squall_http::{parse_request_in, parse_response_in, BodyKind, Header, Limits};

const REQUEST: &[u8] = b"GET /testu HTTP/1.1\r\nHost: 48.0.0.1\r\n\r\n";
/// The answer's head and its 80-byte body: one segment, as the client receives it.
const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nServer: squall\r\nContent-Type: text/plain\r\n\
Content-Length: 80\r\nDate: Wed, 25 Nov 2026 14:50:00 GMT\r\n\r\n\
ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJKLMNOPQRSTUVWXYZAB";

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let lim = Limits::default();
    let mut ok = 0u64;
    for _ in 0..n {
        let req = std::hint::black_box(REQUEST);
        let mut h = [Header::SLOT; 16];
        if let Ok(Some(r)) = parse_request_in(req, &mut h, &lim) {
            ok += u64::from(r.keep_alive && r.head_len == REQUEST.len());
        }
        let resp = std::hint::black_box(RESPONSE);
        let mut h = [Header::SLOT; 16];
        if let Ok(Some(r)) = parse_response_in(resp, &mut h, &lim, false) {
            ok += u64::from(
                r.body == BodyKind::Length(80)
                    && r.headers.len() == 4
                    && resp.len() - r.head_len == 80,
            );
        }
    }
    assert_eq!(ok, 2 * n, "every head parses");
    println!("{n} requests and {n} responses parsed");
}
