//! Application calls outside callbacks (`connect`, `send`, `close`, `abort`) and the
//! operations queued through `Ctl` inside callbacks (`apply_ops`, `set_ctl`).

use super::*;

impl TcpHost {
    /// Opens a connection (active open, RFC 9293 §3.10.1) with the default options. A
    /// flow in TIME_WAIT on the same 4-tuple is recycled (the new ISN comes from the
    /// RFC 6528 clock).
    #[allow(clippy::too_many_arguments)]
    pub fn connect<S: TxSink>(
        &mut self,
        now: u64,
        tx: &mut S,
        local_ip: u32,
        local_port: u16,
        remote_ip: u32,
        remote_port: u16,
    ) -> Result<FlowId, ConnectError> {
        let d = OptsId::DEFAULT;
        self.connect_with(now, tx, local_ip, local_port, remote_ip, remote_port, d)
    }

    /// [`TcpHost::connect`] with option set `opts` (an id from
    /// [`TcpHost::add_flow_opts`]; unknown ids mean the default set).
    #[allow(clippy::too_many_arguments)]
    pub fn connect_with<S: TxSink>(
        &mut self,
        now: u64,
        tx: &mut S,
        local_ip: u32,
        local_port: u16,
        remote_ip: u32,
        remote_port: u16,
        opts: OptsId,
    ) -> Result<FlowId, ConnectError> {
        // 0.0.0.0/8 holds the ids of IPv6 flows (and is no host's address).
        if addr6::is_id(local_ip) || addr6::is_id(remote_ip) {
            return Err(ConnectError::NoResources);
        }
        let key = FlowKey {
            local_ip,
            remote_ip,
            local_port,
            remote_port,
        };
        self.connect_key(now, tx, key, opts)
    }

    /// Opens a connection over IPv6 (as [`TcpHost::connect`]) with the default options.
    pub fn connect6<S: TxSink>(
        &mut self,
        now: u64,
        tx: &mut S,
        local: [u8; 16],
        local_port: u16,
        remote: [u8; 16],
        remote_port: u16,
    ) -> Result<FlowId, ConnectError> {
        let d = OptsId::DEFAULT;
        self.connect6_with(now, tx, local, local_port, remote, remote_port, d)
    }

    /// [`TcpHost::connect6`] with option set `opts`.
    #[allow(clippy::too_many_arguments)]
    pub fn connect6_with<S: TxSink>(
        &mut self,
        now: u64,
        tx: &mut S,
        local: [u8; 16],
        local_port: u16,
        remote: [u8; 16],
        remote_port: u16,
        opts: OptsId,
    ) -> Result<FlowId, ConnectError> {
        let (Some(l), Some(r)) = (self.addr6.intern(&local), self.addr6.intern(&remote)) else {
            if let Some(l) = self.addr6.get(&local) {
                self.addr6.release_unused(l);
            }
            return Err(ConnectError::NoResources);
        };
        let key = FlowKey {
            local_ip: l,
            remote_ip: r,
            local_port,
            remote_port,
        };
        let res = self.connect_key(now, tx, key, opts);
        self.addr6.release_unused(l);
        self.addr6.release_unused(r);
        res
    }

    /// The active open of `key` (either family).
    fn connect_key<S: TxSink>(
        &mut self,
        now: u64,
        tx: &mut S,
        key: FlowKey,
        opts: OptsId,
    ) -> Result<FlowId, ConnectError> {
        let opt = self.valid_opts(opts);
        self.now = now;
        let h = self.table.hash(&key);
        let mut recycled = false;
        if let Some(old) = self.table.find(&key, h) {
            if self.flows[old as usize].state == State::TimeWait {
                self.counters.tcps_twrecycled += 1;
                self.hold_ids(&key);
                recycled = true;
                self.close_flow(old, CloseReason::Normal, &mut NoApp);
            } else {
                return Err(ConnectError::InUse);
            }
        }
        let i = self.alloc_flow(key, h, opt);
        if recycled {
            self.release_ids(&key);
        }
        let i = i.ok_or(ConnectError::NoResources)?;
        let (la, ra) = self.hash_addrs(&key);
        let iss = self
            .isn_key
            .isn(now, la, key.local_port, ra, key.remote_port);
        let t = &mut self.flows[i as usize];
        t.state = State::SynSent;
        t.snd_una = iss;
        t.snd_nxt = iss;
        t.snd_max = iss;
        t.cc.recover = iss;
        t.snd_sml = iss as u16;
        t.flags |= F_TIMING;
        t.rtt_seq = iss;
        t.rtt_ts = (now / 1000) as u32;
        self.counters.tcps_connattempt += 1;
        self.send_syn(i, tx);
        let rto = self.rto_ns(&self.flows[i as usize]);
        self.flows[i as usize].rexmt_at = now + rto;
        self.schedule(i);
        Ok(FlowId(i))
    }

    pub(super) fn check_sendable(&self, f: FlowId) -> Result<u32, SendError> {
        let t = self.flows.get(f.0 as usize).ok_or(SendError::NoFlow)?;
        match t.state {
            State::Established | State::CloseWait | State::SynSent | State::SynReceived => {
                if t.has(F_FIN_QUEUED) {
                    Err(SendError::Closed)
                } else {
                    Ok(f.0)
                }
            }
            State::Closed => Err(SendError::NoFlow),
            _ => Err(SendError::Closed),
        }
    }

    pub(super) fn queue(
        &mut self,
        i: u32,
        buf: BufId,
        off: u32,
        len: u32,
    ) -> Result<(), SendError> {
        let blen = self.bufs.get(buf).len() as u64;
        if off as u64 + len as u64 > blen {
            return Err(SendError::BadRange);
        }
        let t = &mut self.flows[i as usize];
        let idle = t.sq.len == 0;
        self.chunks
            .push(&mut t.sq, buf, off, len)
            .map_err(|_| SendError::QueueFull)?;
        if idle
            && t.snd_wnd == 0
            && t.snd_una == t.snd_max
            && matches!(t.state, State::Established | State::CloseWait)
        {
            // Data for a closed window on an idle established flow (nothing in flight,
            // so no retransmission timer: a SYN's is left alone): the timer held the
            // keep-alive's deadline; output arms the persist timer instead (RFC 1122
            // §4.2.2.17: the first probe after one RTO, not the keep-alive's idle time).
            t.rexmt_at = 0;
        }
        Ok(())
    }

    /// Queues `len` bytes of registered buffer `buf` at `off` and sends what the windows allow.
    pub fn send<S: TxSink>(
        &mut self,
        now: u64,
        tx: &mut S,
        f: FlowId,
        buf: BufId,
        off: u32,
        len: u32,
    ) -> Result<(), SendError> {
        self.now = now;
        let i = self.check_sendable(f)?;
        self.queue(i, buf, off, len)?;
        self.output(i, tx);
        Ok(())
    }

    /// Queues owned bytes (freed once acknowledged) and sends what the windows allow.
    pub fn send_owned<S: TxSink>(
        &mut self,
        now: u64,
        tx: &mut S,
        f: FlowId,
        data: Box<[u8]>,
    ) -> Result<(), SendError> {
        self.now = now;
        let i = self.check_sendable(f)?;
        let len = data.len() as u32;
        let id = self.bufs.register_owned(data);
        if let Err(e) = self.queue(i, id, 0, len) {
            self.bufs.unregister(id);
            return Err(e);
        }
        self.output(i, tx);
        Ok(())
    }

    pub(super) fn do_close(&mut self, i: u32) -> bool {
        let t = &mut self.flows[i as usize];
        if t.has(F_FIN_QUEUED) {
            return false;
        }
        let next = match t.state {
            State::Established | State::SynReceived => State::FinWait1,
            State::CloseWait => State::LastAck,
            _ => return false,
        };
        t.flags |= F_FIN_QUEUED;
        if t.state == State::SynReceived {
            // RFC 9293 §3.10.4 (CLOSE in SYN-RECEIVED, after a simultaneous open): the FIN
            // waits for the handshake; the ACK of our SYN moves the flow to FIN-WAIT-1.
            return false;
        }
        t.state = next;
        true
    }

    /// Closes the send side (FIN after the queued data; RFC 9293 §3.10.4). Closing a flow
    /// still in SYN_SENT releases it.
    pub fn close<A: TcpApp, S: TxSink>(&mut self, now: u64, app: &mut A, tx: &mut S, f: FlowId) {
        self.now = now;
        let Some(t) = self.flows.get(f.0 as usize) else {
            return;
        };
        if t.state == State::SynSent {
            self.close_flow(f.0, CloseReason::Aborted, app);
            return;
        }
        if self.do_close(f.0) {
            self.output(f.0, tx);
            if self.traced(f.0) {
                self.trace_sync(f.0);
            }
        }
    }

    /// Aborts a flow with a RST (RFC 9293 §3.10.5).
    pub fn abort<A: TcpApp, S: TxSink>(&mut self, now: u64, app: &mut A, tx: &mut S, f: FlowId) {
        self.now = now;
        if self.state(f) == State::Closed {
            return;
        }
        self.send_rst_for(f.0, tx);
        self.count_drop(f.0);
        self.close_flow(f.0, CloseReason::Aborted, app);
    }

    /// Counts a connection this end drops (BSD's `tcp_drop`): in `tcps_drops` once the
    /// peer's SYN came, in `tcps_conndrops` before (an embryonic one); not at all in
    /// TIME-WAIT (the connection had ended).
    pub(super) fn count_drop(&mut self, i: u32) {
        match self.flows[i as usize].state {
            State::SynSent => self.counters.tcps_conndrops += 1,
            State::TimeWait | State::Closed => {}
            _ => self.counters.tcps_drops += 1,
        }
    }

    /// Applies the operations queued by a callback; returns true if the flow is gone.
    /// Most callbacks queue nothing (an ACK's `on_acked` while the answer is still
    /// going out): that test is inlined at the call, the rest is out of line.
    #[inline(always)]
    pub(super) fn apply_ops<A: TcpApp, S: TxSink>(
        &mut self,
        i: u32,
        app: &mut A,
        tx: &mut S,
    ) -> Gone {
        if self.ctl.ops.is_empty() {
            return false;
        }
        self.apply_queued_ops(i, app, tx)
    }

    /// [`apply_ops`](Self::apply_ops) with at least one operation queued.
    #[inline(never)]
    fn apply_queued_ops<A: TcpApp, S: TxSink>(&mut self, i: u32, app: &mut A, tx: &mut S) -> Gone {
        match self.ctl.ops.as_slice() {
            [] => return false,
            // The common case (a callback queued one send): no queue juggling.
            &[Op::Send(b, off, len)] => {
                self.ctl.ops.clear();
                if self.check_sendable(FlowId(i)).is_ok() && self.queue(i, b, off, len).is_err() {
                    self.ctl.errors += 1;
                }
                return false;
            }
            _ => {}
        }
        let mut ops = std::mem::take(&mut self.ctl.ops);
        let mut gone = false;
        for op in ops.drain(..) {
            if gone {
                continue;
            }
            match op {
                Op::Send(b, off, len) => {
                    if self.check_sendable(FlowId(i)).is_ok() && self.queue(i, b, off, len).is_err()
                    {
                        self.ctl.errors += 1;
                    }
                }
                Op::SendOwned(data) => {
                    let len = data.len() as u32;
                    let id = self.bufs.register_owned(data);
                    if self.check_sendable(FlowId(i)).is_err() || self.queue(i, id, 0, len).is_err()
                    {
                        self.bufs.unregister(id);
                        self.ctl.errors += 1;
                    }
                }
                Op::Close => {
                    self.do_close(i);
                }
                Op::Abort => {
                    self.send_rst_for(i, tx);
                    self.count_drop(i);
                    self.close_flow(i, CloseReason::Aborted, app);
                    gone = true;
                }
            }
        }
        self.ctl.ops = ops;
        gone
    }

    #[inline]
    pub(super) fn set_ctl(&mut self, i: u32) {
        let t = &self.flows[i as usize];
        self.ctl.flow = FlowId(i);
        self.ctl.key = t.key;
        self.ctl.passive = t.has(F_PASSIVE);
    }

    /// [`set_ctl`](Self::set_ctl) for `on_connected`: also the addresses of an IPv6 flow
    /// (once per flow; an IPv4 flow pays one compare). Cleared by
    /// [`clear_ctl6`](Self::clear_ctl6) after the callback.
    #[inline(always)]
    pub(super) fn set_ctl_connected(&mut self, i: u32) {
        self.set_ctl(i);
        if self.ctl.key.is_ipv6() {
            self.set_ctl6();
        }
    }

    #[cold]
    #[inline(never)]
    fn set_ctl6(&mut self) {
        let k = self.ctl.key;
        self.ctl.addr6 = (*self.addr6.addr(k.local_ip), *self.addr6.addr(k.remote_ip));
    }

    /// Forgets the IPv6 addresses [`set_ctl_connected`](Self::set_ctl_connected) set.
    #[inline(always)]
    pub(super) fn clear_ctl6(&mut self) {
        if self.ctl.key.is_ipv6() {
            self.ctl.addr6 = ([0; 16], [0; 16]);
        }
    }
}

/// An application that ignores every event (used internally when recycling flows).
struct NoApp;
impl TcpApp for NoApp {}
