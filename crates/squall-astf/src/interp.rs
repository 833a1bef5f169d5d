//! The per-flow program interpreter: a pure state machine. A flow's program state
//! ([`ProgState`], 32 bytes) holds the program id, the program counter, four variables, the
//! receive base consumed by `clear`, and a few flag bits. The interpreter acts on the flow
//! only through the small [`FlowIo`] trait (queue a buffer, read counters, close/reset, arm
//! the flow's timer), so it is independent of the TCP/UDP engine underneath and is driven
//! by [`Event`]s the engine reports.

use crate::model::{BufIdx, Insn, Profile, ProgIdx, Program, SendMode};

/// At most this many instructions run in one activation; then the flow yields (arms its
/// timer for "now") so a long non-waiting stretch cannot stall the core.
pub const STEP_BUDGET: u32 = 4096;

/// What the interpreter needs from a flow's socket. Counters are cumulative since the
/// flow started; the interpreter keeps its own base for `clear`.
pub trait FlowIo {
    /// Current time on the engine's clock, nanoseconds.
    fn now_ns(&self) -> u64;
    /// TCP: queue the whole buffer for transmission (by reference). `false` when the send
    /// queue has no room: the interpreter retries on a later event (e.g. [`Event::Acked`]).
    fn send(&mut self, buf: BufIdx) -> bool;
    /// TCP: bytes queued by `send` and not yet acknowledged by the peer.
    fn tx_unacked(&self) -> u64;
    /// TCP: a non-blocking `send` completes once at most this many bytes are
    /// unacknowledged (the side's `tcp.txbufsize`).
    fn send_watermark(&self) -> u64;
    /// TCP: in-order payload bytes received so far.
    fn rx_bytes(&self) -> u64;
    /// TCP: is the connection established (handshake done)?
    fn established(&self) -> bool;
    /// TCP: has the peer's FIN arrived?
    fn peer_closed(&self) -> bool;
    /// TCP: close our side (FIN after the queued data). UDP: release the flow.
    fn close(&mut self);
    /// TCP: abort the connection with RST.
    fn reset(&mut self);
    /// UDP: send one datagram holding the buffer's bytes.
    fn send_msg(&mut self, buf: BufIdx);
    /// UDP: datagrams received so far.
    fn rx_msgs(&self) -> u64;
    /// UDP: idle-aging timeout of the flow (`rx_mode`: only received datagrams refresh it).
    fn set_keepalive(&mut self, msec: u32, rx_mode: bool);
    /// Arm the flow's program timer (one per flow; arming again replaces the deadline).
    /// The engine reports [`Event::Timer`] when it expires.
    fn arm_timer(&mut self, deadline_ns: u64);
    /// A uniformly distributed random number (for `delay_rand`).
    fn random_u32(&mut self) -> u32;
    /// TCP: queue the pieces of HTTP request `req` ([`Profile::http`]) and expect its
    /// response. `false` when the request cannot be sent (the engine counts why); the
    /// program goes on either way.
    fn http_request(&mut self, req: u16) -> bool;
    /// TCP: HTTP requests sent whose response has not ended yet.
    fn http_pending(&self) -> u32;
    /// TCP: the server ends the connection: a response said so (`Connection: close`, an
    /// HTTP/1.0 answer without keep-alive) or its FIN came. No request may follow on it
    /// (RFC 9112 §9.6): `http_request` refuses.
    fn http_closing(&self) -> bool;
}

/// Something happened on the flow. Apart from `Timer` and `Aborted`, events only tell the
/// interpreter to re-check the condition it waits for, so spurious events are harmless.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The flow was created: run the program from the start.
    Start,
    /// The handshake completed.
    Established,
    /// Payload bytes (TCP) or a datagram (UDP) arrived.
    Data,
    /// Sent bytes were acknowledged / the send queue has room again.
    Acked,
    /// The peer's FIN arrived.
    PeerClosed,
    /// The flow's program timer expired.
    Timer,
    /// The connection died (RST received, retransmission timeout, aging...). The
    /// program ends without touching the flow.
    Aborted,
}

/// How a program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Ran to its end or to `close`; the flow was closed (FIN / released).
    Closed,
    /// Ran `reset`.
    Reset,
    /// The engine reported [`Event::Aborted`].
    Aborted,
    /// A `recv` could never be satisfied: the peer closed first. The flow was closed.
    /// (Not when a cleared `recv` of a request loop has seen no byte of its next round:
    /// that is the peer ending the conversation, reported as `Closed`.)
    PeerClosedEarly,
}

/// Result of feeding an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Waiting for a further event.
    Running,
    Finished(Outcome),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Wait {
    /// Not started yet.
    Idle,
    /// Waiting for the condition of the instruction at `pc` (re-checked on every event).
    Cond,
    /// The `send` at `pc` is queued; waiting until the unacknowledged bytes drop to the
    /// limit (0 when blocking, the send watermark when not).
    Acked,
    /// `delay` at `pc`: advance when the timer fires.
    Timer,
    /// Yielded after the step budget: re-run `pc` when the timer fires.
    Yield,
    Done,
}

/// What a waiting program needs before a [`Event::Data`] or [`Event::Acked`] can move it
/// ([`ProgState::wake`]). An engine may skip delivering those two events while the need is
/// not met: the program would only re-check its condition and keep waiting, with no effect.
/// Every other event must still be delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// Any event may move it.
    Any,
    /// Only its timer (`delay`, a yield) or an abort: no data or ack event moves it.
    Timer,
    /// At least this many received bytes in all ([`FlowIo::rx_bytes`]), or the peer's FIN.
    RxBytes(u64),
    /// At most this many unacknowledged bytes ([`FlowIo::tx_unacked`]).
    Unacked(u64),
    /// The peer's FIN ([`FlowIo::peer_closed`]).
    PeerClosed,
    /// The handshake ([`FlowIo::established`]).
    Established,
    /// No pending HTTP response ([`FlowIo::http_pending`] is 0), or the peer's FIN. The
    /// engine, which parses the responses, decides; [`Wake::met`] says yes.
    HttpIdle,
    /// The program has finished: no event moves it.
    Done,
}

impl Wake {
    /// Can a `Data` or `Acked` event move the program, given the flow's counters now?
    #[inline]
    pub fn met(self, rx_bytes: u64, tx_unacked: u64, peer_closed: bool, established: bool) -> bool {
        match self {
            Wake::Any | Wake::HttpIdle => true,
            Wake::Timer | Wake::Done => false,
            Wake::RxBytes(n) => rx_bytes >= n || peer_closed,
            Wake::Unacked(n) => tx_unacked <= n,
            Wake::PeerClosed => peer_closed,
            Wake::Established => established,
        }
    }
}

const F_NONBLOCK: u8 = 1;
const F_OUTCOME_SHIFT: u8 = 4;

/// A flow's program state: 32 bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct ProgState {
    /// Received bytes (TCP) or datagrams (UDP) consumed by `recv`/`recv_msg` with `clear`.
    rx_base: u64,
    vars: [u32; crate::model::MAX_VARS],
    prog: u16,
    pc: u16,
    wait: Wait,
    /// Bit 0: non-blocking send mode; bits 4-5: outcome when done.
    flags: u8,
}

const _: () = assert!(std::mem::size_of::<ProgState>() == 32);

fn outcome_code(o: Outcome) -> u8 {
    match o {
        Outcome::Closed => 0,
        Outcome::Reset => 1,
        Outcome::Aborted => 2,
        Outcome::PeerClosedEarly => 3,
    }
}

fn outcome_of(code: u8) -> Outcome {
    match code & 3 {
        0 => Outcome::Closed,
        1 => Outcome::Reset,
        2 => Outcome::Aborted,
        _ => Outcome::PeerClosedEarly,
    }
}

impl ProgState {
    /// State of a flow that will run `prog` (call [`ProgState::on_event`] with
    /// [`Event::Start`] to begin).
    pub fn new(prog: ProgIdx) -> Self {
        ProgState {
            rx_base: 0,
            vars: [0; crate::model::MAX_VARS],
            prog: prog.0,
            pc: 0,
            wait: Wait::Idle,
            flags: 0,
        }
    }
    pub fn program(&self) -> ProgIdx {
        ProgIdx(self.prog)
    }
    pub fn pc(&self) -> u16 {
        self.pc
    }
    pub fn var(&self, id: usize) -> u32 {
        self.vars.get(id).copied().unwrap_or(0)
    }
    pub fn is_done(&self) -> bool {
        self.wait == Wait::Done
    }
    /// Is the program waiting for its timer (`delay`, `delay_rand` or a yield)?
    pub fn waits_for_timer(&self) -> bool {
        matches!(self.wait, Wait::Timer | Wait::Yield)
    }

    /// What the program waits for now (see [`Wake`]); `send_watermark` is the flow's
    /// [`FlowIo::send_watermark`]. Mirrors the conditions [`ProgState::on_event`] re-checks.
    pub fn wake(&self, profile: &Profile, send_watermark: u64) -> Wake {
        let insn = || {
            profile
                .programs
                .get(self.prog as usize)
                .and_then(|p| p.insns.get(self.pc as usize))
        };
        match self.wait {
            Wait::Done => Wake::Done,
            Wait::Timer | Wait::Yield => Wake::Timer,
            Wait::Idle => Wake::Any,
            Wait::Acked => match insn() {
                Some(&Insn::Send { mode, .. }) => {
                    let blocking = match mode {
                        SendMode::Current => self.flags & F_NONBLOCK == 0,
                        SendMode::Blocking => true,
                        SendMode::NonBlocking => false,
                    };
                    Wake::Unacked(if blocking { 0 } else { send_watermark })
                }
                _ => Wake::Any,
            },
            Wait::Cond => match insn() {
                Some(&Insn::Recv { bytes, .. }) => {
                    Wake::RxBytes(self.rx_base.saturating_add(u64::from(bytes)))
                }
                Some(Insn::WaitForPeerClose) => Wake::PeerClosed,
                Some(Insn::Connect | Insn::Accept) => Wake::Established,
                Some(Insn::HttpWaitResponse) => Wake::HttpIdle,
                _ => Wake::Any,
            },
        }
    }

    fn finish(&mut self, o: Outcome) -> Status {
        self.wait = Wait::Done;
        self.flags = (self.flags & 0x0f) | (outcome_code(o) << F_OUTCOME_SHIFT);
        Status::Finished(o)
    }

    /// Feeds one event; runs the program as far as it can go.
    pub fn on_event<I: FlowIo + ?Sized>(
        &mut self,
        profile: &Profile,
        io: &mut I,
        ev: Event,
    ) -> Status {
        match self.wait {
            Wait::Done => return Status::Finished(outcome_of(self.flags >> F_OUTCOME_SHIFT)),
            _ if ev == Event::Aborted => return self.finish(Outcome::Aborted),
            Wait::Idle if ev != Event::Start => return Status::Running,
            Wait::Timer | Wait::Yield if ev != Event::Timer => return Status::Running,
            Wait::Timer => {
                self.pc += 1;
                self.wait = Wait::Cond;
            }
            Wait::Acked => {}
            _ => self.wait = Wait::Cond,
        }
        let prog = profile.program(ProgIdx(self.prog));
        self.run(prog, io)
    }

    fn run<I: FlowIo + ?Sized>(&mut self, prog: &Program, io: &mut I) -> Status {
        let mut budget = STEP_BUDGET;
        loop {
            let Some(&insn) = prog.insns.get(self.pc as usize) else {
                io.close();
                return self.finish(Outcome::Closed);
            };
            if budget == 0 {
                io.arm_timer(io.now_ns());
                self.wait = Wait::Yield;
                return Status::Running;
            }
            budget -= 1;
            match insn {
                Insn::Send { buf, mode } => {
                    let blocking = match mode {
                        SendMode::Current => self.flags & F_NONBLOCK == 0,
                        SendMode::Blocking => true,
                        SendMode::NonBlocking => false,
                    };
                    // Blocking: wait until everything is acknowledged. Non-blocking: go on
                    // while at most the send watermark is unacknowledged (bounded memory).
                    let limit = if blocking { 0 } else { io.send_watermark() };
                    if self.wait != Wait::Acked {
                        if !io.send(buf) {
                            return Status::Running; // retry when the queue has room
                        }
                        self.wait = Wait::Acked;
                    }
                    if io.tx_unacked() > limit {
                        return Status::Running;
                    }
                    self.wait = Wait::Cond;
                }
                Insn::Recv { bytes, clear } => {
                    let have = io.rx_bytes().saturating_sub(self.rx_base);
                    if have < u64::from(bytes) {
                        if io.peer_closed() {
                            io.close();
                            // Between two rounds of a request loop (a cleared recv that has
                            // seen nothing yet, after an earlier cleared recv) the peer
                            // ending the conversation is a normal end.
                            let between_rounds = clear && have == 0 && self.rx_base > 0;
                            return self.finish(if between_rounds {
                                Outcome::Closed
                            } else {
                                Outcome::PeerClosedEarly
                            });
                        }
                        return Status::Running;
                    }
                    if clear {
                        self.rx_base += u64::from(bytes);
                    }
                }
                Insn::RecvMsg { count, clear } => {
                    let have = io.rx_msgs().saturating_sub(self.rx_base);
                    if have < u64::from(count) {
                        return Status::Running;
                    }
                    if clear {
                        self.rx_base += u64::from(count);
                    }
                }
                Insn::Delay { usec } => {
                    io.arm_timer(io.now_ns().saturating_add(u64::from(usec) * 1000));
                    self.wait = Wait::Timer;
                    return Status::Running;
                }
                Insn::DelayRand { min_usec, max_usec } => {
                    let span = u64::from(max_usec.saturating_sub(min_usec)) + 1;
                    let usec = u64::from(min_usec) + ((u64::from(io.random_u32()) * span) >> 32);
                    io.arm_timer(io.now_ns().saturating_add(usec * 1000));
                    self.wait = Wait::Timer;
                    return Status::Running;
                }
                Insn::Reset => {
                    io.reset();
                    return self.finish(Outcome::Reset);
                }
                Insn::Close => {
                    io.close();
                    return self.finish(Outcome::Closed);
                }
                Insn::WaitForPeerClose => {
                    if !io.peer_closed() {
                        return Status::Running;
                    }
                }
                Insn::Connect | Insn::Accept => {
                    if !io.established() {
                        return Status::Running;
                    }
                }
                Insn::SetVar { id, val } => self.vars[var(id)] = val,
                Insn::JmpNz { id, target } => {
                    let v = &mut self.vars[var(id)];
                    *v = v.saturating_sub(1);
                    if *v != 0 {
                        self.pc = target;
                        continue;
                    }
                }
                Insn::SetTickVar { id } => self.vars[var(id)] = now_us(io),
                Insn::JmpDp {
                    id,
                    target,
                    duration_usec,
                } => {
                    if now_us(io).wrapping_sub(self.vars[var(id)]) < duration_usec {
                        self.pc = target;
                        continue;
                    }
                }
                Insn::SendMsg { buf } => io.send_msg(buf),
                Insn::SetKeepaliveMsg { msec, rx_mode } => io.set_keepalive(msec, rx_mode),
                Insn::HttpRequest { req } => {
                    if !io.http_request(req) && io.http_closing() {
                        // The server ends the connection: no request may follow (RFC 9112
                        // §9.6), the conversation ends here as a request loop's does when
                        // the peer closes between rounds (answers still pending never
                        // come: counted incomplete).
                        io.close();
                        return self.finish(Outcome::Closed);
                    }
                }
                Insn::HttpWaitResponse => {
                    if io.http_pending() > 0 {
                        if io.peer_closed() {
                            // The engine ends a close-delimited response at the FIN
                            // before this event: a response still pending never ends.
                            io.close();
                            return self.finish(Outcome::PeerClosedEarly);
                        }
                        return Status::Running;
                    }
                }
                Insn::SetSendBlocking { block } => {
                    if block {
                        self.flags &= !F_NONBLOCK;
                    } else {
                        self.flags |= F_NONBLOCK;
                    }
                }
            }
            self.pc += 1;
        }
    }
}

/// Variable slot of an id (validated profiles have ids < MAX_VARS; masking keeps a
/// hand-built one from indexing out of bounds).
fn var(id: u8) -> usize {
    id as usize % crate::model::MAX_VARS
}

/// Current time in microseconds, wrapping at 2^32 (tick variables compare by difference).
fn now_us<I: FlowIo + ?Sized>(io: &I) -> u32 {
    (io.now_ns() / 1000) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_codes_round_trip() {
        for o in [
            Outcome::Closed,
            Outcome::Reset,
            Outcome::Aborted,
            Outcome::PeerClosedEarly,
        ] {
            assert_eq!(outcome_of(outcome_code(o)), o);
        }
    }

    /// A flow whose counters the test moves by hand; records every action.
    #[derive(Clone, Debug, Default, PartialEq)]
    struct Fake {
        now: u64,
        rx: u64,
        unacked: u64,
        est: bool,
        peer_closed: bool,
        http: u32,
        actions: Vec<&'static str>,
    }

    impl FlowIo for Fake {
        fn now_ns(&self) -> u64 {
            self.now
        }
        fn send(&mut self, _buf: BufIdx) -> bool {
            self.actions.push("send");
            self.unacked += 1000;
            true
        }
        fn tx_unacked(&self) -> u64 {
            self.unacked
        }
        fn send_watermark(&self) -> u64 {
            1500
        }
        fn rx_bytes(&self) -> u64 {
            self.rx
        }
        fn established(&self) -> bool {
            self.est
        }
        fn peer_closed(&self) -> bool {
            self.peer_closed
        }
        fn close(&mut self) {
            self.actions.push("close");
        }
        fn reset(&mut self) {
            self.actions.push("reset");
        }
        fn send_msg(&mut self, _buf: BufIdx) {
            self.actions.push("send_msg");
        }
        fn rx_msgs(&self) -> u64 {
            0
        }
        fn set_keepalive(&mut self, _msec: u32, _rx_mode: bool) {}
        fn arm_timer(&mut self, _deadline_ns: u64) {
            self.actions.push("timer");
        }
        fn random_u32(&mut self) -> u32 {
            7
        }
        fn http_request(&mut self, _req: u16) -> bool {
            if self.http_closing() {
                return false;
            }
            self.actions.push("http_request");
            self.http += 1;
            true
        }
        fn http_pending(&self) -> u32 {
            self.http
        }
        fn http_closing(&self) -> bool {
            self.peer_closed
        }
    }

    fn test_profile() -> Profile {
        let prog = |cmds: serde_json::Value| serde_json::json!({"name": "p", "commands": cmds});
        let mut progs = vec![
            prog(
                serde_json::json!([{"op": "connect"}, {"op": "send", "buf": "b"},
                {"op": "recv", "bytes": 2500, "clear": true}, {"op": "delay", "usec": 10},
                {"op": "recv", "bytes": 500, "clear": true}, {"op": "wait_for_peer_close"}]),
            ),
            prog(
                serde_json::json!([{"op": "accept"}, {"op": "recv", "bytes": 100},
                {"op": "set_send_blocking", "block": false}, {"op": "send", "buf": "b"},
                {"op": "send", "buf": "b"}, {"op": "set_send_blocking", "block": true},
                {"op": "send", "buf": "b"}, {"op": "wait_for_peer_close"}]),
            ),
            prog(
                serde_json::json!([{"op": "set_var", "id": 0, "val": 3}, {"op": "set_label", "label": "a"},
                {"op": "send", "buf": "b"}, {"op": "recv", "bytes": 700, "clear": true},
                {"op": "jmp_nz", "id": 0, "label": "a"}, {"op": "reset"}]),
            ),
        ];
        for (i, p) in progs.iter_mut().enumerate() {
            p["name"] = serde_json::json!(format!("p{i}"));
        }
        let v = serde_json::json!({
            "version": 1,
            "buffers": [{"name": "b", "text": "x", "size": 1000}],
            "ip_gens": [{"name": "g", "clients": {"range": ["16.0.0.1", "16.0.0.1"]},
                "servers": {"range": ["48.0.0.1", "48.0.0.1"]}}],
            "programs": progs,
            "templates": [{"client_program": "p0", "server_program": "p1"},
                {"client_program": "p2", "server_program": "p1", "port": 81}]
        });
        match crate::load_profile_value(v) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        }
    }

    /// Whenever `wake` says a data or ack event cannot move the program, delivering one
    /// changes nothing (no action, same state); and the programs do reach their end.
    #[test]
    fn unmet_wake_means_data_and_acks_are_no_ops() {
        let profile = test_profile();
        let mut skipped = 0;
        for prog in 0..3u16 {
            for seed in 0..40u64 {
                let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut next = |n: u64| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng % n
                };
                let mut st = ProgState::new(ProgIdx(prog));
                let mut io = Fake::default();
                let mut status = st.on_event(&profile, &mut io, Event::Start);
                for _ in 0..400 {
                    if status != Status::Running {
                        break;
                    }
                    io.now += 1000;
                    let ev = match next(8) {
                        0 => {
                            io.est = true;
                            Event::Established
                        }
                        1 | 2 => {
                            io.rx += next(400);
                            Event::Data
                        }
                        3 | 4 => {
                            io.unacked = io.unacked.saturating_sub(next(1200));
                            Event::Acked
                        }
                        5 if next(10) == 0 => {
                            io.peer_closed = true;
                            Event::PeerClosed
                        }
                        _ => Event::Timer,
                    };
                    let w = st.wake(&profile, io.send_watermark());
                    let moves = w.met(io.rx, io.unacked, io.peer_closed, io.est);
                    if matches!(ev, Event::Data | Event::Acked) && !moves {
                        let (before, io_before) = (st.clone(), io.clone());
                        let s2 = st.on_event(&profile, &mut io, ev);
                        assert_eq!(s2, Status::Running, "{prog} {seed} {w:?}");
                        assert_eq!((&st, &io), (&before, &io_before), "{prog} {seed} {w:?}");
                        skipped += 1;
                    } else {
                        status = st.on_event(&profile, &mut io, ev);
                    }
                }
                if status != Status::Running {
                    assert_eq!(st.wake(&profile, 1500), Wake::Done);
                }
            }
        }
        assert!(skipped > 100, "{skipped}");
    }

    #[test]
    fn http_wait_response_waits_for_the_pending_responses() {
        let v = serde_json::json!({
            "version": 1, "buffers": [],
            "ip_gens": [{"name": "g", "clients": {"range": ["16.0.0.1", "16.0.0.1"]},
                "servers": {"range": ["48.0.0.1", "48.0.0.1"]}}],
            "programs": [{"name": "c", "commands": [
                {"op": "http_request", "url": "/", "headers": [{"name": "Host", "value": "h"}]},
                {"op": "http_request", "url": "/", "headers": [{"name": "Host", "value": "h"}]},
                {"op": "http_wait_response"}]}],
            "templates": [{"client_program": "c", "server_program": "c"}]
        });
        let profile = crate::load_profile_value(v).unwrap();
        for peer_closes in [false, true] {
            let mut st = ProgState::new(ProgIdx(0));
            let mut io = Fake::default();
            assert_eq!(
                st.on_event(&profile, &mut io, Event::Start),
                Status::Running
            );
            assert_eq!(io.actions, ["http_request", "http_request"]);
            assert_eq!(st.wake(&profile, 0), Wake::HttpIdle);
            io.http = 1;
            assert_eq!(st.on_event(&profile, &mut io, Event::Data), Status::Running);
            let s = if peer_closes {
                io.peer_closed = true;
                st.on_event(&profile, &mut io, Event::PeerClosed)
            } else {
                io.http = 0;
                st.on_event(&profile, &mut io, Event::Data)
            };
            let want = if peer_closes {
                Outcome::PeerClosedEarly
            } else {
                Outcome::Closed
            };
            assert_eq!(s, Status::Finished(want));
            assert_eq!(io.actions.last(), Some(&"close"));
        }
    }

    #[test]
    fn wake_conditions() {
        assert!(Wake::Any.met(0, 9, false, false));
        assert!(!Wake::Timer.met(9, 0, true, true));
        assert!(!Wake::Done.met(9, 0, true, true));
        assert!(!Wake::RxBytes(10).met(9, 0, false, true));
        assert!(Wake::RxBytes(10).met(10, 0, false, true));
        assert!(Wake::RxBytes(10).met(0, 0, true, true));
        assert!(!Wake::Unacked(5).met(0, 6, false, true));
        assert!(Wake::Unacked(5).met(0, 5, false, true));
        assert!(!Wake::PeerClosed.met(9, 0, false, true));
        assert!(Wake::PeerClosed.met(0, 9, true, false));
        assert!(!Wake::Established.met(9, 0, true, false));
        assert!(Wake::Established.met(0, 0, false, true));
    }

    #[test]
    fn var_ids_are_masked() {
        assert_eq!(var(3), 3);
        assert_eq!(var(200), 200 % crate::model::MAX_VARS);
    }
}
