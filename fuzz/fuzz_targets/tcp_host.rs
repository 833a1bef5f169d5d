//! squall-tcp's host under hostile segments, guided by coverage: a host listening on
//! port 80 (SACK, timestamps, window scaling, keep-alive, a small flow table and
//! half-open budget) takes a sequence of events decoded from the input — segments from
//! four peer ports over IPv4 or IPv6 (control bits, window, raw option bytes, payload length, sequence and
//! acknowledgment numbers either arbitrary or near the ones the host's own frames carry,
//! so that most land in its window), clock steps, timer polls, and the application
//! sending, closing or aborting, and ICMP errors quoting the host's last frame (cut
//! short, a byte changed, any MTU) or arbitrary bytes. It must never panic (fuzz builds check arithmetic
//! overflow), every frame it sends must parse with a valid checksum, and once the
//! clock runs far ahead every flow must have ended and been reported closed once.
#![no_main]

use std::collections::HashSet;

use libfuzzer_sys::fuzz_target;
use squall_tcp::{
    CloseReason, Ctl, FlowId, FlowOpts, IcmpError, TcpApp, TcpConfig, TcpHost, TxSink,
};
use squall_wire::segment::{self, TxHdr, ACK};

const HOST_IP: u32 = 0x3000_0001;
const PEER_IP: u32 = 0x1000_0001;
const PORTS: u16 = 4;

/// The input as a stream of bytes (zeros once it runs out).
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn take(&mut self, n: usize) -> &[u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
    }
}

/// Frames the host sends, kept whole.
#[derive(Default)]
struct Sink {
    cur: Vec<u8>,
    frames: Vec<Vec<u8>>,
}

impl TxSink for Sink {
    fn alloc(&mut self, len: usize) -> Option<&mut [u8]> {
        self.cur.clear();
        self.cur.resize(len, 0);
        Some(&mut self.cur[..])
    }
    fn commit(&mut self, len: usize) {
        self.frames.push(self.cur[..len].to_vec());
    }
}

/// Echoes what it receives, and counts the flows it was told about.
#[derive(Default)]
struct App {
    /// Flows reported connected and not yet closed.
    open: HashSet<u32>,
}

impl TcpApp for App {
    fn on_connected(&mut self, _ctl: &mut Ctl, f: FlowId) {
        assert!(self.open.insert(f.0), "flow {} connected twice", f.0);
    }
    fn on_data(&mut self, ctl: &mut Ctl, _f: FlowId, d: &[u8]) {
        match d.first() {
            Some(b'c') => ctl.close(),
            Some(b'a') => ctl.abort(),
            _ => {
                let n = d.len().min(512);
                ctl.send_owned(d[..n].into());
            }
        }
    }
    fn on_peer_closed(&mut self, ctl: &mut Ctl, _f: FlowId) {
        ctl.close();
    }
    fn on_closed(&mut self, f: FlowId, _r: CloseReason) {
        assert!(self.open.remove(&f.0), "flow {} closed but not open", f.0);
    }
}

/// Per peer port: the host's last sequence and acknowledgment numbers seen.
#[derive(Clone, Copy, Default)]
struct Seen {
    seq: u32,
    ack: u32,
}

/// The IPv6 addresses of the host and its peer (2001:db8::/32, documentation).
const HOST_IP6: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const PEER_IP6: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9];

fn segment(inp: &mut Input, seen: &[Seen; PORTS as usize], v6: bool) -> Vec<u8> {
    let k = inp.u8();
    let port = 1000 + u16::from(k) % PORTS;
    let s = seen[usize::from(k % PORTS as u8)];
    let flags = inp.u8() & 0x3f;
    // Near the host's view (its ACK is our next sequence number, its sequence number
    // (+1) what we acknowledge): by small offsets most often, so that handshakes and
    // in-window data are found from an empty corpus; by 16-bit ones; or anywhere.
    let (seq, ack) = match k >> 6 {
        0 | 1 => {
            let ds = i32::from(inp.u8() as i8);
            let da = i32::from(inp.u8() as i8);
            (s.ack.wrapping_add_signed(ds), s.seq.wrapping_add_signed(da))
        }
        2 => {
            let ds = i32::from(inp.u16() as i16);
            let da = i32::from(inp.u16() as i16);
            (s.ack.wrapping_add_signed(ds), s.seq.wrapping_add_signed(da))
        }
        _ => (inp.u32(), inp.u32()),
    };
    let wnd = inp.u16();
    let olen = usize::from(inp.u8() % 11) * 4;
    let mut opts = inp.take(olen).to_vec();
    opts.resize(olen, 0);
    let plen = usize::from(inp.u16()) % 1461;
    let payload: Vec<u8> = match inp.u8() % 3 {
        0 => vec![b'x'; plen],
        1 => vec![b'c'; plen],
        _ => (0..plen).map(|i| i as u8).collect(),
    };
    let h = TxHdr {
        src_mac: [2, 0, 0, 0, 0, 9],
        dst_mac: [2, 0, 0, 0, 0, 1],
        src_ip: PEER_IP,
        dst_ip: HOST_IP,
        ip_id: 1,
        src_port: port,
        dst_port: 80,
        seq,
        ack,
        flags,
        wnd,
        ttl: 64,
        tos: 0,
    };
    let psum = u64::from(squall_wire::checksum::sum(&payload));
    let mut buf;
    if v6 {
        buf = vec![0u8; segment::HDRS6_LEN + olen + plen];
        let (at, sum) =
            segment::write_headers6_sum(&mut buf, &h, &PEER_IP6, &HOST_IP6, &opts, plen);
        buf[at..].copy_from_slice(&payload);
        segment::store_tcp6_checksum(&mut buf, sum, psum);
    } else {
        buf = vec![0u8; segment::HDRS_LEN + olen + plen];
        let (at, sum) = segment::write_headers_sum(&mut buf, &h, &opts, plen);
        buf[at..].copy_from_slice(&payload);
        segment::store_tcp_checksum(&mut buf, sum, psum);
    }
    // Sometimes a byte of the frame is corrupted after the checksums.
    if inp.u8() == 0xff {
        let i = usize::from(inp.u16()) % buf.len();
        buf[i] = inp.u8();
    }
    buf
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    let setup = inp.u8();
    let v6 = setup & 2 != 0;
    let cfg = TcpConfig {
        max_flows: 8,
        max_half_open: 3,
        keepalive: Some((5_000_000_000, 1_000_000_000, 3)),
        opts: FlowOpts {
            sack: setup & 1 == 0,
            timestamps: true,
            wscale: Some(7),
            ..FlowOpts::default()
        },
        ..TcpConfig::default()
    };
    let mut host = TcpHost::new(cfg, 1);
    host.listen(80);
    let mut app = App::default();
    let mut sink = Sink::default();
    let mut now = 1_000_000u64;
    let mut seen = [Seen::default(); PORTS as usize];
    let mut last_sent: Vec<u8> = Vec::new();
    let mut steps = 0;
    while !inp.0.is_empty() && steps < 2000 {
        steps += 1;
        match inp.u8() % 9 {
            0..=3 => {
                let f = segment(&mut inp, &seen, v6);
                host.rx(now, &f, &mut app, &mut sink);
            }
            4 => now += u64::from(inp.u16()) * 1000,
            5 => now += u64::from(inp.u8()) << 24,
            6 => host.poll(now, &mut app, &mut sink),
            7 => {
                let err = match inp.u8() % 4 {
                    0 => IcmpError::PacketTooBig {
                        mtu: u32::from(inp.u16()),
                    },
                    1 => IcmpError::Unreachable { hard: true },
                    2 => IcmpError::Unreachable { hard: false },
                    _ => IcmpError::Other,
                };
                let n = usize::from(inp.u8());
                let mut q = if inp.u8() & 1 == 0 {
                    last_sent.get(14..).unwrap_or(&[]).to_vec()
                } else {
                    inp.take(n).to_vec()
                };
                q.truncate(n.max(8));
                if inp.u8() == 0xff && !q.is_empty() {
                    let i = usize::from(inp.u8()) % q.len();
                    q[i] = inp.u8();
                }
                host.icmp_error(now, v6, &q, err, &mut app, &mut sink);
            }
            _ => {
                let f = FlowId(u32::from(inp.u8() % 8));
                match inp.u8() % 3 {
                    0 => {
                        let _ = host.send_owned(now, &mut sink, f, vec![b'y'; 3000].into());
                    }
                    1 => host.close(now, &mut app, &mut sink, f),
                    _ => host.abort(now, &mut app, &mut sink, f),
                }
            }
        }
        if let Some(f) = sink.frames.last() {
            last_sent.clone_from(f);
        }
        for out in sink.frames.drain(..) {
            let s = if v6 {
                let (s, src, dst) = segment::parse6_opt(&out, true)
                    .expect("the host's frames parse, checksums valid");
                assert_eq!((src, dst), (HOST_IP6, PEER_IP6));
                s
            } else {
                segment::parse(&out).expect("the host's frames parse, checksums valid")
            };
            let p = usize::from(s.dst_port.wrapping_sub(1000));
            if p < usize::from(PORTS) {
                seen[p] = Seen {
                    seq: s.seq,
                    ack: if s.flags & ACK != 0 {
                        s.ack
                    } else {
                        seen[p].ack
                    },
                };
            }
        }
    }
    // Every flow ends: timers run far into the future.
    for _ in 0..100 {
        now += 120_000_000_000;
        host.poll(now, &mut app, &mut sink);
        sink.frames.clear();
    }
    assert_eq!(host.flow_count(), 0, "flows left after every timer ran");
    assert_eq!(
        host.ipv6_addresses(),
        0,
        "IPv6 address ids given back with the flows"
    );
    assert!(
        app.open.is_empty(),
        "flows never reported closed: {:?}",
        app.open
    );
});
