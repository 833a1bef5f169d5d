//! RFC behaviour tests of `TcpHost` against a hand-driven peer: each test crafts the peer's
//! segments, feeds them to the host and checks the host's replies, state and events. Test
//! names carry the RFC section.

use std::sync::Arc;

mod common;

use common::wire::{self, FrameHdr, Out, ACK, FIN, PSH, RST, SYN, URG};
use common::Family;
use squall_tcp::{
    BufId, CloseReason, Ctl, FlowId, OptsId, State, TcpApp, TcpConfig, TcpHost, TxSink,
};

const HOST_IP: u32 = 0x1000_0001;
const PEER_IP: u32 = 0x3000_0001;
const HP: u16 = 40_000;
const PP: u16 = 80;
const MS: u64 = 1_000_000;

#[derive(Debug, Clone, PartialEq)]
enum Ev {
    Connected(bool),
    Data(Vec<u8>),
    Acked(u32),
    PeerClosed,
    Closed(CloseReason),
    Urgent(u32),
}

#[derive(Default)]
struct App {
    ev: Vec<Ev>,
    /// Data to send on connect.
    send_on_connect: Option<(BufId, u32)>,
    close_on_peer_fin: bool,
    /// Closes when the peer acknowledges data (a server ending with a blocking send).
    close_when_acked: bool,
}
impl TcpApp for App {
    fn on_connected(&mut self, ctl: &mut Ctl, _f: FlowId) {
        self.ev.push(Ev::Connected(ctl.passive()));
        if let Some((b, l)) = self.send_on_connect {
            ctl.send(b, 0, l);
        }
    }
    fn on_data(&mut self, _ctl: &mut Ctl, _f: FlowId, d: &[u8]) {
        self.ev.push(Ev::Data(d.to_vec()));
    }
    fn on_acked(&mut self, ctl: &mut Ctl, _f: FlowId, n: u32) {
        self.ev.push(Ev::Acked(n));
        if self.close_when_acked {
            ctl.close();
        }
    }
    fn on_peer_closed(&mut self, ctl: &mut Ctl, _f: FlowId) {
        self.ev.push(Ev::PeerClosed);
        if self.close_on_peer_fin {
            ctl.close();
        }
    }
    fn on_closed(&mut self, _f: FlowId, r: CloseReason) {
        self.ev.push(Ev::Closed(r));
    }
    fn on_urgent(&mut self, _f: FlowId, pending: u32) {
        self.ev.push(Ev::Urgent(pending));
    }
}

#[derive(Default)]
struct Sink {
    cur: Vec<u8>,
    out: Vec<Vec<u8>>,
    /// A full TX ring: no frame to build into.
    full: bool,
}
impl TxSink for Sink {
    fn alloc(&mut self, len: usize) -> Option<&mut [u8]> {
        if self.full {
            return None;
        }
        self.cur.resize(len, 0);
        Some(&mut self.cur[..len])
    }
    fn commit(&mut self, len: usize) {
        self.out.push(self.cur[..len].to_vec());
    }
}

struct T {
    /// The family of every segment: the peer's, and the host's (checked in `take`).
    fam: Family,
    host: TcpHost,
    app: App,
    sink: Sink,
    now: u64,
    flow: Option<FlowId>,
    /// Peer's next sequence number.
    pseq: u32,
}

impl T {
    fn new(cfg: TcpConfig) -> Self {
        T {
            fam: Family::V4,
            host: TcpHost::new(cfg, 0),
            app: App::default(),
            sink: Sink::default(),
            now: 0,
            flow: None,
            pseq: 5000,
        }
    }
    /// The same over `fam` (the peer's segments and the flows the test opens).
    fn over(mut self, fam: Family) -> Self {
        self.fam = fam;
        self
    }
    fn take(&mut self) -> Vec<Out> {
        let v: Vec<Out> = self.sink.out.drain(..).map(|f| Out::of(&f)).collect();
        assert!(v.iter().all(|o| o.family == self.fam), "{v:?}");
        v
    }
    fn one(&mut self) -> Out {
        let v = self.take();
        assert_eq!(v.len(), 1, "expected one segment, got {v:?}");
        v[0].clone()
    }
    /// Feeds a peer segment (peer -> host).
    fn feed(&mut self, seq: u32, ack: u32, flags: u8, wnd: u16, opts: &[u8], payload: &[u8]) {
        let (peer, host) = ((PEER_IP, PP), (HOST_IP, HP));
        let buf = wire::peer_frame(self.fam, peer, host, seq, ack, flags, wnd, opts, payload);
        self.host.rx(self.now, &buf, &mut self.app, &mut self.sink);
    }
    /// Feeds a peer segment with URG and urgent pointer `up` (ACK set).
    fn feed_urgent(&mut self, seq: u32, ack: u32, up: u16, payload: &[u8]) {
        let (peer, host) = ((PEER_IP, PP), (HOST_IP, HP));
        let flags = ACK | URG;
        let mut buf = wire::peer_frame(self.fam, peer, host, seq, ack, flags, 65535, &[], payload);
        wire::set_urgent(self.fam, &mut buf, up);
        self.host.rx(self.now, &buf, &mut self.app, &mut self.sink);
    }
    fn advance(&mut self, to: u64) {
        self.now = to;
        self.host.poll(to, &mut self.app, &mut self.sink);
    }
    fn state(&self) -> State {
        self.host.state(self.flow.unwrap())
    }
    fn connect(&mut self) -> Out {
        self.flow = Some(
            self.fam
                .connect(
                    &mut self.host,
                    self.now,
                    &mut self.sink,
                    (HOST_IP, HP),
                    (PEER_IP, PP),
                    OptsId::DEFAULT,
                )
                .unwrap(),
        );
        self.one()
    }
    /// Active open completed; returns our ISS+1 (SND.NXT).
    fn established(&mut self, peer_opts: &[u8]) -> u32 {
        let syn = self.connect();
        self.feed(
            self.pseq,
            syn.seq.wrapping_add(1),
            SYN | ACK,
            65535,
            peer_opts,
            &[],
        );
        self.pseq += 1;
        assert_eq!(self.state(), State::Established);
        syn.seq.wrapping_add(1)
    }
}

fn cfg() -> TcpConfig {
    TcpConfig {
        mac: [2, 0, 0, 0, 0, 1],
        gateway_mac: [2, 0, 0, 0, 0, 9],
        max_flows: 64,
        ..TcpConfig::default()
    }
}

const MSS_1000: [u8; 4] = [2, 4, 0x03, 0xe8];
const MSS_1460: [u8; 4] = [2, 4, 0x05, 0xb4];

/// A host offering window scaling (shift 3), over `fam`.
fn scaling_by_3(fam: Family) -> T {
    T::new(TcpConfig {
        opts: squall_tcp::FlowOpts {
            wscale: Some(3),
            ..squall_tcp::FlowOpts::default()
        },
        ..cfg()
    })
    .over(fam)
}

// RFC 9293 §3.5 + §3.7.1: active open sends SYN with the MSS option; SYN-ACK completes it.
per_family!(rfc9293_3_5_active_open_with_mss_option);
fn rfc9293_3_5_active_open_with_mss_option(fam: Family) {
    let mut t = scaling_by_3(fam);
    let syn = t.connect();
    assert_eq!(syn.flags, SYN);
    assert_eq!(syn.opts.mss, fam.mss(1460));
    assert_eq!(syn.opts.wscale, Some(3));
    assert_eq!(t.state(), State::SynSent);
    t.feed(
        5000,
        syn.seq.wrapping_add(1),
        SYN | ACK,
        1000,
        &[2, 4, 0x03, 0xe8, 1, 3, 3, 2],
        &[],
    );
    assert_eq!(t.state(), State::Established);
    let ack = t.one();
    assert_eq!(
        (ack.flags, ack.ack, ack.seq),
        (ACK, 5001, syn.seq.wrapping_add(1))
    );
    let tcb = t.host.flow_info(t.flow.unwrap()).unwrap();
    assert_eq!(tcb.mss, 1000);
    assert_eq!(
        tcb.snd_wnd, 1000,
        "window in a SYN is not scaled (RFC 7323 §2.2)"
    );
    assert_eq!(t.app.ev, vec![Ev::Connected(false)]);
    assert_eq!(t.host.counters().tcps_connattempt, 1);
    assert_eq!(t.host.counters().tcps_connects, 1);
}

// RFC 7323 §2.3: after the handshake the peer's window is scaled by its shift.
// RFC 9293 §3.7.1: without the peer's MSS option, the send MSS is 536 over IPv4 and
// 1220 over IPv6 (both ends, active and passive).
per_family!(rfc9293_3_7_1_default_mss_of_the_family);
fn rfc9293_3_7_1_default_mss_of_the_family(fam: Family) {
    let want = match fam {
        Family::V4 => 536,
        Family::V6 => 1220,
    };
    let mut t = T::new(cfg()).over(fam);
    t.established(&[]);
    let f = t.flow.unwrap();
    assert_eq!(t.host.flow_info(f).unwrap().mss, want, "active open");
    let mut t = T::new(cfg()).over(fam);
    t.host.listen(HP);
    t.feed(7000, 0, SYN, 65535, &[], &[]);
    let sa = t.one();
    t.feed(7001, sa.seq.wrapping_add(1), ACK, 65535, &[], &[]);
    assert_eq!(
        t.host.flow_info(FlowId(0)).unwrap().mss,
        want,
        "passive open"
    );
}

per_family!(rfc7323_2_3_window_scaling_applied);
fn rfc7323_2_3_window_scaling_applied(fam: Family) {
    let mut t = T::new(TcpConfig {
        opts: squall_tcp::FlowOpts {
            wscale: Some(3),
            rcv_wnd: 262_144,
            ..squall_tcp::FlowOpts::default()
        },
        ..cfg()
    })
    .over(fam);
    let iss1 = t.established(&[2, 4, 0x05, 0xb4, 1, 3, 3, 2]);
    let a = t.one();
    assert_eq!(
        a.wnd as u32,
        262_144 >> 3,
        "our advertised window is scaled by our shift"
    );
    t.feed(t.pseq, iss1, ACK, 100, &[], &[]);
    assert_eq!(t.host.flow_info(t.flow.unwrap()).unwrap().snd_wnd, 400);
}

// RFC 7323 §2.2: no scaling unless both sides sent the option.
per_family!(rfc7323_2_2_no_scaling_without_both_options);
fn rfc7323_2_2_no_scaling_without_both_options(fam: Family) {
    let mut t = scaling_by_3(fam);
    let iss1 = t.established(&MSS_1000);
    t.take();
    t.feed(t.pseq, iss1, ACK, 100, &[], &[]);
    assert_eq!(t.host.flow_info(t.flow.unwrap()).unwrap().snd_wnd, 100);
}

// RFC 9293 §3.5 / §3.10.7.2: passive open from LISTEN.
per_family!(rfc9293_3_10_7_2_passive_open);
fn rfc9293_3_10_7_2_passive_open(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    t.host.listen(HP);
    t.feed(7000, 0, SYN, 65535, &MSS_1000, &[]);
    let sa = t.one();
    assert_eq!(sa.flags, SYN | ACK);
    assert_eq!(sa.ack, 7001);
    assert_eq!(sa.opts.mss, fam.mss(1460));
    assert!(
        t.app.ev.is_empty(),
        "no event before the handshake completes"
    );
    t.feed(7001, sa.seq.wrapping_add(1), ACK, 65535, &[], b"GET");
    assert_eq!(
        t.app.ev,
        vec![Ev::Connected(true), Ev::Data(b"GET".to_vec())]
    );
    assert_eq!(t.host.counters().tcps_accepts, 1);
}

// RFC 6298 §3 (Karn): the SYN-ACK sent again for a retransmitted SYN is a
// retransmission; the ACK completing the handshake gives no RTT sample (it was timed
// from the first, lost SYN-ACK: 901 ms where the path takes 1 ms).
per_family!(rfc6298_3_no_rtt_sample_from_a_syn_ack_sent_again);
fn rfc6298_3_no_rtt_sample_from_a_syn_ack_sent_again(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    t.host.listen(HP);
    t.feed(7000, 0, SYN, 65535, &MSS_1000, &[]);
    let sa = t.one(); // lost
    t.now = 900_000_000;
    t.feed(7000, 0, SYN, 65535, &MSS_1000, &[]);
    assert_eq!(t.one().flags, SYN | ACK);
    t.now = 901_000_000;
    t.feed(7001, sa.seq.wrapping_add(1), ACK, 65535, &[], &[]);
    assert_eq!(t.app.ev, vec![Ev::Connected(true)]);
    assert_eq!(t.host.counters().tcps_rttupdated, 0);
    let f = FlowId(0);
    let info = t.host.flow_info(f).expect("the accepted flow");
    assert!(info.rto_us >= 1_000_000, "RTO {} us", info.rto_us);
}

// RFC 9293 §3.10.7.2: a retransmitted SYN in SYN-RECEIVED gets the SYN-ACK again; a
// SYN-ACK timeout retransmits it too.
per_family!(rfc9293_3_8_1_syn_ack_retransmission);
fn rfc9293_3_8_1_syn_ack_retransmission(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    t.host.listen(HP);
    t.feed(7000, 0, SYN, 65535, &[], &[]);
    let a = t.one();
    t.feed(7000, 0, SYN, 65535, &[], &[]);
    let b = t.one();
    assert_eq!((a.seq, a.flags), (b.seq, b.flags));
    t.advance(1_000 * MS);
    let c = t.one();
    assert_eq!((c.seq, c.flags), (a.seq, SYN | ACK));
}

// RFC 9293 §3.10.7.1: segments to a closed port get a RST.
per_family!(rfc9293_3_10_7_1_rst_for_closed_port);
fn rfc9293_3_10_7_1_rst_for_closed_port(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    t.feed(100, 0, SYN, 65535, &[], &[]);
    let r = t.one();
    assert_eq!((r.flags, r.seq, r.ack), (RST | ACK, 0, 101));
    t.feed(100, 777, ACK, 65535, &[], b"x");
    let r = t.one();
    assert_eq!((r.flags, r.seq), (RST, 777));
    t.feed(100, 777, RST, 65535, &[], &[]);
    assert!(t.take().is_empty(), "never answer a RST");
}

// RFC 9293 §3.10.7.3: RST acknowledging our SYN refuses the connection.
per_family!(rfc9293_3_10_7_3_connection_refused);
fn rfc9293_3_10_7_3_connection_refused(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    let syn = t.connect();
    t.feed(0, syn.seq.wrapping_add(1), RST | ACK, 0, &[], &[]);
    assert_eq!(t.state(), State::Closed);
    assert_eq!(t.app.ev, vec![Ev::Closed(CloseReason::Refused)]);
}

// RFC 9293 §3.10.7.3: a SYN-ACK acknowledging something we never sent gets a RST.
per_family!(rfc9293_3_10_7_3_bad_ack_in_syn_sent);
fn rfc9293_3_10_7_3_bad_ack_in_syn_sent(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    let syn = t.connect();
    t.feed(5000, syn.seq.wrapping_add(99), SYN | ACK, 1000, &[], &[]);
    let r = t.one();
    assert_eq!((r.flags, r.seq), (RST, syn.seq.wrapping_add(99)));
    assert_eq!(t.state(), State::SynSent);
}

// RFC 9293 §3.5 figure 7: simultaneous open.
per_family!(rfc9293_3_5_simultaneous_open);
fn rfc9293_3_5_simultaneous_open(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    let syn = t.connect();
    t.feed(9000, 0, SYN, 65535, &MSS_1000, &[]);
    assert_eq!(t.state(), State::SynReceived);
    let sa = t.one();
    assert_eq!((sa.flags, sa.seq, sa.ack), (SYN | ACK, syn.seq, 9001));
    // Peer's SYN-ACK: its SYN is old (ACKed), our SYN is acknowledged: established at
    // once (a Linux peer sends nothing more), nothing to answer.
    t.feed(
        9000,
        syn.seq.wrapping_add(1),
        SYN | ACK,
        65535,
        &MSS_1000,
        &[],
    );
    assert_eq!(t.state(), State::Established);
    assert_eq!(t.app.ev, vec![Ev::Connected(false)]);
    assert!(t.take().is_empty());
    t.feed(9001, syn.seq.wrapping_add(1), ACK, 65535, &[], &[]);
    assert_eq!(t.state(), State::Established);
}

// RFC 7323 §2.2: in a simultaneous open with window scaling, the peer's SYN,ACK that
// completes the handshake carries an unscaled window (a SYN's never is): the send window
// stays at most that (scaled by 4 it read 256 KiB where the peer offered 64 KiB).
per_family!(rfc7323_2_2_simultaneous_open_takes_the_syn_ack_window_unscaled);
fn rfc7323_2_2_simultaneous_open_takes_the_syn_ack_window_unscaled(fam: Family) {
    let mut t = scaling_by_3(fam);
    let syn = t.connect();
    let ws2 = [2, 4, 0x03, 0xe8, 1, 3, 3, 2];
    t.feed(9000, 0, SYN, 65535, &ws2, &[]);
    assert_eq!(t.state(), State::SynReceived);
    t.take();
    t.feed(9000, syn.seq.wrapping_add(1), SYN | ACK, 65535, &ws2, &[]);
    assert_eq!(t.state(), State::Established);
    let wnd = t.host.flow_info(t.flow.unwrap()).unwrap().snd_wnd;
    assert!((65_532..=65_535).contains(&wnd), "send window {wnd}");
}

// RFC 9293 §3.10.4: CLOSE in SYN-RECEIVED (after a simultaneous open) queues the FIN
// until the handshake completes, after the data already queued; sends are refused after
// the close.
per_family!(rfc9293_3_10_4_close_in_syn_received);
fn rfc9293_3_10_4_close_in_syn_received(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    let (data, _) = with_data(&mut t, 5);
    let syn = t.connect();
    let f = t.flow.unwrap();
    t.feed(9000, 0, SYN, 65535, &MSS_1000, &[]);
    assert_eq!(t.state(), State::SynReceived);
    let sa = t.one();
    assert_eq!(sa.flags, SYN | ACK);
    t.host.send(t.now, &mut t.sink, f, data, 0, 5).unwrap();
    t.host.close(t.now, &mut t.app, &mut t.sink, f);
    assert!(
        t.take().is_empty(),
        "nothing before our SYN is acknowledged"
    );
    assert_eq!(t.state(), State::SynReceived);
    assert!(
        t.host.send(t.now, &mut t.sink, f, data, 0, 5).is_err(),
        "send after close"
    );
    // The peer acknowledges our SYN: the data and the FIN go, FIN-WAIT-1.
    let iss1 = syn.seq.wrapping_add(1);
    t.feed(9001, iss1, ACK, 65535, &[], &[]);
    assert_eq!(t.state(), State::FinWait1);
    let out = t.take();
    let (last, first) = (out.last().unwrap(), &out[0]);
    assert_eq!(first.seq, iss1);
    assert_eq!(
        out.iter().map(|o| o.payload.len()).sum::<usize>(),
        5,
        "{out:?}"
    );
    assert_ne!(last.flags & FIN, 0, "{out:?}");
    assert_eq!(
        last.seq.wrapping_add(last.payload.len() as u32),
        iss1.wrapping_add(5)
    );
    assert_eq!(t.app.ev, vec![Ev::Connected(false)]);
    // Its ACK of the FIN: FIN-WAIT-2.
    t.feed(9001, iss1.wrapping_add(6), ACK, 65535, &[], &[]);
    assert_eq!(t.state(), State::FinWait2);
}

// RFC 5961 §3.2: RST with in-window but not exact sequence -> challenge ACK; exact -> reset.
per_family!(rfc5961_3_2_rst_challenge_then_exact_reset);
fn rfc5961_3_2_rst_challenge_then_exact_reset(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    let _ = t.established(&[]);
    t.take();
    t.feed(t.pseq + 10, 0, RST, 0, &[], &[]);
    let c = t.one();
    assert_eq!((c.flags, c.ack), (ACK, t.pseq));
    assert_eq!(t.state(), State::Established);
    assert_eq!(t.host.counters().tcps_challengeack, 1);
    t.feed(t.pseq + 70_000, 0, RST, 0, &[], &[]); // outside the window: silently dropped
    assert!(t.take().is_empty());
    t.feed(t.pseq, 0, RST, 0, &[], &[]);
    assert_eq!(t.state(), State::Closed);
    assert_eq!(t.app.ev.last(), Some(&Ev::Closed(CloseReason::Reset)));
}

// RFC 5961 §4.2: SYN in a synchronized state -> challenge ACK, connection unaffected.
per_family!(rfc5961_4_2_syn_in_established_challenge_ack);
fn rfc5961_4_2_syn_in_established_challenge_ack(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    let _ = t.established(&[]);
    t.take();
    t.feed(t.pseq + 5, 0, SYN, 65535, &[], &[]);
    let c = t.one();
    assert_eq!((c.flags, c.ack), (ACK, t.pseq));
    assert_eq!(t.state(), State::Established);
}

// RFC 5961 §5.2 / RFC 9293 §3.10.7.4: ACK for data never sent -> ACK and drop.
per_family!(rfc5961_5_2_ack_of_unsent_data_dropped);
fn rfc5961_5_2_ack_of_unsent_data_dropped(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    let iss1 = t.established(&[]);
    t.take();
    t.feed(t.pseq, iss1.wrapping_add(1000), ACK, 65535, &[], b"data");
    let a = t.one();
    assert_eq!(
        (a.flags, a.ack),
        (ACK, t.pseq),
        "data of that segment not accepted"
    );
    assert!(t.app.ev.iter().all(|e| !matches!(e, Ev::Data(_))));
    assert_eq!(t.host.counters().tcps_rcvacktoomuch, 1);
}

// RFC 9293 §3.10.7.4 (first check): an old duplicate segment is answered with an ACK.
per_family!(rfc9293_3_10_7_4_duplicate_segment_acked);
fn rfc9293_3_10_7_4_duplicate_segment_acked(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    let iss1 = t.established(&[]);
    t.take();
    t.feed(t.pseq, iss1, ACK | PSH, 65535, &[], b"abc");
    t.advance(t.now + 200 * MS);
    t.take();
    t.feed(t.pseq, iss1, ACK | PSH, 65535, &[], b"abc");
    let a = t.one();
    assert_eq!(a.ack, t.pseq + 3);
    assert_eq!(
        t.app.ev.iter().filter(|e| matches!(e, Ev::Data(_))).count(),
        1
    );
    assert_eq!(t.host.counters().tcps_rcvduppack, 1);
}

/// An established flow (the peer sent `peer_opts` on its SYN-ACK) whose delayed-ACK
/// timeout is `delack_ns`; its SND.NXT.
fn established_with_delack(fam: Family, delack_ns: u64, peer_opts: &[u8]) -> (T, u32) {
    let mut t = T::new(TcpConfig {
        opts: squall_tcp::FlowOpts {
            delack_ns,
            ..squall_tcp::FlowOpts::default()
        },
        ..cfg()
    })
    .over(fam);
    let iss1 = t.established(peer_opts);
    t.take();
    (t, iss1)
}

// RFC 9293 §3.8.6.3 + RFC 5681 §4.2: delayed ACK within the timeout, and at least every
// second full-sized segment.
per_family!(rfc5681_4_2_delayed_ack_and_every_second_segment);
fn rfc5681_4_2_delayed_ack_and_every_second_segment(fam: Family) {
    let (mut t, iss1) = established_with_delack(fam, 100 * MS, &MSS_1460);
    t.feed(t.pseq, iss1, ACK, 65535, &[], &[7u8; 100]);
    assert!(t.take().is_empty(), "ACK delayed");
    t.advance(99 * MS);
    assert!(t.take().is_empty());
    t.advance(100 * MS);
    let a = t.one();
    assert_eq!(a.ack, t.pseq + 100);
    assert_eq!(t.host.counters().tcps_delack, 1);
    t.pseq += 100;
    let m = u32::from(fam.mss(1460));
    let full = vec![1u8; m as usize];
    t.feed(t.pseq, iss1, ACK, 65535, &[], &full);
    assert!(t.take().is_empty());
    t.feed(t.pseq + m, iss1, ACK, 65535, &[], &full);
    let a = t.one();
    assert_eq!(a.ack, t.pseq + 2 * m, "second full segment ACKed at once");
    // That ACK paid the delayed one: nothing more when its timeout would have run out.
    let acks = t.host.counters().tcps_sndacks;
    t.advance(400 * MS);
    assert!(t.take().is_empty(), "a second ACK for the same bytes");
    assert_eq!(t.host.counters().tcps_delack, 1);
    assert_eq!(t.host.counters().tcps_sndacks, acks);
}

// RFC 9293 §3.8.5 and §3.10.7.4 (sixth), RFC 6093: urgent data is delivered inline; the
// app is told when it becomes pending and whenever the pointer moves further, with the
// bytes still to come up to the last urgent one (MUST-31, MUST-32); a pointer to bytes
// already delivered, or the same pointer again, is no news.
per_family!(rfc9293_3_8_5_urgent_data_is_told_to_the_app);
fn rfc9293_3_8_5_urgent_data_is_told_to_the_app(fam: Family) {
    let (mut t, iss1) = established_with_delack(fam, 100 * MS, &MSS_1460);
    t.app.ev.clear();
    let p = t.pseq;
    let data = |s: &[u8]| Ev::Data(s.to_vec());
    // Urgent up to the 4th byte (the pointer names the 5th).
    t.feed_urgent(p, iss1, 4, b"0123456789");
    assert_eq!(t.app.ev, [Ev::Urgent(4), data(b"0123456789")]);
    // Retransmitted: nothing new.
    t.app.ev.clear();
    t.feed_urgent(p, iss1, 4, b"0123456789");
    assert_eq!(t.app.ev, []);
    // A pointer beyond the segment: 25 bytes to come up to the last urgent one.
    t.feed_urgent(p + 10, iss1, 25, b"abcde");
    assert_eq!(t.app.ev, [Ev::Urgent(25), data(b"abcde")]);
    // The same pointer from the next segment: still pending, no news.
    t.app.ev.clear();
    t.feed_urgent(p + 15, iss1, 20, b"fghij");
    assert_eq!(t.app.ev, [data(b"fghij")]);
    // Moved further: told again (15 bytes to come before, now 30).
    t.app.ev.clear();
    t.feed_urgent(p + 20, iss1, 30, b"klmno");
    assert_eq!(t.app.ev, [Ev::Urgent(30), data(b"klmno")]);
    // A pointer of 0 names nothing past the segment's start.
    t.app.ev.clear();
    t.feed_urgent(p + 25, iss1, 0, b"pq");
    assert_eq!(t.app.ev, [data(b"pq")]);
    assert_eq!(t.host.counters().tcps_rcvurg, 3);
    // Every byte delivered in order, urgent or not.
    assert_eq!(t.host.counters().tcps_rcvbyte, 27);
}

// An urgent pointer the flow's bytes passed is forgotten: 2 GiB later (when sequence
// comparison would see it ahead again) a new one is still news.
#[test]
fn rfc9293_3_8_5_a_passed_urgent_pointer_is_forgotten() {
    let (mut t, iss1) = established_with_delack(Family::V4, 100 * MS, &MSS_1460);
    let mut p = t.pseq;
    t.feed_urgent(p, iss1, 4, b"0123");
    p = p.wrapping_add(4);
    let chunk = vec![b'x'; 60_000];
    let mut sent = 0u64;
    while sent < (1 << 31) + (1 << 20) {
        t.feed(p, iss1, ACK, 65535, &[], &chunk);
        p = p.wrapping_add(chunk.len() as u32);
        sent += chunk.len() as u64;
        t.app.ev.clear();
        t.sink.out.clear();
    }
    t.feed_urgent(p, iss1, 4, b"abcd");
    assert_eq!(t.app.ev, [Ev::Urgent(4), Ev::Data(b"abcd".to_vec())]);
    assert_eq!(t.host.counters().tcps_rcvurg, 2);
}

// RFC 5681 §4.2 / RFC 9293 §3.10.7.4: out-of-order segment -> immediate duplicate ACK;
// queued bytes delivered in order once the hole fills, with an immediate ACK.
per_family!(rfc5681_4_2_out_of_order_dup_ack_and_reassembly);
fn rfc5681_4_2_out_of_order_dup_ack_and_reassembly(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    let iss1 = t.established(&[]);
    t.take();
    let p = t.pseq;
    t.feed(p + 5, iss1, ACK, 65535, &[], b"fghij");
    let a = t.one();
    assert_eq!(a.ack, p, "duplicate ACK for the hole");
    t.feed(p + 3, iss1, ACK, 65535, &[], b"defg"); // overlaps the queued range
    t.take();
    t.feed(p, iss1, ACK, 65535, &[], b"abc");
    let a = t.one();
    assert_eq!(a.ack, p + 10);
    let data: Vec<u8> = t
        .app
        .ev
        .iter()
        .filter_map(|e| {
            if let Ev::Data(d) = e {
                Some(d.clone())
            } else {
                None
            }
        })
        .flatten()
        .collect();
    assert_eq!(data, b"abcdefghij");
    assert_eq!(t.host.counters().tcps_rcvoopack, 2);
}

fn with_data(t: &mut T, len: u32) -> (BufId, u32) {
    let b = t
        .host
        .buffers()
        .register(Arc::from((0..len).map(|i| i as u8).collect::<Vec<u8>>()));
    (b, len)
}

// RFC 6298 §5.4-§5.6: on timeout retransmit the earliest segment, double the RTO.
per_family!(rfc6298_5_retransmission_timeout_and_backoff);
fn rfc6298_5_retransmission_timeout_and_backoff(fam: Family) {
    let mut t = T::new(TcpConfig {
        rto: squall_tcp::RtoConfig {
            min_us: 200_000,
            max_us: 60_000_000,
            initial_us: 1_000_000,
        },
        ..cfg()
    })
    .over(fam);
    let (b, l) = with_data(&mut t, 1000);
    t.app.send_on_connect = Some((b, l));
    let syn = t.connect();
    t.now = 50 * MS; // RTT sample 50 ms -> RTO = max(200ms, 50 + 4*25) = 200 ms
    t.feed(
        t.pseq,
        syn.seq.wrapping_add(1),
        SYN | ACK,
        65535,
        &MSS_1000,
        &[],
    );
    let d = t.one();
    assert_eq!(d.payload.len(), 1000);
    t.advance(t.now + 199 * MS);
    assert!(t.take().is_empty());
    t.advance(t.now + MS);
    let r1 = t.one();
    assert_eq!((r1.seq, r1.payload.len()), (d.seq, 1000));
    t.advance(t.now + 399 * MS);
    assert!(t.take().is_empty(), "backed-off RTO is doubled");
    t.advance(t.now + MS);
    let r2 = t.one();
    assert_eq!(r2.seq, d.seq);
    assert_eq!(t.host.counters().tcps_rexmttimeo, 2);
    assert_eq!(t.host.counters().tcps_sndrexmitpack, 2);
    // ACK of everything stops the timer and reports the acked bytes.
    t.feed(t.pseq + 1, d.seq.wrapping_add(1000), ACK, 65535, &[], &[]);
    assert_eq!(t.app.ev.last(), Some(&Ev::Acked(1000)));
    t.advance(t.now + 10_000 * MS);
    assert!(t.take().is_empty());
}

// RFC 6298 §5 (Karn): the backed-off RTO is kept until an ACK gives a valid RTT sample;
// an ACK of a retransmitted segment does not clear the backoff. A later ACK of a timed
// (never retransmitted) segment does.
per_family!(rfc6298_karn_backoff_kept_until_valid_sample);
fn rfc6298_karn_backoff_kept_until_valid_sample(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    let (b, _) = with_data(&mut t, 3000);
    t.app.send_on_connect = Some((b, 2000));
    let syn = t.connect();
    t.now = 50 * MS; // RTT sample 50 ms -> RTO 200 ms
    t.feed(
        t.pseq,
        syn.seq.wrapping_add(1),
        SYN | ACK,
        65535,
        &MSS_1000,
        &[],
    );
    t.pseq += 1;
    let u = syn.seq.wrapping_add(1);
    assert_eq!(t.take().len(), 2);
    t.advance(t.now + 200 * MS);
    assert_eq!(t.one().seq, u, "first RTO retransmits the first segment");
    // The retransmission is acknowledged: no RTT sample, the backoff (RTO 400 ms) stays.
    t.feed(t.pseq, u.wrapping_add(1000), ACK, 65535, &[], &[]);
    let r = t.one();
    assert_eq!(r.seq, u.wrapping_add(1000));
    let at = t.now;
    t.advance(at + 399 * MS);
    assert!(t.take().is_empty(), "backed-off RTO kept (Karn)");
    t.advance(at + 400 * MS);
    assert_eq!(t.one().seq, u.wrapping_add(1000));
    // Everything acknowledged; new data is timed and its ACK 50 ms later is a valid sample:
    // the backoff is gone (RTO back to 200 ms).
    t.feed(t.pseq, u.wrapping_add(2000), ACK, 65535, &[], &[]);
    let f = t.flow.unwrap();
    t.host.send(t.now, &mut t.sink, f, b, 2000, 500).unwrap();
    assert_eq!(t.one().seq, u.wrapping_add(2000));
    t.now += 50 * MS;
    t.feed(t.pseq, u.wrapping_add(2500), ACK, 65535, &[], &[]);
    t.host.send(t.now, &mut t.sink, f, b, 2500, 500).unwrap();
    assert_eq!(t.one().seq, u.wrapping_add(2500));
    let at = t.now;
    t.advance(at + 199 * MS);
    assert!(t.take().is_empty());
    t.advance(at + 200 * MS);
    assert_eq!(
        t.one().seq,
        u.wrapping_add(2500),
        "backoff cleared by a valid sample"
    );
}

// RFC 6298 §5.7: the SYN (active open) or SYN-ACK (passive open) was retransmitted, so the
// handshake gave no RTT sample: data transmission starts with an RTO of 3 s, not 1 s.
per_family!(rfc6298_5_7_rto_3s_after_retransmitted_syn);
fn rfc6298_5_7_rto_3s_after_retransmitted_syn(fam: Family) {
    for passive in [false, true] {
        let mut t = T::new(cfg()).over(fam);
        let (b, l) = with_data(&mut t, 100);
        t.app.send_on_connect = Some((b, l));
        let u = if passive {
            t.host.listen(HP);
            t.feed(7000, 0, SYN, 65535, &[], &[]);
            let sa = t.one();
            t.advance(1_000 * MS);
            assert_eq!(t.one().flags, SYN | ACK, "SYN-ACK retransmitted");
            t.feed(7001, sa.seq.wrapping_add(1), ACK, 65535, &[], &[]);
            t.flow = Some(FlowId(0));
            sa.seq.wrapping_add(1)
        } else {
            let syn = t.connect();
            t.advance(1_000 * MS);
            assert_eq!(t.one().flags, SYN, "SYN retransmitted");
            t.feed(t.pseq, syn.seq.wrapping_add(1), SYN | ACK, 65535, &[], &[]);
            syn.seq.wrapping_add(1)
        };
        assert_eq!(t.state(), State::Established);
        let d: Vec<Out> = t
            .take()
            .into_iter()
            .filter(|s| !s.payload.is_empty())
            .collect();
        assert_eq!((d.len(), d[0].seq), (1, u), "passive {passive}");
        let at = t.now;
        t.advance(at + 2_999 * MS);
        assert!(t.take().is_empty(), "RTO is 3 s (passive {passive})");
        t.advance(at + 3_000 * MS);
        assert_eq!(t.one().seq, u, "passive {passive}");
        let i = t.host.flow_info(t.flow.unwrap()).unwrap();
        assert_eq!(i.rto_us, 3_000_000);
    }
}

// After a retransmission timeout SND.NXT is rolled back; a pure ACK still carries SND.MAX
// (BSD tcp_output), or the peer, whose RCV.NXT may be past our SND.NXT, would find it an
// old, unacceptable segment and ignore the acknowledgement (RFC 9293 §3.10.7.4).
per_family!(rfc9293_3_10_7_4_pure_ack_after_rto_carries_snd_max);
fn rfc9293_3_10_7_4_pure_ack_after_rto_carries_snd_max(fam: Family) {
    let mut t = T::new(TcpConfig {
        opts: squall_tcp::FlowOpts {
            delack_ns: 0,
            ..squall_tcp::FlowOpts::default()
        },
        ..cfg()
    })
    .over(fam);
    let (b, _) = with_data(&mut t, 2000);
    t.app.send_on_connect = Some((b, 2000));
    let u = t.established(&MSS_1000);
    assert_eq!(t.take().len(), 2);
    let n = t.host.next_timer().unwrap();
    t.advance(n);
    assert_eq!(t.one().seq, u, "RTO: the first segment again");
    // The peer's data arrives: the ACK we send carries SND.MAX.
    t.feed(t.pseq, u, ACK | PSH, 65535, &[], b"data");
    let a = t.one();
    assert_eq!(
        (a.seq, a.ack, a.payload.len()),
        (u.wrapping_add(2000), t.pseq + 4, 0)
    );
}

// RFC 7323 §4.1: an echoed timestamp from the current millisecond is a valid sample (our
// TSval clock is odd-valued: the echo may be one above the millisecond count).
per_family!(rfc7323_4_1_sub_millisecond_rtt_sampled);
fn rfc7323_4_1_sub_millisecond_rtt_sampled(fam: Family) {
    let mut t = T::new(TcpConfig {
        opts: squall_tcp::FlowOpts {
            timestamps: true,
            ..squall_tcp::FlowOpts::default()
        },
        ..cfg()
    })
    .over(fam);
    t.now = 10 * MS; // an even millisecond: TSval 11
    let (b, _) = with_data(&mut t, 100);
    t.app.send_on_connect = Some((b, 100));
    let syn = t.connect();
    t.feed(
        t.pseq,
        syn.seq.wrapping_add(1),
        SYN | ACK,
        65535,
        &ts_opt(500, syn.opts.ts.unwrap().0),
        &[],
    );
    t.pseq += 1;
    let d = t
        .take()
        .into_iter()
        .find(|s| !s.payload.is_empty())
        .unwrap();
    let before = t.host.counters().tcps_rttupdated;
    t.now += MS / 10;
    let ecr = d.opts.ts.unwrap().0;
    assert_eq!(ecr, 11);
    t.feed(
        t.pseq,
        d.seq.wrapping_add(100),
        ACK,
        65535,
        &ts_opt(501, ecr),
        &[],
    );
    assert_eq!(t.host.counters().tcps_rttupdated, before + 1);
}

// RFC 6298 §5 + RFC 9293 §3.8.3: after too many retransmissions the connection is dropped.
per_family!(rfc9293_3_8_3_give_up_after_max_retries);
fn rfc9293_3_8_3_give_up_after_max_retries(fam: Family) {
    let mut t = T::new(TcpConfig {
        max_retries: 3,
        ..cfg()
    })
    .over(fam);
    let (b, l) = with_data(&mut t, 10);
    t.app.send_on_connect = Some((b, l));
    t.established(&[]);
    t.take();
    for _ in 0..10 {
        let n = t.host.next_timer().unwrap_or(t.now);
        t.advance(n.max(t.now));
    }
    assert_eq!(t.state(), State::Closed);
    assert_eq!(t.app.ev.last(), Some(&Ev::Closed(CloseReason::Timeout)));
    // A dropped connection as BSD counts it (`tcp_drop`): with its RST, in tcps_drops.
    let c = t.host.counters();
    assert_eq!((c.tcps_timeoutdrop, c.tcps_drops, c.tcps_sndrst), (1, 1, 1));
}

// RFC 6582 §3.2 / RFC 5681 §3.2: three duplicate ACKs trigger fast retransmit.
per_family!(rfc6582_3_2_fast_retransmit_on_three_dupacks);
fn rfc6582_3_2_fast_retransmit_on_three_dupacks(fam: Family) {
    let (mut t, iss1) = eight_kb_in_flight(fam);
    let segs = t.take();
    assert_eq!(segs.iter().map(|s| s.payload.len()).sum::<usize>(), 8000);
    for _ in 0..2 {
        t.feed(t.pseq, iss1, ACK, 65535, &[], &[]);
        assert!(t.take().is_empty());
    }
    t.feed(t.pseq, iss1, ACK, 65535, &[], &[]);
    let r = t.one();
    let m = fam.mss(1460);
    assert_eq!((r.seq, r.payload.len()), (iss1, usize::from(m)));
    assert_eq!(t.host.counters().tcps_fastrexmt, 1);
    // Partial ACK (RFC 6582 §3.2 step 5): retransmit the next hole at once.
    t.feed(t.pseq, iss1.wrapping_add(m.into()), ACK, 65535, &[], &[]);
    let r = t.take();
    assert_eq!(r[0].seq, iss1.wrapping_add(m.into()));
}

// RFC 6298 §5.1: a fast retransmission the TX sink refused (a full ring) leaves the
// retransmission timer running with data outstanding: the segment goes one RTO later at
// the latest (the timer stopped for it stayed stopped, and the flow hung).
per_family!(rfc6298_5_1_a_refused_fast_retransmission_keeps_the_timer);
fn rfc6298_5_1_a_refused_fast_retransmission_keeps_the_timer(fam: Family) {
    let (mut t, iss1) = eight_kb_in_flight(fam);
    t.take();
    for _ in 0..2 {
        t.feed(t.pseq, iss1, ACK, 65535, &[], &[]);
    }
    t.sink.full = true;
    t.feed(t.pseq, iss1, ACK, 65535, &[], &[]);
    assert_eq!(t.host.counters().tcps_fastrexmt, 1);
    t.sink.full = false;
    t.host.tx_resume(t.now, &mut t.sink);
    let mut resent_at = None;
    for ms in 1..=5_000u64 {
        t.advance(ms * 1_000_000);
        if t.take()
            .iter()
            .any(|o| o.seq == iss1 && !o.payload.is_empty())
        {
            resent_at = Some(ms);
            break;
        }
    }
    assert!(
        resent_at.is_some_and(|ms| ms <= 1_000),
        "resent at {resent_at:?} ms"
    );
    assert_eq!(t.state(), State::Established);
}

// The most SYN retries the configuration takes (255, `tcp.keepinit` of hours) end in a
// timeout after the 255th: the count no longer overflows its byte at the 256th expiry (a
// panic with overflow checks, endless retries without).
#[test]
fn rfc6298_5_5_syn_retried_255_times_then_given_up() {
    let mut t = T::new(TcpConfig {
        max_syn_retries: 255,
        ..cfg()
    });
    let syn = t.connect();
    let mut resent = 0;
    while let Some(n) = t.host.next_timer() {
        t.advance(n);
        resent += t.take().iter().filter(|o| o.seq == syn.seq).count();
        assert!(resent <= 255, "more than 255 retries");
    }
    assert_eq!(resent, 255);
    assert_eq!(t.app.ev, vec![Ev::Closed(CloseReason::Timeout)]);
    assert_eq!(t.host.counters().tcps_conndrops, 1);
}

/// Established (the peer's MSS 1460, no SACK, no timestamps) with an initial window of
/// ten segments and 8,000 bytes queued on connect, all in flight: our ISS + 1.
fn eight_kb_in_flight(fam: Family) -> (T, u32) {
    let mut t = T::new(TcpConfig {
        opts: squall_tcp::FlowOpts {
            init_cwnd: 10,
            ..squall_tcp::FlowOpts::default()
        },
        ..cfg()
    })
    .over(fam);
    let (b, l) = with_data(&mut t, 8000);
    t.app.send_on_connect = Some((b, l));
    let iss1 = t.established(&MSS_1460);
    (t, iss1)
}

// RFC 9293 §3.8.6.1: zero window -> persist probes.
per_family!(rfc9293_3_8_6_1_zero_window_probe);
fn rfc9293_3_8_6_1_zero_window_probe(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    let (b, l) = with_data(&mut t, 100);
    t.app.send_on_connect = Some((b, l));
    let syn = t.connect();
    t.feed(t.pseq, syn.seq.wrapping_add(1), SYN | ACK, 0, &[], &[]);
    let a = t.one();
    assert!(a.payload.is_empty(), "nothing sent into a zero window");
    let n = t.host.next_timer().unwrap();
    t.advance(n);
    let p = t.one();
    assert_eq!(p.payload.len(), 1, "one-byte window probe");
    assert_eq!(t.host.counters().tcps_persisttimeo, 1);
    // Window opens: the rest flows.
    t.feed(t.pseq + 1, syn.seq.wrapping_add(2), ACK, 65535, &[], &[]);
    let rest = t.take();
    assert_eq!(rest.iter().map(|s| s.payload.len()).sum::<usize>(), 99);
}

/// Established with the peer's window closed (SYN-ACK window 0) and `len` bytes queued on
/// connect; returns SND.UNA.
fn zero_window_flow(t: &mut T, len: u32) -> u32 {
    let (b, l) = with_data(t, len);
    t.app.send_on_connect = Some((b, l));
    let syn = t.connect();
    t.feed(t.pseq, syn.seq.wrapping_add(1), SYN | ACK, 0, &[], &[]);
    t.pseq += 1;
    assert!(
        t.one().payload.is_empty(),
        "nothing sent into a zero window"
    );
    syn.seq.wrapping_add(1)
}

// RFC 1122 §4.2.2.17 / RFC 9293 §3.8.6.1: a peer that answers every probe but keeps its
// window closed (and drops the probe byte) is probed for as long as it answers, with the
// interval backed off up to the maximum RTO; the flow is never reset and the congestion
// window is not collapsed (a probe is not a retransmission timeout).
per_family!(rfc1122_4_2_2_17_zero_window_probed_while_peer_answers);
fn rfc1122_4_2_2_17_zero_window_probed_while_peer_answers(fam: Family) {
    let mut t = T::new(TcpConfig {
        max_retries: 3,
        rto: squall_tcp::RtoConfig {
            min_us: 200_000,
            max_us: 8_000_000,
            initial_us: 1_000_000,
        },
        ..cfg()
    })
    .over(fam);
    let una = zero_window_flow(&mut t, 100);
    let mut last = t.now;
    let mut gaps = Vec::new();
    for k in 0..20 {
        let n = t.host.next_timer().expect("the persist timer runs");
        t.advance(n);
        let p = t.take();
        assert_eq!(p.len(), 1, "probe {k}: {p:?}");
        assert_eq!((p[0].seq, p[0].payload.len()), (una, 1), "probe {k}");
        assert_eq!(p[0].flags & RST, 0);
        gaps.push((n - last) / MS);
        last = n;
        // The peer drops the byte and answers with its window still closed.
        t.feed(t.pseq, una, ACK, 0, &[], &[]);
        assert!(t.take().is_empty(), "an answer to a probe triggers nothing");
        assert_eq!(t.state(), State::Established, "probe {k}");
    }
    // The first probe after one RTO (200 ms: the handshake's RTT sample is below the
    // minimum), then doubling up to the 8 s maximum.
    assert_eq!(gaps[0], 200, "{gaps:?}");
    for w in gaps.windows(2) {
        assert_eq!(
            w[1],
            (2 * w[0]).min(8000),
            "backed off and capped: {gaps:?}"
        );
    }
    let c = t.host.counters();
    assert_eq!((c.tcps_persisttimeo, c.tcps_sndprobe), (20, 20));
    assert_eq!(
        (c.tcps_rexmttimeo, c.tcps_rcvdupack, c.tcps_fastrexmt),
        (0, 0, 0)
    );
    // The window opens: all 100 bytes flow at once (cwnd untouched by the probes).
    t.feed(t.pseq, una, ACK, 65535, &[], &[]);
    let rest = t.take();
    assert_eq!(rest.iter().map(|s| s.payload.len()).sum::<usize>(), 100);
    assert_eq!(rest[0].seq, una);
}

/// An established flow (peer MSS 1,000, window 65,535) with the keep-alive's 2 h idle
/// timer running: (test, SND.UNA, flow).
fn idle_with_keepalive(fam: Family) -> (T, u32, FlowId) {
    let mut t = T::new(TcpConfig {
        keepalive: Some((7_200_000 * MS, 75_000 * MS, 9)),
        ..cfg()
    })
    .over(fam);
    let una = t.established(&MSS_1000);
    let f = t.flow.unwrap();
    t.take();
    (t, una, f)
}

/// Runs the timers until the host sends something, failing if that takes longer than
/// `limit` from now.
fn until_sent_within(t: &mut T, limit: u64) {
    let from = t.now;
    while t.sink.out.is_empty() {
        let n = t.host.next_timer().expect("a timer runs");
        assert!(n - from <= limit, "{} ms", (n - from) / MS);
        t.advance(n);
    }
}

// RFC 9293 §3.8.6.1: data queued into a window that closed while the flow was idle is
// probed by the persist timer, which replaces the keep-alive's idle timer (2 h here).
per_family!(rfc9293_3_8_6_1_window_closed_while_idle_is_probed);
fn rfc9293_3_8_6_1_window_closed_while_idle_is_probed(fam: Family) {
    let (mut t, una, f) = idle_with_keepalive(fam);
    // The peer closes its window (a window update; nothing of ours outstanding).
    t.feed(t.pseq, una, ACK, 0, &[], &[]);
    let (b, _) = with_data(&mut t, 100);
    t.host.send(t.now, &mut t.sink, f, b, 0, 100).unwrap();
    assert!(t.take().is_empty(), "nothing sent into a zero window");
    until_sent_within(&mut t, 1_000 * MS);
    let p = t.one();
    assert_eq!((p.seq, p.payload.len()), (una, 1), "a one-byte probe");
    assert_eq!(t.host.counters().tcps_sndprobe, 1);
}

// RFC 9293 §3.8.6.2.1 (sender silly-window avoidance), with nothing in flight: a window
// below a segment and below half the largest the peer offered holds the data until the
// override timeout (the persist timer, not the keep-alive's), which sends what fits; a
// full segment's window, or half the largest, is used at once.
per_family!(rfc9293_3_8_6_2_1_small_window_waits_for_the_override_timeout);
fn rfc9293_3_8_6_2_1_small_window_waits_for_the_override_timeout(fam: Family) {
    let (mut t, una, f) = idle_with_keepalive(fam);
    let (b, _) = with_data(&mut t, 3000);
    t.host.send(t.now, &mut t.sink, f, b, 0, 1000).unwrap();
    assert_eq!(t.one().payload.len(), 1000);
    // All acknowledged; the peer's window drops to 400 (its largest was 65,535).
    t.now += 10 * MS;
    t.feed(t.pseq, una.wrapping_add(1000), ACK, 400, &[], &[]);
    t.host.send(t.now, &mut t.sink, f, b, 1000, 2000).unwrap();
    assert!(t.take().is_empty(), "400 bytes of 2,000 wait");
    // The override timeout: the persist timer, one RTO later (not the 2 h keep-alive).
    until_sent_within(&mut t, 1_000 * MS);
    let o = t.one();
    assert_eq!((o.seq, o.payload.len()), (una.wrapping_add(1000), 400));
    assert_eq!(t.host.counters().tcps_persisttimeo, 1);
    assert_eq!(t.host.counters().tcps_sndprobe, 0, "data, not a probe");
    // Acknowledged with a full segment's window: sent at once.
    t.feed(t.pseq, una.wrapping_add(1400), ACK, 1000, &[], &[]);
    let o = t.one();
    assert_eq!((o.seq, o.payload.len()), (una.wrapping_add(1400), 1000));
    // Then a window of 600 with 600 bytes left: all that is queued fits, sent at once.
    t.feed(t.pseq, una.wrapping_add(2400), ACK, 600, &[], &[]);
    let o = t.one();
    assert_eq!((o.seq, o.payload.len()), (una.wrapping_add(2400), 600));

    // A peer whose largest window is 700: 400 is more than half of it, used at once.
    let mut t = T::new(cfg()).over(fam);
    let syn = t.connect();
    let f = t.flow.unwrap();
    t.feed(
        t.pseq,
        syn.seq.wrapping_add(1),
        SYN | ACK,
        700,
        &MSS_1000,
        &[],
    );
    t.pseq += 1;
    t.take();
    let una = syn.seq.wrapping_add(1);
    let (b, _) = with_data(&mut t, 2000);
    t.host.send(t.now, &mut t.sink, f, b, 0, 700).unwrap();
    assert_eq!(t.one().payload.len(), 700);
    t.feed(t.pseq, una.wrapping_add(700), ACK, 400, &[], &[]);
    t.host.send(t.now, &mut t.sink, f, b, 700, 1300).unwrap();
    let o = t.one();
    assert_eq!((o.seq, o.payload.len()), (una.wrapping_add(700), 400));
}

// The silly-window hold is for new data: a retransmission into a small window goes at
// once (as BSD's tcp_output sends it). Two paths rolled SND.NXT back with nothing "in
// flight" by SND.NXT and were held for good (no persist timer for data already sent; the
// flow was reset after its retries): an RTO after the override's segment was lost, and a
// zero-window probe lost before the window opened a little.
per_family!(rfc9293_3_8_6_2_1_retransmissions_into_a_small_window_go_at_once);
fn rfc9293_3_8_6_2_1_retransmissions_into_a_small_window_go_at_once(fam: Family) {
    // The override's 400 bytes are lost: the RTO resends them.
    let (mut t, una, f) = idle_with_keepalive(fam);
    let (b, _) = with_data(&mut t, 3000);
    t.host.send(t.now, &mut t.sink, f, b, 0, 1000).unwrap();
    t.one();
    t.now += 10 * MS;
    t.feed(t.pseq, una.wrapping_add(1000), ACK, 400, &[], &[]);
    t.host.send(t.now, &mut t.sink, f, b, 1000, 2000).unwrap();
    until_sent_within(&mut t, 1_000 * MS);
    let lost = t.one();
    assert_eq!(
        (lost.seq, lost.payload.len()),
        (una.wrapping_add(1000), 400)
    );
    until_sent_within(&mut t, 5_000 * MS);
    let again = t.one();
    assert_eq!((again.seq, again.payload.len()), (lost.seq, 400), "resent");
    assert_eq!(t.host.counters().tcps_sndrexmitpack, 1);
    assert_eq!(t.state(), State::Established);

    // A zero window, its probe byte lost, then a window of 400: sent at once from SND.UNA.
    let mut t = T::new(cfg()).over(fam);
    let una = zero_window_flow(&mut t, 2000);
    until_sent_within(&mut t, 1_000 * MS);
    let p = t.one();
    assert_eq!((p.seq, p.payload.len()), (una, 1), "the probe");
    t.feed(t.pseq, una, ACK, 400, &[], &[]);
    let o = t.one();
    assert_eq!((o.seq, o.payload.len()), (una, 400));
}

// RFC 1122 §4.2.2.17 allows closing a zero-window connection whose peer stops answering:
// after `max_retries` unanswered probes the flow is reset.
per_family!(rfc1122_4_2_2_17_unanswered_zero_window_probes_drop_the_flow);
fn rfc1122_4_2_2_17_unanswered_zero_window_probes_drop_the_flow(fam: Family) {
    let mut t = T::new(TcpConfig {
        max_retries: 3,
        ..cfg()
    })
    .over(fam);
    zero_window_flow(&mut t, 100);
    for _ in 0..10 {
        if t.state() == State::Closed {
            break;
        }
        let n = t.host.next_timer().unwrap();
        t.advance(n);
    }
    assert_eq!(t.state(), State::Closed);
    assert_eq!(t.app.ev.last(), Some(&Ev::Closed(CloseReason::Timeout)));
    let c = t.host.counters();
    assert_eq!(
        (c.tcps_sndprobe, c.tcps_persisttimeo),
        (3, 4),
        "3 unanswered probes, then drop"
    );
}

/// Established with the peer's MSS 1000 and `len` bytes queued on connect; returns
/// (SND.UNA at the start, bytes of the first flight).
fn flight_sent(t: &mut T, len: u32, peer_wnd: u16, peer_opts: &[u8]) -> (u32, u32) {
    let (b, l) = with_data(t, len);
    t.app.send_on_connect = Some((b, l));
    let syn = t.connect();
    t.feed(
        t.pseq,
        syn.seq.wrapping_add(1),
        SYN | ACK,
        peer_wnd,
        peer_opts,
        &[],
    );
    t.pseq += 1;
    let sent = t.take().iter().map(|s| s.payload.len() as u32).sum();
    (syn.seq.wrapping_add(1), sent)
}

// RFC 1122 §4.2.2.17: the first zero-window probe goes after one RTO, keep-alive or not:
// (a) the ACK of the whole flight closes the window with data still queued; (b) the app
// sends on an idle flow (its keep-alive timer running) whose window is closed.
per_family!(rfc1122_4_2_2_17_persist_timer_not_replaced_by_keepalive);
fn rfc1122_4_2_2_17_persist_timer_not_replaced_by_keepalive(fam: Family) {
    let ka = TcpConfig {
        keepalive: Some((7_200_000 * MS, 75_000 * MS, 9)),
        ..cfg()
    };
    let mut t = T::new(ka.clone()).over(fam);
    let (u, sent) = flight_sent(&mut t, 5000, 65535, &MSS_1000);
    assert!(sent > 0 && sent < 5000, "{sent}");
    t.now += 10 * MS;
    t.feed(t.pseq, u.wrapping_add(sent), ACK, 0, &[], &[]);
    assert!(t.take().is_empty());
    let p = first_segment_within(&mut t, 3_000 * MS);
    assert_eq!((p.seq, p.payload.len()), (u.wrapping_add(sent), 1), "{p:?}");
    assert_eq!(t.host.counters().tcps_sndprobe, 1);
    // (b)
    let mut t = T::new(ka).over(fam);
    let (u, sent) = flight_sent(&mut t, 1000, 65535, &MSS_1000);
    assert_eq!(sent, 1000);
    t.now += 10 * MS;
    t.feed(t.pseq, u.wrapping_add(1000), ACK, 0, &[], &[]);
    let (b, _) = with_data(&mut t, 500);
    t.now += 10 * MS;
    let f = t.flow.unwrap();
    t.host.send(t.now, &mut t.sink, f, b, 0, 500).unwrap();
    assert!(t.take().is_empty(), "nothing into a closed window");
    assert_eq!(first_segment_within(&mut t, 3_000 * MS).payload.len(), 1);
}

// Data queued while the SYN is out (a client sends its request at once) leaves the SYN's
// retransmission timer alone: a lost SYN is sent again.
per_family!(rfc6298_syn_retransmitted_with_data_queued);
fn rfc6298_syn_retransmitted_with_data_queued(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    let syn = t.connect();
    let (b, _) = with_data(&mut t, 100);
    let f = t.flow.unwrap();
    t.host.send(t.now, &mut t.sink, f, b, 0, 100).unwrap();
    assert!(t.take().is_empty());
    let again = first_segment_within(&mut t, 5_000 * MS);
    assert_eq!((again.flags, again.seq), (SYN, syn.seq));
}

// RFC 1122 §4.2.3.10 / §3.2.1.3: a segment for no connection is answered only on an
// owned address, whichever receive path takes it (one frame, or a burst whose prefetch
// pass already knows both addresses, as here: the peer's own address, which has an id
// while the peer's flow lives).
per_family!(segments_for_no_connection_are_answered_on_owned_addresses_only);
fn segments_for_no_connection_are_answered_on_owned_addresses_only(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    t.host.listen(81);
    t.established(&[]);
    t.take();
    let own = |a: u32| -> u128 { u128::from_be_bytes(wire::ip6_of(a)) };
    match fam {
        Family::V4 => t.host.set_owned(&[(HOST_IP, HOST_IP)], &[]),
        Family::V6 => t.host.set_owned(&[], &[(own(HOST_IP), own(HOST_IP))]),
    }
    let to_peer = wire::peer_frame(
        fam,
        (PEER_IP, 1000),
        (PEER_IP, 81),
        7,
        0,
        SYN,
        65535,
        &[],
        &[],
    );
    t.host.rx(t.now, &to_peer, &mut t.app, &mut t.sink);
    let burst: Vec<&[u8]> = vec![&to_peer; 4];
    t.host.rx_burst(t.now, &burst, &mut t.app, &mut t.sink);
    assert!(
        t.take().is_empty(),
        "no SYN-ACK or RST from an address not ours"
    );
    assert_eq!(t.host.counters().tcps_rcvnotours, 5);
    // Our own address is answered (a SYN-ACK from the listener).
    let to_us = wire::peer_frame(
        fam,
        (PEER_IP, 1001),
        (HOST_IP, 81),
        7,
        0,
        SYN,
        65535,
        &[],
        &[],
    );
    t.host.rx_burst(t.now, &[&to_us], &mut t.app, &mut t.sink);
    assert_eq!(t.one().flags, SYN | ACK);
}

// A listener bound to an address (a socket bound to it, `listen_at`) takes SYNs to that
// address only: one to another of the host's addresses on the same port is refused with
// a RST, as for a closed port; a port opened on any address takes both.
per_family!(a_listener_bound_to_an_address_refuses_the_others);
fn a_listener_bound_to_an_address_refuses_the_others(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    let other = HOST_IP + 1;
    let ip = |a: u32| -> std::net::IpAddr {
        match fam {
            Family::V4 => std::net::Ipv4Addr::from(a).into(),
            Family::V6 => std::net::Ipv6Addr::from(wire::ip6_of(a)).into(),
        }
    };
    t.host.listen_at(ip(HOST_IP), 81);
    let syn = |to: u32, port: u16| {
        wire::peer_frame(fam, (PEER_IP, port), (to, 81), 7, 0, SYN, 65535, &[], &[])
    };
    t.host.rx(t.now, &syn(other, 1000), &mut t.app, &mut t.sink);
    let r = t.one();
    assert_eq!(
        (r.flags, r.ack),
        (RST | ACK, 8),
        "another address is refused"
    );
    t.host
        .rx(t.now, &syn(HOST_IP, 1001), &mut t.app, &mut t.sink);
    assert_eq!(t.one().flags, SYN | ACK, "the bound address is taken");
    // A second address on the port, then the port on any address.
    t.host.listen_at(ip(other), 81);
    t.host.rx(t.now, &syn(other, 1002), &mut t.app, &mut t.sink);
    assert_eq!(t.one().flags, SYN | ACK);
    t.host
        .rx(t.now, &syn(other + 1, 1003), &mut t.app, &mut t.sink);
    assert_eq!(t.one().flags, RST | ACK);
    t.host.listen(81);
    t.host
        .rx(t.now, &syn(other + 1, 1004), &mut t.app, &mut t.sink);
    assert_eq!(t.one().flags, SYN | ACK, "listen: any address");
    // Bound again after unlisten: the addresses of before are gone.
    t.host.unlisten(81);
    t.host.listen_at(ip(other), 81);
    t.host
        .rx(t.now, &syn(HOST_IP, 1005), &mut t.app, &mut t.sink);
    assert_eq!(t.one().flags, RST | ACK);
    // Another port is untouched by the binding.
    t.host.listen(82);
    let to82 = wire::peer_frame(
        fam,
        (PEER_IP, 1006),
        (HOST_IP, 82),
        7,
        0,
        SYN,
        65535,
        &[],
        &[],
    );
    t.host.rx(t.now, &to82, &mut t.app, &mut t.sink);
    assert_eq!(t.one().flags, SYN | ACK);
}

// TIME_WAIT reuse over IPv6 keeps the flow's addresses: the old incarnation's close must
// not free the address ids the new one takes (the next new address would get one of them
// and the reused flow's segments would go to that address). Passive (a new SYN) and
// active (connect on the same 4-tuple).
#[test]
fn ipv6_time_wait_reuse_keeps_the_flows_addresses() {
    let fam = Family::V6;
    // Passive: the peer's new SYN reopens its TIME_WAIT 4-tuple.
    let (mut t, f) = passive_time_wait(fam);
    let before = t.host.flow_ipv6(f).unwrap();
    t.feed(9000, 0, SYN, 65535, &[], &[]);
    assert_eq!(t.one().flags, SYN | ACK);
    let g = (0..4)
        .map(FlowId)
        .find(|&g| t.host.state(g) == State::SynReceived)
        .unwrap();
    assert_eq!(t.host.ipv6_addresses(), 2);
    let other = wire::peer_frame(
        fam,
        (PEER_IP + 7, 1234),
        (HOST_IP, HP),
        1,
        0,
        SYN,
        65535,
        &[],
        &[],
    );
    t.host.rx(t.now, &other, &mut t.app, &mut t.sink);
    t.take();
    assert_eq!(
        t.host.flow_ipv6(g).unwrap(),
        before,
        "the reused flow's addresses"
    );
    assert_eq!(t.host.ipv6_addresses(), 3);
    // Active: connect on the 4-tuple of a flow in TIME_WAIT.
    let (mut t, _, f) = active_time_wait(fam);
    let before = t.host.flow_ipv6(f).unwrap();
    t.connect();
    let g = t.flow.unwrap();
    assert_eq!(t.host.ipv6_addresses(), 2);
    fam.connect(
        &mut t.host,
        t.now,
        &mut t.sink,
        (HOST_IP + 5, 999),
        (PEER_IP + 5, 80),
        OptsId::DEFAULT,
    )
    .unwrap();
    t.take();
    assert_eq!(
        t.host.flow_ipv6(g).unwrap(),
        before,
        "the reused flow's addresses"
    );
    assert_eq!(t.host.ipv6_addresses(), 4);
}

/// Runs the host's timers until it sends; the segment, which must come within `ns`.
fn first_segment_within(t: &mut T, ns: u64) -> Out {
    let start = t.now;
    loop {
        let n = t.host.next_timer().expect("a timer runs");
        assert!(n - start <= ns, "nothing sent in {} ms", (n - start) / MS);
        t.advance(n);
        let v = t.take();
        if let Some(o) = v.first() {
            assert_eq!(v.len(), 1, "{v:?}");
            return o.clone();
        }
    }
}

// Counters of a closed window (BSD's): probes are `sndprobe` only, not retransmissions;
// every byte of data counts once in `sndbyte` (the probe byte the first time it leaves),
// a segment resending bytes below SND.MAX counts as a retransmission with those bytes.
per_family!(zero_window_probes_are_counted_as_probes);
fn zero_window_probes_are_counted_as_probes(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    let una = zero_window_flow(&mut t, 100);
    for _ in 0..5 {
        let n = t.host.next_timer().unwrap();
        t.advance(n);
        assert_eq!(t.one().payload.len(), 1, "a probe");
        t.feed(t.pseq, una, ACK, 0, &[], &[]);
        t.take();
    }
    t.feed(t.pseq, una, ACK, 65535, &[], &[]);
    let s = t.one();
    assert_eq!((s.seq, s.payload.len()), (una, 100));
    t.feed(t.pseq, una.wrapping_add(100), ACK, 65535, &[], &[]);
    let c = t.host.counters();
    assert_eq!(
        (c.tcps_sndprobe, c.tcps_sndpack, c.tcps_sndbyte),
        (5, 0, 100),
        "probes, data packets, data bytes"
    );
    assert_eq!((c.tcps_sndrexmitpack, c.tcps_sndrexmitbyte), (1, 1));
}

// RFC 9293 §3.6: orderly close by us (active close) -> FIN_WAIT_1 -> FIN_WAIT_2 ->
// TIME_WAIT; half-close: data from the peer still arrives after our FIN.
per_family!(rfc9293_3_6_half_close_and_time_wait);
fn rfc9293_3_6_half_close_and_time_wait(fam: Family) {
    let mut t = T::new(TcpConfig {
        time_wait_ns: 500 * MS,
        ..cfg()
    })
    .over(fam);
    let iss1 = t.established(&[]);
    t.take();
    let f = t.flow.unwrap();
    t.host.close(t.now, &mut t.app, &mut t.sink, f);
    let fin = t.one();
    assert_eq!(fin.flags, FIN | ACK);
    assert_eq!(t.state(), State::FinWait1);
    t.feed(t.pseq, iss1.wrapping_add(1), ACK, 65535, &[], &[]);
    assert_eq!(t.state(), State::FinWait2);
    t.feed(t.pseq, iss1.wrapping_add(1), ACK, 65535, &[], b"late data");
    assert_eq!(t.app.ev.last(), Some(&Ev::Data(b"late data".to_vec())));
    t.pseq += 9;
    t.feed(t.pseq, iss1.wrapping_add(1), FIN | ACK, 65535, &[], &[]);
    assert_eq!(t.state(), State::TimeWait);
    let a = t.take();
    assert_eq!(a.last().unwrap().ack, t.pseq + 1);
    assert_eq!(t.app.ev.last(), Some(&Ev::Closed(CloseReason::Normal)));
    // A retransmitted FIN in TIME_WAIT is ACKed again.
    t.feed(t.pseq, iss1.wrapping_add(1), FIN | ACK, 65535, &[], &[]);
    assert_eq!(t.one().ack, t.pseq + 1);
    t.advance(t.now + 499 * MS);
    assert_eq!(t.state(), State::TimeWait);
    t.advance(t.now + 2 * MS);
    assert_eq!(t.state(), State::Closed);
    assert_eq!(t.host.flow_count(), 0);
    assert_eq!(
        t.app
            .ev
            .iter()
            .filter(|e| matches!(e, Ev::Closed(_)))
            .count(),
        1
    );
}

// RFC 9293 §3.6 figure 13: simultaneous close -> CLOSING -> TIME_WAIT.
per_family!(rfc9293_3_6_simultaneous_close);
fn rfc9293_3_6_simultaneous_close(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    let iss1 = t.established(&[]);
    t.take();
    let f = t.flow.unwrap();
    t.host.close(t.now, &mut t.app, &mut t.sink, f);
    t.take();
    t.feed(t.pseq, iss1, FIN | ACK, 65535, &[], &[]); // peer's FIN, not acking ours
    assert_eq!(t.state(), State::Closing);
    t.take();
    t.feed(t.pseq + 1, iss1.wrapping_add(1), ACK, 65535, &[], &[]);
    assert_eq!(t.state(), State::TimeWait);
}

// The app runs after the whole segment, as over a kernel: a FIN riding on the ACK of our
// data takes effect before the app hears of the acknowledged bytes. An app closing
// there answers the peer's close (CLOSE_WAIT -> LAST_ACK: the peer, which closed first,
// holds TIME_WAIT), not crosses it (FIN_WAIT_1 -> CLOSING -> TIME_WAIT); the peer's close
// reaches only an app that did not close on its own, after the ACK's callback.
per_family!(fin_riding_on_the_ack_of_our_data_comes_before_the_apps_close);
fn fin_riding_on_the_ack_of_our_data_comes_before_the_apps_close(fam: Family) {
    for closes in [true, false] {
        let mut t = T::new(cfg()).over(fam);
        t.app.close_when_acked = closes;
        t.app.close_on_peer_fin = false;
        let iss1 = t.established(&[]);
        t.take();
        let (b, _) = with_data(&mut t, 10);
        let f = t.flow.unwrap();
        t.host.send(t.now, &mut t.sink, f, b, 0, 10).unwrap();
        assert_eq!(t.one().payload.len(), 10);
        t.app.ev.clear();
        t.feed(t.pseq, iss1.wrapping_add(10), FIN | ACK, 65535, &[], &[]);
        if closes {
            assert_eq!(t.state(), State::LastAck);
            assert_eq!(
                t.app.ev,
                [Ev::Acked(10)],
                "no PeerClosed after its own close"
            );
            let fin = t.one();
            assert_eq!(fin.flags, FIN | ACK);
            assert_eq!(fin.ack, t.pseq + 1, "the peer's FIN acknowledged with ours");
            t.feed(t.pseq + 1, iss1.wrapping_add(11), ACK, 65535, &[], &[]);
            assert_eq!(t.state(), State::Closed, "no TIME_WAIT on our side");
            assert_eq!(t.app.ev.last(), Some(&Ev::Closed(CloseReason::Normal)));
            assert_eq!(t.host.flow_count(), 0);
        } else {
            assert_eq!(t.state(), State::CloseWait);
            assert_eq!(t.app.ev, [Ev::Acked(10), Ev::PeerClosed]);
            let a = t.one();
            assert_eq!((a.flags, a.ack), (ACK, t.pseq + 1));
        }
    }
}

// RFC 9293 §3.6: passive close: CLOSE_WAIT -> LAST_ACK -> CLOSED.
per_family!(rfc9293_3_6_passive_close);
fn rfc9293_3_6_passive_close(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    t.app.close_on_peer_fin = true;
    let iss1 = t.established(&[]);
    t.take();
    t.feed(t.pseq, iss1, FIN | ACK, 65535, &[], &[]);
    assert_eq!(t.state(), State::LastAck);
    let fin = t.one();
    assert_eq!(fin.flags & FIN, FIN);
    assert_eq!(fin.ack, t.pseq + 1);
    t.feed(t.pseq + 1, iss1.wrapping_add(1), ACK, 65535, &[], &[]);
    assert_eq!(t.state(), State::Closed);
    assert_eq!(t.app.ev.last(), Some(&Ev::Closed(CloseReason::Normal)));
}

/// A flow the peer opened on port HP, closed by us first and then by the peer: in
/// TIME_WAIT (flow 0).
fn passive_time_wait(fam: Family) -> (T, FlowId) {
    let mut t = T::new(cfg()).over(fam);
    t.host.listen(HP);
    t.feed(7000, 0, SYN, 65535, &[], &[]);
    let sa = t.one();
    t.feed(7001, sa.seq.wrapping_add(1), ACK, 65535, &[], &[]);
    let f = FlowId(0);
    assert_eq!(t.host.state(f), State::Established);
    t.host.close(t.now, &mut t.app, &mut t.sink, f);
    t.take();
    t.feed(7001, sa.seq.wrapping_add(2), FIN | ACK, 65535, &[], &[]);
    assert_eq!(t.host.state(f), State::TimeWait);
    t.take();
    (t, f)
}

/// A flow we opened, closed by us first and then by the peer: in TIME_WAIT (60 s), with
/// its initial sequence number.
fn active_time_wait(fam: Family) -> (T, u32, FlowId) {
    let mut t = T::new(TcpConfig {
        time_wait_ns: 60_000 * MS,
        ..cfg()
    })
    .over(fam);
    let iss = t.established(&[]);
    t.take();
    let f = t.flow.unwrap();
    t.host.close(t.now, &mut t.app, &mut t.sink, f);
    t.feed(t.pseq, iss.wrapping_add(1), FIN | ACK, 65535, &[], &[]);
    assert_eq!(t.state(), State::TimeWait);
    t.take();
    (t, iss, f)
}

// RFC 9293 §3.6.1 (TIME_WAIT assassination avoidance / reuse): connect on a 4-tuple in
// TIME_WAIT recycles it with a fresh ISN.
per_family!(rfc9293_3_6_1_time_wait_port_reuse);
fn rfc9293_3_6_1_time_wait_port_reuse(fam: Family) {
    let (mut t, iss1, _) = active_time_wait(fam);
    t.now += 10 * MS;
    let syn = t.connect();
    assert_eq!(syn.flags, SYN);
    assert_ne!(syn.seq, iss1.wrapping_sub(1));
    assert_eq!(t.host.counters().tcps_twrecycled, 1);
}

// RFC 9293 §3.10.5: abort sends RST and reports.
per_family!(rfc9293_3_10_5_abort_sends_rst);
fn rfc9293_3_10_5_abort_sends_rst(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    t.established(&[]);
    t.take();
    let f = t.flow.unwrap();
    t.host.abort(t.now, &mut t.app, &mut t.sink, f);
    assert_eq!(t.one().flags & RST, RST);
    assert_eq!(t.app.ev.last(), Some(&Ev::Closed(CloseReason::Aborted)));
    // After a retransmission timeout (which rolls our send point back to SND.UNA) the
    // RST still carries the highest sequence number sent: the peer may hold all of it.
    let opts = squall_tcp::FlowOpts {
        init_cwnd: 4,
        ..squall_tcp::FlowOpts::default()
    };
    let mut t = host_with(fam, opts);
    let (u, sent) = flight_sent(&mut t, 4000, 65535, &MSS_1000);
    assert_eq!(sent, 4000);
    let n = t.host.next_timer().unwrap();
    t.advance(n);
    assert_eq!(t.one().seq, u, "the RTO's retransmission");
    let f = t.flow.unwrap();
    t.host.abort(t.now, &mut t.app, &mut t.sink, f);
    let rst = t.one();
    assert_eq!((rst.flags & RST, rst.seq), (RST, u.wrapping_add(4000)));
}

// RFC 9293 §3.7.4: Nagle holds a small segment while data is unacknowledged.
per_family!(rfc9293_3_7_4_nagle);
fn rfc9293_3_7_4_nagle(fam: Family) {
    let mut t = T::new(TcpConfig {
        opts: squall_tcp::FlowOpts {
            nagle: true,
            ..squall_tcp::FlowOpts::default()
        },
        ..cfg()
    })
    .over(fam);
    let iss1 = t.established(&[]);
    t.take();
    let (b, _) = with_data(&mut t, 10);
    let f = t.flow.unwrap();
    t.host.send(t.now, &mut t.sink, f, b, 0, 5).unwrap();
    assert_eq!(t.one().payload.len(), 5);
    t.host.send(t.now, &mut t.sink, f, b, 5, 5).unwrap();
    assert!(t.take().is_empty(), "held by Nagle");
    t.feed(t.pseq, iss1.wrapping_add(5), ACK, 65535, &[], &[]);
    assert_eq!(t.one().payload.len(), 5);
}

// Nagle in Minshall's variant (Linux tcp_nagle_check / tcp_minshall_check): the short
// tail of a burst goes with the burst, since no earlier short segment is unacknowledged
// (the classic rule held it until every full segment was acknowledged, and a receiver
// delaying its ACK for the odd last full segment stalled the flow); a further short
// segment waits for that one's ACK; a short segment carrying our FIN goes at once.
per_family!(nagle_minshall_short_tail_of_an_odd_burst_goes_at_once);
fn nagle_minshall_short_tail_of_an_odd_burst_goes_at_once(fam: Family) {
    let mut t = T::new(TcpConfig {
        opts: squall_tcp::FlowOpts {
            nagle: true,
            init_cwnd: 10,
            ..squall_tcp::FlowOpts::default()
        },
        ..cfg()
    })
    .over(fam);
    let iss1 = t.established(&MSS_1460);
    t.take();
    let m = u32::from(fam.mss(1460));
    let (b, _) = with_data(&mut t, 3 * m + 600);
    let f = t.flow.unwrap();
    t.host
        .send(t.now, &mut t.sink, f, b, 0, 3 * m + 500)
        .unwrap();
    let segs = t.take();
    let lens: Vec<u32> = segs.iter().map(|s| s.payload.len() as u32).collect();
    assert_eq!(lens, [m, m, m, 500], "the short tail is not held");
    assert_eq!(segs[3].flags & PSH, PSH);
    // Another short segment waits while the first short one is unacknowledged...
    t.host.send(t.now, &mut t.sink, f, b, 0, 50).unwrap();
    assert!(t.take().is_empty(), "held: a short segment is in flight");
    // ... even when only the full segments are acknowledged ...
    t.feed(t.pseq, iss1.wrapping_add(3 * m), ACK, 65535, &[], &[]);
    assert!(
        t.take().is_empty(),
        "held: the short segment is still in flight"
    );
    // ... and goes once it is.
    t.feed(t.pseq, iss1.wrapping_add(3 * m + 500), ACK, 65535, &[], &[]);
    assert_eq!(t.one().payload.len(), 50);
    // A short segment that carries our FIN is never held (Linux tcp_nagle_test).
    t.host.send(t.now, &mut t.sink, f, b, 0, 30).unwrap();
    t.host.close(t.now, &mut t.app, &mut t.sink, f);
    let s = t.one();
    assert_eq!((s.payload.len(), s.flags & FIN), (30, FIN));
}

// A segment with PSH ends what the peer had queued: it is acknowledged at once (the peer
// may be waiting for it: Nagle, or an application that waits for its data to be acked),
// not after the delayed-ACK timeout.
per_family!(psh_segment_is_acknowledged_at_once);
fn psh_segment_is_acknowledged_at_once(fam: Family) {
    let (mut t, iss1) = established_with_delack(fam, 200 * MS, &MSS_1460);
    t.feed(t.pseq, iss1, ACK, 65535, &[], &[7u8; 100]);
    assert!(t.take().is_empty(), "no PSH: ACK delayed");
    t.feed(t.pseq + 100, iss1, ACK | PSH, 65535, &[], &[8u8; 100]);
    assert_eq!(t.one().ack, t.pseq + 200, "PSH: ACK at once");
    assert_eq!(t.host.counters().tcps_delack, 0);
}

// RFC 9293 §3.8.6.3: "at least every second full-sized segment" counts the segment size
// of the connection: a peer that announced a smaller MSS than ours gets its ACK after two
// of its full segments, not after three.
per_family!(every_second_full_segment_of_the_connection_mss);
fn every_second_full_segment_of_the_connection_mss(fam: Family) {
    let (mut t, iss1) = established_with_delack(fam, 200 * MS, &MSS_1000);
    t.feed(t.pseq, iss1, ACK, 65535, &[], &[1u8; 1000]);
    assert!(t.take().is_empty());
    t.feed(t.pseq + 1000, iss1, ACK, 65535, &[], &[1u8; 1000]);
    assert_eq!(
        t.one().ack,
        t.pseq + 2000,
        "second full segment ACKed at once"
    );
}

fn syn_from(fam: Family, port: u16, seq: u32, flags: u8, ack: u32, payload: &[u8]) -> Vec<u8> {
    let h = FrameHdr {
        src_mac: [2, 0, 0, 0, 0, 9],
        dst_mac: [2, 0, 0, 0, 0, 1],
        src_ip: PEER_IP,
        dst_ip: HOST_IP,
        ip_id: 1,
        src_port: port,
        dst_port: HP,
        seq,
        ack,
        flags,
        wnd: 1000,
        ttl: 64,
        tos: 0,
    };
    let opts: &[u8] = if flags & SYN != 0 { &MSS_1000 } else { &[] };
    wire::frame_in(fam, &h, opts, payload)
}

// RFC 4987 §3.6: when the half-open table is full, SYN cookies keep accepting connections
// without state; a forged cookie is refused.
per_family!(rfc4987_3_6_syn_cookies_when_half_open_table_full);
fn rfc4987_3_6_syn_cookies_when_half_open_table_full(fam: Family) {
    let mut t = T::new(TcpConfig {
        max_half_open: 1,
        ..cfg()
    })
    .over(fam);
    t.host.listen(HP);
    t.host.rx(
        0,
        &syn_from(fam, 1000, 10, SYN, 0, &[]),
        &mut t.app,
        &mut t.sink,
    );
    t.take();
    t.host.rx(
        0,
        &syn_from(fam, 1001, 500, SYN, 0, &[]),
        &mut t.app,
        &mut t.sink,
    );
    let sa = t.one();
    assert_eq!(
        (sa.flags, sa.ack, sa.opts.mss),
        (SYN | ACK, 501, fam.mss(1460))
    );
    assert_eq!(t.host.counters().tcps_sc_sendcookie, 1);
    assert_eq!(t.host.flow_count(), 1, "no state for the cookie SYN");
    // Forged cookie: RST.
    t.host.rx(
        0,
        &syn_from(fam, 1001, 501, ACK, sa.seq.wrapping_add(2), &[]),
        &mut t.app,
        &mut t.sink,
    );
    assert_eq!(t.one().flags, RST);
    // Valid cookie ACK with data: connection established, data delivered, MSS from the cookie.
    t.host.rx(
        1_000_000,
        &syn_from(fam, 1001, 501, ACK, sa.seq.wrapping_add(1), b"hi"),
        &mut t.app,
        &mut t.sink,
    );
    assert_eq!(
        t.app.ev,
        vec![Ev::Connected(true), Ev::Data(b"hi".to_vec())]
    );
    assert_eq!(t.host.counters().tcps_sc_recvcookie, 1);
    assert_eq!(t.host.flow_count(), 2);
    let f = (0..2)
        .map(FlowId)
        .find(|f| t.host.flow_key(*f).map(|k| k.remote_port) == Some(1001))
        .unwrap();
    assert_eq!(
        t.host.flow_info(f).unwrap().mss,
        536,
        "largest encodable MSS not above the peer's 1000"
    );
    assert_eq!(t.host.state(f), State::Established);
}

// Bounded half-open table (issue 3 defences): with SYN cookies off, SYNs beyond the limit
// are dropped and counted.
per_family!(half_open_table_is_bounded);
fn half_open_table_is_bounded(fam: Family) {
    let mut t = T::new(TcpConfig {
        max_half_open: 2,
        syn_cookies: false,
        ..cfg()
    })
    .over(fam);
    t.host.listen(HP);
    for i in 0..3u16 {
        let h = FrameHdr {
            src_mac: [2, 0, 0, 0, 0, 9],
            dst_mac: [2, 0, 0, 0, 0, 1],
            src_ip: PEER_IP,
            dst_ip: HOST_IP,
            ip_id: 1,
            src_port: 1000 + i,
            dst_port: HP,
            seq: 1,
            ack: 0,
            flags: SYN,
            wnd: 1000,
            ttl: 64,
            tos: 0,
        };
        let buf = wire::frame_in(fam, &h, &[], &[]);
        let off = buf.len();
        t.host.rx(0, &buf[..off], &mut t.app, &mut t.sink);
    }
    assert_eq!(t.take().len(), 2);
    assert_eq!(t.host.counters().tcps_synfull, 1);
    assert_eq!(t.host.flow_count(), 2);
}

// Owned dynamic data works and is freed once acknowledged.
per_family!(owned_send_data_freed_when_acked);
fn owned_send_data_freed_when_acked(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    let iss1 = t.established(&[]);
    t.take();
    let f = t.flow.unwrap();
    let before = t.host.buffers().live();
    t.host
        .send_owned(t.now, &mut t.sink, f, b"dynamic!"[..].into())
        .unwrap();
    assert_eq!(t.one().payload, b"dynamic!");
    assert_eq!(t.host.buffers().live(), before + 1);
    t.feed(t.pseq, iss1.wrapping_add(8), ACK, 65535, &[], &[]);
    assert_eq!(t.host.buffers().live(), before);
}

// Corrupted frames are dropped and counted, never processed.
per_family!(rfc9293_3_1_bad_checksum_counted);
fn rfc9293_3_1_bad_checksum_counted(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    t.host.listen(HP);
    let h = FrameHdr {
        src_mac: [0; 6],
        dst_mac: [0; 6],
        src_ip: PEER_IP,
        dst_ip: HOST_IP,
        ip_id: 1,
        src_port: 1,
        dst_port: HP,
        seq: 1,
        ack: 0,
        flags: SYN,
        wnd: 1,
        ttl: 64,
        tos: 0,
    };
    let mut buf = wire::frame_in(fam, &h, &[], &[]);
    let off = buf.len();
    buf.resize(off.max(64), 0);
    buf[fam.tcp_at() + 6] ^= 0xff; // the sequence number
    t.host.rx(0, &buf[..off], &mut t.app, &mut t.sink);
    assert!(t.take().is_empty());
    assert_eq!(t.host.counters().tcps_rcvbadsum, 1);
    // Garbage never panics.
    for n in 0..buf.len() {
        t.host.rx(0, &buf[..n], &mut t.app, &mut t.sink);
    }
}

fn ts_opt(val: u32, ecr: u32) -> Vec<u8> {
    let mut o = vec![1, 1, 8, 10];
    o.extend_from_slice(&val.to_be_bytes());
    o.extend_from_slice(&ecr.to_be_bytes());
    o
}

// RFC 7323 §3.2: timestamps negotiated in the handshake, then sent on every segment with
// TS.Recent echoed; MSS accounts for the option.
per_family!(rfc7323_3_2_timestamps_negotiated_and_echoed);
fn rfc7323_3_2_timestamps_negotiated_and_echoed(fam: Family) {
    let mut t = T::new(TcpConfig {
        opts: squall_tcp::FlowOpts {
            timestamps: true,
            ..squall_tcp::FlowOpts::default()
        },
        ..cfg()
    })
    .over(fam);
    t.now = 5 * MS;
    let syn = t.connect();
    let (val, _) = syn.opts.ts.expect("TS offered on SYN");
    assert_eq!(val, 5 | 1);
    let mut o = vec![2, 4, 0x05, 0xb4];
    o.extend(ts_opt(1000, val));
    t.feed(t.pseq, syn.seq.wrapping_add(1), SYN | ACK, 65535, &o, &[]);
    let a = t.one();
    assert_eq!(a.opts.ts.map(|x| x.1), Some(1000), "TS.Recent echoed");
    assert_eq!(
        t.host.flow_info(t.flow.unwrap()).unwrap().mss,
        fam.mss(1460) - 12
    );
}

// RFC 7323 §3.2: no timestamps unless both sides offer them.
// RFC 7323 §4.3 (A): a delayed ACK of two segments echoes the TSval of the earlier one
// (TS.Recent is recorded only for a segment starting at Last.ACK.sent), so the peer's
// RTT sample includes the delay it caused.
per_family!(rfc7323_4_3_delayed_ack_echoes_the_earliest_tsval);
fn rfc7323_4_3_delayed_ack_echoes_the_earliest_tsval(fam: Family) {
    let mut t = T::new(TcpConfig {
        opts: squall_tcp::FlowOpts {
            timestamps: true,
            burst_ack: false,
            ..squall_tcp::FlowOpts::default()
        },
        ..cfg()
    })
    .over(fam);
    let mut o = MSS_1460.to_vec();
    o.extend(ts_opt(1000, 1));
    let iss1 = t.established(&o);
    t.take();
    for tsval in [1100u32, 1200] {
        t.feed(t.pseq, iss1, ACK, 65535, &ts_opt(tsval, 1), &[7u8; 500]);
        t.pseq += 500;
    }
    assert!(t.take().is_empty(), "the ACK is delayed");
    let n = t.host.next_timer().unwrap();
    t.advance(n);
    let a = t.one();
    assert_eq!((a.ack, a.opts.ts.map(|x| x.1)), (t.pseq, Some(1100)));
    // Acknowledged: the next segment's TSval is recorded.
    t.feed(t.pseq, iss1, ACK | PSH, 65535, &ts_opt(1300, 1), &[7u8; 10]);
    t.pseq += 10;
    assert_eq!(t.one().opts.ts.map(|x| x.1), Some(1300));
}

per_family!(rfc7323_3_2_no_timestamps_without_peer_offer);
fn rfc7323_3_2_no_timestamps_without_peer_offer(fam: Family) {
    let mut t = T::new(TcpConfig {
        opts: squall_tcp::FlowOpts {
            timestamps: true,
            ..squall_tcp::FlowOpts::default()
        },
        ..cfg()
    })
    .over(fam);
    t.established(&[2, 4, 0x05, 0xb4]);
    let a = t.one();
    assert_eq!(a.opts.ts, None);
    assert_eq!(
        t.host.flow_info(t.flow.unwrap()).unwrap().mss,
        fam.mss(1460)
    );
}

// RFC 7323 §5.3: PAWS drops a segment whose TSval is older than TS.Recent (and ACKs);
// newer timestamps are accepted and update TS.Recent.
per_family!(rfc7323_5_3_paws_rejects_old_timestamps);
fn rfc7323_5_3_paws_rejects_old_timestamps(fam: Family) {
    let mut t = T::new(TcpConfig {
        opts: squall_tcp::FlowOpts {
            timestamps: true,
            ..squall_tcp::FlowOpts::default()
        },
        ..cfg()
    })
    .over(fam);
    let mut o = vec![2, 4, 0x05, 0xb4];
    o.extend(ts_opt(1000, 1));
    let iss1 = t.established(&o);
    t.take();
    t.feed(t.pseq, iss1, ACK, 65535, &ts_opt(900, 1), b"old");
    let a = t.one();
    assert_eq!(a.ack, t.pseq, "old segment not accepted");
    assert_eq!(t.host.counters().tcps_pawsdrop, 1);
    assert!(t.app.ev.iter().all(|e| !matches!(e, Ev::Data(_))));
    t.feed(t.pseq, iss1, ACK, 65535, &ts_opt(1100, 1), b"new");
    assert_eq!(t.app.ev.last(), Some(&Ev::Data(b"new".to_vec())));
    assert_eq!(t.host.flow_info(t.flow.unwrap()).unwrap().ts_recent, 1100);
}

// RFC 2018 §2: SACK-permitted negotiated in the handshake.
per_family!(rfc2018_2_sack_permitted_negotiated);
fn rfc2018_2_sack_permitted_negotiated(fam: Family) {
    let mut t = T::new(TcpConfig {
        opts: squall_tcp::FlowOpts {
            sack: true,
            ..squall_tcp::FlowOpts::default()
        },
        ..cfg()
    })
    .over(fam);
    let syn = t.connect();
    assert!(syn.opts.sack_ok);
    t.feed(
        t.pseq,
        syn.seq.wrapping_add(1),
        SYN | ACK,
        65535,
        &[2, 4, 5, 0xb4, 4, 2, 1, 1],
        &[],
    );
    assert!(t.host.flow_info(t.flow.unwrap()).unwrap().sack);
    let mut u = T::new(TcpConfig {
        opts: squall_tcp::FlowOpts {
            sack: true,
            ..squall_tcp::FlowOpts::default()
        },
        ..cfg()
    })
    .over(fam);
    u.established(&[2, 4, 5, 0xb4]);
    assert!(!u.host.flow_info(u.flow.unwrap()).unwrap().sack);
}

// RFC 2018 §4: the receiver reports out-of-order blocks, the most recent first.
per_family!(rfc2018_4_receiver_sends_sack_blocks);
fn rfc2018_4_receiver_sends_sack_blocks(fam: Family) {
    let mut t = T::new(TcpConfig {
        opts: squall_tcp::FlowOpts {
            sack: true,
            ..squall_tcp::FlowOpts::default()
        },
        ..cfg()
    })
    .over(fam);
    let syn = t.connect();
    t.feed(
        t.pseq,
        syn.seq.wrapping_add(1),
        SYN | ACK,
        65535,
        &[4, 2, 1, 1],
        &[],
    );
    t.pseq += 1;
    t.take();
    let iss1 = syn.seq.wrapping_add(1);
    let p = t.pseq;
    t.feed(p + 100, iss1, ACK, 65535, &[], &[1u8; 50]);
    let a = t.one();
    assert_eq!(a.ack, p);
    let o = a.opts;
    assert_eq!(o.sack_n, 1);
    assert_eq!(o.sack[0], (p + 100, p + 150));
    t.feed(p + 300, iss1, ACK, 65535, &[], &[1u8; 50]);
    let o = t.one().opts;
    assert_eq!(o.sack_n, 2);
    assert_eq!(o.sack[0], (p + 300, p + 350), "most recent block first");
    assert_eq!(o.sack[1], (p + 100, p + 150));
}

// RFC 6675 §5: with SACK, the sender retransmits every hole the scoreboard shows (not one
// per round trip as NewReno does), each once IsLost says it is lost: from step 2, before
// the third duplicate where the SACKed bytes above a hole already say so.
per_family!(rfc6675_5_sack_recovery_retransmits_holes);
fn rfc6675_5_sack_recovery_retransmits_holes(fam: Family) {
    let mut t = sack_host(fam);
    let (u, sent) = flight_sent(&mut t, 10 * 1000, 65535, &MSS_1000_SACK);
    assert_eq!(sent, 10 * 1000, "ten segments");
    // Segments 0 and 3 lost; the peer SACKs 1-2 and 4-9 with three duplicate ACKs.
    let sack = sack_opt;
    t.feed(t.pseq, u, ACK, 65535, &sack(&[(u + 1000, u + 3000)]), &[]);
    assert!(t.take().is_empty(), "2,000 bytes SACKed: not lost yet");
    t.feed(
        t.pseq,
        u,
        ACK,
        65535,
        &sack(&[(u + 4000, u + 6000), (u + 1000, u + 3000)]),
        &[],
    );
    // 4,000 bytes SACKed above segment 0 (more than 2 SMSS): lost, recovery starts.
    let r = t.take();
    let seqs: Vec<u32> = r.iter().map(|s| s.seq.wrapping_sub(u)).collect();
    assert_eq!(seqs, vec![0], "{seqs:?}");
    assert_eq!(t.host.counters().tcps_fastrexmt, 1);
    t.feed(
        t.pseq,
        u,
        ACK,
        65535,
        &sack(&[(u + 4000, u + 10_000), (u + 1000, u + 3000)]),
        &[],
    );
    let r = t.take();
    let seqs: Vec<u32> = r.iter().map(|s| s.seq.wrapping_sub(u)).collect();
    assert_eq!(seqs, vec![3000], "the second hole, lost now: {seqs:?}");
    assert_eq!(t.host.counters().tcps_sndrexmitpack, 2);
    // Everything acknowledged: recovery ends, scoreboard released.
    t.feed(t.pseq, u.wrapping_add(10_000), ACK, 65535, &[], &[]);
    assert!(!t.host.flow_info(t.flow.unwrap()).unwrap().sack_scoreboard);
    assert!(!t.host.flow_info(t.flow.unwrap()).unwrap().in_recovery);
}

// RFC 6675 §5 step 2: one duplicate ACK SACKing the rest of the flight (a receiver
// coalescing its ACKs, as GRO does) starts recovery at once: SND.UNA is lost by IsLost.
// (It waited for two more duplicates that never come, then for the RTO.)
per_family!(rfc6675_5_2_one_duplicate_that_sacks_the_flight_starts_recovery);
fn rfc6675_5_2_one_duplicate_that_sacks_the_flight_starts_recovery(fam: Family) {
    let mut t = sack_host(fam);
    let (u, sent) = flight_sent(&mut t, 10 * 1000, 65535, &MSS_1000_SACK);
    assert_eq!(sent, 10_000);
    t.feed(
        t.pseq,
        u,
        ACK,
        65535,
        &sack_opt(&[(u + 1000, u + 10_000)]),
        &[],
    );
    let r = t.take();
    assert_eq!(
        (r.len(), r[0].seq, r[0].payload.len()),
        (1, u, 1000),
        "{r:?}"
    );
    assert_eq!(t.host.counters().tcps_fastrexmt, 1);
}

// RFC 3042 / RFC 5681 §3.2 (Limited Transmit): the first and second duplicate ACKs each
// send one segment of new data, so that a flight of two (the default initial window) with
// one segment lost still brings three duplicates and a fast retransmit, not an RTO.
per_family!(rfc3042_limited_transmit_on_the_first_two_duplicates);
fn rfc3042_limited_transmit_on_the_first_two_duplicates(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    let (u, sent) = flight_sent(&mut t, 8000, 65535, &MSS_1000);
    assert_eq!(sent, 2000, "an initial window of two segments");
    for k in 0..2u32 {
        t.feed(t.pseq, u, ACK, 65535, &[], &[]);
        let r = t.one();
        let at = 2000 + 1000 * k;
        assert_eq!((r.seq.wrapping_sub(u), r.payload.len()), (at, 1000));
    }
    t.feed(t.pseq, u, ACK, 65535, &[], &[]);
    let r = t.take();
    assert_eq!(
        (r[0].seq, r[0].payload.len()),
        (u, 1000),
        "the fast retransmit"
    );
    assert_eq!(t.host.counters().tcps_fastrexmt, 1);
}

// RFC 6675 §5 NextSeg rule 2: new data in SACK recovery only as the receiver's window
// allows — never past its right edge (a stateful firewall drops such a segment).
per_family!(rfc6675_5_new_data_in_recovery_stays_in_the_window);
fn rfc6675_5_new_data_in_recovery_stays_in_the_window(fam: Family) {
    let mut t = sack_host(fam);
    let w: u16 = 10_500;
    let (u, sent) = flight_sent(&mut t, 20_000, w, &MSS_1000_SACK);
    assert_eq!(sent, 10_000);
    // Segment 0 lost: three duplicate ACKs, then one SACKing [1000, 9000).
    for k in 1..=3u32 {
        let s = sack_opt(&[(u + 1000, u + 1000 + 1000 * k)]);
        t.feed(t.pseq, u, ACK, w, &s, &[]);
    }
    t.feed(t.pseq, u, ACK, w, &sack_opt(&[(u + 1000, u + 9000)]), &[]);
    let r = t.take();
    assert!(r.iter().any(|s| s.seq == u), "fast retransmit: {r:?}");
    for s in &r {
        let end = s.seq.wrapping_sub(u) + s.payload.len() as u32;
        assert!(
            end <= u32::from(w),
            "[{}, {end}) past the window's right edge {w}",
            s.seq.wrapping_sub(u)
        );
    }
}

// RFC 6675 §2: with SACK, an ACK that reports new SACKed data is a duplicate ACK even when
// its window changed (a receiver autotuning its buffer opens the window while it reports
// the loss): three of them start fast retransmit, no timeout needed.
per_family!(rfc6675_2_sack_dupacks_with_a_growing_window);
fn rfc6675_2_sack_dupacks_with_a_growing_window(fam: Family) {
    let mut t = sack_host(fam);
    let (u, sent) = flight_sent(&mut t, 10_000, 30_000, &MSS_1000_SACK);
    assert_eq!(sent, 10_000);
    for k in 1..=3u32 {
        let s = sack_opt(&[(u + 1000, u + 1000 + 1000 * k)]);
        t.feed(t.pseq, u, ACK, 30_000 + 2000 * k as u16, &s, &[]);
    }
    let r = t.take();
    assert_eq!(r.first().map(|s| s.seq), Some(u), "fast retransmit: {r:?}");
    let c = t.host.counters();
    assert_eq!((c.tcps_rcvdupack, c.tcps_fastrexmt), (3, 1));
    // The same block again with yet another window: no new information, a window update.
    t.feed(
        t.pseq,
        u,
        ACK,
        40_000,
        &sack_opt(&[(u + 1000, u + 4000)]),
        &[],
    );
    assert_eq!(t.host.counters().tcps_rcvdupack, 3);
}

// RFC 6675 §5 NextSeg rule 4: segments 0 and 9 lost; fast retransmit resends 0; the
// partial ACK then leaves 9 outstanding with nothing SACKed above it: one rescue
// retransmission sends it at once (without SACK, NewReno's partial ACK does the same),
// rather than waiting for a timeout that collapses the window.
per_family!(rfc6675_5_rescue_retransmission_of_a_lost_tail);
fn rfc6675_5_rescue_retransmission_of_a_lost_tail(fam: Family) {
    let mut t = sack_host(fam);
    let (u, sent) = flight_sent(&mut t, 10_000, 65535, &MSS_1000_SACK);
    assert_eq!(sent, 10_000);
    t.now += 50 * MS;
    for k in 1..=8u32 {
        let s = sack_opt(&[(u + 1000, u + 1000 + 1000 * k)]);
        t.feed(t.pseq, u, ACK, 65535, &s, &[]);
    }
    let r = t.take();
    assert_eq!(r.first().map(|s| s.seq), Some(u), "fast retransmit: {r:?}");
    t.now += 50 * MS;
    t.feed(t.pseq, u + 9000, ACK, 65535, &[], &[]);
    let r = t.take();
    assert_eq!(
        r.iter()
            .map(|s| (s.seq.wrapping_sub(u), s.payload.len()))
            .collect::<Vec<_>>(),
        [(9000, 1000)],
        "the tail resent on the partial ACK"
    );
    // Once per recovery: a duplicate of the partial ACK sends nothing more.
    t.feed(t.pseq, u + 9000, ACK, 65535, &[], &[]);
    assert!(t.take().is_empty());
    t.feed(t.pseq, u + 10_000, ACK, 65535, &[], &[]);
    assert_eq!(t.host.counters().tcps_rexmttimeo, 0);
}

/// A host with flow options `opts` (the rest of `cfg()`), over `fam`.
fn host_with(fam: Family, opts: squall_tcp::FlowOpts) -> T {
    T::new(TcpConfig { opts, ..cfg() }).over(fam)
}

/// A host with SACK and an initial window of 10 segments, over `fam`.
fn sack_host(fam: Family) -> T {
    let opts = squall_tcp::FlowOpts {
        sack: true,
        init_cwnd: 10,
        ..squall_tcp::FlowOpts::default()
    };
    host_with(fam, opts)
}

/// The peer's SYN options: MSS 1000 and SACK permitted.
const MSS_1000_SACK: [u8; 8] = [2, 4, 0x03, 0xe8, 4, 2, 1, 1];

/// SACK option bytes with `blocks`.
fn sack_opt(blocks: &[(u32, u32)]) -> Vec<u8> {
    let mut o = vec![1, 1, 5, 2 + 8 * blocks.len() as u8];
    for &(a, b) in blocks {
        o.extend_from_slice(&a.to_be_bytes());
        o.extend_from_slice(&b.to_be_bytes());
    }
    o
}

// RFC 6675 §5 step 4.3: on entering loss recovery the segment at SND.UNA (HighACK + 1) is
// retransmitted at once, even when fewer than (DupThresh - 1) * SMSS bytes are SACKed
// above it (a flow of small segments).
per_family!(rfc6675_5_4_3_recovery_retransmits_first_segment_of_small_segments);
fn rfc6675_5_4_3_recovery_retransmits_first_segment_of_small_segments(fam: Family) {
    let mut t = sack_host(fam);
    let u = t.established(&MSS_1000_SACK);
    t.take();
    let (b, _) = with_data(&mut t, 1000);
    let f = t.flow.unwrap();
    for k in 0..10 {
        t.host.send(t.now, &mut t.sink, f, b, k * 100, 100).unwrap();
    }
    assert_eq!(t.take().len(), 10, "ten 100-byte segments");
    // Segment 0 lost; three duplicate ACKs SACK segments 1..=3 (300 bytes < 2 SMSS).
    for k in 1..=3u32 {
        t.feed(
            t.pseq,
            u,
            ACK,
            65535,
            &sack_opt(&[(u + 100, u + 100 + 100 * k)]),
            &[],
        );
        if k < 3 {
            assert!(t.take().is_empty());
        }
    }
    let r = t.take();
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!((r[0].seq, r[0].payload.len()), (u, 100));
    assert_eq!(t.host.counters().tcps_fastrexmt, 1);
    assert!(t.host.flow_info(f).unwrap().in_recovery);
    // A fourth duplicate ACK does not send the same hole again.
    t.feed(t.pseq, u, ACK, 65535, &sack_opt(&[(u + 100, u + 500)]), &[]);
    assert!(t.take().iter().all(|s| s.seq != u));
    t.feed(t.pseq, u.wrapping_add(1000), ACK, 65535, &[], &[]);
    assert!(!t.host.flow_info(f).unwrap().in_recovery);
}

// RFC 9293 §3.7.1 / RFC 6691: the MSS counts data only, so option bytes come out of the
// segment: with timestamps and three SACK blocks (40 option bytes) every data segment still
// fits the MSS + 40 (an MTU of 1500: MSS 1460 over IPv4, 1440 over IPv6).
per_family!(rfc6691_data_segments_with_sack_blocks_fit_the_mtu);
fn rfc6691_data_segments_with_sack_blocks_fit_the_mtu(fam: Family) {
    let mut t = T::new(TcpConfig {
        opts: squall_tcp::FlowOpts {
            sack: true,
            timestamps: true,
            init_cwnd: 10,
            ..squall_tcp::FlowOpts::default()
        },
        ..cfg()
    })
    .over(fam);
    let mut o = vec![2, 4, 0x05, 0xb4, 1, 1, 4, 2];
    o.extend_from_slice(&ts_opt(1000, 0));
    let u = t.established(&o);
    t.take();
    // Three out-of-order segments from the peer: we hold three SACK blocks.
    for k in 1..=3u32 {
        t.feed(
            t.pseq + 100 * k,
            u,
            ACK,
            65535,
            &ts_opt(1000 + k, 1),
            &[7u8; 50],
        );
    }
    assert_eq!(t.take().last().unwrap().opts.sack_n, 3);
    let (b, _) = with_data(&mut t, 6000);
    let f = t.flow.unwrap();
    t.host.send(t.now, &mut t.sink, f, b, 0, 6000).unwrap();
    let mut sent = 0;
    for fr in std::mem::take(&mut t.sink.out) {
        let s = wire::parse(&fr).unwrap();
        assert_eq!(wire::parse_opts(s.opts).sack_n, 3, "SACK blocks on data");
        let tcp = 20 + s.opts.len() + s.payload.len();
        assert!(
            tcp <= usize::from(fam.mss(1460)) + 20,
            "TCP segment of {tcp} bytes: exceeds MSS + options"
        );
        assert!(
            fr.len() - 14 <= 1500,
            "IP datagram of {} bytes",
            fr.len() - 14
        );
        sent += s.payload.len();
    }
    assert_eq!(sent, 6000);
}

// Header prediction (RFC 9293 §3.10.7.4 common case): in-order data and pure ACKs take the
// fast path and are counted.
per_family!(rfc9293_3_10_7_4_header_prediction_counted);
fn rfc9293_3_10_7_4_header_prediction_counted(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    let (b, l) = with_data(&mut t, 100);
    t.app.send_on_connect = Some((b, l));
    let iss1 = t.established(&[2, 4, 5, 0xb4]);
    t.take();
    t.feed(t.pseq, iss1.wrapping_add(100), ACK, 65535, &[], &[]);
    assert_eq!(t.host.counters().tcps_predack, 1);
    assert_eq!(t.app.ev.last(), Some(&Ev::Acked(100)));
    t.feed(
        t.pseq,
        iss1.wrapping_add(100),
        ACK | PSH,
        65535,
        &[],
        b"hello",
    );
    assert_eq!(t.host.counters().tcps_preddat, 1);
    assert_eq!(t.app.ev.last(), Some(&Ev::Data(b"hello".to_vec())));
}

// RFC 9293 §3.10.7.4 (eighth check) with out-of-order arrival: a FIN queued behind a hole
// takes effect once the hole fills, without waiting for its retransmission.
per_family!(rfc9293_3_10_7_4_out_of_order_fin);
fn rfc9293_3_10_7_4_out_of_order_fin(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    let iss1 = t.established(&[]);
    t.take();
    let p = t.pseq;
    t.feed(p + 5, iss1, ACK | FIN, 65535, &[], b"fghij");
    assert_eq!(t.state(), State::Established);
    t.take();
    t.feed(p, iss1, ACK, 65535, &[], b"abcde");
    assert_eq!(t.state(), State::CloseWait);
    assert_eq!(t.app.ev.last(), Some(&Ev::PeerClosed));
    let a = t.take();
    assert_eq!(a.last().unwrap().ack, p + 11, "data and FIN acknowledged");
}

// RFC 5961 §5.2: an ACK below SND.UNA - MAX.SND.WND is answered by a challenge ACK and its
// data dropped; §7: challenge ACKs are rate limited (per host here: the per-flow limit is
// off; the budget of a second is drawn in [2, 5) for a limit of 3, as Linux does).
per_family!(rfc5961_5_2_too_old_ack_and_7_rate_limit);
fn rfc5961_5_2_too_old_ack_and_7_rate_limit(fam: Family) {
    let mut t = T::new(TcpConfig {
        challenge_ack_limit: 3,
        invalid_ratelimit_ns: 0,
        ..cfg()
    })
    .over(fam);
    let iss1 = t.established(&[]);
    t.take();
    t.feed(t.pseq, iss1.wrapping_sub(200_000), ACK, 65535, &[], b"zzz");
    assert_eq!(t.one().ack, t.pseq);
    assert!(t.app.ev.iter().all(|e| !matches!(e, Ev::Data(_))));
    for _ in 0..5 {
        t.feed(t.pseq + 10, 0, RST, 0, &[], &[]);
    }
    let sent = t.take().len() as u64;
    assert!((1..=3).contains(&sent), "budget of 2-4 (one already used)");
    assert_eq!(t.host.counters().tcps_challengeack_limited, 5 - sent);
    t.now += 1_000 * MS;
    t.feed(t.pseq + 10, 0, RST, 0, &[], &[]);
    assert_eq!(t.take().len(), 1, "budget renewed next second");
}

// rx_burst processes every frame of a burst exactly like rx (including garbage).
per_family!(rx_burst_matches_rx);
fn rx_burst_matches_rx(fam: Family) {
    let mut t = T::new(cfg()).over(fam);
    t.host.listen(HP);
    let a = syn_from(fam, 2000, 1, SYN, 0, &[]);
    let b = syn_from(fam, 2001, 1, SYN, 0, &[]);
    let junk = vec![0u8; 20];
    let burst: Vec<&[u8]> = vec![&a, &junk, &b];
    t.host.rx_burst(0, &burst, &mut t.app, &mut t.sink);
    let out = t.take();
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(|o| o.flags == SYN | ACK));
    assert_eq!(t.host.counters().tcps_rcvtotal, 3);
    assert_eq!(
        t.host.counters().tcps_rcvshort + t.host.counters().tcps_rcvnottcp,
        1
    );
}

// RFC 5681 §4.2 with timestamps: "full-sized" means the effective MSS (1448 with the option
// over IPv4, 1428 over IPv6), so the second such segment is ACKed at once.
per_family!(rfc5681_4_2_every_second_segment_with_timestamps);
fn rfc5681_4_2_every_second_segment_with_timestamps(fam: Family) {
    let mut t = T::new(TcpConfig {
        opts: squall_tcp::FlowOpts {
            timestamps: true,
            ..squall_tcp::FlowOpts::default()
        },
        ..cfg()
    })
    .over(fam);
    let mut o = vec![2, 4, 0x05, 0xb4];
    o.extend(ts_opt(1000, 1));
    let iss1 = t.established(&o);
    t.take();
    let m = u32::from(fam.mss(1460) - 12);
    let full = vec![1u8; m as usize];
    t.feed(t.pseq, iss1, ACK, 65535, &ts_opt(1001, 1), &full);
    assert!(t.take().is_empty());
    t.feed(t.pseq + m, iss1, ACK, 65535, &ts_opt(1002, 1), &full);
    assert_eq!(t.one().ack, t.pseq + 2 * m);
}

// FIN_WAIT_2 is bounded: a peer that never sends its FIN does not hold the flow forever.
per_family!(rfc9293_3_6_fin_wait_2_timeout);
fn rfc9293_3_6_fin_wait_2_timeout(fam: Family) {
    let mut t = T::new(TcpConfig {
        fin_wait2_ns: 30_000 * MS,
        ..cfg()
    })
    .over(fam);
    let iss1 = t.established(&[]);
    t.take();
    let f = t.flow.unwrap();
    t.host.close(t.now, &mut t.app, &mut t.sink, f);
    t.feed(t.pseq, iss1.wrapping_add(1), ACK, 65535, &[], &[]);
    assert_eq!(t.state(), State::FinWait2);
    t.advance(29_999 * MS);
    assert_eq!(t.state(), State::FinWait2);
    t.advance(30_001 * MS);
    assert_eq!(t.state(), State::Closed);
    assert_eq!(t.app.ev.last(), Some(&Ev::Closed(CloseReason::Timeout)));
    assert_eq!(t.host.counters().tcps_finwait2_drops, 1);
}

// A half-closed flow whose peer keeps sending is not cut: the FIN_WAIT_2 timeout counts
// from the last data received (idleness), not from our FIN's acknowledgement.
per_family!(fin_wait_2_timeout_counts_idleness_not_age);
fn fin_wait_2_timeout_counts_idleness_not_age(fam: Family) {
    let mut t = T::new(TcpConfig {
        fin_wait2_ns: 30_000 * MS,
        ..cfg()
    })
    .over(fam);
    let iss1 = t.established(&[]);
    t.take();
    let f = t.flow.unwrap();
    t.host.close(t.now, &mut t.app, &mut t.sink, f);
    t.feed(t.pseq, iss1.wrapping_add(1), ACK, 65535, &[], &[]);
    assert_eq!(t.state(), State::FinWait2);
    // The peer sends data every 20 s for 100 s: still receiving, never cut.
    for k in 1..=5u64 {
        t.advance(k * 20_000 * MS);
        assert_eq!(t.state(), State::FinWait2, "at {} s", k * 20);
        t.feed(t.pseq, iss1.wrapping_add(1), ACK, 65535, &[], b"more");
        t.pseq += 4;
        assert_eq!(t.app.ev.last(), Some(&Ev::Data(b"more".to_vec())));
    }
    // Then silence: cut 30 s after the last data.
    t.advance(129_999 * MS);
    assert_eq!(t.state(), State::FinWait2);
    t.advance(130_000 * MS);
    assert_eq!(t.state(), State::Closed);
    assert_eq!(t.app.ev.last(), Some(&Ev::Closed(CloseReason::Timeout)));
    assert_eq!(t.host.counters().tcps_finwait2_drops, 1);
}

/// Established with keep-alive after 10 s idle, probes 1 s apart, 3 of them; returns
/// the host and SND.NXT.
fn keepalive_flow(fam: Family) -> (T, u32) {
    let mut t = T::new(TcpConfig {
        keepalive: Some((10_000 * MS, 1_000 * MS, 3)),
        ..cfg()
    })
    .over(fam);
    let iss1 = t.established(&[]);
    t.take();
    (t, iss1)
}

// RFC 9293 §3.8.4 / RFC 1122 §4.2.3.6: keepalive probes after idle (SEG.SEQ = SND.NXT-1);
// an answer restarts the idle period and the probe count; the connection is dropped after
// the configured number of unanswered probes.
per_family!(rfc9293_3_8_4_keepalive_probes_and_drop);
fn rfc9293_3_8_4_keepalive_probes_and_drop(fam: Family) {
    let (mut t, iss1) = keepalive_flow(fam);
    t.advance(10_000 * MS);
    let p = t.one();
    assert_eq!(
        (p.seq, p.flags, p.payload.len()),
        (iss1.wrapping_sub(1), ACK, 0)
    );
    t.advance(11_000 * MS);
    assert_eq!(t.take().len(), 1, "second probe after one interval");
    // The peer answers: idle again, the next probe comes a whole idle period later.
    t.feed(t.pseq, iss1, ACK, 65535, &[], &[]);
    t.take();
    t.advance(20_999 * MS);
    assert!(
        t.take().is_empty(),
        "no probe within the idle period after an answer"
    );
    for k in 0..3u64 {
        t.advance(21_000 * MS + k * 1_000 * MS);
        assert_eq!(t.take().len(), 1, "probe {k}");
        assert_eq!(t.state(), State::Established);
    }
    t.advance(24_000 * MS);
    assert_eq!(t.state(), State::Closed);
    assert_eq!(t.app.ev.last(), Some(&Ev::Closed(CloseReason::Timeout)));
    let c = t.host.counters();
    assert_eq!((c.tcps_keepprobe, c.tcps_keepdrops), (5, 1));
}

// RFC 1122 §4.2.3.6: keepalives are sent only when no data or acknowledgement has been
// received for the idle interval: a receive-only flow is never probed (nor dropped) while
// the peer keeps sending.
per_family!(rfc1122_4_2_3_6_received_data_defers_keepalive);
fn rfc1122_4_2_3_6_received_data_defers_keepalive(fam: Family) {
    let mut t = T::new(TcpConfig {
        keepalive: Some((10_000 * MS, 1_000 * MS, 3)),
        opts: squall_tcp::FlowOpts {
            delack_ns: 0,
            ..squall_tcp::FlowOpts::default()
        },
        ..cfg()
    })
    .over(fam);
    let iss1 = t.established(&[]);
    t.take();
    // 60 s of data every 5 s, ACKed each time; no probe, still established.
    for k in 1..=12u64 {
        t.advance(k * 5_000 * MS);
        assert!(t.take().is_empty(), "no keepalive at {} s", k * 5);
        t.feed(t.pseq, iss1, ACK, 65535, &[], b"data");
        t.pseq += 4;
        let a = t.one();
        assert_eq!((a.seq, a.ack), (iss1, t.pseq), "an ACK, not a probe");
    }
    assert_eq!(t.state(), State::Established);
    assert_eq!(t.host.counters().tcps_keepprobe, 0);
    // Silence: probes from 10 s after the last segment.
    t.advance(69_999 * MS);
    assert!(t.take().is_empty());
    t.advance(70_000 * MS);
    assert_eq!(t.one().seq, iss1.wrapping_sub(1));
}

// Only acceptable segments show the peer alive: a segment outside the receive window (a
// stale duplicate, or the peer's own keep-alive probe at RCV.NXT - 1) is answered with an
// ACK but does not put our keep-alive off (as Linux: its probe clock runs from the last
// acceptable segment).
per_family!(rfc1122_4_2_3_6_out_of_window_segments_do_not_defer_keepalive);
fn rfc1122_4_2_3_6_out_of_window_segments_do_not_defer_keepalive(fam: Family) {
    let (mut t, iss1) = keepalive_flow(fam);
    for k in 1..=3u64 {
        t.advance(k * 3_000 * MS);
        // The peer's keep-alive probe: one old byte below RCV.NXT.
        t.feed(t.pseq.wrapping_sub(1), iss1, ACK, 65535, &[], b"x");
        assert_eq!(t.one().ack, t.pseq, "answered with an ACK");
    }
    // Our first probe still comes 10 s after the handshake.
    t.advance(9_999 * MS);
    assert!(t.take().is_empty());
    t.advance(10_000 * MS);
    assert_eq!(t.one().seq, iss1.wrapping_sub(1), "our keep-alive probe");
}

// TIME_WAIT on the passive side: a new SYN above RCV.NXT on the same 4-tuple recycles the
// old flow and is accepted (safe port reuse).
per_family!(rfc9293_3_6_1_time_wait_reused_by_new_syn);
fn rfc9293_3_6_1_time_wait_reused_by_new_syn(fam: Family) {
    let (mut t, _) = passive_time_wait(fam);
    t.feed(9000, 0, SYN, 65535, &[], &[]);
    let sa2 = t.one();
    assert_eq!((sa2.flags, sa2.ack), (SYN | ACK, 9001));
    assert_eq!(t.host.counters().tcps_twrecycled, 1);
    // An old SYN (below RCV.NXT) would not have been accepted: it is answered as a duplicate.
}

// RFC 6191 §2: with timestamps on the old incarnation, a SYN whose TSval is newer than
// TS.Recent reopens the 4-tuple from TIME_WAIT whatever its sequence number (a client's
// random ISN is below RCV.NXT half the time); one with an older TSval does not.
per_family!(rfc6191_2_time_wait_reused_by_a_syn_with_a_newer_timestamp);
fn rfc6191_2_time_wait_reused_by_a_syn_with_a_newer_timestamp(fam: Family) {
    let mut t = T::new(TcpConfig {
        opts: squall_tcp::FlowOpts {
            timestamps: true,
            ..squall_tcp::FlowOpts::default()
        },
        time_wait_ns: 60_000 * MS,
        ..cfg()
    })
    .over(fam);
    t.host.listen(HP);
    let syn_opts = |tsval: u32| [&MSS_1460[..], &ts_opt(tsval, 0)[..]].concat();
    t.feed(7000, 0, SYN, 65535, &syn_opts(100), &[]);
    let sa = t.one();
    let ts0 = sa.opts.ts.unwrap().0;
    t.feed(
        7001,
        sa.seq.wrapping_add(1),
        ACK,
        65535,
        &ts_opt(101, ts0),
        &[],
    );
    let f = FlowId(0);
    assert_eq!(t.host.state(f), State::Established);
    t.host.close(t.now, &mut t.app, &mut t.sink, f);
    t.take();
    t.feed(
        7001,
        sa.seq.wrapping_add(2),
        FIN | ACK,
        65535,
        &ts_opt(102, ts0),
        &[],
    );
    assert_eq!(t.host.state(f), State::TimeWait);
    t.take();
    t.now += 1000 * MS;
    // A lower ISN with an older TSval: stays in TIME_WAIT (answered with an ACK).
    t.feed(3000, 0, SYN, 65535, &syn_opts(50), &[]);
    assert_eq!(t.one().flags, ACK);
    assert_eq!(t.host.counters().tcps_twrecycled, 0);
    // A lower ISN with a newer TSval: a new connection.
    t.feed(3000, 0, SYN, 65535, &syn_opts(2000), &[]);
    let sa2 = t.one();
    assert_eq!((sa2.flags, sa2.ack), (SYN | ACK, 3001));
    assert_eq!(t.host.counters().tcps_twrecycled, 1);
}

/// The host's next frames as sent (raw), and parsed.
fn take_raw(t: &mut T) -> Vec<(Vec<u8>, Out)> {
    t.sink
        .out
        .drain(..)
        .map(|f| (f.clone(), Out::of(&f)))
        .collect()
}

/// An ICMP / ICMPv6 error about the frame `f` the host sent: what a router quotes (the IP
/// header and the start of TCP, 8 bytes of it at least, `quote` bytes of the packet).
fn icmp_about(t: &mut T, f: &[u8], quote: usize, err: squall_tcp::IcmpError) {
    let ip = &f[14..];
    let q = &ip[..quote.min(ip.len())];
    let v6 = t.fam == Family::V6;
    t.host
        .icmp_error(t.now, v6, q, err, &mut t.app, &mut t.sink);
}

/// Established with the peer's MSS option of 1460 and no timestamps; `len` bytes queued
/// and the first flight sent: the flight's frames.
fn pmtu_flow(fam: Family, len: u32) -> (T, Vec<(Vec<u8>, Out)>) {
    let mut t = T::new(cfg()).over(fam);
    let (b, l) = with_data(&mut t, len);
    t.app.send_on_connect = Some((b, l));
    t.established(&MSS_1460);
    let flight = take_raw(&mut t);
    assert!(flight.len() >= 2, "{flight:?}");
    (t, flight)
}

// RFC 1191 §6.4-6.5 / RFC 8201 §4: "fragmentation needed" / "packet too big" quoting a
// segment in flight lowers the send MSS at once; the flight goes again from SND.UNA in
// segments that fit the path, without a congestion response; the path's MTU is kept for
// the destination's next connections.
per_family!(rfc1191_packet_too_big_lowers_the_mss_and_resends);
fn rfc1191_packet_too_big_lowers_the_mss_and_resends(fam: Family) {
    use squall_tcp::IcmpError;
    let (mut t, flight) = pmtu_flow(fam, 6000);
    let full = fam.mss(1460).min(1460) as usize;
    assert_eq!(flight[0].1.payload.len(), full);
    let una = flight[0].1.seq;
    let cwnd_before = t.host.flow_info(t.flow.unwrap()).unwrap().cwnd;
    let mtu = match fam {
        Family::V4 => 1400,
        Family::V6 => 1300,
    };
    let new_mss = mtu - fam.ip_len() - 20;
    icmp_about(
        &mut t,
        &flight[0].0,
        576,
        IcmpError::PacketTooBig { mtu: mtu as u32 },
    );
    let c = t.host.counters().clone();
    assert_eq!(
        (c.tcps_icmp_rcvd, c.tcps_pmtu_lowered, c.tcps_icmp_oow),
        (1, 1, 0)
    );
    let info = t.host.flow_info(t.flow.unwrap()).unwrap();
    assert_eq!(info.mss as usize, new_mss);
    assert_eq!(info.cwnd, cwnd_before, "not a congestion signal");
    assert_eq!(info.state, State::Established);
    let again = t.take();
    assert!(!again.is_empty());
    assert_eq!(again[0].seq, una, "from SND.UNA");
    assert!(
        again.iter().all(|o| o.payload.len() <= new_mss),
        "{again:?}"
    );
    // Every byte of the old flight goes again, contiguous.
    let mut next = una;
    for o in &again {
        assert_eq!(o.seq, next);
        next = next.wrapping_add(o.payload.len() as u32);
    }
    let sent: usize = flight.iter().map(|(_, o)| o.payload.len()).sum();
    assert!(next.wrapping_sub(una) as usize >= sent.min(again.len() * new_mss));
    // A second error for the same size changes nothing.
    icmp_about(
        &mut t,
        &flight[1].0,
        576,
        IcmpError::PacketTooBig { mtu: mtu as u32 },
    );
    assert_eq!(t.host.counters().tcps_pmtu_lowered, 1);
    assert!(t.take().is_empty());
    assert_eq!(t.host.pmtu_entries(), 1);
    // A new connection to the same destination starts with the path's MSS (we still
    // advertise our own).
    let (f2, syn2) = open_from(&mut t, HP + 1);
    assert_eq!(syn2.opts.mss, fam.mss(1460));
    assert_eq!(t.host.flow_info(f2).unwrap().mss as usize, new_mss);
    // Ten minutes later the destination's entry has expired.
    t.now += 601_000 * MS;
    let (f3, _) = open_from(&mut t, HP + 2);
    assert_eq!(t.host.flow_info(f3).unwrap().mss as usize, full);
}

/// Another connection from local port `port` to the peer, its handshake completed by a
/// SYN-ACK carrying MSS 1460: the flow and our SYN.
fn open_from(t: &mut T, port: u16) -> (FlowId, Out) {
    let fam = t.fam;
    let f = fam
        .connect(
            &mut t.host,
            t.now,
            &mut t.sink,
            (HOST_IP, port),
            (PEER_IP, PP),
            OptsId::DEFAULT,
        )
        .unwrap();
    let syn = Out::of(t.sink.out.last().unwrap());
    t.sink.out.clear();
    let buf = wire::peer_frame(
        fam,
        (PEER_IP, PP),
        (HOST_IP, port),
        9000,
        syn.seq.wrapping_add(1),
        SYN | ACK,
        65535,
        &MSS_1460,
        &[],
    );
    t.host.rx(t.now, &buf, &mut t.app, &mut t.sink);
    (f, syn)
}

// RFC 5927 §4.1: an error quoting a sequence number outside SND.UNA..SND.MAX (an
// acknowledged segment, or a guess), or no connection of ours, is ignored.
per_family!(rfc5927_4_1_errors_outside_the_flight_are_ignored);
fn rfc5927_4_1_errors_outside_the_flight_are_ignored(fam: Family) {
    use squall_tcp::IcmpError;
    let (mut t, flight) = pmtu_flow(fam, 3000);
    let mss = t.host.flow_info(t.flow.unwrap()).unwrap().mss;
    // The first segment acknowledged: an error about it comes too late.
    let first = &flight[0].1;
    t.feed(
        t.pseq,
        first.seq.wrapping_add(first.payload.len() as u32),
        ACK,
        65535,
        &[],
        &[],
    );
    t.take();
    icmp_about(
        &mut t,
        &flight[0].0.clone(),
        576,
        IcmpError::PacketTooBig { mtu: 1300 },
    );
    // Another port: no connection.
    let mut other = flight[1].0.clone();
    let tcp = fam.tcp_at();
    other[tcp] ^= 0x40;
    icmp_about(&mut t, &other, 576, IcmpError::Unreachable { hard: true });
    // Too short to hold the ports and the sequence number.
    icmp_about(
        &mut t,
        &flight[1].0.clone(),
        fam.ip_len() + 4,
        IcmpError::Other,
    );
    let c = t.host.counters().clone();
    assert_eq!(
        (c.tcps_icmp_oow, c.tcps_icmp_rcvd, c.tcps_pmtu_lowered),
        (3, 0, 0)
    );
    assert_eq!(t.host.flow_info(t.flow.unwrap()).unwrap().mss, mss);
    assert!(t.take().is_empty());
    assert_eq!(t.state(), State::Established);
}

// RFC 1191 §3 / RFC 8201 §4: a reported MTU below the minimum is taken as the minimum
// (IPv4: 552, Linux's floor; IPv6: 1280); an IPv4 error without an MTU (an RFC 792
// router) means the next plateau below the packet's size (RFC 1191 §7).
per_family!(rfc1191_reported_mtu_bounded_and_plateaus);
fn rfc1191_reported_mtu_bounded_and_plateaus(fam: Family) {
    use squall_tcp::IcmpError;
    let (mut t, flight) = pmtu_flow(fam, 6000);
    let (floor, hdrs) = match fam {
        Family::V4 => (552, 40),
        Family::V6 => (1280, 60),
    };
    if fam == Family::V4 {
        // 1500 bytes sent: the plateau below is 1492.
        icmp_about(
            &mut t,
            &flight[0].0,
            576,
            IcmpError::PacketTooBig { mtu: 0 },
        );
        assert_eq!(t.host.flow_info(t.flow.unwrap()).unwrap().mss, 1492 - 40);
        t.take();
    }
    icmp_about(
        &mut t,
        &flight[0].0,
        576,
        IcmpError::PacketTooBig { mtu: 100 },
    );
    assert_eq!(t.host.flow_info(t.flow.unwrap()).unwrap().mss, floor - hdrs);
    let again = t.take();
    assert!(again
        .iter()
        .all(|o| o.payload.len() <= (floor - hdrs) as usize));
}

// RFC 1122 §4.2.3.9 (as Linux acts): a destination unreachable ends a connection attempt
// (SYN-SENT), reported as `Unreachable`; a synchronized connection only counts it (RFC
// 5927 §5.2: hard errors are soft there).
per_family!(rfc1122_4_2_3_9_unreachable_ends_a_connection_attempt);
fn rfc1122_4_2_3_9_unreachable_ends_a_connection_attempt(fam: Family) {
    use squall_tcp::IcmpError;
    let mut t = T::new(cfg()).over(fam);
    t.flow = Some(
        fam.connect(
            &mut t.host,
            0,
            &mut t.sink,
            (HOST_IP, HP),
            (PEER_IP, PP),
            OptsId::DEFAULT,
        )
        .unwrap(),
    );
    let (raw, syn) = take_raw(&mut t).remove(0);
    // Soft (no route) ends an attempt too, as Linux does.
    icmp_about(
        &mut t,
        &raw,
        28 + 40,
        IcmpError::Unreachable { hard: false },
    );
    assert_eq!(t.app.ev, vec![Ev::Closed(CloseReason::Unreachable)]);
    let c = t.host.counters().clone();
    assert_eq!(
        (c.tcps_icmp_rcvd, c.tcps_icmp_drops, c.tcps_conndrops),
        (1, 1, 1)
    );
    assert_eq!(t.host.flow_count(), 0);
    assert!(
        t.take().is_empty(),
        "no RST for an attempt the network refused"
    );
    assert_eq!(syn.flags, SYN);
    // Established: counted, nothing else.
    let (mut t, flight) = pmtu_flow(fam, 3000);
    icmp_about(
        &mut t,
        &flight[0].0,
        576,
        IcmpError::Unreachable { hard: true },
    );
    assert_eq!(t.state(), State::Established);
    assert_eq!(t.host.counters().tcps_icmp_rcvd, 1);
    assert_eq!(t.host.counters().tcps_icmp_drops, 0);
    assert!(t.app.ev.iter().all(|e| !matches!(e, Ev::Closed(_))));
}

// RFC 1191 §6.5 during fast recovery (FreeBSD's tcp_mtudisc): the go-back ends the
// recovery, so the partial ACKs that follow retransmit nothing the go-back already sent
// again, and the window is the recovery's ssthresh, not its inflated value.
per_family!(rfc1191_packet_too_big_during_recovery_resends_once);
fn rfc1191_packet_too_big_during_recovery_resends_once(fam: Family) {
    use squall_tcp::IcmpError;
    let (mut t, iss1) = eight_kb_in_flight(fam);
    let segs = take_raw(&mut t);
    for _ in 0..3 {
        t.feed(t.pseq, iss1, ACK, 65535, &[], &[]);
    }
    assert_eq!(t.one().seq, iss1, "fast retransmit");
    let f = t.flow.unwrap();
    assert!(t.host.flow_info(f).unwrap().in_recovery);
    icmp_about(
        &mut t,
        &segs[0].0,
        576,
        IcmpError::PacketTooBig { mtu: 1000 },
    );
    let info = t.host.flow_info(f).unwrap();
    assert!(!info.in_recovery);
    assert!(info.cwnd <= info.ssthresh, "{info:?}");
    let mss = u32::from(info.mss);
    let again = t.take();
    assert_eq!(again[0].seq, iss1);
    // From here every byte goes once, in order, as the ACKs of the go-back open the
    // window: a recovery still running would send the holes its partial ACKs name again.
    let mut next = iss1;
    let mut sent = again;
    for _ in 0..6 {
        for o in sent.iter().filter(|o| !o.payload.is_empty()) {
            let seqs: Vec<_> = sent.iter().map(|o| (o.seq, o.payload.len())).collect();
            assert_eq!(o.seq, next, "sent twice, or out of order: {seqs:?}");
            assert!(o.payload.len() <= mss as usize);
            next = o.seq.wrapping_add(o.payload.len() as u32);
        }
        let ack = sent
            .iter()
            .find(|o| !o.payload.is_empty())
            .map(|o| o.seq.wrapping_add(o.payload.len() as u32));
        let Some(ack) = ack else { break };
        t.feed(t.pseq, ack, ACK, 65535, &[], &[]);
        sent = t.take();
    }
    assert_eq!(next.wrapping_sub(iss1), 8000, "everything went again, once");
    assert_eq!(t.host.counters().tcps_fastrexmt, 1);
}
