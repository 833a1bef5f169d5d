//! UDP flows of one side: a flow table on the 4-tuple (a hash map from the tuple to an
//! index into a slab of flows, sized at start), each flow's astf program driven by
//! datagrams, program timers and keepalive aging (one timer-wheel token per flow), and
//! datagrams written in place (Ethernet + IPv4 + UDP, both checksums) into the port's
//! frames. Client flows are opened by the scheduler; server flows are created by the
//! first datagram to an address and port a UDP template is associated with. A flow is
//! released when its program ends (implicit close), when it ages out, or when it is cut.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use squall_astf::alloc::ClientAddr;
use squall_astf::interp::{Event, FlowIo, Outcome, ProgState, Status};
use squall_astf::{BufIdx, Profile, ProgIdx, TemplateIdx, Transport};
use squall_engine::TimerWheel;
use squall_tcp::TxSink;

use super::app::splitmix;
use crate::stats::{SideStats, TgCounters, UdpCounters};

const ETH_LEN: usize = 14;
const IP_LEN: usize = 20;
const UDP_LEN: usize = 8;
/// Ethernet + IPv4 + UDP headers.
pub const HDRS_LEN: usize = ETH_LEN + IP_LEN + UDP_LEN;
/// Largest UDP payload of an unfragmented IPv4 datagram.
pub const MAX_PAYLOAD: usize = 65_507;
const NONE: u64 = u64::MAX;

const F_LIVE: u8 = 1;
const F_CLIENT: u8 = 2;
const F_RX_MODE: u8 = 4;
const F_FIRST: u8 = 8;

/// Is this an Ethernet/IPv4/UDP frame (to be handled here rather than by the TCP host)?
#[inline]
pub fn is_udp(f: &[u8]) -> bool {
    f.len() > 23 && f[12] == 0x08 && f[13] == 0x00 && f[23] == 17
}

/// A flow's 4-tuple, from this side's point of view.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Key {
    l_ip: u32,
    r_ip: u32,
    l_port: u16,
    r_port: u16,
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(u64::from(self.l_ip) << 32 | u64::from(self.r_ip));
        h.write_u64(u64::from(self.l_port) << 16 | u64::from(self.r_port));
    }
}

/// A multiplicative hasher for [`Key`] (two words; no per-lookup setup).
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(26) ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type FlowMap = HashMap<Key, u32, BuildHasherDefault<KeyHasher>>;

/// Per-flow state beside the program state.
#[derive(Clone, Copy, Debug, Default)]
struct UdpFlow {
    key: Key,
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

/// Header fields of transmitted datagrams.
#[derive(Clone, Copy)]
struct TxHdr {
    mac: [u8; 6],
    gw: [u8; 6],
    ttl: u8,
    tos: u8,
}

/// The UDP flows of one side.
pub struct UdpFlows {
    map: FlowMap,
    flows: Vec<UdpFlow>,
    progs: Vec<ProgState>,
    free: Vec<u32>,
    timers: TimerWheel,
    expired: Vec<u32>,
    max_flows: usize,
    mac: [u8; 6],
    gw: [u8; 6],
    ip_id: u16,
    /// Server side: create flows for datagrams to associated addresses and ports.
    serve: bool,
    /// Flows alive now.
    pub live: u64,
}

impl UdpFlows {
    /// Flows of a side with MAC `mac` sending to `gw`; `serve`: the server side.
    pub fn new(
        profile: &Profile,
        mac: [u8; 6],
        gw: [u8; 6],
        max_flows: u32,
        serve: bool,
        now: u64,
    ) -> Self {
        let has_udp = profile
            .templates
            .iter()
            .any(|t| t.transport == Transport::Udp);
        // Sized for the table only when the profile has UDP templates.
        let cap = if has_udp {
            (max_flows as usize).min(65_536)
        } else {
            0
        };
        UdpFlows {
            map: FlowMap::with_capacity_and_hasher(cap, Default::default()),
            flows: Vec::with_capacity(cap),
            progs: Vec::with_capacity(cap),
            free: Vec::new(),
            timers: TimerWheel::new(cap.max(1), now),
            expired: Vec::with_capacity(64),
            max_flows: max_flows as usize,
            mac,
            gw,
            ip_id: 0,
            serve,
            live: 0,
        }
    }

    /// Is the client tuple already used by a UDP flow?
    pub fn in_use(&self, ip: u32, port: u16, server: u32, dport: u16) -> bool {
        self.map.contains_key(&Key {
            l_ip: ip,
            r_ip: server,
            l_port: port,
            r_port: dport,
        })
    }

    /// Earliest program or aging deadline.
    pub fn next_timer(&self) -> Option<u64> {
        self.timers.next_deadline()
    }

    fn create(
        &mut self,
        cx: &mut UdpCtx,
        key: Key,
        tpl: u16,
        client: bool,
        sched_ns: u64,
    ) -> Option<u32> {
        if self.map.len() >= self.max_flows {
            return None;
        }
        let t = cx.profile.templates.get(tpl as usize)?;
        let prog = if client {
            t.client_program
        } else {
            t.server_program
        };
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                let i = self.flows.len() as u32;
                self.flows.push(UdpFlow::default());
                self.progs.push(ProgState::new(ProgIdx(0)));
                if self.timers.capacity() <= i as usize {
                    self.timers.grow((i as usize + 1).next_power_of_two());
                }
                i
            }
        };
        self.flows[i as usize] = UdpFlow {
            key,
            sched_ns,
            last_rx_ns: cx.now,
            last_tx_ns: cx.now,
            prog_deadline: NONE,
            tpl,
            flags: F_LIVE | if client { F_CLIENT } else { 0 },
            ..UdpFlow::default()
        };
        self.progs[i as usize] = ProgState::new(prog);
        self.map.insert(key, i);
        *cx.live += 1;
        *cx.peak_live = (*cx.peak_live).max(*cx.live);
        self.live += 1;
        Some(i)
    }

    /// Opens a client flow from `addr` to `server:dport` and runs its program from the
    /// start. False when the flow table is full or the tuple is in use (the caller gives
    /// the address back).
    #[allow(clippy::too_many_arguments)]
    pub fn open_client<S: TxSink>(
        &mut self,
        cx: &mut UdpCtx,
        sink: &mut S,
        tpl: TemplateIdx,
        sched_ns: u64,
        addr: ClientAddr,
        server: u32,
        dport: u16,
    ) -> bool {
        let key = Key {
            l_ip: addr.ip,
            r_ip: server,
            l_port: addr.port,
            r_port: dport,
        };
        if self.map.contains_key(&key) {
            return false;
        }
        let Some(i) = self.create(cx, key, tpl.0, true, sched_ns) else {
            cx.stats.udp.udps_nomem += 1;
            return false;
        };
        cx.stats.udp.udps_connects += 1;
        tg_of(cx.profile, cx.stats, tpl.0).started += 1;
        self.step(cx, sink, i, Event::Start);
        true
    }

    /// One received UDP frame.
    pub fn rx<S: TxSink>(&mut self, cx: &mut UdpCtx, sink: &mut S, f: &[u8]) {
        let d = match parse(f) {
            Ok(d) => d,
            Err(Bad::Sum) => {
                cx.stats.udp.udps_badsum += 1;
                return;
            }
            Err(Bad::Hdr) => {
                cx.stats.udp.udps_hdrops += 1;
                return;
            }
        };
        let key = Key {
            l_ip: d.dst,
            r_ip: d.src,
            l_port: d.dport,
            r_port: d.sport,
        };
        let (i, ev) = match self.map.get(&key) {
            Some(&i) => (i, Event::Data),
            None => {
                let t = if self.serve {
                    cx.profile
                        .server_template_for(Transport::Udp, d.dst, d.dport)
                } else {
                    None
                };
                let Some(t) = t else {
                    cx.stats.udp.udps_notconn += 1;
                    return;
                };
                let Some(i) = self.create(cx, key, t.0, false, cx.now) else {
                    cx.stats.udp.udps_nomem += 1;
                    return;
                };
                cx.stats.udp.udps_accepts += 1;
                tg_of(cx.profile, cx.stats, t.0).accepted += 1;
                (i, Event::Start)
            }
        };
        let now = cx.now;
        let fl = &mut self.flows[i as usize];
        fl.rx_msgs += 1;
        fl.rx_bytes += d.len as u64;
        fl.last_rx_ns = now;
        let first = fl.has(F_CLIENT) && !fl.has(F_FIRST);
        fl.flags |= F_FIRST;
        let (tpl, sched) = (fl.tpl, fl.sched_ns);
        cx.stats.udp.udps_rcvpkt += 1;
        cx.stats.udp.udps_rcvbyte += d.len as u64;
        let g = tg_index(cx.profile, tpl);
        if let Some(s) = cx.stats.tg.get_mut(g) {
            s.c.l7_rx_bytes += d.len as u64;
            if first {
                s.lat.first_byte.record_ns(now.saturating_sub(sched));
            }
        }
        self.step(cx, sink, i, ev);
    }

    /// Fires due program timers and ages idle flows.
    pub fn expire<S: TxSink>(&mut self, cx: &mut UdpCtx, sink: &mut S) {
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
                self.step(cx, sink, i, Event::Timer);
                if !self.flows[i as usize].has(F_LIVE) {
                    continue;
                }
            }
            if self.flows[i as usize].idle_deadline() <= now {
                cx.stats.udp.udps_keepdrops += 1;
                self.release(cx, i, End::Aged);
            } else {
                self.rearm(i);
            }
        }
        self.expired = exp;
    }

    /// Releases every live flow as cut (stop after the drain period); returns how many.
    pub fn cut_all(&mut self, cx: &mut UdpCtx) -> u64 {
        let mut n = 0;
        for i in 0..self.flows.len() as u32 {
            if self.flows[i as usize].has(F_LIVE) {
                self.release(cx, i, End::Cut);
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

    fn step<S: TxSink>(&mut self, cx: &mut UdpCtx, sink: &mut S, i: u32, ev: Event) {
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
        let mut io = Io {
            now: cx.now,
            flow: fl,
            sink,
            profile: cx.profile,
            hdr: TxHdr {
                mac: self.mac,
                gw: self.gw,
                ttl: ip.ttl,
                tos: ip.tos,
            },
            ip_id: &mut self.ip_id,
            udp,
            tg: &mut tg[g].c,
            rng: cx.rng,
        };
        match self.progs[idx].on_event(cx.profile, &mut io, ev) {
            Status::Finished(o) => self.release(cx, i, End::Program(o)),
            Status::Running => self.rearm(i),
        }
    }

    fn release(&mut self, cx: &mut UdpCtx, i: u32, how: End) {
        let fl = self.flows[i as usize];
        if !fl.has(F_LIVE) {
            return;
        }
        self.flows[i as usize].flags &= !F_LIVE;
        self.map.remove(&fl.key);
        self.free.push(i);
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
        if fl.has(F_CLIENT) {
            cx.released.push((
                fl.tpl,
                ClientAddr {
                    ip: fl.key.l_ip,
                    port: fl.key.l_port,
                },
            ));
        }
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

/// The interpreter's view of one UDP flow; datagrams are written straight into frames.
struct Io<'a, S: TxSink> {
    now: u64,
    flow: &'a mut UdpFlow,
    sink: &'a mut S,
    profile: &'a Profile,
    hdr: TxHdr,
    ip_id: &'a mut u16,
    udp: &'a mut UdpCounters,
    tg: &'a mut TgCounters,
    rng: &'a mut u64,
}

impl<S: TxSink> FlowIo for Io<'_, S> {
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
        *self.ip_id = self.ip_id.wrapping_add(1);
        let k = self.flow.key;
        let d = Dgram {
            src: k.l_ip,
            dst: k.r_ip,
            sport: k.l_port,
            dport: k.r_port,
            len: payload.len(),
        };
        if emit(self.sink, &self.hdr, *self.ip_id, &d, payload) {
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
}

/// Addresses, ports and payload length of a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Dgram {
    src: u32,
    dst: u32,
    sport: u16,
    dport: u16,
    len: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bad {
    Hdr,
    Sum,
}

/// Ones'-complement sum of big-endian 16-bit words (not folded).
fn sum16(mut acc: u64, d: &[u8]) -> u64 {
    let mut it = d.chunks_exact(2);
    for w in &mut it {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [b] = it.remainder() {
        acc += u64::from(*b) << 8;
    }
    acc
}

fn fold(mut s: u64) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

fn pseudo(src: u32, dst: u32, udp_len: usize) -> u64 {
    u64::from(src >> 16)
        + u64::from(src & 0xffff)
        + u64::from(dst >> 16)
        + u64::from(dst & 0xffff)
        + 17
        + udp_len as u64
}

fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}

fn be32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// Writes one datagram into a frame from `sink`; false when none is available or the
/// payload does not fit a frame.
fn emit<S: TxSink>(sink: &mut S, h: &TxHdr, ident: u16, d: &Dgram, payload: &[u8]) -> bool {
    if payload.len() > MAX_PAYLOAD {
        return false;
    }
    let len = HDRS_LEN + payload.len();
    let Some(buf) = sink.alloc(len) else {
        return false;
    };
    let Some(f) = buf.get_mut(..len) else {
        return false;
    };
    write_frame(f, h, ident, d, payload);
    sink.commit(len);
    true
}

/// Fills `f` (exactly headers + payload long) with the frame.
fn write_frame(f: &mut [u8], h: &TxHdr, ident: u16, d: &Dgram, payload: &[u8]) {
    let ulen = UDP_LEN + payload.len();
    f[0..6].copy_from_slice(&h.gw);
    f[6..12].copy_from_slice(&h.mac);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[ETH_LEN..ETH_LEN + IP_LEN];
    ip[0] = 0x45;
    ip[1] = h.tos;
    ip[2..4].copy_from_slice(&((IP_LEN + ulen) as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&ident.to_be_bytes());
    ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes());
    ip[8] = h.ttl;
    ip[9] = 17;
    ip[10..12].copy_from_slice(&[0, 0]);
    ip[12..16].copy_from_slice(&d.src.to_be_bytes());
    ip[16..20].copy_from_slice(&d.dst.to_be_bytes());
    let c = !fold(sum16(0, ip));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let u = &mut f[ETH_LEN + IP_LEN..];
    u[0..2].copy_from_slice(&d.sport.to_be_bytes());
    u[2..4].copy_from_slice(&d.dport.to_be_bytes());
    u[4..6].copy_from_slice(&(ulen as u16).to_be_bytes());
    u[6..8].copy_from_slice(&[0, 0]);
    u[UDP_LEN..].copy_from_slice(payload);
    let mut c = !fold(sum16(pseudo(d.src, d.dst, ulen), u));
    if c == 0 {
        c = 0xffff;
    }
    u[6..8].copy_from_slice(&c.to_be_bytes());
}

/// Parses and verifies an Ethernet/IPv4/UDP frame (IPv4 checksum; UDP checksum unless 0).
fn parse(f: &[u8]) -> Result<Dgram, Bad> {
    if f.len() < HDRS_LEN || f[12..14] != [0x08, 0x00] {
        return Err(Bad::Hdr);
    }
    let ihl = usize::from(f[ETH_LEN] & 0x0f) * 4;
    if f[ETH_LEN] >> 4 != 4 || ihl < IP_LEN || f[ETH_LEN + 9] != 17 {
        return Err(Bad::Hdr);
    }
    let total = usize::from(be16(f, ETH_LEN + 2));
    if total < ihl + UDP_LEN || ETH_LEN + total > f.len() {
        return Err(Bad::Hdr);
    }
    // Fragments (more-fragments bit or an offset) are not reassembled.
    if be16(f, ETH_LEN + 6) & 0x3fff != 0 {
        return Err(Bad::Hdr);
    }
    if fold(sum16(0, &f[ETH_LEN..ETH_LEN + ihl])) != 0xffff {
        return Err(Bad::Sum);
    }
    let src = be32(f, ETH_LEN + 12);
    let dst = be32(f, ETH_LEN + 16);
    let u = &f[ETH_LEN + ihl..ETH_LEN + total];
    let ulen = usize::from(be16(u, 4));
    if ulen < UDP_LEN || ulen > u.len() {
        return Err(Bad::Hdr);
    }
    let u = &u[..ulen];
    if be16(u, 6) != 0 && fold(sum16(pseudo(src, dst, ulen), u)) != 0xffff {
        return Err(Bad::Sum);
    }
    Ok(Dgram {
        src,
        dst,
        sport: be16(u, 0),
        dport: be16(u, 2),
        len: ulen - UDP_LEN,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: TxHdr = TxHdr {
        mac: [2, 0, 0, 0, 0, 1],
        gw: [2, 0, 0, 0, 0, 2],
        ttl: 64,
        tos: 0,
    };

    fn frame(payload: &[u8]) -> (Vec<u8>, Dgram) {
        let d = Dgram {
            src: 0x1000_0001,
            dst: 0x3000_0001,
            sport: 40_000,
            dport: 53,
            len: payload.len(),
        };
        let mut f = vec![0u8; HDRS_LEN + payload.len()];
        write_frame(&mut f, &H, 7, &d, payload);
        (f, d)
    }

    #[test]
    fn written_frames_parse_back_with_valid_checksums() {
        for n in [0usize, 1, 2, 33, 512] {
            let p: Vec<u8> = (0..n).map(|i| (i * 13) as u8).collect();
            let (f, d) = frame(&p);
            assert!(is_udp(&f));
            assert_eq!(parse(&f), Ok(d));
            assert_eq!(f.len(), HDRS_LEN + n);
        }
    }

    #[test]
    fn checksums_match_a_known_frame() {
        // IPv4 header checksum example (RFC 1071 style, computed independently).
        let mut f = vec![0u8; HDRS_LEN];
        let d = Dgram {
            src: 0xc612_0001,
            dst: 0xc612_0002,
            sport: 1,
            dport: 2,
            len: 0,
        };
        write_frame(&mut f, &H, 0, &d, &[]);
        // 4500 001c 0000 4000 4011 csum c612 0001 c612 0002
        let s: u32 = [0x4500u32, 0x001c, 0, 0x4000, 0x4011, 0xc612, 1, 0xc612, 2]
            .iter()
            .sum();
        let s = (s & 0xffff) + (s >> 16);
        assert_eq!(be16(&f, ETH_LEN + 10), !(s as u16));
        // UDP: pseudo header + header, no payload.
        let u: u32 = 0xc612 + 1 + 0xc612 + 2 + 17 + 8 + 1 + 2 + 8;
        let u = (u & 0xffff) + (u >> 16);
        assert_eq!(be16(&f, ETH_LEN + IP_LEN + 6), !(u as u16));
    }

    #[test]
    fn corrupted_or_malformed_frames_are_refused() {
        let (mut f, _) = frame(b"hello");
        let last = f.len() - 1;
        f[last] ^= 1;
        assert_eq!(parse(&f), Err(Bad::Sum));
        let (mut f, _) = frame(b"hello");
        f[ETH_LEN + 8] ^= 1; // TTL: IP checksum
        assert_eq!(parse(&f), Err(Bad::Sum));
        let (f, _) = frame(b"hello");
        assert_eq!(parse(&f[..30]), Err(Bad::Hdr));
        let (mut f, _) = frame(b"hello");
        f[ETH_LEN + 6] = 0x20; // more fragments
        assert_eq!(parse(&f), Err(Bad::Hdr));
        let (mut f, _) = frame(b"hello");
        f[ETH_LEN + 2] = 0xff; // total length beyond the frame
        assert_eq!(parse(&f), Err(Bad::Hdr));
        // A zero UDP checksum means "none" and is accepted.
        let (mut f, d) = frame(b"hello");
        f[ETH_LEN + IP_LEN + 6..ETH_LEN + IP_LEN + 8].copy_from_slice(&[0, 0]);
        assert_eq!(parse(&f), Ok(d));
    }

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
