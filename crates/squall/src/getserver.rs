//! A minimal HTTP/1.1 responder for read-only endpoints (the Prometheus exposition): one
//! request per connection, answered and closed, on at most [`WORKERS`] threads at once
//! (a connection beyond them gets 503 at once). Bounded against any client: the request
//! head is at most [`MAX_HEAD`] bytes and must arrive within [`DEADLINE`] (a slow or
//! silent client is dropped; it holds one worker that long, never the others); a request
//! body is never read (the connection closes after the answer, whatever
//! `Content-Length` says); the head is parsed by squall-http, whose errors are answered
//! with their status. `GET` and `HEAD` are served; other methods get 405.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use squall_http::{Header, Limits, Method};

/// Largest request head read (a scraper's is a few hundred bytes).
pub const MAX_HEAD: usize = 8192;
/// Time a client has to send its head, and to take the answer.
pub const DEADLINE: Duration = Duration::from_secs(2);

/// What an endpoint answers for a path (the target without its query): status, body and
/// content type.
pub type Answer = (u16, String, &'static str);

/// Connections served at once.
pub const WORKERS: usize = 8;

/// Serves `listener` until it fails, answering each request with `answer(path)`.
pub fn serve(listener: TcpListener, answer: impl Fn(&str) -> Answer + Send + Sync + 'static) {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let answer = std::sync::Arc::new(answer);
    let busy = std::sync::Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        let mut s = match conn {
            Ok(s) => s,
            // (out of file descriptors, say: no busy loop while it lasts)
            Err(_) => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if busy.fetch_add(1, SeqCst) >= WORKERS {
            busy.fetch_sub(1, SeqCst);
            let _ = s.set_write_timeout(Some(Duration::from_millis(100)));
            let _ = s.write_all(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
            continue;
        }
        let (answer, busy2) = (answer.clone(), busy.clone());
        let spawned = std::thread::Builder::new()
            .name("squall-http-get".into())
            .spawn(move || {
                let _ = respond(&mut s, &*answer);
                busy2.fetch_sub(1, SeqCst);
            });
        if spawned.is_err() {
            busy.fetch_sub(1, SeqCst);
        }
    }
}

/// Reads one request head from `s` and writes the answer.
fn respond(s: &mut TcpStream, answer: &impl Fn(&str) -> Answer) -> std::io::Result<()> {
    let start = Instant::now();
    s.set_write_timeout(Some(DEADLINE))?;
    let mut buf = vec![0u8; MAX_HEAD];
    let mut n = 0;
    let lim = Limits {
        max_head: MAX_HEAD,
        ..Limits::default()
    };
    let (head_only, reply) = loop {
        let left = DEADLINE.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Ok(()); // too slow: dropped without an answer
        }
        s.set_read_timeout(Some(left))?;
        let k = s.read(&mut buf[n..])?;
        if k == 0 {
            return Ok(());
        }
        n += k;
        let mut h = [Header::EMPTY; 32];
        match squall_http::parse_request(&buf[..n], &mut h, &lim) {
            Ok(Some(r)) => {
                let head_only = r.method == Method::Head;
                break match r.method {
                    Method::Get | Method::Head => {
                        let path = String::from_utf8_lossy(r.path()).into_owned();
                        (head_only, answer(&path))
                    }
                    _ => (
                        false,
                        (405, "only GET and HEAD are served\n".into(), "text/plain"),
                    ),
                };
            }
            Ok(None) if n < buf.len() => continue,
            // A head that does not fit: answered as the parser would at its limit.
            Ok(None) => {
                break (
                    false,
                    (431, "request head too large\n".into(), "text/plain"),
                )
            }
            Err(e) => break (false, (e.status(), format!("{e}\n"), "text/plain")),
        }
    };
    let (code, body, ctype) = reply;
    let mut out = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n",
        squall_http::reason(code),
        body.len(),
        if code == 405 { "Allow: GET, HEAD\r\n" } else { "" },
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    s.write_all(&out)?;
    let _ = s.shutdown(std::net::Shutdown::Write);
    // What the client still sends (a body it announced) is read and dropped for a moment,
    // so that closing with unread bytes does not reset the connection under the answer.
    let drain_until = Instant::now() + Duration::from_millis(200);
    let mut sink = [0u8; 4096];
    let mut left = 1usize << 20;
    while left > 0 {
        let t = drain_until.saturating_duration_since(Instant::now());
        if t.is_zero() || s.set_read_timeout(Some(t)).is_err() {
            break;
        }
        match s.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left -= n.min(left),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server on a loopback port answering "ok" at /x; returns its address.
    fn server() -> std::net::SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        std::thread::spawn(move || {
            serve(l, |p| match p {
                "/x" => (200, "ok\n".into(), "text/plain"),
                _ => (404, "no\n".into(), "text/plain"),
            })
        });
        a
    }

    fn exchange(a: std::net::SocketAddr, req: &[u8]) -> String {
        let mut s = TcpStream::connect(a).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.write_all(req);
        let mut r = String::new();
        let _ = s.read_to_string(&mut r);
        r
    }

    #[test]
    fn answers_get_head_and_refuses_the_rest() {
        let a = server();
        let r = exchange(a, b"GET /x?since=1 HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(
            r.contains("Content-Length: 3\r\n") && r.ends_with("\r\n\r\nok\n"),
            "{r}"
        );
        let r = exchange(a, b"HEAD /x HTTP/1.0\r\n\r\n");
        assert!(
            r.starts_with("HTTP/1.1 200 OK\r\n") && r.ends_with("\r\n\r\n"),
            "{r}"
        );
        let r = exchange(a, b"GET /y HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 404 "), "{r}");
        let r = exchange(
            a,
            b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nab",
        );
        assert!(
            r.starts_with("HTTP/1.1 405 ") && r.contains("Allow: GET, HEAD"),
            "{r}"
        );
        let r = exchange(a, b"GET /x HTTP/9.9\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 505 "), "{r}");
    }

    #[test]
    fn a_hostile_client_costs_bounded_time_and_memory() {
        let a = server();
        // A body announced as 2^63 bytes and never sent: 413 at once (the parser's body
        // limit); one of 5,000 bytes never sent: answered, then closed (a body is never
        // read or waited for, nothing is allocated for it).
        let r = exchange(
            a,
            b"GET /x HTTP/1.1\r\nHost: h\r\nContent-Length: 9223372036854775807\r\n\r\n",
        );
        assert!(r.starts_with("HTTP/1.1 413 "), "{r}");
        let t = Instant::now();
        let r = exchange(
            a,
            b"GET /x HTTP/1.1\r\nHost: h\r\nContent-Length: 5000\r\n\r\n",
        );
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        // A head larger than the limit: 431.
        let mut big = b"GET /x HTTP/1.1\r\nHost: h\r\nX: ".to_vec();
        big.resize(MAX_HEAD + 100, b'a');
        let r = exchange(a, &big);
        assert!(r.starts_with("HTTP/1.1 431 "), "{r}");
        // Clients that send half a head and wait each hold one worker until the
        // deadline: a scrape beside them is answered at once; beyond the workers, 503.
        let half = || {
            let mut s = TcpStream::connect(a).unwrap();
            s.write_all(b"GET /x HT").unwrap();
            s
        };
        let slow: Vec<TcpStream> = (0..WORKERS - 1).map(|_| half()).collect();
        std::thread::sleep(Duration::from_millis(100));
        let t = Instant::now();
        let r = exchange(a, b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        // (its worker drains what the client still sends for at most 200 ms: let it end,
        // or both half heads below could find it still busy, get their 503 and leave a
        // worker free for the request after them)
        std::thread::sleep(Duration::from_millis(400));
        let more: Vec<TcpStream> = (0..2).map(|_| half()).collect();
        std::thread::sleep(Duration::from_millis(100));
        let r = exchange(a, b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 503 "), "{r}");
        // After the deadline the workers are free again.
        std::thread::sleep(DEADLINE + Duration::from_millis(300));
        let r = exchange(a, b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        drop((slow, more));
    }
}
