//! W1 over a loop: a client host and a server host exchange W1 flows (100-byte request,
//! 32,768-byte response, client closes after the last byte, server closes on FIN) through
//! two in-process frame queues, on a virtual clock. Prints CPU time per connection for both
//! ends together.
//!
//! `cargo run --release -p squall-tcp --example w1_loop -- [flows] [concurrency] [offload]`
//! (environment: `SQUALL_RING=N` frames per direction, default 512, 0 = unbounded;
//! `SQUALL_RX_SINGLE=1` per-frame `rx` instead of `rx_burst`; `SQUALL_FAMILY=ipv6` the
//! flows over IPv6). Concurrency up to
//! 100,000 and more works (flows get distinct 4-tuples from 200 client addresses).

use std::sync::Arc;
use std::time::Instant;

use squall_tcp::{BufId, CloseReason, Ctl, FlowId, TcpApp, TcpConfig, TcpHost};

#[path = "loop_common/mod.rs"]
mod loop_common;
use loop_common::{cpu_ns, host_pair, loop_config, rx_all, Queue};

struct Client {
    req: BufId,
    rx: Vec<u32>,
    done: u64,
    ok: u64,
}
impl TcpApp for Client {
    fn on_connected(&mut self, ctl: &mut Ctl, _f: FlowId) {
        ctl.send(self.req, 0, 100);
    }
    fn on_data(&mut self, ctl: &mut Ctl, f: FlowId, data: &[u8]) {
        let r = &mut self.rx[f.0 as usize];
        *r += data.len() as u32;
        if *r == 32_768 {
            ctl.close();
        }
    }
    fn on_closed(&mut self, f: FlowId, reason: CloseReason) {
        self.done += 1;
        if reason == CloseReason::Normal && self.rx[f.0 as usize] == 32_768 {
            self.ok += 1;
        }
        self.rx[f.0 as usize] = 0;
    }
}

struct Server {
    resp: BufId,
    rx: Vec<u32>,
}
impl TcpApp for Server {
    fn on_data(&mut self, ctl: &mut Ctl, f: FlowId, data: &[u8]) {
        let r = &mut self.rx[f.0 as usize];
        *r += data.len() as u32;
        if *r == 100 {
            ctl.send(self.resp, 0, 32_768);
        }
    }
    fn on_peer_closed(&mut self, ctl: &mut Ctl, _f: FlowId) {
        ctl.close();
    }
    fn on_closed(&mut self, f: FlowId, _reason: CloseReason) {
        self.rx[f.0 as usize] = 0;
    }
}

fn main() {
    // SQUALL_RX_SINGLE=1: per-frame `rx` instead of `rx_burst` (for comparison).
    let single = std::env::var("SQUALL_RX_SINGLE").is_ok_and(|v| v == "1");
    // SQUALL_RING=N: frames that may wait in each direction (a NIC ring); 0 = unbounded.
    let ring: usize = std::env::var("SQUALL_RING")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512);
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let conc: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    // Third argument "offload": the loop acts as a NIC with TCP checksum offload.
    let offload = args.next().as_deref() == Some("offload");
    let over_v6 = loop_common::ipv6();
    let max_flows = conc * 4 + 1024;
    let base = TcpConfig {
        time_wait_ns: 1_000_000, // short TIME_WAIT so slots recycle in this loop
        ..loop_config(max_flows, offload)
    };
    let mut now = 1u64;
    let (mut ch, mut sh) = host_pair(base, now);
    sh.listen(80);
    let req = ch.buffers().register(Arc::from(vec![b'G'; 100]));
    let resp = sh.buffers().register(Arc::from(vec![b'x'; 32_768]));
    let mut capp = Client {
        req,
        rx: vec![0; max_flows as usize],
        done: 0,
        ok: 0,
    };
    let mut sapp = Server {
        resp,
        rx: vec![0; max_flows as usize],
    };
    let cap = if ring == 0 { 1024 } else { ring };
    let mut cq = Queue::new(cap, ring);
    let mut sq = Queue::new(cap, ring);
    let mut tmp = Queue::new(cap, ring);
    let mut started = 0u32;
    let t0 = Instant::now();
    let c0 = cpu_ns();
    while capp.done < n as u64 {
        while started < n && (started as u64) < capp.done + conc as u64 {
            if ring != 0 && cq.n >= ring {
                break; // the wire backs up: open more flows next round
            }
            let k = started;
            let ip = 0x1000_0001 + (k % 200);
            let port = 1025 + ((k / 200) % 60_000) as u16;
            let opened = client_connect(
                &mut ch,
                now,
                &mut cq,
                (ip, port),
                (0x3000_0001, 80),
                over_v6,
            );
            if opened.is_err() {
                break;
            }
            started += 1;
        }
        // Client -> server.
        std::mem::swap(&mut cq, &mut tmp);
        server_rx(&mut sh, now, &tmp, &mut sapp, &mut sq, single);
        tmp.n = 0;
        // Server -> client.
        std::mem::swap(&mut sq, &mut tmp);
        client_rx(&mut ch, now, &tmp, &mut capp, &mut cq, single);
        tmp.n = 0;
        now += 1_000; // 1 us per round
        if cq.n == 0 && sq.n == 0 {
            let next = [ch.next_timer(), sh.next_timer()]
                .into_iter()
                .flatten()
                .min();
            if let Some(t) = next {
                now = now.max(t);
            }
        }
        client_poll(&mut ch, now, &mut capp, &mut cq);
        server_poll(&mut sh, now, &mut sapp, &mut sq);
    }
    let wall = t0.elapsed();
    let dt = match (c0, cpu_ns()) {
        (Some(a), Some(b)) => std::time::Duration::from_nanos(b - a),
        _ => wall,
    };
    let c = ch.counters();
    println!(
        "W1 loop: {} flows (ok {}), concurrency {}, ring {}, {:.3} s CPU, {:.2} us per connection (both ends), client sndtotal {} rcvtotal {}, server sndtotal {}, txfull {}/{}, rexmit {}",
        n,
        capp.ok,
        conc,
        ring,
        dt.as_secs_f64(),
        dt.as_secs_f64() * 1e6 / n as f64,
        c.tcps_sndtotal,
        c.tcps_rcvtotal,
        sh.counters().tcps_sndtotal,
        c.tcps_txfull,
        sh.counters().tcps_txfull,
        c.tcps_sndrexmitpack + sh.counters().tcps_sndrexmitpack
    );
}

// The work of each side goes through its own non-inlined function, so that callgrind
// splits the instructions by side (`callgrind_annotate --inclusive=yes`, or
// `--toggle-collect='w1_loop::server_*'`).

#[inline(never)]
fn server_rx(
    h: &mut TcpHost,
    now: u64,
    q: &Queue,
    app: &mut Server,
    out: &mut Queue,
    single: bool,
) {
    rx_all(h, now, q, app, out, single);
}

#[inline(never)]
fn client_rx(
    h: &mut TcpHost,
    now: u64,
    q: &Queue,
    app: &mut Client,
    out: &mut Queue,
    single: bool,
) {
    rx_all(h, now, q, app, out, single);
}

#[inline(never)]
fn server_poll(h: &mut TcpHost, now: u64, app: &mut Server, out: &mut Queue) {
    h.poll(now, app, out);
}

#[inline(never)]
fn client_poll(h: &mut TcpHost, now: u64, app: &mut Client, out: &mut Queue) {
    h.poll(now, app, out);
}

#[inline(never)]
fn client_connect(
    h: &mut TcpHost,
    now: u64,
    tx: &mut Queue,
    src: (u32, u16),
    dst: (u32, u16),
    over_v6: bool,
) -> Result<FlowId, squall_tcp::ConnectError> {
    loop_common::connect(h, now, tx, src, dst, over_v6)
}
