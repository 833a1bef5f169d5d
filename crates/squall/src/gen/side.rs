//! One side of a run: a `TcpHost`, its [`GenApp`], the port it talks through and (client
//! side) the flow scheduler with address allocation, and the side's [`UdpFlows`].
//! [`Side::iterate`] is one turn of the loop: rx bursts of 32 (UDP frames to the UDP
//! flows, runs of TCP frames to `TcpHost::rx_burst`, which prefetches their flow-table
//! slots and TCBs), each followed by a TX flush and the host's `tx_resume` ->
//! TCP timers -> program timers -> new flows (none while flows wait for TX frames) ->
//! TX flush and `tx_resume`.

use std::collections::VecDeque;
use std::sync::Arc;

use squall_astf::alloc::{ClientAlloc, PortRange, ServerPick};
use squall_astf::interp::Event;
use squall_astf::sched::{FlowStart, SchedConfig, Scheduler};
use squall_astf::{Profile, SideTunables, Transport};
use squall_port::{FrameBuf, Port};
use squall_tcp::{FlowId, FlowOpts, OptsId, TcpConfig, TcpHost, TxSink};

use super::app::{GenApp, IoOp};
use super::pcap::PcapCap;
use super::udp::{is_udp, UdpFlows};

/// TX frames taken from the port's pool at once.
const BURST: usize = 64;
/// Rx frames taken per burst; the replies they cause are flushed after each burst.
const RX_BURST: usize = 32;
/// Runs of fewer received TCP frames than this skip the host's prefetching burst path.
const PREFETCH_MIN: usize = 4;
/// Most rx bursts handled per iteration.
const MAX_RX_BURSTS: usize = 128;

/// Frames a side holds between port calls.
struct TxState<F> {
    spare: Vec<F>,
    out: Vec<F>,
    cur: Option<F>,
}

/// The host's [`TxSink`]: frames come from the port's pool in bursts and are queued for
/// the end-of-iteration `tx_burst`; the pcap tap sees each committed frame.
struct Sink<'a, P: Port> {
    port: &'a mut P,
    tx: &'a mut TxState<P::Frame>,
    pcap: Option<&'a mut PcapCap>,
    now: u64,
}

impl<P: Port> TxSink for Sink<'_, P> {
    fn alloc(&mut self, len: usize) -> Option<&mut [u8]> {
        if self.tx.cur.is_none() {
            if self.tx.spare.is_empty() {
                self.port.alloc_tx(&mut self.tx.spare, BURST);
            }
            self.tx.cur = self.tx.spare.pop();
        }
        let f = self.tx.cur.as_mut()?;
        f.set_len(len).ok()?;
        Some(f.data_mut())
    }
    fn commit(&mut self, len: usize) {
        if let Some(mut f) = self.tx.cur.take() {
            if f.set_len(len).is_err() {
                self.tx.spare.push(f);
                return;
            }
            if let Some(p) = self.pcap.as_deref_mut() {
                p.frame(self.now, f.data());
            }
            self.tx.out.push(f);
        }
    }
}

/// Hands received TCP frames to the host: a few one by one, more as a burst (prefetching
/// pays off only when there are frames to overlap).
#[inline]
fn tcp_rx<S: TxSink>(host: &mut TcpHost, now: u64, frames: &[&[u8]], app: &mut GenApp, tx: &mut S) {
    if frames.len() >= PREFETCH_MIN {
        host.rx_burst(now, frames, app, tx);
    } else {
        for f in frames {
            host.rx(now, f, app, tx);
        }
    }
}

/// The client side's flow source.
pub struct ClientGen {
    sched: Scheduler,
    allocs: Vec<ClientAlloc>,
    servers: Vec<ServerPick>,
    starts: Vec<FlowStart>,
    /// Flows due but not opened yet (pacing or throttling); opened in order.
    pending: VecDeque<FlowStart>,
}

impl ClientGen {
    /// Scheduler and allocators for every template (one client core), source ports from
    /// the default range.
    pub fn new(profile: &Profile, cfg: &SchedConfig) -> Result<Self, String> {
        Self::with_ports(profile, cfg, PortRange::default())
    }

    /// As [`ClientGen::new`] with source ports from `ports` (ports are reused as flows end).
    pub fn with_ports(
        profile: &Profile,
        cfg: &SchedConfig,
        ports: PortRange,
    ) -> Result<Self, String> {
        let mut allocs = Vec::new();
        let mut servers = Vec::new();
        for (i, t) in profile.templates.iter().enumerate() {
            let gen = &profile.ip_gens[t.ip_gen as usize];
            let seed = cfg.seed ^ (i as u64).wrapping_mul(0x9E37_79B9);
            allocs.push(
                ClientAlloc::new(gen, 0, 0, 1, ports, seed)
                    .map_err(|e| format!("template {i}: client allocation: {e:?}"))?,
            );
            servers.push(ServerPick::new(gen, 0, 0, seed));
        }
        Ok(ClientGen {
            sched: Scheduler::new(profile, cfg),
            allocs,
            servers,
            starts: Vec::with_capacity(64),
            pending: VecDeque::new(),
        })
    }
    /// Stops opening flows from `at` on.
    pub fn stop_at(&mut self, at: u64) {
        self.sched.stop_at(at);
    }
    /// Changes the rate multiplier from `now` on (live rate control: `squall daemon`).
    pub fn set_mult(&mut self, now: u64, mult: f64) {
        self.sched.set_mult(now, mult);
    }
    /// No flow will be opened any more.
    pub fn is_finished(&self) -> bool {
        self.sched.is_finished() && self.pending.is_empty()
    }
    /// Flows due and waiting to be opened.
    pub fn backlog(&self) -> usize {
        self.pending.len()
    }
}

/// Window scale needed to advertise `rxbufsize` (RFC 7323), when `do_rfc1323` allows it
/// and the buffer exceeds what an unscaled window can say.
fn wscale_for(t: &SideTunables) -> Option<u8> {
    let rx = u64::from(t.tcp.rxbufsize);
    (t.tcp.do_rfc1323 && rx > 65_535).then(|| {
        let mut s = 0u8;
        while (65_535u64 << s) < rx && s < 14 {
            s += 1;
        }
        s
    })
}

/// Per-flow TCP/IP options from a side's tunables: MSS, initial window, delayed ACK,
/// Nagle (`no_delay`), RFC 7323 (`do_rfc1323`: timestamps, and window scaling when the
/// receive buffer needs it), SACK, receive window (`rxbufsize`), duplicate-ACK
/// threshold (`rexmtthresh`), TTL and TOS.
pub fn flow_opts(t: &SideTunables) -> FlowOpts {
    let wscale = wscale_for(t);
    FlowOpts {
        mss: t.tcp.mss,
        init_cwnd: t.tcp.initwnd.clamp(1, 20),
        // Without window scaling the advertised window cannot exceed 65535.
        rcv_wnd: if wscale.is_some() {
            t.tcp.rxbufsize
        } else {
            t.tcp.rxbufsize.clamp(1, 65_535)
        },
        wscale,
        timestamps: t.tcp.do_rfc1323,
        sack: t.tcp.do_sack,
        nagle: !t.tcp.no_delay,
        delack_ns: u64::from(t.tcp.delay_ack_msec) * 1_000_000,
        rexmt_thresh: t.tcp.rexmtthresh,
        ttl: t.ip.ttl,
        tos: t.ip.tos,
    }
    .sanitised()
}

/// Host configuration from a side's tunables (its defaults: flows of templates with
/// other tunables get their own option set, see [`flow_opts`]).
pub fn tcp_config(
    t: &SideTunables,
    mac: [u8; 6],
    gw: [u8; 6],
    max_flows: u32,
    seed: u64,
) -> TcpConfig {
    let d = FlowOpts::default();
    TcpConfig {
        mac,
        gateway_mac: gw,
        max_flows,
        // The side's options, except that the default set (RST replies to segments
        // without a flow, ports without a template) keeps the host defaults for the
        // duplicate-ACK threshold, TTL and TOS; template flows get all of their
        // tunables through their own set (`add_flow_opts`).
        opts: FlowOpts {
            rexmt_thresh: d.rexmt_thresh,
            ttl: d.ttl,
            tos: d.tos,
            ..flow_opts(t)
        },
        max_syn_retries: 8,
        max_retries: 12,
        seed,
        ..TcpConfig::default()
    }
}

/// One side of a run.
pub struct Side<P: Port> {
    pub host: TcpHost,
    pub app: GenApp,
    pub udp: UdpFlows,
    pub port: P,
    tx: TxState<P::Frame>,
    rxq: Vec<P::Frame>,
    scratch: Vec<u32>,
    pub client: Option<ClientGen>,
    /// Option set of each template's flows on this side (client tunables on a client
    /// side, server tunables on a server side).
    tpl_opts: Vec<OptsId>,
    /// Most client flows opened per turn (`None`: all that are due). Real-time runs pace
    /// so that a burst of late flows cannot flood the wire's frame pool in one turn.
    pub pace: Option<usize>,
    /// Set by the driver while the wire's frame pools run low: no new flow is opened
    /// (due flows wait; their latency still counts from their scheduled start).
    pub throttle: bool,
    /// Flows of the host still waiting for TX frames after the last `tx_resume` (the
    /// port's pool was empty): no new flow is opened while there are any.
    pub tx_waiting: usize,
    /// The last turn did something (virtual-clock drivers: a side that waits for TX
    /// frames gets another turn at the same instant only after a turn that moved).
    progressed: bool,
}

impl<P: Port> Side<P> {
    /// A side over `port` with a host built from `cfg`; registers every profile buffer
    /// once. Server sides listen on every template's port.
    pub fn new(
        profile: Arc<Profile>,
        port: P,
        cfg: TcpConfig,
        client: Option<ClientGen>,
        now: u64,
        seed: u64,
    ) -> Self {
        let max = cfg.max_flows as usize;
        let udp = UdpFlows::new(
            &profile,
            cfg.mac,
            cfg.gateway_mac,
            cfg.max_flows,
            client.is_none(),
            now,
        );
        let mut host = TcpHost::new(cfg, now);
        let bufs = profile
            .buffers
            .iter()
            .map(|b| (host.buffers().register(b.data.clone()), b.data.len() as u32))
            .collect();
        let is_client = client.is_some();
        let tpl_opts: Vec<OptsId> = profile
            .templates
            .iter()
            .map(|t| {
                let o = flow_opts(if is_client { &t.client } else { &t.server });
                // More than 256 distinct option sets: the rest use the host's defaults.
                host.add_flow_opts(o).unwrap_or(OptsId::DEFAULT)
            })
            .collect();
        if !is_client {
            // Options are per listening port: where templates share a port, the first
            // template (the first association match) sets them, hence the reverse order.
            for (t, &o) in profile.templates.iter().zip(&tpl_opts).rev() {
                if t.transport != Transport::Tcp {
                    continue;
                }
                for r in &t.assoc {
                    host.listen_with(r.port, o);
                }
                host.listen_with(t.port, o);
            }
        }
        Side {
            host,
            app: GenApp::new(profile, bufs, max, now, seed),
            udp,
            port,
            tx: TxState {
                spare: Vec::with_capacity(BURST),
                out: Vec::with_capacity(4 * BURST),
                cur: None,
            },
            rxq: Vec::with_capacity(BURST),
            scratch: Vec::with_capacity(256),
            client,
            tpl_opts,
            pace: None,
            throttle: false,
            tx_waiting: 0,
            progressed: false,
        }
    }

    /// Applies the app's recorded operations for flow `f` outside a callback.
    fn apply_ops(&mut self, now: u64, f: u32, pcap: &mut Option<&mut PcapCap>) {
        if self.app.ops.is_empty() {
            return;
        }
        let mut ops = std::mem::take(&mut self.app.ops);
        let mut sink = Sink {
            port: &mut self.port,
            tx: &mut self.tx,
            pcap: pcap.as_deref_mut(),
            now,
        };
        let fid = FlowId(f);
        for op in ops.drain(..) {
            match op {
                IoOp::Send(id, len) => {
                    if self.host.send(now, &mut sink, fid, id, 0, len).is_err() {
                        self.app.stats.send_errors += 1;
                    }
                }
                IoOp::Close => self.host.close(now, &mut self.app, &mut sink, fid),
                IoOp::Reset => {
                    self.host.abort(now, &mut self.app, &mut sink, fid);
                    break;
                }
            }
        }
        ops.clear();
        self.app.ops = ops;
    }

    /// Hands the queued frames to the port, then lets flows that stopped on an empty TX
    /// pool continue with the frames that came back (`TcpHost::tx_resume`). Returns true
    /// if a resumed flow wrote frames.
    fn flush_tx(&mut self, now: u64, pcap: &mut Option<&mut PcapCap>) -> bool {
        if !self.tx.out.is_empty() {
            // Frames the port cannot take yet stay queued and are retried next time.
            self.port.tx_burst(&mut self.tx.out);
        }
        let mut sink = Sink {
            port: &mut self.port,
            tx: &mut self.tx,
            pcap: pcap.as_deref_mut(),
            now,
        };
        let queued = sink.tx.out.len();
        self.tx_waiting = self.host.tx_resume(now, &mut sink);
        self.tx.out.len() > queued
    }

    /// One loop turn at time `now`. Returns true if anything happened.
    pub fn iterate(&mut self, now: u64, mut pcap: Option<&mut PcapCap>) -> bool {
        let mut work = false;
        self.port.set_time(now);
        self.app.set_now(now);
        // Receive.
        for _ in 0..MAX_RX_BURSTS {
            let n = self.port.rx_burst(&mut self.rxq, RX_BURST);
            if n == 0 {
                break;
            }
            work = true;
            let mut sink = Sink {
                port: &mut self.port,
                tx: &mut self.tx,
                pcap: pcap.as_deref_mut(),
                now,
            };
            // Runs of consecutive TCP frames go to the host as one burst (it prefetches
            // their flow-table slots and TCBs first); frames keep their arrival order.
            let mut tcp: [&[u8]; RX_BURST] = [&[]; RX_BURST];
            let mut k = 0;
            for f in &self.rxq {
                let d = f.data();
                if is_udp(d) {
                    tcp_rx(&mut self.host, now, &tcp[..k], &mut self.app, &mut sink);
                    k = 0;
                    self.udp.rx(&mut self.app.udp_ctx(), &mut sink, d);
                } else {
                    tcp[k] = d;
                    k += 1;
                    if k == RX_BURST {
                        tcp_rx(&mut self.host, now, &tcp, &mut self.app, &mut sink);
                        k = 0;
                    }
                }
            }
            tcp_rx(&mut self.host, now, &tcp[..k], &mut self.app, &mut sink);
            self.port.release_all(&mut self.rxq);
            let _ = self.flush_tx(now, &mut pcap);
            if n < RX_BURST {
                break;
            }
        }
        // TCP timers.
        if self.host.next_timer().is_some_and(|t| t <= now) {
            work = true;
            let mut sink = Sink {
                port: &mut self.port,
                tx: &mut self.tx,
                pcap: pcap.as_deref_mut(),
                now,
            };
            self.host.poll(now, &mut self.app, &mut sink);
        }
        // Program timers.
        if self.app.next_timer().is_some_and(|t| t <= now) {
            work = true;
            let mut exp = self.app.take_expired();
            self.app.expire_timers(now, &mut exp);
            for &f in &exp {
                self.app.step(f, Event::Timer);
                self.apply_ops(now, f, &mut pcap);
            }
            self.app.put_expired(exp);
        }
        if self.udp.next_timer().is_some_and(|t| t <= now) {
            work = true;
            let mut sink = Sink {
                port: &mut self.port,
                tx: &mut self.tx,
                pcap: pcap.as_deref_mut(),
                now,
            };
            self.udp.expire(&mut self.app.udp_ctx(), &mut sink);
        }
        // New client flows.
        if let Some(mut cg) = self.client.take() {
            if !self.throttle && self.tx_waiting == 0 {
                if cg.pending.is_empty() && cg.sched.next_due().is_some_and(|t| t <= now) {
                    let mut starts = std::mem::take(&mut cg.starts);
                    starts.clear();
                    cg.sched.poll(now, &mut starts);
                    cg.pending.extend(starts.drain(..));
                    cg.starts = starts;
                }
                let budget = self.pace.unwrap_or(usize::MAX);
                let mut n = 0;
                while n < budget {
                    let Some(s) = cg.pending.pop_front() else {
                        break;
                    };
                    self.start_flow(now, &mut cg, &s, &mut pcap);
                    n += 1;
                }
                work |= n > 0;
            }
            for (tpl, addr) in self.app.released.drain(..) {
                if let Some(a) = cg.allocs.get_mut(tpl as usize) {
                    a.release(addr);
                }
            }
            self.client = Some(cg);
        }
        // Transmit, then resume flows that waited for frames (and send what they wrote).
        work |= !self.tx.out.is_empty();
        work |= self.flush_tx(now, &mut pcap);
        if !self.tx.out.is_empty() {
            self.port.tx_burst(&mut self.tx.out);
        }
        self.progressed = work;
        work
    }

    /// Opens a client flow: picks the server, allocates a client tuple (for UDP one no UDP
    /// flow uses), then connects (TCP) or opens the UDP flow and runs its program.
    fn start_flow(
        &mut self,
        now: u64,
        cg: &mut ClientGen,
        s: &FlowStart,
        pcap: &mut Option<&mut PcapCap>,
    ) {
        let ti = s.template.0 as usize;
        let t = &self.app.profile().templates[ti];
        let (tg, dport, is_udp) = (t.tg_id as usize, t.port, t.transport == Transport::Udp);
        let server = cg.servers[ti].pick();
        let udp = &self.udp;
        let addr =
            match cg.allocs[ti].alloc(|ip, port| is_udp && udp.in_use(ip, port, server, dport)) {
                Ok(a) => a,
                Err(_) => {
                    self.app.stats.tg[tg].c.ports_exhausted += 1;
                    return;
                }
            };
        if let Some(p) = pcap.as_deref_mut() {
            p.want(addr.ip, addr.port);
        }
        let mut sink = Sink {
            port: &mut self.port,
            tx: &mut self.tx,
            pcap: pcap.as_deref_mut(),
            now,
        };
        let opened = if is_udp {
            let mut cx = self.app.udp_ctx();
            self.udp
                .open_client(&mut cx, &mut sink, s.template, s.at_ns, addr, server, dport)
        } else {
            let o = self.tpl_opts[ti];
            match self
                .host
                .connect_with(now, &mut sink, addr.ip, addr.port, server, dport, o)
            {
                Ok(f) => {
                    self.app.start_client(f, s.template, s.at_ns, addr);
                    self.apply_ops(now, f.0, pcap);
                    true
                }
                Err(_) => false,
            }
        };
        if !opened {
            cg.allocs[ti].release(addr);
            self.app.stats.tg[tg].c.connect_failed += 1;
        }
    }

    /// Aborts every live flow (stop after the drain period); they are counted as cut.
    pub fn cut_all(&mut self, now: u64, pcap: Option<&mut PcapCap>) -> u64 {
        let mut live = std::mem::take(&mut self.scratch);
        self.app.live_flows(&mut live);
        let n = live.len() as u64 + self.udp.cut_all(&mut self.app.udp_ctx());
        let mut sink = Sink {
            port: &mut self.port,
            tx: &mut self.tx,
            pcap,
            now,
        };
        for &f in &live {
            self.app.mark_cut(f);
            self.host.abort(now, &mut self.app, &mut sink, FlowId(f));
        }
        self.scratch = live;
        self.port.tx_burst(&mut self.tx.out);
        // Flows scheduled before the stop but never opened (the generator fell behind).
        if let Some(cg) = self.client.as_mut() {
            let mut starts = std::mem::take(&mut cg.starts);
            starts.clear();
            cg.sched.poll(now, &mut starts);
            cg.pending.extend(starts.drain(..));
            cg.starts = starts;
            for s in cg.pending.drain(..) {
                let ti = s.template.0 as usize;
                let tg = self.app.profile().templates[ti].tg_id as usize;
                if let Some(g) = self.app.stats.tg.get_mut(tg) {
                    g.c.not_opened += 1;
                }
            }
        }
        n
    }

    /// Earliest moment this side has something to do (virtual-clock driver).
    pub fn next_event(&self, now: u64) -> Option<u64> {
        let mut t = [
            self.host.next_timer(),
            self.app.next_timer(),
            self.udp.next_timer(),
            self.port.next_event_ns(),
            self.client.as_ref().and_then(|c| {
                if self.tx_waiting > 0 {
                    // No flow opens before frames come back (a peer's turn or a timer).
                    None
                } else if c.pending.is_empty() {
                    c.sched.next_due()
                } else {
                    Some(now)
                }
            }),
        ]
        .into_iter()
        .flatten()
        .min();
        if !self.tx.out.is_empty() || (self.tx_waiting > 0 && self.progressed) {
            t = Some(now);
        }
        t
    }

    /// No client flow will be opened any more, no flow runs, the host holds no flow
    /// (TIME_WAIT included) and no frame is on its way to this side (a datagram to a
    /// released UDP flow still gets counted).
    pub fn is_idle(&self) -> bool {
        self.app.live == 0
            && self.udp.live == 0
            && self.port.next_event_ns().is_none()
            && self.host.flow_count() == 0
            && !matches!(&self.client, Some(c) if !c.is_finished())
    }

    /// Gives every frame this side still holds back to the port.
    pub fn release_frames(&mut self) {
        self.port.release_all(&mut self.tx.spare);
        self.port.release_all(&mut self.tx.out);
        if let Some(f) = self.tx.cur.take() {
            self.port.release(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_scale_only_when_the_buffer_needs_it() {
        let mut t = SideTunables::default();
        t.tcp.rxbufsize = 32_768;
        let c = tcp_config(&t, [0; 6], [0; 6], 16, 1);
        assert_eq!((c.opts.wscale, c.opts.rcv_wnd), (None, 32_768));
        t.tcp.rxbufsize = 262_144;
        let c = tcp_config(&t, [0; 6], [0; 6], 16, 1);
        assert_eq!((c.opts.wscale, c.opts.rcv_wnd), (Some(3), 262_144));
        t.tcp.do_rfc1323 = false;
        let c = tcp_config(&t, [0; 6], [0; 6], 16, 1);
        assert_eq!((c.opts.wscale, c.opts.rcv_wnd), (None, 65_535));
    }
}
