//! Interpreter tests against a deterministic fake network: two interpreters (client and
//! server) exchange real bytes taken from the profile's buffers through a simulated
//! connection with a per-tick bandwidth, delayed acknowledgements, FIN/RST delivery,
//! datagrams and a virtual clock. Nothing is canned: what a side receives is what the
//! other side's program sent.

use std::collections::VecDeque;

use serde_json::{json, Value};
use squall_astf::interp::{Event, FlowIo, Outcome, ProgState, Status, STEP_BUDGET};
use squall_astf::*;

const TICK_NS: u64 = 10_000;

#[derive(Default)]
struct End {
    txq: VecDeque<(BufIdx, usize)>,
    queue_limit: usize,
    unacked: u64,
    ack_next_tick: u64,
    rx: Vec<u8>,
    first_rx_ns: Option<u64>,
    rx_msgs: Vec<Vec<u8>>,
    out_msgs: Vec<Vec<u8>>,
    established: bool,
    fin_req: bool,
    fin_sent: bool,
    peer_fin: bool,
    rst_req: bool,
    timer: Option<u64>,
    yields: u32,
    keepalive: Option<(u32, bool)>,
    rng: u64,
    events: Vec<Event>,
    sends: u32,
    watermark: u64,
    max_unacked: u64,
}

struct Io<'a> {
    end: &'a mut End,
    profile: &'a Profile,
    now: u64,
}

impl FlowIo for Io<'_> {
    fn now_ns(&self) -> u64 {
        self.now
    }
    fn send(&mut self, buf: BufIdx) -> bool {
        if self.end.txq.len() >= self.end.queue_limit {
            return false;
        }
        self.end.sends += 1;
        self.end.txq.push_back((buf, 0));
        self.end.unacked += self.profile.buffer(buf).len() as u64;
        self.end.max_unacked = self.end.max_unacked.max(self.end.unacked);
        true
    }
    fn tx_unacked(&self) -> u64 {
        self.end.unacked
    }
    fn send_watermark(&self) -> u64 {
        self.end.watermark
    }
    fn rx_bytes(&self) -> u64 {
        self.end.rx.len() as u64
    }
    fn established(&self) -> bool {
        self.end.established
    }
    fn peer_closed(&self) -> bool {
        self.end.peer_fin
    }
    fn close(&mut self) {
        self.end.fin_req = true;
    }
    fn reset(&mut self) {
        self.end.rst_req = true;
    }
    fn send_msg(&mut self, buf: BufIdx) {
        self.end.out_msgs.push(self.profile.buffer(buf).to_vec());
    }
    fn rx_msgs(&self) -> u64 {
        self.end.rx_msgs.len() as u64
    }
    fn set_keepalive(&mut self, msec: u32, rx_mode: bool) {
        self.end.keepalive = Some((msec, rx_mode));
    }
    fn arm_timer(&mut self, deadline_ns: u64) {
        if deadline_ns <= self.now {
            self.end.yields += 1;
        }
        self.end.timer = Some(deadline_ns);
    }
    fn random_u32(&mut self) -> u32 {
        // xorshift64*
        let mut x = self.end.rng | 1;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.end.rng = x;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }
    fn http_request(&mut self, _req: u16) -> bool {
        false
    }
    fn http_pending(&self) -> u32 {
        0
    }
    fn http_closing(&self) -> bool {
        false
    }
}

struct Sim {
    profile: Profile,
    udp: bool,
    c: End,
    s: End,
    cst: ProgState,
    sst: Option<ProgState>,
    server_prog: ProgIdx,
    cstat: Status,
    sstat: Status,
    now: u64,
    /// Bytes each direction carries per tick.
    bw: usize,
}

impl Sim {
    fn new(profile: Profile) -> Sim {
        let t = &profile.templates[0];
        let (cp, sp, udp) = (
            t.client_program,
            t.server_program,
            t.transport == Transport::Udp,
        );
        let end = || End {
            queue_limit: 64,
            rng: 0x9e37_79b9_7f4a_7c15,
            watermark: 65536,
            ..End::default()
        };
        Sim {
            udp,
            c: end(),
            s: end(),
            cst: ProgState::new(cp),
            sst: None,
            server_prog: sp,
            cstat: Status::Running,
            sstat: Status::Running,
            now: 0,
            bw: 4 * 1460,
            profile,
        }
    }

    fn dispatch(&mut self) {
        for ev in std::mem::take(&mut self.c.events) {
            let mut io = Io {
                end: &mut self.c,
                profile: &self.profile,
                now: self.now,
            };
            self.cstat = self.cst.on_event(&self.profile, &mut io, ev);
        }
        if let Some(sst) = &mut self.sst {
            for ev in std::mem::take(&mut self.s.events) {
                let mut io = Io {
                    end: &mut self.s,
                    profile: &self.profile,
                    now: self.now,
                };
                self.sstat = sst.on_event(&self.profile, &mut io, ev);
            }
        }
    }

    fn start_server(&mut self) {
        if self.sst.is_none() {
            self.sst = Some(ProgState::new(self.server_prog));
            self.s.events.insert(0, Event::Start);
        }
    }

    /// Moves bytes/datagrams/FIN/RST one tick; returns whether anything moved.
    fn wire(&mut self) -> bool {
        let mut busy = false;
        if !self.udp && !self.c.established && self.now >= TICK_NS {
            // SYN / SYN-ACK.
            self.start_server();
            self.c.established = true;
            self.s.established = true;
            self.c.events.push(Event::Established);
            self.s.events.push(Event::Established);
            busy = true;
        }
        busy |= move_dir(&mut self.c, &mut self.s, &self.profile, self.bw, self.now);
        busy |= move_dir(&mut self.s, &mut self.c, &self.profile, self.bw, self.now);
        if self.udp && !self.s.rx_msgs.is_empty() {
            self.start_server();
        }
        busy
    }

    fn fire_timers(&mut self) {
        for e in [&mut self.c, &mut self.s] {
            if e.timer.is_some_and(|t| t <= self.now) {
                e.timer = None;
                e.events.push(Event::Timer);
            }
        }
    }

    fn finished(&self) -> bool {
        let c_done = matches!(self.cstat, Status::Finished(_));
        let s_done = matches!(self.sstat, Status::Finished(_)) || self.sst.is_none();
        let flushed = |e: &End| e.txq.is_empty() && (!e.fin_req || e.fin_sent) && !e.rst_req;
        c_done && s_done && flushed(&self.c) && flushed(&self.s)
    }

    /// Runs until both programs end (or `max_ns` of virtual time).
    fn run(&mut self, max_ns: u64) {
        self.c.events.push(Event::Start);
        self.dispatch();
        while !self.finished() && self.now < max_ns {
            self.now += TICK_NS;
            let busy = self.wire();
            self.fire_timers();
            let had_events = !self.c.events.is_empty() || !self.s.events.is_empty();
            self.dispatch();
            if !busy && !had_events {
                // Idle: jump to the next timer.
                let next = [self.c.timer, self.s.timer].into_iter().flatten().min();
                if let Some(t) = next {
                    self.now = self.now.max(t.saturating_sub(TICK_NS));
                }
            }
        }
    }
}

/// One tick of traffic from `a` to `b`: acks due to `a`, RST, up to `bw` payload bytes
/// copied from the buffers, FIN once the queue is empty, datagrams.
fn move_dir(a: &mut End, b: &mut End, profile: &Profile, bw: usize, now: u64) -> bool {
    let mut busy = false;
    if a.ack_next_tick > 0 {
        a.unacked -= a.ack_next_tick;
        a.ack_next_tick = 0;
        a.events.push(Event::Acked);
        busy = true;
    }
    if a.rst_req {
        a.rst_req = false;
        a.txq.clear();
        b.events.push(Event::Aborted);
        return true;
    }
    let mut budget = bw;
    let mut moved = 0;
    while budget > 0 {
        let Some((buf, off)) = a.txq.front_mut() else {
            break;
        };
        let data = profile.buffer(*buf);
        let n = (data.len() - *off).min(budget);
        b.rx.extend_from_slice(&data[*off..*off + n]);
        *off += n;
        budget -= n;
        moved += n;
        if *off == data.len() {
            a.txq.pop_front();
        }
    }
    if moved > 0 {
        b.first_rx_ns.get_or_insert(now);
        a.ack_next_tick += moved as u64;
        b.events.push(Event::Data);
        busy = true;
    }
    if a.fin_req && !a.fin_sent && a.txq.is_empty() {
        a.fin_sent = true;
        b.peer_fin = true;
        b.events.push(Event::PeerClosed);
        busy = true;
    }
    for m in a.out_msgs.drain(..) {
        b.rx_msgs.push(m);
        b.events.push(Event::Data);
        busy = true;
    }
    busy
}

fn profile(buffers: Value, client: Value, server: Value, transport: &str) -> Profile {
    let v = json!({
        "version": 1,
        "buffers": buffers,
        "ip_gens": [{"name": "g", "clients": {"range": ["16.0.0.1", "16.0.0.1"]}, "servers": {"range": ["48.0.0.1", "48.0.0.1"]}}],
        "programs": [{"name": "c", "commands": client}, {"name": "s", "commands": server}],
        "templates": [{"client_program": "c", "server_program": "s", "transport": transport}]
    });
    match load_profile_value(v) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

fn repeat(bytes: &[u8], n: usize) -> Vec<u8> {
    bytes
        .iter()
        .copied()
        .cycle()
        .take(bytes.len() * n)
        .collect()
}

#[test]
fn state_is_small() {
    assert_eq!(std::mem::size_of::<ProgState>(), 32);
    assert!(
        std::mem::size_of::<Insn>() <= 12,
        "{}",
        std::mem::size_of::<Insn>()
    );
}

#[test]
fn w1_client_and_server() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/w1-astf-http.json"
    );
    let p = load_profile_file(std::path::Path::new(path)).unwrap();
    let (req, resp) = (p.buffers[0].data.to_vec(), p.buffers[1].data.to_vec());
    let mut sim = Sim::new(p);
    sim.run(1_000_000_000);
    assert_eq!(sim.cstat, Status::Finished(Outcome::Closed));
    assert_eq!(sim.sstat, Status::Finished(Outcome::Closed));
    assert_eq!(sim.s.rx, req, "server received the GET");
    assert_eq!(sim.c.rx.len(), 32768);
    assert_eq!(sim.c.rx, resp, "client received the response");
    assert!(sim.c.fin_sent && sim.s.fin_sent, "both sides closed");
    assert!(sim.c.peer_fin && sim.s.peer_fin);
    assert_eq!((sim.c.sends, sim.s.sends), (1, 1));
}

#[test]
fn w1_server_waits_for_client_fin_before_closing() {
    // The client waits 50 ms after the response before closing: the server must not
    // close first (it waits for the peer's FIN).
    let p = profile(
        json!([{"name": "q", "text": "GET"}, {"name": "r", "size": 10000, "fill": {"text": "r"}}]),
        json!([{"op": "send", "buf": "q"}, {"op": "recv", "bytes": 10000}, {"op": "delay", "usec": 50000}]),
        json!([{"op": "recv", "bytes": 3}, {"op": "send", "buf": "r"}, {"op": "wait_for_peer_close"}]),
        "tcp",
    );
    let mut sim = Sim::new(p);
    sim.run(1_000_000_000);
    assert_eq!(sim.sstat, Status::Finished(Outcome::Closed));
    assert!(
        sim.now >= 50_000_000,
        "client delayed its close: {}",
        sim.now
    );
    assert!(sim.c.fin_sent && sim.s.fin_sent);
}

#[test]
fn server_speaks_first() {
    let p = profile(
        json!([{"name": "banner", "text": "220 hello\r\n"}, {"name": "cmd", "text": "QUIT\r\n"}, {"name": "bye", "text": "221 bye\r\n"}]),
        json!([{"op": "connect"}, {"op": "recv", "bytes": 11}, {"op": "send", "buf": "cmd"}, {"op": "recv", "bytes": 20}, {"op": "wait_for_peer_close"}]),
        json!([{"op": "accept"}, {"op": "send", "buf": "banner"}, {"op": "recv", "bytes": 6}, {"op": "send", "buf": "bye"}]),
        "tcp",
    );
    let mut sim = Sim::new(p);
    sim.run(1_000_000_000);
    assert_eq!(sim.cstat, Status::Finished(Outcome::Closed));
    assert_eq!(sim.sstat, Status::Finished(Outcome::Closed));
    assert_eq!(sim.c.rx, b"220 hello\r\n221 bye\r\n");
    assert_eq!(sim.s.rx, b"QUIT\r\n");
}

#[test]
fn loop_with_set_var_and_jmp_nz() {
    let p = profile(
        json!([{"name": "q", "text": "ping"}, {"name": "r", "size": 3000, "fill": {"text": "pong"}}]),
        json!([{"op": "set_var", "id": 2, "val": 5}, {"op": "set_label", "label": "a"},
               {"op": "send", "buf": "q"}, {"op": "recv", "bytes": 3000, "clear": true},
               {"op": "jmp_nz", "id": 2, "label": "a"}]),
        json!([{"op": "set_var", "id": 0, "val": 5}, {"op": "set_label", "label": "b"},
               {"op": "recv", "bytes": 4, "clear": true}, {"op": "send", "buf": "r"},
               {"op": "jmp_nz", "id": 0, "label": "b"}, {"op": "wait_for_peer_close"}]),
        "tcp",
    );
    let r = p.buffers[1].data.to_vec();
    let mut sim = Sim::new(p);
    sim.run(1_000_000_000);
    assert_eq!(sim.cstat, Status::Finished(Outcome::Closed));
    assert_eq!(sim.sstat, Status::Finished(Outcome::Closed));
    assert_eq!(sim.s.rx, repeat(b"ping", 5));
    assert_eq!(sim.c.rx, repeat(&r, 5));
    assert_eq!((sim.c.sends, sim.s.sends), (5, 5));
    assert_eq!(sim.cst.var(2), 0);
}

#[test]
fn tick_loop_bounded_by_time() {
    // Request, response, 1 ms pause; repeat while less than 10 ms have passed.
    let p = profile(
        json!([{"name": "q", "text": "tick"}, {"name": "r", "text": "tock"}]),
        json!([{"op": "set_tick_var", "id": 1}, {"op": "set_label", "label": "a"},
               {"op": "send", "buf": "q"}, {"op": "recv", "bytes": 4, "clear": true},
               {"op": "delay", "usec": 1000}, {"op": "jmp_dp", "id": 1, "label": "a", "duration_usec": 10000}]),
        json!([{"op": "set_var", "id": 0, "val": 1000000}, {"op": "set_label", "label": "b"},
               {"op": "recv", "bytes": 4, "clear": true}, {"op": "send", "buf": "r"},
               {"op": "jmp_nz", "id": 0, "label": "b"}]),
        "tcp",
    );
    let mut sim = Sim::new(p);
    sim.run(1_000_000_000);
    assert_eq!(sim.cstat, Status::Finished(Outcome::Closed));
    // The server loops "forever": the client's FIN between two requests ends it normally.
    assert_eq!(sim.sstat, Status::Finished(Outcome::Closed));
    let rounds = sim.c.sends as usize;
    // Each round takes >= 1 ms (the delay) and the loop runs while < 10 ms elapsed.
    assert!((5..=10).contains(&rounds), "rounds = {rounds}");
    assert_eq!(sim.s.rx, repeat(b"tick", rounds));
    assert_eq!(sim.c.rx, repeat(b"tock", rounds));
    assert!(
        sim.now >= 10_000_000 && sim.now < 20_000_000,
        "ended at {} ns",
        sim.now
    );
}

#[test]
fn delay_and_delay_rand_postpone_the_send() {
    let p = profile(
        json!([{"name": "q", "text": "hello"}]),
        json!([{"op": "delay", "usec": 5000}, {"op": "delay_rand", "min_usec": 2000, "max_usec": 3000},
               {"op": "send", "buf": "q"}]),
        json!([{"op": "recv", "bytes": 5}]),
        "tcp",
    );
    let mut sim = Sim::new(p);
    sim.run(1_000_000_000);
    assert_eq!(sim.s.rx, b"hello");
    let t = sim.s.first_rx_ns.unwrap();
    assert!(
        (7_000_000..=8_000_000 + 2 * TICK_NS).contains(&t),
        "first byte at {t} ns"
    );
}

#[test]
fn delay_rand_covers_its_range() {
    let p = profile(
        json!([{"name": "q", "text": "x"}]),
        json!([{"op": "delay_rand", "min_usec": 100, "max_usec": 199}, {"op": "send", "buf": "q"}]),
        json!([{"op": "recv", "bytes": 1}]),
        "tcp",
    );
    let mut seen = std::collections::BTreeSet::new();
    for seed in 1..400u64 {
        let mut sim = Sim::new(p.clone());
        sim.c.rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        sim.c.events.push(Event::Start);
        sim.dispatch();
        let d = sim.c.timer.unwrap();
        assert!((100_000..=199_000).contains(&d), "{d}");
        seen.insert(d / 1000);
    }
    assert!(seen.len() > 80, "only {} distinct delays", seen.len());
}

#[test]
fn reset_aborts_the_peer() {
    let p = profile(
        json!([{"name": "q", "text": "GET"}, {"name": "r", "size": 100}]),
        json!([{"op": "send", "buf": "q"}, {"op": "recv", "bytes": 100}, {"op": "reset"}]),
        json!([{"op": "recv", "bytes": 3}, {"op": "send", "buf": "r"}, {"op": "wait_for_peer_close"}]),
        "tcp",
    );
    let mut sim = Sim::new(p);
    sim.run(1_000_000_000);
    assert_eq!(sim.cstat, Status::Finished(Outcome::Reset));
    assert_eq!(sim.sstat, Status::Finished(Outcome::Aborted));
    assert!(!sim.c.fin_sent && !sim.s.fin_sent, "no FIN after a reset");
    assert_eq!(sim.c.rx.len(), 100);
}

#[test]
fn peer_closing_early_is_reported() {
    // The server sends 10 bytes (in a loop, so the loader cannot see the shortfall) and
    // closes; the client wants 100.
    let p = profile(
        json!([{"name": "q", "text": "GET"}, {"name": "r", "size": 10}]),
        json!([{"op": "send", "buf": "q"}, {"op": "recv", "bytes": 100}]),
        json!([{"op": "set_var", "id": 0, "val": 1}, {"op": "set_label", "label": "l"}, {"op": "send", "buf": "r"},
               {"op": "jmp_nz", "id": 0, "label": "l"}, {"op": "close"}]),
        "tcp",
    );
    let mut sim = Sim::new(p);
    sim.run(1_000_000_000);
    assert_eq!(sim.cstat, Status::Finished(Outcome::PeerClosedEarly));
    assert_eq!(sim.sstat, Status::Finished(Outcome::Closed));
    assert_eq!(sim.c.rx.len(), 10);
    assert!(sim.c.fin_sent, "the client closes its side too");
}

#[test]
fn blocking_send_waits_for_ack_nonblocking_does_not() {
    let p = profile(
        json!([{"name": "a", "size": 20000}, {"name": "b", "size": 20000}]),
        json!([{"op": "send", "buf": "a"}, {"op": "set_send_blocking", "block": false},
               {"op": "send", "buf": "b"}, {"op": "send", "buf": "a", "blocking": false}, {"op": "send", "buf": "b", "blocking": true}]),
        json!([{"op": "recv", "bytes": 80000}]),
        "tcp",
    );
    let mut sim = Sim::new(p);
    sim.c.events.push(Event::Start);
    sim.dispatch();
    assert_eq!(sim.cst.pc(), 0, "blocking send waits");
    assert_eq!(sim.c.sends, 1);
    // 20000 bytes at 5840 per tick: 4 ticks to move, acks one tick later.
    for _ in 0..4 {
        sim.now += TICK_NS;
        sim.wire();
        sim.dispatch();
        assert_eq!(sim.cst.pc(), 0);
    }
    sim.now += TICK_NS;
    sim.wire();
    sim.dispatch();
    // Acked: the two non-blocking sends and the last (blocking) one are queued at once.
    assert_eq!(sim.c.sends, 4);
    assert_eq!(sim.cst.pc(), 4);
    sim.run(1_000_000_000);
    assert_eq!(sim.s.rx.len(), 80000);
    assert_eq!(sim.cstat, Status::Finished(Outcome::Closed));
}

#[test]
fn full_send_queue_is_retried() {
    let p = profile(
        json!([{"name": "a", "text": "0123456789"}]),
        json!([{"op": "set_send_blocking", "block": false}, {"op": "set_var", "id": 0, "val": 50},
               {"op": "set_label", "label": "l"}, {"op": "send", "buf": "a"}, {"op": "jmp_nz", "id": 0, "label": "l"}]),
        json!([{"op": "recv", "bytes": 500}]),
        "tcp",
    );
    let mut sim = Sim::new(p);
    sim.c.queue_limit = 2;
    sim.bw = 10; // one buffer per tick
    sim.run(1_000_000_000);
    assert_eq!(sim.c.sends, 50);
    assert_eq!(sim.s.rx, repeat(b"0123456789", 50));
    assert_eq!(sim.cstat, Status::Finished(Outcome::Closed));
}

#[test]
fn long_loops_yield_after_the_step_budget() {
    let n = 10_000u32;
    let p = profile(
        json!([{"name": "a", "text": "z"}]),
        json!([{"op": "set_send_blocking", "block": false}, {"op": "set_var", "id": 3, "val": n},
               {"op": "set_label", "label": "l"}, {"op": "send", "buf": "a"}, {"op": "jmp_nz", "id": 3, "label": "l"}]),
        json!([{"op": "recv", "bytes": n}]),
        "tcp",
    );
    let mut sim = Sim::new(p);
    sim.c.queue_limit = usize::MAX;
    sim.bw = usize::MAX;
    sim.run(1_000_000_000);
    assert_eq!(sim.s.rx.len(), n as usize);
    let min_yields = 2 * n / STEP_BUDGET;
    assert!(sim.c.yields >= min_yields, "{} yields", sim.c.yields);
    assert_eq!(sim.cstat, Status::Finished(Outcome::Closed));
}

#[test]
fn udp_request_response_with_keepalive() {
    let p = profile(
        json!([{"name": "q", "text": "dns?"}, {"name": "r", "text": "dns!"}]),
        json!([{"op": "set_keepalive_msg", "msec": 2000}, {"op": "send_msg", "buf": "q"}, {"op": "recv_msg", "count": 1}]),
        json!([{"op": "set_keepalive_msg", "msec": 2000, "rx_mode": true}, {"op": "recv_msg", "count": 1}, {"op": "send_msg", "buf": "r"}]),
        "udp",
    );
    let mut sim = Sim::new(p);
    sim.run(1_000_000_000);
    assert_eq!(sim.cstat, Status::Finished(Outcome::Closed));
    assert_eq!(sim.sstat, Status::Finished(Outcome::Closed));
    assert_eq!(sim.s.rx_msgs, vec![b"dns?".to_vec()]);
    assert_eq!(sim.c.rx_msgs, vec![b"dns!".to_vec()]);
    assert_eq!(sim.c.keepalive, Some((2000, false)));
    assert_eq!(sim.s.keepalive, Some((2000, true)));
}

#[test]
fn udp_loop_with_clear() {
    let p = profile(
        json!([{"name": "q", "text": "q"}, {"name": "r", "text": "rr"}]),
        json!([{"op": "set_var", "id": 0, "val": 3}, {"op": "set_label", "label": "a"}, {"op": "send_msg", "buf": "q"},
               {"op": "send_msg", "buf": "q"}, {"op": "recv_msg", "count": 1, "clear": true}, {"op": "jmp_nz", "id": 0, "label": "a"}]),
        json!([{"op": "set_var", "id": 0, "val": 3}, {"op": "set_label", "label": "a"}, {"op": "recv_msg", "count": 2, "clear": true},
               {"op": "send_msg", "buf": "r"}, {"op": "jmp_nz", "id": 0, "label": "a"}]),
        "udp",
    );
    let mut sim = Sim::new(p);
    sim.run(1_000_000_000);
    assert_eq!(sim.cstat, Status::Finished(Outcome::Closed));
    assert_eq!(sim.sstat, Status::Finished(Outcome::Closed));
    assert_eq!(sim.s.rx_msgs.len(), 6);
    assert_eq!(sim.c.rx_msgs.len(), 3);
}

#[test]
fn events_before_start_and_after_end_are_ignored() {
    let p = profile(
        json!([{"name": "q", "text": "x"}]),
        json!([{"op": "send", "buf": "q"}]),
        json!([{"op": "recv", "bytes": 1}]),
        "tcp",
    );
    let mut sim = Sim::new(p);
    let mut io = Io {
        end: &mut sim.c,
        profile: &sim.profile,
        now: 0,
    };
    assert_eq!(
        sim.cst.on_event(&sim.profile, &mut io, Event::Data),
        Status::Running
    );
    assert_eq!(io.end.sends, 0, "not started");
    assert_eq!(
        sim.cst.on_event(&sim.profile, &mut io, Event::Aborted),
        Status::Finished(Outcome::Aborted)
    );
    assert_eq!(
        sim.cst.on_event(&sim.profile, &mut io, Event::Start),
        Status::Finished(Outcome::Aborted)
    );
    assert_eq!(io.end.sends, 0);
    assert!(sim.cst.is_done());
}

#[test]
fn peer_closing_mid_round_of_a_loop_is_an_error() {
    // The client sends 1.5 requests and closes: the server's second round saw half a request.
    let p = profile(
        json!([{"name": "q", "text": "0123456789"}, {"name": "h", "text": "01234"}]),
        json!([{"op": "send", "buf": "q"}, {"op": "send", "buf": "h"}]),
        json!([{"op": "set_var", "id": 0, "val": 5}, {"op": "set_label", "label": "a"},
               {"op": "recv", "bytes": 10, "clear": true}, {"op": "jmp_nz", "id": 0, "label": "a"}]),
        "tcp",
    );
    let mut sim = Sim::new(p);
    sim.run(1_000_000_000);
    assert_eq!(sim.sstat, Status::Finished(Outcome::PeerClosedEarly));
}

#[test]
fn shipped_examples_run_to_completion() {
    // SQUALL_PROFILE_DIR runs the same check on another folder of compiled profiles
    // (e.g. the Python examples compiled with `python3 -m squall.compile`).
    let default_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples").to_string();
    let dir = std::env::var("SQUALL_PROFILE_DIR").unwrap_or(default_dir);
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().and_then(|x| x.to_str()) == Some("json"))
        .collect();
    names.sort();
    assert!(!names.is_empty());
    for path in names {
        let p = load_profile_file(&path).unwrap();
        for (ti, t) in p.templates.iter().enumerate() {
            let mut one = p.clone();
            one.templates = vec![t.clone()];
            let mut sim = Sim::new(one);
            sim.bw = 1 << 20;
            sim.run(10_000_000_000);
            let what = format!("{} template {ti}", path.display());
            let expect_client = if path.ends_with("reset.json") {
                Outcome::Reset
            } else {
                Outcome::Closed
            };
            let expect_server = if path.ends_with("reset.json") {
                Outcome::Aborted
            } else {
                Outcome::Closed
            };
            assert_eq!(sim.cstat, Status::Finished(expect_client), "{what}");
            assert_eq!(sim.sstat, Status::Finished(expect_server), "{what}");
            assert!(
                !sim.s.rx.is_empty() || !sim.s.rx_msgs.is_empty(),
                "{what}: server got nothing"
            );
            eprintln!(
                "{what}: client rx {} B {} msgs, server rx {} B {} msgs, t={} ns",
                sim.c.rx.len(),
                sim.c.rx_msgs.len(),
                sim.s.rx.len(),
                sim.s.rx_msgs.len(),
                sim.now
            );
        }
    }
}

#[test]
fn nonblocking_sends_stop_at_the_watermark() {
    let p = profile(
        json!([{"name": "a", "text": "0123456789"}]),
        json!([{"op": "set_send_blocking", "block": false}, {"op": "set_var", "id": 0, "val": 100},
               {"op": "set_label", "label": "l"}, {"op": "send", "buf": "a"}, {"op": "jmp_nz", "id": 0, "label": "l"}]),
        json!([{"op": "recv", "bytes": 1000}]),
        "tcp",
    );
    let mut sim = Sim::new(p);
    sim.c.watermark = 35;
    sim.c.queue_limit = usize::MAX;
    sim.bw = 10;
    sim.run(1_000_000_000);
    assert_eq!(sim.s.rx, repeat(b"0123456789", 100));
    assert_eq!(sim.cstat, Status::Finished(Outcome::Closed));
    // Never more than the watermark plus one buffer outstanding.
    assert_eq!(sim.c.max_unacked, 40);
}
