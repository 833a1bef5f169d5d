//! `squall serve`'s application under arbitrary request bytes, end to end: a node running
//! the server's app (a small file, a large one for ranges, a fixed route; default
//! limits) and a client node joined by the in-memory wire; the client opens one
//! connection and sends the input's bytes in pieces cut where the input says, with
//! virtual time between them. The server must never panic (fuzz builds check arithmetic
//! overflow); what it sends back must begin with an HTTP/1.1 status line whose head
//! parses; and once the clock runs past its timeouts it must have closed the connection
//! and every flow must have ended on both nodes.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use squall_http::{Header, Limits};
use squall_port::mem::{pair, MemConfig, MemPort};
use squall_port::Port;
use squall_serve::app::{AppConfig, ServeApp};
use squall_serve::files::Files;
use squall_serve::respond::Route;
use squall_stack::{Node, NodeApp, NodeConfig, NodeIo, Owned};
use squall_tcp::{BufId, CloseReason, Ctl, FlowId, OptsId, TcpApp, TcpConfig};

const MAC_S: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const MAC_C: [u8; 6] = [2, 0, 0, 0, 0, 0xb];
const IP_S: u32 = 0xc612_3001; // 198.18.48.1
const IP_C: u32 = 0xc612_0002; // 198.18.0.2
const MS: u64 = 1_000_000;

fn node(port: MemPort, mac: [u8; 6], peer: [u8; 6], ip: u32) -> Node<MemPort> {
    let tcp = TcpConfig {
        mac,
        gateway_mac: peer,
        max_flows: 16,
        time_wait_ns: 100 * MS,
        fin_wait2_ns: 500 * MS,
        ..TcpConfig::default()
    };
    let cfg = NodeConfig {
        owned: Owned(vec![(ip, ip)]),
        ..NodeConfig::default()
    };
    Node::new(port, tcp, cfg, 0)
}

fn files() -> Arc<Files> {
    Arc::new(Files::from_memory(
        [
            ("/a.html", &b"<p>hi</p>\n"[..]),
            ("/big", &[7u8; 50_000][..]),
        ],
        1_700_000_000,
    ))
}

/// One connection sending `pieces` (registered buffers) one per millisecond.
#[derive(Default)]
struct Client {
    pieces: Vec<(BufId, u32)>,
    next: usize,
    flow: Option<FlowId>,
    connected: bool,
    got: Vec<u8>,
    closed: bool,
    now: u64,
    last_sent: u64,
}

impl TcpApp for Client {
    fn on_connected(&mut self, _ctl: &mut Ctl, _f: FlowId) {
        self.connected = true;
    }
    fn on_data(&mut self, _ctl: &mut Ctl, _f: FlowId, data: &[u8]) {
        if self.got.len() < 1 << 20 {
            self.got.extend_from_slice(data);
        }
    }
    fn on_peer_closed(&mut self, ctl: &mut Ctl, _f: FlowId) {
        ctl.close();
    }
    fn on_closed(&mut self, _f: FlowId, _r: CloseReason) {
        self.closed = true;
    }
}

impl NodeApp for Client {
    fn begin_turn(&mut self, now: u64) {
        self.now = now;
    }
    fn owns_tcp_port(&self, _port: u16) -> bool {
        false
    }
    fn poll<P: Port>(&mut self, io: &mut NodeIo<'_, P>) -> bool {
        let Some(f) = self.flow else {
            self.flow = io.connect(IP_C, 40_000, IP_S, 80, OptsId::DEFAULT).ok();
            return true;
        };
        if self.connected
            && !self.closed
            && self.next < self.pieces.len()
            && self.now >= self.last_sent + MS
        {
            let (b, n) = self.pieces[self.next];
            if io.send(f, b, 0, n).is_ok() {
                self.next += 1;
                self.last_sent = self.now;
                return true;
            }
        }
        false
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&cuts, data)) = data.split_first() else {
        return;
    };
    let data = &data[..data.len().min(16 * 1024)];
    let wire = MemConfig {
        frames: 512,
        ring_size: 256,
        ..MemConfig::default()
    };
    let (ps, pc) = pair(wire).expect("wire");
    let (mut s, mut c) = (node(ps, MAC_S, MAC_C, IP_S), node(pc, MAC_C, MAC_S, IP_C));
    s.tcp.listen(80);
    let cfg = AppConfig {
        max_conns: 4,
        idle_timeout_ns: 200 * MS,
        header_timeout_ns: 100 * MS,
        limits: Limits::default(),
    };
    let routes = [Route::parse("/ping return 200 \"pong\"").expect("route")];
    let mut app = ServeApp::new(cfg, files(), &routes, &mut s.tcp, None);
    // The input in pieces: (cuts % 8) + 1 of them, of lengths from the input's bytes.
    let n = usize::from(cuts % 8) + 1;
    let mut client = Client::default();
    let mut at = 0;
    for k in 0..n {
        let end = if k + 1 == n {
            data.len()
        } else {
            let step = data.get(at).map_or(1, |&b| usize::from(b) % 64 + 1);
            (at + step).min(data.len())
        };
        if end > at {
            let b = c.tcp.buffers().register(Arc::from(&data[at..end]));
            client.pieces.push((b, (end - at) as u32));
        }
        at = end;
    }
    let mut now = 0u64;
    // The pieces go out over ~n ms; then the server's timeouts run out (header 100 ms,
    // idle 200 ms, TIME_WAIT 100 ms, FIN_WAIT_2 500 ms), in coarser steps.
    let phases = [
        (20_000u64, 30 * MS),
        (200_000, 400 * MS),
        (5_000_000, 3_000 * MS),
    ];
    for (step, span) in phases {
        let until = now + span;
        while now < until {
            now += step;
            s.turn(now, &mut app, None);
            c.turn(now, &mut client, None);
        }
    }
    if !client.got.is_empty() {
        assert!(
            client.got.starts_with(b"HTTP/1.1 "),
            "answer: {:?}",
            String::from_utf8_lossy(&client.got[..client.got.len().min(200)])
        );
        let mut h = [Header::EMPTY; 32];
        let parsed = squall_http::parse_response(&client.got, &mut h, &Limits::default(), false);
        assert!(
            matches!(parsed, Ok(Some(_))),
            "first answer's head: {parsed:?}"
        );
    }
    assert!(client.closed, "the server closed the connection");
    assert_eq!(s.tcp.flow_count(), 0, "server flows left");
    assert_eq!(c.tcp.flow_count(), 0, "client flows left");
});
