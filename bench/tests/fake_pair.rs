//! The generic W1/W2 drivers against an ideal in-process byte-stream "stack" (no frames),
//! including one that corrupts the server's bytes: the drivers must count errors then.

use std::time::Duration;

use squall_bench::pair::{MemPair, PairStats, Side, SockState};
use squall_bench::workload::{run_w1, run_w2, RunCfg};

#[derive(Default, Clone)]
struct Conn {
    opening: bool,
    c2s: Vec<u8>,
    s2c: Vec<u8>,
    c_fin: bool,
    s_fin: bool,
    c_released: bool,
    s_released: bool,
}

/// Client slot i maps to a connection in an arena; the server id is the arena index.
struct FakePair {
    clients: Vec<Option<usize>>,
    conns: Vec<Conn>,
    free: Vec<usize>,
    corrupt: bool,
    window: usize,
}

impl FakePair {
    fn new(n: usize, corrupt: bool) -> Self {
        FakePair {
            clients: vec![None; n],
            conns: Vec::new(),
            free: Vec::new(),
            corrupt,
            window: 3000,
        }
    }

    fn maybe_free(&mut self, ci: usize) {
        let c = &self.conns[ci];
        if c.c_released && c.s_released {
            self.free.push(ci);
        }
    }
}

impl MemPair for FakePair {
    fn client_name(&self) -> &'static str {
        "fake"
    }
    fn server_name(&self) -> &'static str {
        "fake"
    }
    fn open(&mut self, id: usize) -> bool {
        if self.clients[id].is_some() {
            return false;
        }
        let ci = self.free.pop().unwrap_or_else(|| {
            self.conns.push(Conn::default());
            self.conns.len() - 1
        });
        self.conns[ci] = Conn {
            opening: true,
            ..Conn::default()
        };
        self.clients[id] = Some(ci);
        true
    }
    fn poll(&mut self, _now: Duration, ready: &mut Vec<(Side, usize)>) -> bool {
        for c in &mut self.conns {
            c.opening = false;
        }
        ready.extend((0..self.clients.len()).map(|i| (Side::Client, i)));
        ready.extend(
            (0..self.conns.len())
                .filter(|&i| !self.conns[i].s_released)
                .map(|i| (Side::Server, i)),
        );
        false
    }
    fn idle(&mut self) -> bool {
        false
    }
    fn state(&self, side: Side, id: usize) -> SockState {
        let c = match side {
            Side::Client => match self.clients[id] {
                Some(ci) => &self.conns[ci],
                None => return SockState::Idle,
            },
            Side::Server => match self.conns.get(id) {
                Some(c) if !c.s_released => c,
                _ => return SockState::Idle,
            },
        };
        if c.opening {
            return match side {
                Side::Client => SockState::Opening,
                Side::Server => SockState::Idle,
            };
        }
        let (mine, theirs, inbox) = match side {
            Side::Client => (c.c_fin, c.s_fin, &c.s2c),
            Side::Server => (c.s_fin, c.c_fin, &c.c2s),
        };
        match (mine, theirs) {
            (true, true) => SockState::Done,
            (true, false) => SockState::Closing,
            (false, true) if inbox.is_empty() => SockState::PeerClosed,
            _ => SockState::Open,
        }
    }
    fn send(&mut self, side: Side, id: usize, data: &[u8]) -> usize {
        let ci = match side {
            Side::Client => self.clients[id].expect("open slot"),
            Side::Server => id,
        };
        let window = self.window;
        let corrupt = self.corrupt && side == Side::Server;
        let c = &mut self.conns[ci];
        let out = match side {
            Side::Client => &mut c.c2s,
            Side::Server => &mut c.s2c,
        };
        let n = data.len().min(window.saturating_sub(out.len()));
        let start = out.len();
        out.extend_from_slice(&data[..n]);
        if corrupt && n > 0 {
            out[start] ^= 0xff;
        }
        n
    }
    fn recv<F: FnMut(&[u8])>(&mut self, side: Side, id: usize, mut f: F) -> usize {
        let ci = match side {
            Side::Client => match self.clients[id] {
                Some(ci) => ci,
                None => return 0,
            },
            Side::Server => id,
        };
        let c = &mut self.conns[ci];
        let inbox = match side {
            Side::Client => &mut c.s2c,
            Side::Server => &mut c.c2s,
        };
        let n = inbox.len();
        if n > 0 {
            f(inbox);
            inbox.clear();
        }
        n
    }
    fn close(&mut self, side: Side, id: usize) {
        match side {
            Side::Client => {
                if let Some(ci) = self.clients[id] {
                    self.conns[ci].c_fin = true;
                }
            }
            Side::Server => self.conns[id].s_fin = true,
        }
    }
    fn release(&mut self, side: Side, id: usize) {
        match side {
            Side::Client => {
                if let Some(ci) = self.clients[id].take() {
                    self.conns[ci].c_released = true;
                    self.maybe_free(ci);
                }
            }
            Side::Server => {
                self.conns[id].s_released = true;
                self.maybe_free(id);
            }
        }
    }
    fn stats(&self) -> PairStats {
        PairStats::default()
    }
}

/// Short bound for runs expected to fail; clean runs use [`cfg_ok`].
fn cfg(conns: usize) -> RunCfg {
    let mut c = RunCfg::new(conns, 0.2);
    c.warmup = 0.02;
    c.max_ops = 2000;
    c
}

/// A long bound ended by `max_ops`, so a starved test thread still completes its ops.
fn cfg_ok(conns: usize) -> RunCfg {
    let mut c = cfg(conns);
    c.seconds = 20.0;
    c
}

#[test]
fn w1_completes_connections_without_errors() {
    let mut p = FakePair::new(10, false);
    let r = run_w1(&mut p, &cfg_ok(10));
    assert_eq!(r.errors, 0);
    assert!(r.cps.unwrap() > 0.0, "{r:?}");
    assert_eq!(r.workload, "W1");
    assert_eq!(r.conns, Some(10));
    assert!(r.cpu_us_per_op.is_some());
    assert!(r.rps.is_none());
}

#[test]
fn w1_counts_corrupted_responses_as_errors() {
    let mut p = FakePair::new(4, true);
    let r = run_w1(&mut p, &cfg(4));
    assert!(r.errors > 0, "{r:?}");
    assert_eq!(r.cps, Some(0.0));
    assert!(r.cpu_us_per_op.is_none());
}

#[test]
fn w2_loops_requests_without_errors() {
    let mut p = FakePair::new(8, false);
    let r = run_w2(&mut p, &cfg_ok(8));
    assert_eq!(r.errors, 0);
    assert!(r.rps.unwrap() > 0.0, "{r:?}");
    assert!(r.p50_us.is_some() && r.p99_us >= r.p50_us);
}

#[test]
fn w2_counts_corrupted_responses_as_errors() {
    let mut p = FakePair::new(3, true);
    let r = run_w2(&mut p, &cfg(3));
    assert!(r.errors > 0, "{r:?}");
    assert_eq!(r.rps, Some(0.0));
}

#[test]
fn stalled_flows_are_counted_not_hidden() {
    // A zero window: nothing ever moves, every flow stalls after opening.
    let mut p = FakePair::new(5, false);
    p.window = 0;
    let mut c = RunCfg::new(5, 1.3);
    c.warmup = 0.0;
    let r = run_w1(&mut p, &c);
    assert_eq!(r.errors, 5, "{r:?}");
    assert_eq!(r.cps, Some(0.0));
}
