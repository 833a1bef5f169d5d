//! Regression tests for the receive-path defects of issue #10 (review of the TCP against
//! the RFCs): TS.Recent ordering (RFC 7323 §5.3), the out-of-order memory budget, rate
//! limits of challenge / duplicate ACKs (RFC 5961 §7, CVE-2016-5696), SND.WL1 on the fast
//! path, hostile SACK blocks and TSecr values, SYN-cookie options, bare out-of-order FINs
//! and RSTs in TIME_WAIT (RFC 1337). A hand-driven peer feeds crafted segments to one host,
//! which may hold several flows (one per local port).

mod common;

use std::sync::Arc;

use common::wire::{self, Out, ACK, FIN, RST, SYN};
use common::{Family, Rng, VecSink};
use squall_tcp::{CloseReason, Ctl, FlowId, FlowOpts, OptsId, State, TcpApp, TcpConfig, TcpHost};

const HOST_IP: u32 = 0x1000_0001;
const PEER_IP: u32 = 0x3000_0001;
const PP: u16 = 80;
const HP: u16 = 40_000;
const MS: u64 = 1_000_000;

#[derive(Default)]
struct App {
    data: Vec<u8>,
    peer_closed: u32,
    closed: Vec<CloseReason>,
}
impl TcpApp for App {
    fn on_data(&mut self, _ctl: &mut Ctl, _f: FlowId, d: &[u8]) {
        self.data.extend_from_slice(d);
    }
    fn on_peer_closed(&mut self, _ctl: &mut Ctl, _f: FlowId) {
        self.peer_closed += 1;
    }
    fn on_closed(&mut self, _f: FlowId, r: CloseReason) {
        self.closed.push(r);
    }
}

/// One established flow: the host's local port, its SND.NXT and the peer's next sequence.
#[derive(Clone, Copy, Debug)]
struct Conn {
    flow: FlowId,
    hp: u16,
    snd: u32,
    rcv: u32,
}

struct H {
    /// The family of the peer's segments and the host's flows.
    fam: Family,
    host: TcpHost,
    app: App,
    sink: VecSink,
    now: u64,
}

fn cfg() -> TcpConfig {
    TcpConfig {
        mac: [2, 0, 0, 0, 0, 1],
        gateway_mac: [2, 0, 0, 0, 0, 9],
        max_flows: 512,
        ..TcpConfig::default()
    }
}

fn with_opts(o: FlowOpts) -> TcpConfig {
    TcpConfig { opts: o, ..cfg() }
}

fn ts_opt(val: u32, ecr: u32) -> Vec<u8> {
    let mut o = vec![1, 1, 8, 10];
    o.extend_from_slice(&val.to_be_bytes());
    o.extend_from_slice(&ecr.to_be_bytes());
    o
}

impl H {
    fn new(cfg: TcpConfig) -> Self {
        H {
            fam: Family::V4,
            host: TcpHost::new(cfg, 0),
            app: App::default(),
            sink: VecSink::default(),
            now: 0,
        }
    }
    /// The same over `fam` (the peer's segments and the flows the test opens).
    fn over(mut self, fam: Family) -> Self {
        self.fam = fam;
        self
    }
    #[allow(clippy::too_many_arguments)]
    fn feed(&mut self, hp: u16, seq: u32, ack: u32, flags: u8, wnd: u16, o: &[u8], p: &[u8]) {
        let (peer, host) = ((PEER_IP, PP), (HOST_IP, hp));
        let f = wire::peer_frame(self.fam, peer, host, seq, ack, flags, wnd, o, p);
        self.host.rx(self.now, &f, &mut self.app, &mut self.sink);
    }
    fn take(&mut self) -> Vec<Out> {
        let v: Vec<Out> = self.sink.frames.drain(..).map(|f| Out::of(&f)).collect();
        assert!(v.iter().all(|o| o.family == self.fam), "{v:?}");
        v
    }
    /// Active open from local port `hp`, answered by a SYN-ACK with `peer_opts`.
    fn open(&mut self, hp: u16, peer_opts: &[u8]) -> Conn {
        let flow = self
            .fam
            .connect(
                &mut self.host,
                self.now,
                &mut self.sink,
                (HOST_IP, hp),
                (PEER_IP, PP),
                OptsId::DEFAULT,
            )
            .unwrap();
        let syn = self.take().pop().expect("SYN");
        let snd = syn.seq.wrapping_add(1);
        self.feed(hp, 5000, snd, SYN | ACK, 65535, peer_opts, &[]);
        assert_eq!(self.host.state(flow), State::Established);
        self.take();
        Conn {
            flow,
            hp,
            snd,
            rcv: 5001,
        }
    }
}

/// MSS 1460 and timestamps (TSval `val`).
fn mss_ts(val: u32) -> Vec<u8> {
    let mut o = vec![2, 4, 0x05, 0xb4];
    o.extend(ts_opt(val, 1));
    o
}

fn ts_cfg() -> TcpConfig {
    with_opts(FlowOpts {
        timestamps: true,
        ..FlowOpts::default()
    })
}

// Item 2. RFC 7323 §5.3: TS.Recent is updated (R3) only for segments that pass the
// sequence check (R2). An off-path segment with a wrong sequence number and a huge TSval
// must not move TS.Recent, or PAWS would then drop every genuine segment.
per_family!(rfc7323_5_3_ts_recent_not_moved_by_unacceptable_segment);
fn rfc7323_5_3_ts_recent_not_moved_by_unacceptable_segment(fam: Family) {
    let mut h = H::new(ts_cfg()).over(fam);
    let c = h.open(HP, &mss_ts(1000));
    let f = c.flow;
    // Below the window (SEG.SEQ <= RCV.NXT, so the old R3 test passed) and far above it.
    for off_seq in [c.rcv.wrapping_sub(1_000_000), c.rcv.wrapping_add(1_000_000)] {
        h.feed(
            HP,
            off_seq,
            c.snd,
            ACK,
            65535,
            &ts_opt(1000 + (1 << 30), 1),
            b"evil",
        );
        assert_eq!(h.host.flow_info(f).unwrap().ts_recent, 1000);
        h.take();
    }
    h.feed(HP, c.rcv, c.snd, ACK, 65535, &ts_opt(1100, 1), b"real");
    assert_eq!(h.app.data, b"real");
    assert_eq!(h.host.counters().tcps_pawsdrop, 0);
    assert_eq!(h.host.flow_info(f).unwrap().ts_recent, 1100);
    // An unacceptable RST does not move it either.
    h.feed(
        HP,
        c.rcv.wrapping_add(4 + 10),
        0,
        RST,
        0,
        &ts_opt(5000, 1),
        &[],
    );
    assert_eq!(h.host.flow_info(f).unwrap().ts_recent, 1100);
    // A retransmission of data already received (within a window below RCV.NXT: its ACK
    // was lost) records its TSval, so that our echo keeps the peer's RTT samples honest.
    h.feed(HP, c.rcv, c.snd, ACK, 65535, &ts_opt(1200, 1), b"real");
    assert_eq!(h.host.flow_info(f).unwrap().ts_recent, 1200);
}

// Item 10. RFC 9293 §3.10.7.4: SND.WL1 follows the segments that carry window
// information. Data taken by header prediction must advance it too, or after 2^31 bytes
// received that way SND.WL1 < SEG.SEQ reads as false and window updates are ignored.
per_family!(rfc9293_3_10_7_4_window_update_after_2_31_bytes_of_fast_path_data);
fn rfc9293_3_10_7_4_window_update_after_2_31_bytes_of_fast_path_data(fam: Family) {
    let mut h = H::new(TcpConfig {
        rx_checksum: false,
        ..cfg()
    })
    .over(fam);
    let c = h.open(HP, &[2, 4, 0x05, 0xb4]);
    const LEN: u32 = 60_000;
    let payload = vec![7u8; LEN as usize];
    let (peer, host) = ((PEER_IP, PP), (HOST_IP, HP));
    let mut f = wire::peer_frame(fam, peer, host, c.rcv, c.snd, ACK, 65535, &[], &payload);
    let seq_at = fam.tcp_at() + 4;
    let mut rcv = c.rcv;
    let mut total = 0u64;
    let mut app = Null;
    while total <= 1u64 << 31 {
        f[seq_at..seq_at + 4].copy_from_slice(&rcv.to_be_bytes());
        h.host.rx(h.now, &f, &mut app, &mut h.sink);
        h.sink.frames.clear();
        rcv = rcv.wrapping_add(LEN);
        total += LEN as u64;
    }
    assert!(h.host.counters().tcps_preddat >= (1 << 31) / LEN as u64);
    assert_eq!(h.host.counters().tcps_rcvbyte, total);
    // A pure window update from the peer.
    h.feed(HP, rcv, c.snd, ACK, 1000, &[], &[]);
    assert_eq!(h.host.flow_info(c.flow).unwrap().snd_wnd, 1000);
}

/// An application that ignores everything (for bulk tests).
struct Null;
impl TcpApp for Null {}

// Item 4: out-of-order memory has a per-host bound. Many flows each holding one byte
// past a gap cannot pin more than the budget; beyond it out-of-order segments are
// refused (and ACKed), and queues given back are freed rather than pooled forever.
per_family!(ooo_memory_bounded_per_host_and_given_back);
fn ooo_memory_bounded_per_host_and_given_back(fam: Family) {
    let mut h = H::new(TcpConfig {
        ooo_bytes: 65_536,
        ..cfg()
    })
    .over(fam);
    let conns: Vec<Conn> = (0..300).map(|k| h.open(HP + k, &[2, 4, 5, 0xb4])).collect();
    let base = h.host.memory_bytes();
    for c in &conns {
        h.feed(c.hp, c.rcv.wrapping_add(10), c.snd, ACK, 65535, &[], b"x");
        let a = h.take();
        assert_eq!(a.len(), 1, "out-of-order segment ACKed at once");
        assert_eq!(a[0].ack, c.rcv);
    }
    let grown = h.host.memory_bytes() - base;
    // 300 flows x 64 KiB would be 19.7 MB; the default budget is max_flows x ooo_bytes / 16.
    let budget = 512 * 65_536 / 16;
    assert!(
        grown <= budget + 4096,
        "out-of-order memory grew by {grown}"
    );
    assert_eq!(
        h.host.counters().tcps_rcvoomemdrop,
        300 - 32,
        "32 queues fit"
    );
    // The first flows still reassemble.
    let c = conns[0];
    h.feed(c.hp, c.rcv, c.snd, ACK, 65535, &[], b"0123456789");
    assert_eq!(h.app.data, b"0123456789x");
    // Flows gone: the pooled queues are given back.
    for c in &conns {
        h.host.abort(h.now, &mut h.app, &mut h.sink, c.flow);
    }
    let after = h.host.memory_bytes();
    assert!(
        after <= base + 16 * 65_536,
        "pooled out-of-order memory kept: {} bytes above the base",
        after - base.min(after)
    );
}

// Item 5 (per flow). Linux's tcp_invalid_ratelimit: ACKs answering out-of-window pure
// ACKs, PAWS drops and ACKs of unsent data go out at most once per 500 ms per flow; data
// segments are always answered (they may be genuine retransmissions).
per_family!(rfc5961_7_invalid_acks_rate_limited_per_flow);
fn rfc5961_7_invalid_acks_rate_limited_per_flow(fam: Family) {
    let mut h = H::new(ts_cfg()).over(fam);
    let c = h.open(HP, &mss_ts(1000));
    let ts = ts_opt(1000, 1);
    // Out-of-window pure ACKs.
    for _ in 0..10 {
        h.feed(HP, c.rcv.wrapping_add(1 << 20), c.snd, ACK, 65535, &ts, &[]);
    }
    assert_eq!(h.take().len(), 1, "out-of-window pure ACKs");
    // PAWS drops (pure ACKs) in the same 500 ms.
    for _ in 0..10 {
        h.feed(HP, c.rcv, c.snd, ACK, 65535, &ts_opt(900, 1), &[]);
    }
    assert_eq!(h.take().len(), 0, "PAWS drops within 500 ms of the last");
    // ACKs of unsent data.
    h.now += 501 * MS;
    for _ in 0..10 {
        h.feed(HP, c.rcv, c.snd.wrapping_add(1000), ACK, 65535, &ts, &[]);
    }
    assert_eq!(h.take().len(), 1, "ACKs of unsent data");
    // Out-of-window data is answered every time.
    for _ in 0..5 {
        h.feed(
            HP,
            c.rcv.wrapping_add(1 << 20),
            c.snd,
            ACK,
            65535,
            &ts,
            b"d",
        );
    }
    assert_eq!(h.take().len(), 5, "data segments are not limited");
    assert_eq!(h.host.counters().tcps_invalidack_limited, 9 + 10 + 9);
    assert_eq!(h.host.counters().tcps_pawsdrop, 10);
    assert_eq!(h.host.counters().tcps_rcvacktoomuch, 10);
}

// Item 5 (per host). RFC 5961 §7 with the CVE-2016-5696 fix: the per-second challenge-ACK
// budget has a random component (Linux: uniform in [limit/2, limit * 3/2)), so an
// off-path observer cannot count it down exactly.
per_family!(rfc5961_7_challenge_ack_budget_randomised);
fn rfc5961_7_challenge_ack_budget_randomised(fam: Family) {
    let limit = 10u32;
    let mut h = H::new(TcpConfig {
        challenge_ack_limit: limit,
        ..cfg()
    })
    .over(fam);
    let conns: Vec<Conn> = (0..40).map(|k| h.open(HP + k, &[])).collect();
    let mut per_sec = Vec::new();
    for s in 0..20u64 {
        h.now = (s + 1) * 1000 * MS;
        for c in &conns {
            // In window, not exact: challenge ACK.
            h.feed(c.hp, c.rcv.wrapping_add(100), 0, RST, 0, &[], &[]);
        }
        per_sec.push(h.take().len() as u32);
    }
    let half = limit.div_ceil(2);
    assert!(
        per_sec.iter().all(|&n| n >= half && n < limit + half),
        "{per_sec:?}"
    );
    assert!(
        per_sec.iter().any(|&n| n != per_sec[0]),
        "budget not randomised: {per_sec:?}"
    );
}

// Item: hostile SACK blocks never overflow arithmetic (this test runs with overflow
// checks: the dev and ci profiles). An ACK of unsent data used to have its SACK blocks
// recorded against SEG.ACK > SND.MAX before being dropped, leaving ranges outside the
// data in flight; the duplicate ACKs that follow then overflowed the RFC 6675 pipe
// computation. The first case is the one the scoreboard fuzzing found.
per_family!(rfc2018_hostile_sack_blocks_never_overflow);
fn rfc2018_hostile_sack_blocks_never_overflow(fam: Family) {
    let mut rng = Rng::new(7);
    for k in 0..300 {
        let mut h = H::new(with_opts(FlowOpts {
            sack: true,
            init_cwnd: 10,
            ..FlowOpts::default()
        }))
        .over(fam);
        let buf = h.host.buffers().register(Arc::from(vec![b'z'; 100_000]));
        let c = h.open(HP, &[2, 4, 0x05, 0xa8, 1, 1, 4, 2]);
        h.host
            .send(h.now, &mut h.sink, c.flow, buf, 0, 100_000)
            .unwrap();
        assert_eq!(h.take().len(), 10);
        let una = c.snd;
        let max = una.wrapping_add(10 * 1448);
        let found = [
            (905656176u32, 1148286808u32, 2912205582u32),
            (1957430185, 3608628896, 3655079645),
            (1868391781, 63481968, 1416875408),
        ];
        // (ACK, SACK block) as offsets from SND.UNA (the fuzzing's SND.UNA was 1000).
        let hostile: Vec<(u32, u32, u32)> = found
            .iter()
            .map(|&(a, s, e)| {
                if k == 0 {
                    (a - 1000, s.wrapping_sub(1000), e.wrapping_sub(1000))
                } else {
                    let a = 10 * 1448 + rng.below((1 << 31) - 20_000) as u32;
                    let s = rng.next() as u32;
                    (a, s, s.wrapping_add(rng.below(1 << 31) as u32))
                }
            })
            .collect();
        for (a, s, e) in hostile {
            let mut o = vec![1, 1, 5, 10];
            o.extend(una.wrapping_add(s).to_be_bytes());
            o.extend(una.wrapping_add(e).to_be_bytes());
            h.feed(HP, c.rcv, una.wrapping_add(a), ACK, 65535, &o, &[]);
        }
        for _ in 0..4 {
            h.feed(HP, c.rcv, una, ACK, 65535, &[], &[]);
        }
        assert_eq!(h.host.counters().tcps_rcvacktoomuch, 3);
        // Recovery retransmits from SND.UNA, within what was sent (and the two segments of
        // new data Limited Transmit sends on the first two duplicates, RFC 3042).
        let out = h.take();
        let lt_max = max.wrapping_add(2 * 1448);
        assert!(
            out.iter()
                .all(|s| seq_le(una, s.seq) && seq_le(s.seq, lt_max)),
            "{out:?}"
        );
    }
}

fn seq_le(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) >= 0
}

// Item: a TSecr far in the past (up to the one-hour plausibility bound) gives a huge RTT
// sample; the estimator saturates instead of overflowing, and the RTO stays bounded.
per_family!(rfc7323_4_1_hostile_tsecr_rtt_sample_saturates);
fn rfc7323_4_1_hostile_tsecr_rtt_sample_saturates(fam: Family) {
    let mut h = H::new(ts_cfg()).over(fam);
    let buf = h.host.buffers().register(Arc::from(vec![b'z'; 10_000]));
    h.now = 4_000_000 * MS;
    let c = h.open(HP, &mss_ts(1000));
    h.host
        .send(h.now, &mut h.sink, c.flow, buf, 0, 10_000)
        .unwrap();
    h.take();
    for k in 1..=3u32 {
        h.now += MS;
        let old = ((h.now / MS) as u32).wrapping_sub(3_599_999);
        h.feed(
            HP,
            c.rcv,
            c.snd.wrapping_add(k * 100),
            ACK,
            65535,
            &ts_opt(1000 + k, old),
            &[],
        );
    }
    let i = h.host.flow_info(c.flow).unwrap();
    assert!(i.rto_us <= 60_000_000, "{i:?}");
}

/// A host answering every SYN with a cookie, offering timestamps, SACK and window scale 5.
fn cookie_host(fam: Family) -> H {
    let mut h = H::new(TcpConfig {
        max_half_open: 0,
        ..with_opts(FlowOpts {
            timestamps: true,
            sack: true,
            wscale: Some(5),
            ..FlowOpts::default()
        })
    })
    .over(fam);
    h.host.listen(HP);
    h
}

// Item: SYN cookies keep window scaling, SACK-permitted and timestamps (encoded in the low
// bits of our TSval, as Linux's cookie_init_timestamp does) when the peer offers
// timestamps; without timestamps only the MSS is kept (and only the MSS is offered).
per_family!(rfc4987_syn_cookie_keeps_wscale_sack_and_timestamps);
fn rfc4987_syn_cookie_keeps_wscale_sack_and_timestamps(fam: Family) {
    let mut h = cookie_host(fam);
    h.now = 123_456 * MS;
    let mut o = vec![2, 4, 0x05, 0xb4, 1, 3, 3, 7, 4, 2, 1, 1];
    o.extend(ts_opt(777, 0));
    h.feed(HP, 9, 0, SYN, 65535, &o, &[]);
    let sa = h.take().pop().expect("SYN-ACK");
    assert_eq!(h.host.counters().tcps_sc_sendcookie, 1);
    assert_eq!(h.host.flow_count(), 0);
    assert_eq!(sa.flags, SYN | ACK);
    assert_eq!(sa.opts.wscale, Some(5));
    assert!(sa.opts.sack_ok);
    let (tsval, tsecr) = sa.opts.ts.expect("timestamps on the cookie SYN-ACK");
    assert_eq!(tsecr, 777);
    assert!(
        tsval <= 123_456 | 1,
        "our TSval never runs ahead of our clock"
    );
    h.now += 5 * MS;
    h.feed(
        HP,
        10,
        sa.seq.wrapping_add(1),
        ACK,
        100,
        &ts_opt(778, tsval),
        b"hi",
    );
    assert_eq!(h.host.counters().tcps_sc_recvcookie, 1);
    assert_eq!(h.app.data, b"hi");
    let f = (0..4)
        .map(FlowId)
        .find(|f| h.host.state(*f) == State::Established)
        .expect("flow from the cookie");
    let i = h.host.flow_info(f).unwrap();
    assert!(i.wscale && i.sack && i.timestamps, "{i:?}");
    assert_eq!(i.ts_recent, 778);
    assert_eq!(i.mss, fam.mss(1460) - 12);
    assert_eq!(i.snd_wnd, 100 << 7);
    // The host's next segments carry timestamps, scaled windows and SACK blocks.
    h.take();
    h.feed(
        HP,
        100,
        sa.seq.wrapping_add(1),
        ACK,
        100,
        &ts_opt(779, 1),
        b"x",
    );
    let a = h.take().pop().unwrap();
    assert_eq!(a.opts.ts.map(|t| t.1), Some(778), "TS.Recent after the gap");
    assert_eq!(a.opts.sack_n, 1);

    // No timestamps from the peer: MSS only, as before.
    let mut h = cookie_host(fam);
    h.feed(HP, 9, 0, SYN, 65535, &[2, 4, 5, 0xb4, 1, 3, 3, 7], &[]);
    let sa = h.take().pop().unwrap();
    assert_eq!(
        (sa.opts.wscale, sa.opts.sack_ok, sa.opts.ts),
        (None, false, None)
    );
    h.feed(HP, 10, sa.seq.wrapping_add(1), ACK, 100, &[], &[]);
    let i = h.host.flow_info(FlowId(0)).unwrap();
    assert_eq!((i.wscale, i.sack, i.timestamps), (false, false, false));
}

// Item: a bare FIN beyond RCV.NXT is ACKed at once (a duplicate ACK, RFC 5681 §4.2) and
// remembered until the gap fills, even when it takes several segments.
per_family!(rfc9293_3_10_7_4_bare_out_of_order_fin_acked_and_kept);
fn rfc9293_3_10_7_4_bare_out_of_order_fin_acked_and_kept(fam: Family) {
    let mut h = H::new(cfg()).over(fam);
    let c = h.open(HP, &[]);
    h.feed(
        HP,
        c.rcv.wrapping_add(10),
        c.snd,
        ACK | FIN,
        65535,
        &[],
        &[],
    );
    let a = h.take();
    assert_eq!(a.len(), 1, "immediate duplicate ACK: {a:?}");
    assert_eq!((a[0].ack, a[0].flags), (c.rcv, ACK));
    h.feed(HP, c.rcv, c.snd, ACK, 65535, &[], b"01234");
    assert_eq!(h.host.state(c.flow), State::Established);
    assert_eq!(h.take().last().unwrap().ack, c.rcv.wrapping_add(5));
    h.feed(HP, c.rcv.wrapping_add(5), c.snd, ACK, 65535, &[], b"56789");
    assert_eq!(h.host.state(c.flow), State::CloseWait);
    assert_eq!(h.app.peer_closed, 1);
    assert_eq!(h.app.data, b"0123456789");
    assert_eq!(h.take().last().unwrap().ack, c.rcv.wrapping_add(11));
}

// Item: RFC 1337 (TIME-WAIT assassination, hazard H1): a RST received in TIME_WAIT does
// not end it early; the 2*MSL period runs out as usual.
per_family!(rfc1337_rst_ignored_in_time_wait);
fn rfc1337_rst_ignored_in_time_wait(fam: Family) {
    let mut h = H::new(TcpConfig {
        time_wait_ns: 500 * MS,
        ..cfg()
    })
    .over(fam);
    let c = h.open(HP, &[]);
    h.host.close(h.now, &mut h.app, &mut h.sink, c.flow);
    h.take();
    h.feed(HP, c.rcv, c.snd.wrapping_add(1), FIN | ACK, 65535, &[], &[]);
    assert_eq!(h.host.state(c.flow), State::TimeWait);
    h.take();
    h.feed(HP, c.rcv.wrapping_add(1), 0, RST, 0, &[], &[]);
    h.feed(
        HP,
        c.rcv.wrapping_add(1),
        c.snd.wrapping_add(1),
        RST | ACK,
        0,
        &[],
        &[],
    );
    assert_eq!(h.host.state(c.flow), State::TimeWait);
    assert!(h.take().is_empty(), "no answer to a RST");
    h.now += 501 * MS;
    h.host.poll(h.now, &mut h.app, &mut h.sink);
    assert_eq!(h.host.state(c.flow), State::Closed);
    assert_eq!(h.app.closed, vec![CloseReason::Normal]);
}
