//! Flow slab: allocation and release of TCBs (table entry, timer, send queue) and the
//! side tables (out-of-order queues, SACK scoreboards) a flow borrows by index.

use super::*;

impl TcpHost {
    /// Keeps an IPv6 key's address ids across the close of its flow when a new
    /// incarnation takes the same key (TIME_WAIT reuse): the close would free them, and
    /// the next new address would take an id the new flow holds. Paired with
    /// [`release_ids`](Self::release_ids) once the new flow is allocated (or not).
    pub(super) fn hold_ids(&mut self, key: &FlowKey) {
        if key.is_ipv6() {
            self.addr6.retain(key.local_ip);
            self.addr6.retain(key.remote_ip);
        }
    }
    /// Ends a [`hold_ids`](Self::hold_ids).
    pub(super) fn release_ids(&mut self, key: &FlowKey) {
        if key.is_ipv6() {
            self.addr6.release(key.local_ip);
            self.addr6.release(key.remote_ip);
        }
    }

    pub(super) fn alloc_flow(&mut self, key: FlowKey, h: u64, opt: u8) -> Option<u32> {
        let i = if let Some(i) = self.free.pop() {
            i
        } else if self.flows.len() < self.cfg.max_flows as usize {
            self.flows.push(Tcb::default());
            self.flows.len() as u32 - 1
        } else {
            self.counters.tcps_flowfull += 1;
            return None;
        };
        if self.table.insert(key, h, i).is_err() {
            self.free.push(i);
            self.counters.tcps_flowfull += 1;
            return None;
        }
        let o = self.opts[opt as usize];
        let mss = self.fo_mss(opt, &key);
        if key.is_ipv6() {
            self.addr6.retain(key.local_ip);
            self.addr6.retain(key.remote_ip);
        }
        self.flows[i as usize] = Tcb {
            key,
            flags: if o.nagle { F_NAGLE } else { 0 },
            mss,
            opt,
            ooo: NO_SIDE,
            sb: NO_SIDE,
            rtt: Rtt::new(&self.cfg.rto),
            cc: NewReno::new(o.init_cwnd, mss as u32, 0),
            ..Tcb::default()
        };
        self.active += 1;
        Some(i)
    }

    /// Releases a flow; reports `reason` to the app unless already reported.
    pub(super) fn close_flow<A: TcpApp>(&mut self, i: u32, reason: CloseReason, app: &mut A) {
        if self.flows[i as usize].state == State::Closed {
            return;
        }
        if self.traced(i) {
            self.trace_close(i, reason);
        }
        let t = &mut self.flows[i as usize];
        let report = !t.has(F_REPORTED) && !t.has(F_HALF_OPEN);
        if t.has(F_HALF_OPEN) {
            self.half_open -= 1;
        }
        let key = t.key;
        let mut sq = t.sq;
        let ooo = t.ooo;
        let sb = t.sb;
        t.state = State::Closed;
        t.sq = SendQueue::default();
        t.ooo = NO_SIDE;
        t.sb = NO_SIDE;
        self.chunks.clear(&mut sq, &mut self.bufs);
        self.release_ooo(ooo);
        self.release_sb(sb);
        let h = self.table.hash(&key);
        self.table.remove(&key, h);
        if key.is_ipv6() {
            self.addr6.release(key.local_ip);
            self.addr6.release(key.remote_ip);
        }
        self.wheel.cancel(i);
        if !self.urgent.is_empty() {
            self.urgent.remove(&i);
        }
        self.free.push(i);
        self.active -= 1;
        self.counters.tcps_closed += 1;
        if report {
            app.on_closed(FlowId(i), reason);
        }
    }

    /// Gives a flow's out-of-order queue back: kept in the pool while the pool holds
    /// fewer than an eighth of the budget's queues (at least 4), freed otherwise.
    pub(super) fn release_ooo(&mut self, o: u32) {
        if o == NO_SIDE {
            return;
        }
        let keep = (self.ooo_max / 8).max(4) as usize;
        match self.ooo[o as usize].as_mut() {
            Some(q) if self.ooo_free.len() < keep => {
                q.clear();
                self.ooo_free.push(o);
            }
            Some(_) => {
                self.ooo[o as usize] = None;
                self.ooo_alloc -= 1;
                self.ooo_vacant.push(o);
            }
            None => self.ooo_vacant.push(o),
        }
    }

    pub(super) fn release_sb(&mut self, b: u32) {
        if b != NO_SIDE {
            self.sboards[b as usize].clear();
            self.sb_free.push(b);
        }
    }

    pub(super) fn get_sb(&mut self) -> u32 {
        if let Some(b) = self.sb_free.pop() {
            return b;
        }
        self.sboards.push(Scoreboard::default());
        self.sboards.len() as u32 - 1
    }

    /// An out-of-order queue for a flow: from the pool, or newly allocated within the
    /// host's budget (`TcpConfig::ooo_budget`); None (counted) when the budget is spent.
    pub(super) fn get_ooo(&mut self) -> Option<u32> {
        if let Some(o) = self.ooo_free.pop() {
            return Some(o);
        }
        if self.ooo_alloc >= self.ooo_max {
            self.counters.tcps_rcvoomemdrop += 1;
            return None;
        }
        self.ooo_alloc += 1;
        let q = Some(Box::new(OooQueue::new(self.cfg.ooo_bytes as usize)));
        if let Some(o) = self.ooo_vacant.pop() {
            self.ooo[o as usize] = q;
            return Some(o);
        }
        self.ooo.push(q);
        Some(self.ooo.len() as u32 - 1)
    }
}
