//! Robustness: hostile or random segments never panic the host (debug build: overflow
//! checks on) and every flow still ends. Randomised from fixed seeds.

mod common;

use common::wire::{self, FrameHdr};
use common::{Family, Rng, VecSink};
use squall_tcp::{CloseReason, Ctl, FlowId, TcpApp, TcpConfig, TcpHost};

#[derive(Default)]
struct Echo {
    closed: u64,
}
impl TcpApp for Echo {
    fn on_data(&mut self, ctl: &mut Ctl, _f: FlowId, d: &[u8]) {
        if d.first() == Some(&b'x') {
            ctl.close();
        }
        if d.first() == Some(&b'a') {
            ctl.abort();
        }
        if !d.is_empty() && d.len() < 64 {
            ctl.send_owned(d.into());
        }
    }
    fn on_peer_closed(&mut self, ctl: &mut Ctl, _f: FlowId) {
        ctl.close();
    }
    fn on_closed(&mut self, _f: FlowId, _r: CloseReason) {
        self.closed += 1;
    }
}

fn frame(fam: Family, r: &mut Rng, port: u16, seq: u32, ack: u32) -> Vec<u8> {
    let flags = match r.below(10) {
        0..=4 => 0x10 | (r.next() as u8 & 0x08),
        5 => 0x02,
        6 => 0x11,
        _ => (r.next() & 0x3f) as u8,
    };
    let h = FrameHdr {
        src_mac: [2, 0, 0, 0, 0, 9],
        dst_mac: [2, 0, 0, 0, 0, 1],
        src_ip: 0x1000_0001,
        dst_ip: 0x3000_0001,
        ip_id: 1,
        src_port: port,
        dst_port: 80,
        seq,
        ack,
        flags,
        wnd: (r.next() & 0xffff) as u16,
        ttl: 64,
        tos: 0,
    };
    let olen = (r.below(11) * 4) as usize;
    let mut opts = vec![0u8; olen];
    for b in opts.iter_mut() {
        *b = match r.below(4) {
            0 => 1,
            1 => r.below(9) as u8,
            _ => r.next() as u8,
        };
    }
    let plen = if r.chance(0.5) {
        0
    } else {
        r.below(1400) as usize
    };
    let payload: Vec<u8> = (0..plen).map(|_| r.next() as u8).collect();
    let mut buf = wire::frame_in(fam, &h, &opts, &payload);
    if r.chance(0.05) {
        // Raw corruption of any byte (header fields included).
        let i = r.below(buf.len() as u64) as usize;
        buf[i] = r.next() as u8;
    }
    buf
}

per_family!(random_segments_never_panic_and_flows_end);
fn random_segments_never_panic_and_flows_end(fam: Family) {
    for seed in 1..=4u64 {
        let cfg = TcpConfig {
            max_flows: 64,
            max_half_open: 8,
            keepalive: Some((5_000_000_000, 1_000_000_000, 3)),
            opts: squall_tcp::FlowOpts {
                sack: seed % 2 == 0,
                timestamps: seed % 2 == 1,
                wscale: Some(7),
                ..squall_tcp::FlowOpts::default()
            },
            ..TcpConfig::default()
        };
        let mut host = TcpHost::new(cfg, 0);
        host.listen(80);
        let mut app = Echo::default();
        let mut sink = VecSink::default();
        let mut r = Rng::new(seed);
        let mut now = 0u64;
        // Learn plausible sequence numbers from the host's replies so that many segments are in window.
        let mut seqs: Vec<(u16, u32, u32)> = Vec::new();
        for _ in 0..30_000 {
            now += r.below(5_000_000);
            let port = 1000 + r.below(24) as u16;
            let (seq, ack) = match seqs.iter().rev().find(|s| s.0 == port) {
                Some(&(_, a, s)) if r.chance(0.8) => {
                    let ds = match r.below(6) {
                        0..=2 => 0,
                        3 => 1,
                        4 => u32::MAX,
                        _ => r.below(4000) as u32,
                    };
                    let da = match r.below(6) {
                        0..=2 => 1,
                        3 => 0,
                        _ => r.below(2000) as u32,
                    };
                    (a.wrapping_add(ds), s.wrapping_add(da))
                }
                _ => (r.next() as u32, r.next() as u32),
            };
            let f = frame(fam, &mut r, port, seq, ack);
            host.rx(now, &f, &mut app, &mut sink);
            host.poll(now, &mut app, &mut sink);
            for out in sink.frames.drain(..) {
                let s = wire::parse(&out).expect("host frames are always valid");
                assert_eq!(s.family, fam);
                seqs.push((s.dst_port, s.ack, s.seq));
            }
            if seqs.len() > 1000 {
                seqs.drain(..500);
            }
            if r.chance(0.01) {
                let k = r.below(64) as u32;
                host.abort(now, &mut app, &mut sink, FlowId(k));
            }
        }
        // Everything ends: run timers far into the future.
        for _ in 0..200 {
            now += 120_000_000_000;
            host.poll(now, &mut app, &mut sink);
            sink.frames.clear();
        }
        assert_eq!(
            host.flow_count(),
            0,
            "seed {seed}: flows left {}",
            host.flow_count()
        );
        // Over IPv6 every address id is given back with the flows (corrupted frames
        // name any address).
        assert_eq!(host.ipv6_addresses(), 0, "seed {seed}");
        let c = host.counters();
        assert!(c.tcps_rcvtotal >= 30_000);
        assert!(
            c.tcps_accepts > 10,
            "the random peer should complete some handshakes"
        );
        assert_eq!(
            app.closed, c.tcps_accepts,
            "every accepted flow reported closed exactly once"
        );
        eprintln!(
            "seed {seed}: accepts {} closed {} app_closed {} challenge {} badsum {} drops {}",
            c.tcps_accepts,
            c.tcps_closed,
            app.closed,
            c.tcps_challengeack,
            c.tcps_rcvbadsum,
            c.tcps_drops
        );
    }
}
