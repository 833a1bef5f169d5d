//! W2 over a loop: C persistent connections, each looping a ~40-byte `GET /testu` request and
//! a ~150-byte response with an 80-byte body (one request in flight per connection), between
//! two hosts through in-process frame queues. Prints CPU time per request/response for both
//! ends together.
//!
//! `cargo run --release -p squall-tcp --example w2_loop -- [requests] [connections] [offload]`

use std::sync::Arc;
use std::time::Instant;

use squall_tcp::{BufId, Ctl, FlowId, TcpApp};

#[path = "loop_common/mod.rs"]
mod loop_common;
use loop_common::{cpu_ns, host_pair, loop_config, rx_all, Queue};

const REQ: &[u8] = b"GET /testu HTTP/1.1\r\nHost: 48.0.0.1\r\n\r\n";

struct Client {
    req: BufId,
    resp_len: u32,
    rx: Vec<u32>,
    done: u64,
    target: u64,
}
impl TcpApp for Client {
    fn on_connected(&mut self, ctl: &mut Ctl, _f: FlowId) {
        ctl.send(self.req, 0, REQ.len() as u32);
    }
    fn on_data(&mut self, ctl: &mut Ctl, f: FlowId, data: &[u8]) {
        let r = &mut self.rx[f.0 as usize];
        *r += data.len() as u32;
        if *r == self.resp_len {
            *r = 0;
            self.done += 1;
            if self.done < self.target {
                ctl.send(self.req, 0, REQ.len() as u32);
            }
        }
    }
}

struct Server {
    resp: BufId,
    resp_len: u32,
    rx: Vec<u32>,
}
impl TcpApp for Server {
    fn on_data(&mut self, ctl: &mut Ctl, f: FlowId, data: &[u8]) {
        let r = &mut self.rx[f.0 as usize];
        *r += data.len() as u32;
        if *r == REQ.len() as u32 {
            *r = 0;
            ctl.send(self.resp, 0, self.resp_len);
        }
    }
}

fn main() {
    // SQUALL_RX_SINGLE=1: per-frame `rx` instead of `rx_burst` (for comparison).
    let single = std::env::var("SQUALL_RX_SINGLE").is_ok_and(|v| v == "1");
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let conns: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let offload = args.next().as_deref() == Some("offload");
    // SQUALL_FAMILY=ipv6: the connections run over IPv6.
    let over_v6 = loop_common::ipv6();
    let body = [b'x'; 80];
    let mut resp = format!(
        "HTTP/1.1 200 OK\r\nServer: squall\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    resp.extend_from_slice(&body);
    let max_flows = conns + 16;
    let base = loop_config(max_flows, offload);
    let mut now = 1u64;
    let (mut ch, mut sh) = host_pair(base, now);
    sh.listen(80);
    let req = ch.buffers().register_static(REQ);
    let resp_len = resp.len() as u32;
    let resp = sh.buffers().register(Arc::from(resp));
    let mut capp = Client {
        req,
        resp_len,
        rx: vec![0; max_flows as usize],
        done: 0,
        target: n,
    };
    let mut sapp = Server {
        resp,
        resp_len,
        rx: vec![0; max_flows as usize],
    };
    let mut cq = Queue::new(1024, 0);
    let mut sq = Queue::new(1024, 0);
    let mut tmp = Queue::new(1024, 0);
    for k in 0..conns {
        loop_common::connect(
            &mut ch,
            now,
            &mut cq,
            (0x1000_0001 + (k % 200), 1025 + (k / 200) as u16),
            (0x3000_0001, 80),
            over_v6,
        )
        .unwrap();
    }
    let mut t0 = None;
    let mut warm = 0;
    while capp.done < n {
        if t0.is_none() && capp.done >= conns as u64 {
            t0 = Some((Instant::now(), cpu_ns()));
            warm = capp.done;
        }
        std::mem::swap(&mut cq, &mut tmp);
        rx_all(&mut sh, now, &tmp, &mut sapp, &mut sq, single);
        tmp.n = 0;
        std::mem::swap(&mut sq, &mut tmp);
        rx_all(&mut ch, now, &tmp, &mut capp, &mut cq, single);
        tmp.n = 0;
        now += 1_000;
        if cq.n == 0 && sq.n == 0 {
            if let Some(t) = [ch.next_timer(), sh.next_timer()]
                .into_iter()
                .flatten()
                .min()
            {
                now = now.max(t);
            }
        }
        ch.poll(now, &mut capp, &mut cq);
        sh.poll(now, &mut sapp, &mut sq);
    }
    let (w0, c0) = t0.expect("warm-up finished");
    let wall = w0.elapsed();
    let dt = match (c0, cpu_ns()) {
        (Some(a), Some(b)) => std::time::Duration::from_nanos(b - a),
        _ => wall,
    };
    let reqs = capp.done - warm;
    println!(
        "W2 loop: {} connections, {} requests measured, {:.3} s CPU, {:.3} us per request/response (both ends), client sndtotal {} server sndtotal {} checksums {}",
        conns,
        reqs,
        dt.as_secs_f64(),
        dt.as_secs_f64() * 1e6 / reqs as f64,
        ch.counters().tcps_sndtotal,
        sh.counters().tcps_sndtotal,
        if offload { "offloaded" } else { "software" }
    );
}
