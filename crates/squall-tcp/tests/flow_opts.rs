//! Per-flow options (`FlowOpts`): flows opened with `connect_with` or accepted on a port
//! set up with `listen_with` use their own MSS, initial window, delayed ACK, RFC 7323 /
//! SACK offers, TTL and TOS, while other flows of the same host keep the defaults. Every
//! check reads the emitted frames.

mod common;
use common::wire::{self, ACK, SYN};
use common::*;
use squall_tcp::{FlowOpts, OptsId, TcpConfig, TcpHost};

const T0: u64 = 1_000_000_000;

fn hosts(ccfg: TcpConfig, scfg: TcpConfig) -> (TcpHost, TcpHost) {
    host_pair(ccfg, scfg, T0)
}

/// A client and a server host with the W1 applications, driven in lock step; every
/// frame each side emitted is kept for inspection.
struct Pair {
    /// The family of every flow (and every frame, checked by `seg_of`'s callers).
    fam: Family,
    ch: TcpHost,
    sh: TcpHost,
    capp: W1Client,
    sapp: W1Server,
    cq: VecSink,
    sq: VecSink,
    /// Frames sent by the client / by the server, in order.
    c_sent: Vec<Vec<u8>>,
    s_sent: Vec<Vec<u8>>,
    now: u64,
}

impl Pair {
    fn new(fam: Family, ccfg: TcpConfig, scfg: TcpConfig) -> Self {
        let (mut ch, mut sh) = hosts(ccfg, scfg);
        let (capp, sapp) = w1_apps(&mut ch, &mut sh);
        Pair {
            fam,
            ch,
            sh,
            capp,
            sapp,
            cq: VecSink::default(),
            sq: VecSink::default(),
            c_sent: Vec::new(),
            s_sent: Vec::new(),
            now: T0,
        }
    }

    fn connect(&mut self, k: u32, port: u16, opts: OptsId) {
        let (local, remote) = ((client_ip(k), client_port(k)), (SERVER_IP, port));
        let f = self
            .fam
            .connect(&mut self.ch, self.now, &mut self.cq, local, remote, opts)
            .unwrap();
        self.capp.started(f, k);
    }

    /// Delivers the frames queued by the client to the server; returns how many.
    fn client_to_server(&mut self) -> usize {
        let fr = std::mem::take(&mut self.cq.frames);
        for f in &fr {
            self.sh.rx(self.now, f, &mut self.sapp, &mut self.sq);
        }
        let n = fr.len();
        self.c_sent.extend(fr);
        n
    }

    fn server_to_client(&mut self) -> usize {
        let fr = std::mem::take(&mut self.sq.frames);
        for f in &fr {
            self.ch.rx(self.now, f, &mut self.capp, &mut self.cq);
        }
        let n = fr.len();
        self.s_sent.extend(fr);
        n
    }

    /// Runs until every flow is closed on both sides (bounded).
    fn finish(&mut self, flows: u64) {
        for _ in 0..100_000 {
            if self.capp.done >= flows && self.sapp.done >= flows && self.ch.flow_count() == 0 {
                break;
            }
            let n = self.client_to_server() + self.server_to_client();
            if n == 0 {
                self.now = [self.ch.next_timer(), self.sh.next_timer()]
                    .into_iter()
                    .flatten()
                    .min()
                    .unwrap_or(self.now + 1)
                    .max(self.now + 1);
            }
            self.ch.poll(self.now, &mut self.capp, &mut self.cq);
            self.sh.poll(self.now, &mut self.sapp, &mut self.sq);
        }
        assert_eq!(
            self.capp.ok, flows,
            "client failures {:?}",
            self.capp.failed
        );
        assert_eq!(
            self.sapp.ok, flows,
            "server failures {:?}",
            self.sapp.failed
        );
    }
}

/// Parsed view of an emitted frame.
fn seg_of(f: &[u8]) -> wire::Seg<'_> {
    wire::parse(f).expect("every emitted frame parses with valid checksums")
}

/// Frames of client flow `k` (either direction), each of family `fam`.
fn of_flow(fam: Family, frames: &[Vec<u8>], k: u32) -> Vec<&Vec<u8>> {
    let (ip, port) = (client_ip(k), client_port(k));
    frames
        .iter()
        .filter(|f| {
            let s = seg_of(f);
            assert_eq!(s.family, fam);
            (s.src_ip, s.src_port) == (ip, port) || (s.dst_ip, s.dst_port) == (ip, port)
        })
        .collect()
}

fn syn_mss(f: &[u8]) -> u16 {
    let s = seg_of(f);
    assert!(s.flags & SYN != 0);
    wire::parse_opts(s.opts).mss
}

per_family!(mss_536_flow_sends_and_advertises_536_others_keep_1460);
fn mss_536_flow_sends_and_advertises_536_others_keep_1460(fam: Family) {
    let mut p = Pair::new(fam, w1_config(), w1_config());
    p.sh.listen(80);
    let small =
        p.ch.add_flow_opts(FlowOpts {
            mss: 536,
            ..*p.ch.flow_opts(OptsId::DEFAULT)
        })
        .unwrap();
    assert_ne!(small, OptsId::DEFAULT);
    p.connect(0, 80, small);
    p.connect(1, 80, OptsId::DEFAULT);
    p.finish(2);
    let c_small = of_flow(fam, &p.c_sent, 0);
    let c_big = of_flow(fam, &p.c_sent, 1);
    // Over IPv6 both 20 bytes less (the option set's MSS is an IPv4 figure).
    let (small_mss, big_mss) = (fam.mss(536), fam.mss(1460));
    assert_eq!(syn_mss(c_small[0]), small_mss);
    assert_eq!(syn_mss(c_big[0]), big_mss);
    let s_small = of_flow(fam, &p.s_sent, 0);
    let s_big = of_flow(fam, &p.s_sent, 1);
    let max_small = s_small.iter().map(|f| seg_of(f).payload.len()).max();
    let max_big = s_big.iter().map(|f| seg_of(f).payload.len()).max();
    assert_eq!(max_small, Some(usize::from(small_mss)));
    assert_eq!(max_big, Some(usize::from(big_mss)));
    let data_small = s_small
        .iter()
        .filter(|f| !seg_of(f).payload.is_empty())
        .count();
    assert_eq!(data_small, RESP_LEN.div_ceil(small_mss.into()));
}

per_family!(listen_with_gives_accepted_flows_the_ports_options);
fn listen_with_gives_accepted_flows_the_ports_options(fam: Family) {
    // Server side: port 80 accepts with MSS 1000, port 81 with the default 1460.
    let mut p = Pair::new(fam, w1_config(), w1_config());
    let o =
        p.sh.add_flow_opts(FlowOpts {
            mss: 1000,
            ..w1_config().opts
        })
        .unwrap();
    p.sh.listen_with(80, o);
    p.sh.listen(81);
    p.connect(0, 80, OptsId::DEFAULT);
    p.connect(1, 81, OptsId::DEFAULT);
    p.finish(2);
    let s80 = of_flow(fam, &p.s_sent, 0);
    let s81 = of_flow(fam, &p.s_sent, 1);
    let (m80, m81) = (fam.mss(1000), fam.mss(1460));
    assert_eq!(syn_mss(s80[0]), m80);
    assert_eq!(syn_mss(s81[0]), m81);
    let max = |v: &[&Vec<u8>]| v.iter().map(|f| seg_of(f).payload.len()).max();
    assert_eq!(max(&s80), Some(usize::from(m80)));
    assert_eq!(max(&s81), Some(usize::from(m81)));
}

/// Server data segments sent before the client acknowledged any of them.
fn first_flight(fam: Family, init: u8) -> usize {
    let (mut p, fr) = server_first_flight(fam, init, 0);
    let n = fr.iter().filter(|f| !seg_of(f).payload.is_empty()).count();
    p.sq.frames = fr;
    p.finish(1);
    n
}

/// A pair whose server answers with initial window `init`, after the handshake of a
/// client flow whose ACKs go by `ack_bytes` (0: the default option set): the pair, and
/// the frames of the server's first flight, taken out of its queue.
fn server_first_flight(fam: Family, init: u8, ack_bytes: u16) -> (Pair, Vec<Vec<u8>>) {
    let mut p = Pair::new(fam, w1_config(), w1_config());
    let o =
        p.sh.add_flow_opts(FlowOpts {
            init_cwnd: init,
            ..w1_config().opts
        })
        .unwrap();
    p.sh.listen_with(80, o);
    let c =
        p.ch.add_flow_opts(FlowOpts {
            ack_bytes,
            ..*p.ch.flow_opts(OptsId::DEFAULT)
        })
        .unwrap();
    p.connect(0, 80, c);
    p.client_to_server(); // SYN
    p.server_to_client(); // SYN-ACK -> client ACK + request
    p.client_to_server(); // the server answers: its first flight
    let fr = std::mem::take(&mut p.sq.frames);
    (p, fr)
}

per_family!(init_cwnd_10_vs_2_first_flight);
fn init_cwnd_10_vs_2_first_flight(fam: Family) {
    assert_eq!(first_flight(fam, 10), 10);
    assert_eq!(first_flight(fam, 2), 2);
}

// `ack_bytes` (TRex's tcp.no_delay_counter): an ACK once that many bytes came since the
// last one; 0 keeps RFC 5681's ACK every second full-sized segment.
per_family!(ack_bytes_sets_how_many_received_bytes_make_an_ack_due);
fn ack_bytes_sets_how_many_received_bytes_make_an_ack_due(fam: Family) {
    // The server's first flight (initial window 20) after the handshake of a client flow
    // with `ack_bytes`: the pair, and the flight's frames.
    let flight = |ack_bytes: u16| server_first_flight(fam, 20, ack_bytes);
    let (_, fr) = flight(0);
    let l = fr.iter().map(|f| seg_of(f).payload.len()).max().unwrap() as u16;
    // Segments handed to the client one at a time: `want` pure ACKs for 8 of them.
    for (ack_bytes, want) in [(0, 4), (l, 8), (3 * l + 1, 2), (1, 8), (8 * l, 1)] {
        let (mut p, fr) = flight(ack_bytes);
        let data: Vec<&Vec<u8>> = fr
            .iter()
            .filter(|f| !seg_of(f).payload.is_empty())
            .collect();
        assert!(data.len() >= 9, "a flight of {}", data.len());
        let mut acks = 0;
        for f in &data[..8] {
            assert_eq!(seg_of(f).payload.len(), usize::from(l));
            p.ch.rx(p.now, f, &mut p.capp, &mut p.cq);
            acks += std::mem::take(&mut p.cq.frames)
                .iter()
                .filter(|f| {
                    let s = seg_of(f);
                    s.flags & ACK != 0 && s.payload.is_empty()
                })
                .count();
        }
        assert_eq!(acks, want, "ack_bytes {ack_bytes} (segments of {l})");
        // The same 8 segments in one receive burst: with ack_bytes each ACK still goes
        // as it falls due; without, one for the burst (burst_ack).
        let (mut q, fr2) = flight(ack_bytes);
        let burst: Vec<&[u8]> = fr2
            .iter()
            .filter(|f| !seg_of(f).payload.is_empty())
            .take(8)
            .map(|f| f.as_slice())
            .collect();
        q.ch.rx_burst(q.now, &burst, &mut q.capp, &mut q.cq);
        let in_burst = std::mem::take(&mut q.cq.frames)
            .iter()
            .filter(|f| {
                let s = seg_of(f);
                s.flags & ACK != 0 && s.payload.is_empty()
            })
            .count();
        let want_burst = if ack_bytes == 0 { 1 } else { want };
        assert_eq!(in_burst, want_burst, "ack_bytes {ack_bytes}, one burst");
        // The rest in order: the flow completes.
        for f in &fr {
            if !data[..8].contains(&f) {
                p.ch.rx(p.now, f, &mut p.capp, &mut p.cq);
            }
        }
        p.finish(1);
    }
}

per_family!(delack_zero_acks_every_segment_at_once);
fn delack_zero_acks_every_segment_at_once(fam: Family) {
    for (delack, want_ack) in [(0u64, true), (100_000_000, false)] {
        let mut p = Pair::new(fam, w1_config(), w1_config());
        p.sh.listen(80);
        let o =
            p.ch.add_flow_opts(FlowOpts {
                delack_ns: delack,
                ..*p.ch.flow_opts(OptsId::DEFAULT)
            })
            .unwrap();
        p.connect(0, 80, o);
        p.client_to_server();
        p.server_to_client();
        p.client_to_server();
        // Hand the client only the first data segment of the server's flight.
        let fr = std::mem::take(&mut p.sq.frames);
        let first = fr
            .iter()
            .position(|f| !seg_of(f).payload.is_empty())
            .unwrap();
        p.ch.rx(p.now, &fr[first], &mut p.capp, &mut p.cq);
        let acks =
            p.cq.frames
                .iter()
                .filter(|f| {
                    let s = seg_of(f);
                    s.flags & ACK != 0 && s.payload.is_empty()
                })
                .count();
        assert_eq!(acks > 0, want_ack, "delack {delack}");
        // Deliver the rest in order and finish.
        for f in &fr[first + 1..] {
            p.ch.rx(p.now, f, &mut p.capp, &mut p.cq);
        }
        p.finish(1);
    }
}

per_family!(ttl_and_tos_appear_in_every_frame_of_the_flow);
fn ttl_and_tos_appear_in_every_frame_of_the_flow(fam: Family) {
    let mut p = Pair::new(fam, w1_config(), w1_config());
    let so =
        p.sh.add_flow_opts(FlowOpts {
            ttl: 9,
            tos: 0x48,
            ..w1_config().opts
        })
        .unwrap();
    p.sh.listen_with(80, so);
    p.sh.listen(81);
    let co =
        p.ch.add_flow_opts(FlowOpts {
            ttl: 200,
            tos: 0xb8,
            ..*p.ch.flow_opts(OptsId::DEFAULT)
        })
        .unwrap();
    p.connect(0, 80, co);
    p.connect(1, 81, OptsId::DEFAULT);
    p.finish(2);
    // TTL and TOS over IPv4, hop limit and traffic class over IPv6.
    let ip = |f: &[u8]| (seg_of(f).ttl, seg_of(f).tos);
    let c0 = of_flow(fam, &p.c_sent, 0);
    let s0 = of_flow(fam, &p.s_sent, 0);
    assert!(c0.len() > 5 && s0.len() > 20);
    assert!(c0.iter().all(|f| ip(f) == (200, 0xb8)));
    assert!(s0.iter().all(|f| ip(f) == (9, 0x48)));
    let c1 = of_flow(fam, &p.c_sent, 1);
    let s1 = of_flow(fam, &p.s_sent, 1);
    assert!(c1.iter().chain(s1.iter()).all(|f| ip(f) == (64, 0)));
}

per_family!(sack_and_timestamps_not_offered_when_disabled);
fn sack_and_timestamps_not_offered_when_disabled(fam: Family) {
    let cfg = TcpConfig {
        opts: FlowOpts {
            timestamps: true,
            sack: true,
            wscale: Some(2),
            ..FlowOpts::default()
        },
        ..w1_config()
    };
    let mut p = Pair::new(fam, cfg.clone(), cfg.clone());
    p.sh.listen(80);
    let plain =
        p.ch.add_flow_opts(FlowOpts {
            timestamps: false,
            sack: false,
            wscale: None,
            ..cfg.opts
        })
        .unwrap();
    p.connect(0, 80, plain);
    p.connect(1, 80, OptsId::DEFAULT);
    p.finish(2);
    let opts = |f: &[u8]| wire::parse_opts(seg_of(f).opts);
    let syn0 = opts(of_flow(fam, &p.c_sent, 0)[0]);
    let syn1 = opts(of_flow(fam, &p.c_sent, 1)[0]);
    assert!(!syn0.sack_ok && syn0.ts.is_none() && syn0.wscale.is_none());
    assert!(syn1.sack_ok && syn1.ts.is_some() && syn1.wscale == Some(2));
    // The server answers in kind: no timestamps on the plain flow's segments.
    let s0 = of_flow(fam, &p.s_sent, 0);
    assert!(s0.iter().all(|f| opts(f).ts.is_none() && !opts(f).sack_ok));
    let s1 = of_flow(fam, &p.s_sent, 1);
    assert!(s1.iter().all(|f| opts(f).ts.is_some()));
}

// No frames: the option sets of a host, the same for both families.
#[test]
fn option_sets_are_shared_and_bounded() {
    let (mut h, _) = hosts(TcpConfig::default(), TcpConfig::default());
    let d = *h.flow_opts(OptsId::DEFAULT);
    assert_eq!(h.add_flow_opts(d), Some(OptsId::DEFAULT));
    let mut last = None;
    for ttl in 1..=255u8 {
        last = h.add_flow_opts(FlowOpts { ttl, ..d });
    }
    // TTL 64 is the default set: 254 new sets (ids 1..=254) besides it.
    assert_eq!(last, Some(OptsId(254)));
    assert!(h.add_flow_opts(FlowOpts { tos: 1, ..d }).is_some());
    assert_eq!(h.add_flow_opts(FlowOpts { tos: 2, ..d }), None);
    assert_eq!(*h.flow_opts(OptsId(255)), FlowOpts { tos: 1, ..d });
}
