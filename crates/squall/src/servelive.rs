//! What the workers of `squall serve` publish for the thread that reports ([`ServeLive`]):
//! each worker copies its figures ([`WorkerFigures`]: the server's counters, connections,
//! port and TCP counters, request latencies, loop load) into its own slot every 10 ms
//! with `try_lock` only (it never waits for the reader; a busy slot is published at the
//! next period). The live view, the progress line, `--metrics` and the `--json` series
//! read these copies: nothing else is added on the data path.

use std::sync::Mutex;

use squall_port::{Port, PortStats};
use squall_serve::app::{ServeApp, ServeStats};
use squall_serve::lathist::ReqLat;
use squall_tcp::TcpCounters;

/// Publication period of a worker, ns.
pub const PUBLISH_NS: u64 = 10_000_000;

/// The TCP counters the server's reports use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpFigures {
    /// Segments retransmitted (tcps_sndrexmitpack).
    pub retransmits: u64,
    /// RSTs received and accepted (tcps_rcvrst).
    pub resets_received: u64,
    /// RSTs sent (tcps_sndrst).
    pub resets_sent: u64,
    /// Connections dropped after retransmission timeouts (tcps_timeoutdrop).
    pub timeout_drops: u64,
    /// SYNs dropped: half-open table or flow table full (tcps_synfull + tcps_flowfull).
    pub syn_dropped: u64,
}

impl TcpFigures {
    pub fn of(c: &TcpCounters) -> TcpFigures {
        TcpFigures {
            retransmits: c.tcps_sndrexmitpack,
            resets_received: c.tcps_rcvrst,
            resets_sent: c.tcps_sndrst,
            timeout_drops: c.tcps_timeoutdrop,
            syn_dropped: c.tcps_synfull + c.tcps_flowfull,
        }
    }
    pub fn add(&mut self, o: &TcpFigures) {
        self.retransmits += o.retransmits;
        self.resets_received += o.resets_received;
        self.resets_sent += o.resets_sent;
        self.timeout_drops += o.timeout_drops;
        self.syn_dropped += o.syn_dropped;
    }
}

/// One worker's cumulative figures at one instant (or several workers' summed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerFigures {
    pub stats: ServeStats,
    /// Open connections, and those of them idle (as of the last timeout sweep).
    pub open: u64,
    pub idle: u64,
    pub port: PortStats,
    pub tcp: TcpFigures,
    pub req_lat: ReqLat,
    /// Wall time of the loop turns that did work, and of all turns, ns.
    pub busy_ns: u64,
    pub loop_ns: u64,
}

impl WorkerFigures {
    /// Adds another worker's figures.
    pub fn add(&mut self, o: &WorkerFigures) {
        self.stats += o.stats;
        self.open += o.open;
        self.idle += o.idle;
        self.port.add(&o.port);
        self.tcp.add(&o.tcp);
        self.req_lat.add(&o.req_lat);
        self.busy_ns += o.busy_ns;
        self.loop_ns += o.loop_ns;
    }
}

/// The published figures of every worker of a `squall serve`.
#[derive(Debug, Default)]
pub struct ServeLive {
    pub workers: Vec<Mutex<WorkerFigures>>,
}

impl ServeLive {
    /// Slots for `n` workers.
    pub fn new(n: u32) -> ServeLive {
        ServeLive {
            workers: (0..n.max(1))
                .map(|_| Mutex::new(WorkerFigures::default()))
                .collect(),
        }
    }
    /// A copy of every worker's latest figures (a slot being written is read as it was).
    pub fn read(&self) -> Vec<WorkerFigures> {
        self.workers
            .iter()
            .map(|m| m.lock().map(|g| *g).unwrap_or_else(|e| *e.into_inner()))
            .collect()
    }
}

/// A worker's side of the publication: the loop's load (from the turn instants the loop
/// reads anyway: no extra clock read) and the copy into its slot every [`PUBLISH_NS`].
#[derive(Debug, Default)]
pub struct Publisher {
    last_pub: u64,
    prev_turn: u64,
    prev_worked: bool,
    busy_ns: u64,
    loop_ns: u64,
}

impl Publisher {
    /// One loop turn that started at `now` (the previous one's work decides whether the
    /// time since it was busy); publishes when due.
    #[inline]
    pub fn turn<P: Port>(
        &mut self,
        now: u64,
        worked: bool,
        slot: &Mutex<WorkerFigures>,
        app: &ServeApp,
        node: &squall_stack::Node<P>,
    ) {
        if self.prev_turn != 0 {
            let d = now.saturating_sub(self.prev_turn);
            self.loop_ns += d;
            if self.prev_worked {
                self.busy_ns += d;
            }
        }
        self.prev_turn = now;
        self.prev_worked = worked;
        if now.saturating_sub(self.last_pub) >= PUBLISH_NS {
            self.last_pub = now;
            self.publish(slot, app, node);
        }
    }

    /// Copies the figures into `slot` unless the reader holds it.
    pub fn publish<P: Port>(
        &self,
        slot: &Mutex<WorkerFigures>,
        app: &ServeApp,
        node: &squall_stack::Node<P>,
    ) {
        if let Ok(mut g) = slot.try_lock() {
            *g = self.figures(app, node);
        }
    }

    /// Copies the worker's final figures into `slot` (waits for the reader if needed).
    pub fn publish_final<P: Port>(
        &self,
        slot: &Mutex<WorkerFigures>,
        app: &ServeApp,
        node: &squall_stack::Node<P>,
    ) {
        let f = self.figures(app, node);
        match slot.lock() {
            Ok(mut g) => *g = f,
            Err(e) => *e.into_inner() = f,
        }
    }

    fn figures<P: Port>(&self, app: &ServeApp, node: &squall_stack::Node<P>) -> WorkerFigures {
        WorkerFigures {
            stats: app.stats,
            open: app.live,
            idle: app.idle.min(app.live),
            port: node.port.stats(),
            tcp: TcpFigures::of(node.tcp.counters()),
            req_lat: app.req_lat,
            busy_ns: self.busy_ns,
            loop_ns: self.loop_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_add_up_and_a_held_slot_is_read_as_it_was() {
        let mut a = WorkerFigures {
            open: 3,
            idle: 1,
            busy_ns: 10,
            loop_ns: 40,
            ..WorkerFigures::default()
        };
        a.stats.requests = 5;
        a.tcp.resets_received = 2;
        a.req_lat.record_ns(1_000_000);
        let mut b = a;
        b.port.tx_bytes = 100;
        a.add(&b);
        assert_eq!((a.open, a.idle, a.stats.requests), (6, 2, 10));
        assert_eq!((a.tcp.resets_received, a.port.tx_bytes), (4, 100));
        assert_eq!((a.req_lat.count(), a.busy_ns, a.loop_ns), (2, 20, 80));
        let live = ServeLive::new(2);
        *live.workers[1].lock().unwrap() = b;
        let r = live.read();
        assert_eq!(r.len(), 2);
        assert_eq!(r[1], b);
        assert_eq!(r[0], WorkerFigures::default());
    }
}
