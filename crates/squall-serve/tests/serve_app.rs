//! `squall serve`'s app on a node over the in-memory wire (virtual clock, no root): a
//! scripted raw client sends bytes in pieces at set times and collects the answers.
//! Pipelined requests split across segments, 100-continue, parse errors, the header and
//! idle timeouts, the connection limit and the graceful stop.

use std::collections::HashMap;
use std::sync::Arc;

use squall_http::Limits;
use squall_port::mem::{pair, MemConfig, MemPort};
use squall_port::Port;
use squall_serve::app::{AppConfig, ServeApp};
use squall_serve::files::Files;
use squall_serve::respond::Route;
use squall_stack::{Node, NodeApp, NodeConfig, NodeIo, Owned};
use squall_tcp::{BufId, CloseReason, Ctl, FlowId, OptsId, TcpApp, TcpConfig};

const MS: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const MC: [u8; 6] = [2, 0, 0, 0, 0, 0xb];
const IP_S: u32 = 0xc612_3001; // 198.18.48.1
const IP_C: u32 = 0xc612_0002; // 198.18.0.2
const MS_NS: u64 = 1_000_000;

fn node(port: MemPort, mac: [u8; 6], peer: [u8; 6], ip: u32) -> Node<MemPort> {
    let tcp = TcpConfig {
        mac,
        gateway_mac: peer,
        ..TcpConfig::default()
    };
    let cfg = NodeConfig {
        owned: Owned(vec![(ip, ip)]),
        ..NodeConfig::default()
    };
    Node::new(port, tcp, cfg, 0)
}

/// One scripted connection: pieces to send at times (ns after the start), what came back.
#[derive(Default)]
struct Script {
    pieces: Vec<(u64, BufId, u32)>,
    next: usize,
    flow: Option<FlowId>,
    connected: bool,
    got: Vec<u8>,
    peer_closed: bool,
    closed: Option<CloseReason>,
    /// Send our FIN once every piece is sent (a half-close, as `nc -N` does).
    half_close: bool,
    fin_sent: bool,
}

#[derive(Default)]
struct RawClient {
    conns: Vec<Script>,
    by_flow: HashMap<u32, usize>,
    now: u64,
}

impl TcpApp for RawClient {
    fn on_connected(&mut self, _ctl: &mut Ctl, f: FlowId) {
        self.conns[self.by_flow[&f.0]].connected = true;
    }
    fn on_data(&mut self, _ctl: &mut Ctl, f: FlowId, data: &[u8]) {
        self.conns[self.by_flow[&f.0]].got.extend_from_slice(data);
    }
    fn on_peer_closed(&mut self, ctl: &mut Ctl, f: FlowId) {
        self.conns[self.by_flow[&f.0]].peer_closed = true;
        ctl.close();
    }
    fn on_closed(&mut self, f: FlowId, r: CloseReason) {
        if let Some(&i) = self.by_flow.get(&f.0) {
            self.conns[i].closed = Some(r);
        }
    }
}

impl NodeApp for RawClient {
    fn begin_turn(&mut self, now: u64) {
        self.now = now;
    }
    fn owns_tcp_port(&self, _port: u16) -> bool {
        false
    }
    fn poll<P: Port>(&mut self, io: &mut NodeIo<'_, P>) -> bool {
        let mut work = false;
        let mut fins = Vec::new();
        for i in 0..self.conns.len() {
            let s = &mut self.conns[i];
            if s.flow.is_none() {
                let f = io
                    .connect(IP_C, 40_000 + i as u16, IP_S, 80, OptsId::DEFAULT)
                    .expect("connect");
                s.flow = Some(f);
                self.by_flow.insert(f.0, i);
                work = true;
                continue;
            }
            while s.connected
                && s.closed.is_none()
                && s.next < s.pieces.len()
                && s.pieces[s.next].0 <= self.now
            {
                let (_, b, n) = s.pieces[s.next];
                io.send(s.flow.unwrap(), b, 0, n).expect("send");
                s.next += 1;
                work = true;
            }
            if s.half_close && !s.fin_sent && s.next == s.pieces.len() {
                s.fin_sent = true;
                fins.extend(s.flow);
            }
        }
        for f in fins {
            io.close(self, f);
            work = true;
        }
        work
    }
}

struct Bench {
    s: Node<MemPort>,
    c: Node<MemPort>,
    app: ServeApp,
    client: RawClient,
    now: u64,
}

fn files() -> Arc<Files> {
    Arc::new(Files::from_memory(
        [
            ("/index.html", &b"<p>hi</p>\n"[..]),
            ("/big.bin", &[7u8; 100_000][..]),
        ],
        1_700_000_000,
    ))
}

impl Bench {
    fn new(max_conns: u32, scripts: Vec<Vec<(u64, &[u8])>>) -> Bench {
        Bench::logged(max_conns, scripts, None)
    }

    /// [`Bench::new`] with the access log `log`.
    fn logged(
        max_conns: u32,
        scripts: Vec<Vec<(u64, &[u8])>>,
        log: Option<squall_serve::log::AccessLog>,
    ) -> Bench {
        let (ps, pc) = pair(MemConfig::default()).unwrap();
        let (mut s, mut c) = (node(ps, MS, MC, IP_S), node(pc, MC, MS, IP_C));
        s.tcp.listen(80);
        let cfg = AppConfig {
            max_conns,
            idle_timeout_ns: 2_000 * MS_NS,
            header_timeout_ns: 500 * MS_NS,
            limits: Limits::default(),
        };
        let routes = [Route::parse("/ping return 200 \"pong\"").unwrap()];
        let app = ServeApp::new(cfg, files(), &routes, &mut s.tcp, log);
        let mut client = RawClient::default();
        for sc in scripts {
            let pieces = sc
                .into_iter()
                .map(|(t, b)| (t, c.tcp.buffers().register(Arc::from(b)), b.len() as u32))
                .collect();
            client.conns.push(Script {
                pieces,
                ..Script::default()
            });
        }
        Bench {
            s,
            c,
            app,
            client,
            now: 0,
        }
    }

    /// Runs the two nodes for `ms` of virtual time.
    fn run(&mut self, ms: u64) {
        let end = self.now + ms * MS_NS;
        while self.now < end {
            self.now += 20_000;
            self.s.turn(self.now, &mut self.app, None);
            self.c.turn(self.now, &mut self.client, None);
        }
    }

    fn got(&self, i: usize) -> String {
        String::from_utf8_lossy(&self.client.conns[i].got).into_owned()
    }
}

/// Status codes of the answers in `s`, in order.
fn codes(s: &str) -> Vec<u16> {
    s.match_indices("HTTP/1.1 ")
        .map(|(i, _)| s[i + 9..i + 12].parse().unwrap())
        .collect()
}

#[test]
fn pipelined_requests_split_across_segments_are_answered_in_order() {
    let reqs = b"GET /ping HTTP/1.1\r\nHost: a\r\n\r\nGET /index.html HTTP/1.1\r\nHost: a\r\n\r\nHEAD /big.bin HTTP/1.1\r\nHost: a\r\n\r\nGET /nope HTTP/1.1\r\nHost: a\r\n\r\nGET /big.bin HTTP/1.1\r\nHost: a\r\nRange: bytes=10-19\r\n\r\n";
    // The bytes in pieces cut mid-line, mid-CRLF and between requests.
    let cuts = [5, 19, 20, 47, 60, 100, 101, 150, reqs.len()];
    let mut pieces = Vec::new();
    let mut at = 0;
    for (k, &c) in cuts.iter().enumerate() {
        pieces.push((10 * MS_NS * k as u64, &reqs[at..c]));
        at = c;
    }
    let mut b = Bench::new(10, vec![pieces]);
    b.run(300);
    let g = b.got(0);
    assert_eq!(codes(&g), [200, 200, 200, 404, 206], "{g}");
    assert!(g.contains("\r\n\r\npongHTTP/1.1 200 OK"), "{g}");
    assert!(g.contains("Content-Length: 100000\r\n"), "{g}");
    assert!(g.contains("Content-Range: bytes 10-19/100000\r\n"), "{g}");
    assert!(
        g.ends_with("\r\n\r\n\x07\x07\x07\x07\x07\x07\x07\x07\x07\x07"),
        "{g}"
    );
    // The HEAD answer carries no body: the 404 follows its empty line directly.
    assert!(g.contains("Accept-Ranges: bytes\r\nDate: ") && !g.contains("\x07HTTP/1.1 404"));
    assert_eq!(b.app.stats.requests, 5);
    assert_eq!(b.app.stats.parse_errors, 0);
    assert!(b.client.conns[0].closed.is_none(), "keep-alive");
}

#[test]
fn expect_continue_then_body_then_next_request() {
    let mut b = Bench::new(
        10,
        vec![vec![
            (0, &b"GET /ping HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"[..]),
            (50 * MS_NS, b"helloGET /ping HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"),
        ]],
    );
    b.run(200);
    let g = b.got(0);
    assert!(
        g.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"),
        "{g}"
    );
    assert_eq!(codes(&g), [100, 200, 200], "{g}");
    assert!(g.ends_with("Connection: close\r\n\r\npong"), "{g}");
    assert!(
        b.client.conns[0].peer_closed,
        "closed after Connection: close"
    );
}

#[test]
fn bad_requests_get_their_status_and_a_close() {
    // (request, status, whether the connection is closed after the answer)
    let cases: [(&[u8], u16, bool); 5] = [
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            400,
            true,
        ),
        (b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505, true),
        (
            b"POST /index.html HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
            405,
            true,
        ),
        // Well-formed, no body: the connection stays usable.
        (b"BREW /pot HTTP/1.1\r\nHost: a\r\n\r\n", 501, false),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nExpect: tea\r\n\r\n",
            417,
            true,
        ),
    ];
    let scripts = cases.iter().map(|(r, _, _)| vec![(0, *r)]).collect();
    let mut b = Bench::new(10, scripts);
    b.run(200);
    for (i, (_, code, close)) in cases.iter().enumerate() {
        let g = b.got(i);
        assert_eq!(codes(&g), [*code], "{g}");
        assert_eq!(g.contains("Connection: close\r\n"), *close, "{g}");
        assert_eq!(b.client.conns[i].peer_closed, *close, "case {i}");
    }
    assert!(b.got(2).contains("Allow: GET, HEAD\r\n"));
    assert_eq!(b.app.stats.parse_errors, 2);
}

#[test]
fn limits_are_answered_413_and_414_at_the_server() {
    let long_target = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(9000));
    let big_body = format!(
        "GET /ping HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\n\r\n",
        (1u64 << 20) + 1
    );
    let cases: [(&[u8], u16); 2] = [(long_target.as_bytes(), 414), (big_body.as_bytes(), 413)];
    let scripts = cases.iter().map(|(r, _)| vec![(0, *r)]).collect();
    let mut b = Bench::new(10, scripts);
    b.run(200);
    for (i, (_, code)) in cases.iter().enumerate() {
        let g = b.got(i);
        assert_eq!(codes(&g), [*code], "{g}");
        assert!(g.contains("Connection: close\r\n"), "{g}");
        assert!(b.client.conns[i].peer_closed, "case {i}");
    }
    assert_eq!(b.app.stats.parse_errors, 2);
}

#[test]
fn a_bad_body_after_the_answer_ends_the_connection_without_a_second_answer() {
    // A GET with a chunked body is answered at its head; its body then breaks the
    // chunked coding (a size that is no hex). The client must see exactly one answer
    // (a 400 after it would answer a request never sent), then the end of the stream.
    let mut b = Bench::new(
        10,
        vec![vec![
            (
                0,
                &b"GET /ping HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            ),
            (
                20 * MS_NS,
                b"zz\r\nhello\r\n0\r\n\r\nGET /index.html HTTP/1.1\r\nHost: a\r\n\r\n",
            ),
        ]],
    );
    b.run(200);
    let g = b.got(0);
    assert_eq!(codes(&g), [200], "{g}");
    assert!(g.ends_with("\r\n\r\npong"), "{g}");
    assert!(b.client.conns[0].peer_closed);
    assert_eq!(
        (b.app.stats.requests, b.app.stats.parse_errors),
        (1, 1),
        "one request answered, one broken body counted"
    );
}

#[test]
fn header_and_idle_timeouts_close_connections() {
    let mut b = Bench::new(
        10,
        vec![
            // Half a head, then nothing: 408 after the header timeout (500 ms).
            vec![(0, &b"GET /ping HTTP/1.1\r\nHo"[..])],
            // One request, then idle: closed after the idle timeout (2 s).
            vec![(0, b"GET /ping HTTP/1.1\r\nHost: a\r\n\r\n")],
        ],
    );
    b.run(400);
    assert!(!b.client.conns[0].peer_closed && !b.client.conns[1].peer_closed);
    b.run(300);
    assert_eq!(codes(&b.got(0)), [408]);
    // A 4xx answer carries a Date (RFC 9110 §6.6.1).
    assert!(b.got(0).contains("\r\nDate: "), "{}", b.got(0));
    assert!(b.client.conns[0].peer_closed);
    assert!(!b.client.conns[1].peer_closed, "not idle long enough yet");
    b.run(2_000);
    assert!(b.client.conns[1].peer_closed);
    assert_eq!(codes(&b.got(1)), [200]);
    assert_eq!(
        (b.app.stats.header_timeouts, b.app.stats.idle_closed),
        (1, 1)
    );
    b.run(100);
    assert_eq!(b.app.live, 0);
}

/// What the workers publish for `squall serve`'s reports: the idle connections (counted
/// by the sweep: nothing being read, every answer acknowledged) and one request-latency
/// value per burst of answers, once the burst is acknowledged.
#[test]
fn idle_connections_and_request_latency_are_counted() {
    let mut b = Bench::new(
        10,
        vec![
            // One request, answered and acknowledged: idle.
            vec![(0, &b"GET /ping HTTP/1.1\r\nHost: a\r\n\r\n"[..])],
            // Half a head: a request in progress, not idle.
            vec![(0, b"GET /ping HTTP/1.1\r\nHo")],
            // Two pipelined requests answered together: one latency value.
            vec![(
                0,
                b"GET /ping HTTP/1.1\r\nHost: a\r\n\r\nGET /ping HTTP/1.1\r\nHost: a\r\n\r\n",
            )],
        ],
    );
    assert_eq!(b.app.req_lat.count(), 0);
    b.run(300);
    assert_eq!(codes(&b.got(2)), [200, 200]);
    assert_eq!(b.app.live, 3);
    assert_eq!(b.app.idle, 2, "the half head is not idle");
    assert_eq!(b.app.req_lat.count(), 2, "one value per acknowledged burst");
    // The answers were acknowledged within the run, after the requests came.
    let p99 = b.app.req_lat.quantile(0.99);
    assert!(p99 < 300_000, "{p99} us");
}

/// One access-log line per answer, each with its status and the body bytes sent: the
/// answers built per request (404, 405), a parse error's (400), the header timeout's
/// (408) and the connection limit's (503) included.
#[test]
fn every_answer_is_logged_with_its_body_bytes() {
    let p = std::env::temp_dir().join(format!("squall-serve-log-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&p);
    let log = squall_serve::log::AccessLog::open(&p).unwrap();
    let mut b = Bench::logged(
        4,
        vec![
            vec![(0, &b"GET /nope HTTP/1.1\r\nHost: a\r\n\r\n"[..])],
            vec![(0, b"DELETE /ping HTTP/1.1\r\nHost: a\r\n\r\n")],
            vec![(0, b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n")],
            vec![(0, b"GET /ping HTTP/1.1\r\nHo")],
            vec![(20, b"GET /ping HTTP/1.1\r\nHost: a\r\n\r\n")],
        ],
        Some(log),
    );
    b.run(1_000);
    b.app.finish().unwrap();
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::remove_file(&p).unwrap();
    // (status, body bytes) of each line, and what the client got.
    let mut lines: Vec<(u16, usize)> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.rsplitn(5, ' ').collect();
            (f[3].parse().unwrap(), f[2].parse().unwrap())
        })
        .collect();
    lines.sort();
    let body = |i: usize| {
        let g = b.got(i);
        g.len() - g.find("\r\n\r\n").unwrap() - 4
    };
    let mut want = vec![
        (404, body(0)),
        (405, body(1)),
        (400, body(2)),
        (408, body(3)),
        (503, body(4)),
    ];
    want.sort();
    assert_eq!(lines, want, "{text}");
    assert!(want.iter().all(|&(_, n)| n > 0));
    // Every request counted, the timed-out one included (the 503 refused a connection
    // before any request).
    assert_eq!(b.app.stats.requests, 4);
}

/// Pipelined requests whose answers would pile up past the backlog a connection may have
/// unacknowledged wait for the client to take the answers before them, then go on: every
/// answer comes, whole and in order (a 100 KB file five times, a backlog of 150 KB).
#[test]
fn pipelined_requests_wait_behind_a_full_backlog() {
    let big = &b"GET /big.bin HTTP/1.1\r\nHost: a\r\n\r\n"[..];
    let mut reqs = big.repeat(5);
    reqs.extend_from_slice(b"GET /ping HTTP/1.1\r\nHost: a\r\n\r\n");
    let reqs: &'static [u8] = Box::leak(reqs.into_boxed_slice());
    // The second client half-closes right after its requests (its FIN reaches the
    // server while requests wait): every one is still answered, then the server closes.
    let mut b = Bench::new(10, vec![vec![(0, reqs)], vec![(0, reqs)]]);
    b.client.conns[1].half_close = true;
    b.app.set_backlog(150_000);
    b.run(2_000);
    for k in 0..2 {
        let g = &b.client.conns[k].got;
        let text = String::from_utf8_lossy(g);
        assert_eq!(codes(&text), [200, 200, 200, 200, 200, 200], "client {k}");
        assert_eq!(g.iter().filter(|&&c| c == 7).count(), 5 * 100_000);
        assert!(text.ends_with("\r\n\r\npong"));
    }
    assert!(!b.client.conns[0].peer_closed);
    // (the half-closed client ends at the server's FIN, from FIN-WAIT-2)
    assert_eq!(
        b.client.conns[1].closed,
        Some(CloseReason::Normal),
        "closed after the last answer"
    );
    assert_eq!(b.app.stats.requests, 12);
}

#[test]
fn connection_limit_answers_503() {
    let req = &b"GET /ping HTTP/1.1\r\nHost: a\r\n\r\n"[..];
    let mut b = Bench::new(2, vec![vec![(0, req)], vec![(0, req)], vec![(0, req)]]);
    b.run(200);
    let mut got: Vec<Vec<u16>> = (0..3).map(|i| codes(&b.got(i))).collect();
    got.sort();
    assert_eq!(got, [vec![200], vec![200], vec![503]]);
    assert_eq!(b.app.stats.refused, 1);
}

#[test]
fn graceful_stop_closes_idle_connections_and_finishes_the_others() {
    let mut b = Bench::new(
        10,
        vec![
            vec![(0, &b"GET /ping HTTP/1.1\r\nHost: a\r\n\r\n"[..])],
            vec![
                (0, b"GET /big.bin HTTP/1.1\r\nHo"),
                (150 * MS_NS, b"st: a\r\n\r\n"),
            ],
        ],
    );
    b.run(100);
    b.app.stop();
    b.run(300);
    // The idle one is closed; the one mid-request gets its whole answer, marked close.
    assert!(b.client.conns[0].peer_closed);
    let g = b.got(1);
    assert_eq!(codes(&g), [200]);
    assert!(g.contains("Connection: close\r\n"), "{g}");
    assert_eq!(
        b.client.conns[1].got.iter().filter(|&&c| c == 7).count(),
        100_000
    );
    assert!(b.client.conns[1].peer_closed);
    b.run(100);
    assert_eq!(b.app.live, 0);
}

#[test]
fn many_header_fields_up_to_the_limit() {
    let with = |n: usize| {
        let mut r = String::from("GET /ping HTTP/1.1\r\nHost: a\r\n");
        for i in 0..n {
            r.push_str(&format!("X-H{i}: v\r\n"));
        }
        r.push_str("\r\n");
        r.into_bytes()
    };
    // 30 fields: past the first, small header array; 70: past the limit of 64.
    let (ok, big) = (with(29), with(69));
    let mut b = Bench::new(10, vec![vec![(0, &ok[..])], vec![(0, &big[..])]]);
    b.run(100);
    assert_eq!(codes(&b.got(0)), [200]);
    assert_eq!(codes(&b.got(1)), [431]);
}

/// What RFC 9110/9112 ask of a server beyond the plain GET: preconditions (412), HTTP/1.0
/// keep-alive on every answer, absolute-form targets, HEAD without ranges, routes
/// matched percent-decoded, and empty lines between requests ignored.
#[test]
fn preconditions_versions_and_target_forms() {
    let mut b = Bench::new(
        10,
        vec![
            // 0: If-Match false (412), then If-Unmodified-Since older than the file (412,
            // even with a Range), then a true If-Match with a range (206).
            vec![(
                0,
                &b"GET /index.html HTTP/1.1\r\nHost: a\r\nIf-Match: \"nope\"\r\n\r\n\
GET /index.html HTTP/1.1\r\nHost: a\r\nRange: bytes=2-\r\nIf-Unmodified-Since: Thu, 01 Jan 1970 00:00:00 GMT\r\n\r\n\
GET /index.html HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1\r\nIf-Match: \"x\", *\r\n\r\n"[..],
            )],
            // 1: HTTP/1.0 keep-alive: a 404 and a 416 say keep-alive and keep the
            // connection, then a 200.
            vec![(
                0,
                b"GET /nope HTTP/1.0\r\nConnection: keep-alive\r\n\r\n\
GET /index.html HTTP/1.0\r\nConnection: keep-alive\r\nRange: bytes=100-\r\n\r\n\
GET /ping HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            )],
            // 2: absolute-form targets, a route percent-encoded, HEAD with a Range.
            vec![(
                0,
                b"GET http://a/index.html HTTP/1.1\r\nHost: a\r\n\r\n\
GET HTTP://a:80/p%69ng?x=1 HTTP/1.1\r\nHost: a\r\n\r\n\
HEAD /index.html HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1\r\n\r\n",
            )],
            // 3: a request followed by an empty line, then nothing: idle, no 408.
            vec![(0, b"GET /ping HTTP/1.1\r\nHost: a\r\n\r\n\r\n")],
            // 4: a route's preconditions (no validators): If-None-Match `*` matches its
            // current representation (304, GET and HEAD), another tag does not (200), an
            // If-Match other than `*` fails (412); a range unit in capitals.
            vec![(
                0,
                b"GET /ping HTTP/1.1\r\nHost: a\r\nIf-None-Match: *\r\n\r\n\
GET /ping HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"x\"\r\n\r\n\
HEAD /ping HTTP/1.1\r\nHost: a\r\nIf-None-Match: *\r\n\r\n\
GET /ping HTTP/1.1\r\nHost: a\r\nIf-Match: \"x\"\r\n\r\n\
GET /index.html HTTP/1.1\r\nHost: a\r\nRange: Bytes=0-1\r\n\r\n",
            )],
        ],
    );
    b.run(800);
    let g = b.got(0);
    assert_eq!(codes(&g), [412, 412, 206], "{g}");
    assert!(g.contains("\r\nDate: "), "{g}");
    assert!(g.ends_with("\r\n\r\n<p"), "{g}");
    let g = b.got(1);
    assert_eq!(codes(&g), [404, 416, 200], "{g}");
    assert_eq!(g.matches("Connection: keep-alive\r\n").count(), 3, "{g}");
    assert!(g.ends_with("pong"), "{g}");
    assert!(!b.client.conns[1].peer_closed, "kept alive");
    let g = b.got(2);
    assert_eq!(codes(&g), [200, 200, 200], "{g}");
    assert!(g.contains("\r\n\r\n<p>hi</p>\nHTTP/1.1 200 OK\r\n"), "{g}");
    assert!(g.contains("\r\n\r\npongHTTP/1.1 200 OK\r\n"), "{g}");
    assert!(
        g.ends_with("\r\n\r\n") && g.contains("Content-Length: 10\r\n"),
        "{g}"
    );
    assert_eq!(codes(&b.got(3)), [200]);
    assert!(
        !b.client.conns[3].peer_closed,
        "an empty line starts no head"
    );
    let g = b.got(4);
    assert_eq!(codes(&g), [304, 200, 304, 412, 206], "{g}");
    assert!(
        g.starts_with("HTTP/1.1 304 Not Modified\r\n")
            && !g[..g.find("\r\n\r\n").unwrap()].contains("Content-Length"),
        "{g}"
    );
    assert!(g.ends_with("\r\n\r\n<p"), "{g}");
    assert_eq!(b.app.stats.header_timeouts, 0);
    assert_eq!(b.app.stats.parse_errors, 0);
}
