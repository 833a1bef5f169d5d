//! UDP flows of one side, as programs: each flow's astf program driven by datagrams,
//! program timers and keepalive aging (one timer-wheel token per flow). The node's UDP
//! layer (`squall_stack::udp`) owns the 4-tuple table and the datagrams; flows here are
//! indexed by its `UdpFlowId`. Client flows are opened by the scheduler; server flows are
//! created by the first datagram to an address and port a UDP template is associated
//! with. A flow is released when its program ends (implicit close), when it ages out, or
//! when it is cut.

use squall_astf::alloc::ClientAddr;
use squall_astf::interp::{Event, FlowIo, Outcome, ProgState, Status};
use squall_astf::ipv6::split;
use squall_astf::{BufIdx, Profile, ProgIdx, ServerAssoc, TemplateIdx, Transport};
use squall_engine::TimerWheel;
use squall_port::Port;
use squall_stack::{Datagram, NodeIo, UdpFlowId, UdpKey};

use super::app::splitmix;
use crate::stats::{SideStats, TgCounters, UdpCounters};

const NONE: u64 = u64::MAX;

const F_LIVE: u8 = 1;
const F_CLIENT: u8 = 2;
const F_RX_MODE: u8 = 4;
const F_FIRST: u8 = 8;

/// Idle-aging time of a UDP flow whose program sets none (`set_keepalive_msg`): TRex's
/// default (its UDP flows age after 1 s without traffic), so that a datagram a device
/// under test lost ends the flow as aborted within a second rather than hiding until
/// the run cuts it.
pub const UDP_KEEPALIVE_NS: u64 = 1_000_000_000;

/// Per-flow state beside the program state.
#[derive(Clone, Copy, Debug, Default)]
struct UdpFlow {
    /// Scheduled start (client) or creation time (server), ns.
    sched_ns: u64,
    last_rx_ns: u64,
    last_tx_ns: u64,
    /// Program timer deadline (`NONE`: not armed).
    prog_deadline: u64,
    /// Keepalive idle time, ns (0: no aging).
    keepalive_ns: u64,
    rx_msgs: u64,
    rx_bytes: u64,
    tpl: u16,
    flags: u8,
}

impl UdpFlow {
    fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
    /// When the flow ages out if nothing more happens (`NONE`: never).
    fn idle_deadline(&self) -> u64 {
        if self.keepalive_ns == 0 {
            return NONE;
        }
        let base = if self.has(F_RX_MODE) {
            self.last_rx_ns
        } else {
            self.last_rx_ns.max(self.last_tx_ns)
        };
        base.saturating_add(self.keepalive_ns)
    }
}

/// What the generator app lends the UDP flows for one call.
pub struct UdpCtx<'a> {
    pub profile: &'a Profile,
    pub stats: &'a mut SideStats,
    pub live: &'a mut u64,
    pub peak_live: &'a mut u64,
    pub released: &'a mut Vec<(u16, ClientAddr)>,
    pub rng: &'a mut u64,
    pub now: u64,
}

/// How a flow ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Program(Outcome),
    Aged,
    Cut,
}

/// The UDP flows of one side.
pub struct UdpFlows {
    flows: Vec<UdpFlow>,
    progs: Vec<ProgState>,
    timers: TimerWheel,
    expired: Vec<u32>,
    /// Server side: create flows for datagrams to associated addresses and ports.
    serve: bool,
    /// Flows alive now.
    pub live: u64,
}

impl UdpFlows {
    /// Flows of a side; `serve`: the server side.
    pub fn new(profile: &Profile, max_flows: u32, serve: bool, now: u64) -> Self {
        let cap = udp_prealloc(profile, max_flows);
        UdpFlows {
            flows: Vec::with_capacity(cap),
            progs: Vec::with_capacity(cap),
            timers: TimerWheel::new(cap.max(1), now),
            expired: Vec::with_capacity(64),
            serve,
            live: 0,
        }
    }

    /// Earliest program or aging deadline.
    pub fn next_timer(&self) -> Option<u64> {
        self.timers.next_deadline()
    }

    fn create(
        &mut self,
        cx: &mut UdpCtx,
        id: UdpFlowId,
        tpl: u16,
        client: bool,
        sched_ns: u64,
    ) -> Option<u32> {
        let t = cx.profile.templates.get(tpl as usize)?;
        let prog = if client {
            t.client_program
        } else {
            t.server_program
        };
        let i = id.0;
        let n = i as usize + 1;
        if self.flows.len() < n {
            self.flows.resize(n, UdpFlow::default());
            self.progs.resize(n, ProgState::new(ProgIdx(0)));
        }
        if self.timers.capacity() < n {
            self.timers.grow(n.next_power_of_two());
        }
        self.flows[i as usize] = UdpFlow {
            sched_ns,
            last_rx_ns: cx.now,
            last_tx_ns: cx.now,
            prog_deadline: NONE,
            keepalive_ns: UDP_KEEPALIVE_NS,
            tpl,
            flags: F_LIVE | if client { F_CLIENT } else { 0 },
            ..UdpFlow::default()
        };
        self.progs[i as usize] = ProgState::new(prog);
        *cx.live += 1;
        *cx.peak_live = (*cx.peak_live).max(*cx.live);
        self.live += 1;
        Some(i)
    }

    /// Opens a client flow from `addr` to `server:dport` and runs its program from the
    /// start. False when the flow table is full or the tuple is in use (the caller gives
    /// the address back).
    #[allow(clippy::too_many_arguments)]
    pub fn open_client<P: Port>(
        &mut self,
        cx: &mut UdpCtx,
        io: &mut NodeIo<'_, P>,
        tpl: TemplateIdx,
        sched_ns: u64,
        addr: ClientAddr,
        server: u32,
        dport: u16,
    ) -> bool {
        let key = match cx.profile.templates[tpl.0 as usize].ipv6 {
            None => UdpKey {
                local_ip: addr.ip,
                remote_ip: server,
                local_port: addr.port,
                remote_port: dport,
            },
            // Pool values are the low 32 bits under the template's high bits.
            Some(m) => {
                let (c, s) = (m.client_addr(addr.ip), m.server_addr(server));
                let Some(k) = io.udp_key6(c, addr.port, s, dport) else {
                    cx.stats.udp.udps_nomem += 1;
                    return false;
                };
                k
            }
        };
        if io.udp().in_use(&key) {
            io.udp_release_unused(&key);
            return false;
        }
        let Some(id) = io.udp_open(key) else {
            io.udp_release_unused(&key);
            cx.stats.udp.udps_nomem += 1;
            return false;
        };
        let Some(i) = self.create(cx, id, tpl.0, true, sched_ns) else {
            io.udp_close(id);
            cx.stats.udp.udps_nomem += 1;
            return false;
        };
        cx.stats.udp.udps_connects += 1;
        tg_of(cx.profile, cx.stats, tpl.0).started += 1;
        self.step(cx, io, i, Event::Start);
        true
    }

    /// One received datagram (checked by the node); false if no flow or template takes it.
    pub fn rx<P: Port>(
        &mut self,
        cx: &mut UdpCtx,
        io: &mut NodeIo<'_, P>,
        flow: Option<UdpFlowId>,
        d: &Datagram<'_>,
    ) -> bool {
        let (i, ev) = match flow {
            Some(id) if self.flows.get(id.0 as usize).is_some_and(|f| f.has(F_LIVE)) => {
                (id.0, Event::Data)
            }
            _ => {
                let t = if self.serve {
                    // An IPv6 datagram's addresses are ids: associate by the low 32 bits.
                    let (v6, dst) = if d.key().is_ipv6() {
                        (true, split(&io.udp().addr6(d.dst)).1)
                    } else {
                        (false, d.dst)
                    };
                    match cx.profile.server_assoc_in(Transport::Udp, v6, dst, d.dport) {
                        ServerAssoc::Template(t) => Some(t),
                        _ => None,
                    }
                } else {
                    None
                };
                let Some(t) = t else {
                    cx.stats.udp.udps_notconn += 1;
                    return false;
                };
                let Some(id) = io.udp_open(d.key()) else {
                    cx.stats.udp.udps_nomem += 1;
                    return true;
                };
                let Some(i) = self.create(cx, id, t.0, false, cx.now) else {
                    io.udp_close(id);
                    cx.stats.udp.udps_nomem += 1;
                    return true;
                };
                cx.stats.udp.udps_accepts += 1;
                tg_of(cx.profile, cx.stats, t.0).accepted += 1;
                (i, Event::Start)
            }
        };
        let len = d.payload.len() as u64;
        let now = cx.now;
        let fl = &mut self.flows[i as usize];
        fl.rx_msgs += 1;
        fl.rx_bytes += len;
        fl.last_rx_ns = now;
        let first = fl.has(F_CLIENT) && !fl.has(F_FIRST);
        fl.flags |= F_FIRST;
        let (tpl, sched) = (fl.tpl, fl.sched_ns);
        cx.stats.udp.udps_rcvpkt += 1;
        cx.stats.udp.udps_rcvbyte += len;
        let g = tg_index(cx.profile, tpl);
        if let Some(s) = cx.stats.tg.get_mut(g) {
            s.c.l7_rx_bytes += len;
            if first {
                s.lat.first_byte.record_ns(now.saturating_sub(sched));
            }
        }
        self.step(cx, io, i, ev);
        true
    }

    /// Fires due program timers and ages idle flows.
    pub fn expire<P: Port>(&mut self, cx: &mut UdpCtx, io: &mut NodeIo<'_, P>) {
        let now = cx.now;
        let mut exp = std::mem::take(&mut self.expired);
        exp.clear();
        self.timers.advance(now, &mut exp);
        for &i in &exp {
            let fl = self.flows[i as usize];
            if !fl.has(F_LIVE) {
                continue;
            }
            if fl.prog_deadline <= now {
                self.flows[i as usize].prog_deadline = NONE;
                self.step(cx, io, i, Event::Timer);
                if !self.flows[i as usize].has(F_LIVE) {
                    continue;
                }
            }
            if self.flows[i as usize].idle_deadline() <= now {
                cx.stats.udp.udps_keepdrops += 1;
                self.release(cx, io, i, End::Aged);
            } else {
                self.rearm(i);
            }
        }
        self.expired = exp;
    }

    /// Releases every live flow as cut (stop after the drain period); returns how many.
    pub fn cut_all<P: Port>(&mut self, cx: &mut UdpCtx, io: &mut NodeIo<'_, P>) -> u64 {
        let mut n = 0;
        for i in 0..self.flows.len() as u32 {
            if self.flows[i as usize].has(F_LIVE) {
                self.release(cx, io, i, End::Cut);
                n += 1;
            }
        }
        n
    }

    fn rearm(&mut self, i: u32) {
        let fl = &self.flows[i as usize];
        let d = fl.prog_deadline.min(fl.idle_deadline());
        if d == NONE {
            self.timers.cancel(i);
        } else {
            self.timers.arm(i, d);
        }
    }

    fn step<P: Port>(&mut self, cx: &mut UdpCtx, io: &mut NodeIo<'_, P>, i: u32, ev: Event) {
        let idx = i as usize;
        let fl = &mut self.flows[idx];
        let Some(t) = cx.profile.templates.get(fl.tpl as usize) else {
            return;
        };
        let ip = if fl.has(F_CLIENT) {
            t.client.ip
        } else {
            t.server.ip
        };
        let g = (t.tg_id as usize).min(cx.stats.tg.len().saturating_sub(1));
        let SideStats { tg, udp, .. } = &mut *cx.stats;
        let mut fio = Io {
            now: cx.now,
            id: UdpFlowId(i),
            flow: fl,
            node: io,
            profile: cx.profile,
            ttl: ip.ttl,
            tos: ip.tos,
            udp,
            tg: &mut tg[g].c,
            rng: cx.rng,
        };
        match self.progs[idx].on_event(cx.profile, &mut fio, ev) {
            Status::Finished(o) => self.release(cx, io, i, End::Program(o)),
            Status::Running => self.rearm(i),
        }
    }

    fn release<P: Port>(&mut self, cx: &mut UdpCtx, io: &mut NodeIo<'_, P>, i: u32, how: End) {
        let fl = self.flows[i as usize];
        if !fl.has(F_LIVE) {
            return;
        }
        // The client address to give back: an IPv6 key's low 32 bits (before the close
        // gives its ids back).
        let key = io.udp().key(UdpFlowId(i)).map(|k| UdpKey {
            local_ip: if k.is_ipv6() {
                split(&io.udp().addr6(k.local_ip)).1
            } else {
                k.local_ip
            },
            ..k
        });
        io.udp_close(UdpFlowId(i));
        self.flows[i as usize].flags &= !F_LIVE;
        self.timers.cancel(i);
        *cx.live = cx.live.saturating_sub(1);
        self.live = self.live.saturating_sub(1);
        cx.stats.udp.udps_closed += 1;
        let g = tg_index(cx.profile, fl.tpl);
        if let Some(s) = cx.stats.tg.get_mut(g) {
            match how {
                End::Cut => s.c.cut += 1,
                End::Program(Outcome::Closed) => {
                    s.c.completed += 1;
                    if fl.has(F_CLIENT) && fl.rx_msgs > 0 {
                        s.lat
                            .last_byte
                            .record_ns(fl.last_rx_ns.saturating_sub(fl.sched_ns));
                    }
                }
                End::Program(_) | End::Aged => s.c.aborted += 1,
            }
        }
        if let (true, Some(k)) = (fl.has(F_CLIENT), key) {
            cx.released.push((
                fl.tpl,
                ClientAddr {
                    ip: k.local_ip,
                    port: k.local_port,
                },
            ));
        }
    }
}

/// UDP flow-table entries to allocate at start: only for profiles with UDP templates.
pub fn udp_prealloc(profile: &Profile, max_flows: u32) -> usize {
    let has_udp = profile
        .templates
        .iter()
        .any(|t| t.transport == Transport::Udp);
    if has_udp {
        (max_flows as usize).min(65_536)
    } else {
        0
    }
}

fn tg_index(p: &Profile, tpl: u16) -> usize {
    p.templates
        .get(tpl as usize)
        .map_or(0, |t| t.tg_id as usize)
}

fn tg_of<'a>(p: &Profile, s: &'a mut SideStats, tpl: u16) -> &'a mut TgCounters {
    let g = tg_index(p, tpl).min(s.tg.len().saturating_sub(1));
    &mut s.tg[g].c
}

/// The interpreter's view of one UDP flow; datagrams go out through the node.
struct Io<'a, 'n, P: Port> {
    now: u64,
    id: UdpFlowId,
    flow: &'a mut UdpFlow,
    node: &'a mut NodeIo<'n, P>,
    profile: &'a Profile,
    ttl: u8,
    tos: u8,
    udp: &'a mut UdpCounters,
    tg: &'a mut TgCounters,
    rng: &'a mut u64,
}

impl<P: Port> FlowIo for Io<'_, '_, P> {
    fn now_ns(&self) -> u64 {
        self.now
    }
    fn send(&mut self, _buf: BufIdx) -> bool {
        self.tg.io_misuse += 1;
        true
    }
    fn tx_unacked(&self) -> u64 {
        0
    }
    fn send_watermark(&self) -> u64 {
        0
    }
    fn rx_bytes(&self) -> u64 {
        self.flow.rx_bytes
    }
    fn established(&self) -> bool {
        true
    }
    fn peer_closed(&self) -> bool {
        false
    }
    fn close(&mut self) {}
    fn reset(&mut self) {
        self.tg.io_misuse += 1;
    }
    fn send_msg(&mut self, buf: BufIdx) {
        let Some(b) = self.profile.buffers.get(buf.0 as usize) else {
            self.tg.io_misuse += 1;
            return;
        };
        let payload: &[u8] = &b.data;
        if self.node.udp_send(self.id, payload, self.ttl, self.tos) {
            self.flow.last_tx_ns = self.now;
            self.udp.udps_sndpkt += 1;
            self.udp.udps_sndbyte += payload.len() as u64;
            self.tg.l7_tx_acked += payload.len() as u64;
        } else {
            self.udp.udps_nombuf += 1;
        }
    }
    fn rx_msgs(&self) -> u64 {
        self.flow.rx_msgs
    }
    fn set_keepalive(&mut self, msec: u32, rx_mode: bool) {
        self.flow.keepalive_ns = u64::from(msec) * 1_000_000;
        if rx_mode {
            self.flow.flags |= F_RX_MODE;
        } else {
            self.flow.flags &= !F_RX_MODE;
        }
    }
    fn arm_timer(&mut self, deadline_ns: u64) {
        self.flow.prog_deadline = deadline_ns;
    }
    fn random_u32(&mut self) -> u32 {
        (splitmix(self.rng) >> 32) as u32
    }
    fn http_request(&mut self, _req: u16) -> bool {
        false // TCP only (the loader refuses HTTP instructions in UDP programs)
    }
    fn http_pending(&self) -> u32 {
        0
    }
    fn http_closing(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_deadline_follows_rx_mode() {
        let mut fl = UdpFlow {
            last_rx_ns: 100,
            last_tx_ns: 500,
            keepalive_ns: 1000,
            ..UdpFlow::default()
        };
        assert_eq!(fl.idle_deadline(), 1500);
        fl.flags |= F_RX_MODE;
        assert_eq!(fl.idle_deadline(), 1100);
        fl.keepalive_ns = 0;
        assert_eq!(fl.idle_deadline(), NONE);
    }
}
