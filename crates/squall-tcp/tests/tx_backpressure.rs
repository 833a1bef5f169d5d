//! TX backpressure: a TX sink that refuses frames when full (a NIC ring) must not cost
//! retransmissions. Flows whose output stopped on a full sink (SYN, SYN-ACK, data, pure
//! ACKs) resume at the next `TcpHost::poll` / `tx_resume` once the ring has room; every
//! byte is verified by the common W1 client and server.

mod common;
use common::wire;
use common::*;
use squall_tcp::{OptsId, TcpHost, TxSink};

/// A bounded FIFO of frames: `alloc` fails once `limit` frames wait.
struct Ring {
    cur: Vec<u8>,
    frames: Vec<Vec<u8>>,
    limit: usize,
}
impl Ring {
    fn new(limit: usize) -> Self {
        Ring {
            cur: Vec::new(),
            frames: Vec::new(),
            limit,
        }
    }
}
impl TxSink for Ring {
    fn alloc(&mut self, len: usize) -> Option<&mut [u8]> {
        if self.frames.len() >= self.limit {
            return None;
        }
        self.cur.clear();
        self.cur.resize(len, 0);
        Some(&mut self.cur[..])
    }
    fn commit(&mut self, len: usize) {
        self.frames.push(self.cur[..len].to_vec());
    }
}

/// Runs `n` W1 flows over `fam`, `conc` at a time, with no loss, over a client->server
/// ring of `climit` frames and a server->client ring of `slimit` frames.
fn run(
    fam: Family,
    n: u32,
    conc: u32,
    climit: usize,
    slimit: usize,
) -> (W1Client, W1Server, TcpHost, TcpHost) {
    let mut now = 1_000_000_000u64;
    let W1Pair {
        mut ch,
        mut sh,
        mut capp,
        mut sapp,
    } = w1_pair(w1_config(), n + conc + 16, 0, now);
    let mut cq = Ring::new(climit);
    let mut sq = Ring::new(slimit);
    let mut next = 0u32;
    let deadline = now + 3_600_000_000_000;
    while (capp.done < n as u64 || sapp.done < n as u64) && now < deadline {
        while next < n && (next as u64) < capp.done + conc as u64 && cq.frames.len() < climit {
            let local = (client_ip(next), client_port(next));
            let f = fam
                .connect(
                    &mut ch,
                    now,
                    &mut cq,
                    local,
                    (SERVER_IP, 80),
                    OptsId::DEFAULT,
                )
                .expect("connect");
            capp.started(f, next);
            next += 1;
        }
        for f in std::mem::take(&mut cq.frames) {
            sh.rx(now, &f, &mut sapp, &mut sq);
        }
        for f in std::mem::take(&mut sq.frames) {
            ch.rx(now, &f, &mut capp, &mut cq);
        }
        now += 1_000;
        if cq.frames.is_empty() && sq.frames.is_empty() {
            if let Some(t) = [ch.next_timer(), sh.next_timer()]
                .into_iter()
                .flatten()
                .min()
            {
                now = now.max(t);
            }
        }
        ch.poll(now, &mut capp, &mut cq);
        sh.poll(now, &mut sapp, &mut sq);
    }
    (capp, sapp, ch, sh)
}

per_family!(full_tx_ring_resumes_flows_without_retransmission);
fn full_tx_ring_resumes_flows_without_retransmission(fam: Family) {
    let (n, conc) = (300, 60);
    let (capp, sapp, ch, sh) = run(fam, n, conc, 3, 4);
    assert_eq!(capp.ok, n as u64, "client failures: {:?}", capp.failed);
    assert_eq!(sapp.ok, n as u64, "server failures: {:?}", sapp.failed);
    let (c, s) = (ch.counters(), sh.counters());
    // The rings really were full on both sides (client: SYNs, ACKs, requests; server:
    // SYN-ACKs, data)...
    assert!(
        s.tcps_txfull > 0 && c.tcps_txfull > 0,
        "{} {}",
        s.tcps_txfull,
        c.tcps_txfull
    );
    // ...and no flow had to wait for a retransmission timeout to recover.
    assert_eq!(c.tcps_sndrexmitpack + s.tcps_sndrexmitpack, 0);
    assert_eq!(c.tcps_rexmttimeo + s.tcps_rexmttimeo, 0);
    assert_eq!(s.tcps_sndbyte, n as u64 * RESP_LEN as u64);
    // Runs of segments cut short by the full ring count only the segments that left.
    assert_eq!(s.tcps_sndpack, n as u64 * RESP_LEN.div_ceil(1460) as u64);
}

per_family!(ring_of_one_frame_still_completes);
fn ring_of_one_frame_still_completes(fam: Family) {
    let (capp, sapp, ch, sh) = run(fam, 20, 5, 1, 1);
    assert_eq!(capp.ok, 20, "client failures: {:?}", capp.failed);
    assert_eq!(sapp.ok, 20, "server failures: {:?}", sapp.failed);
    assert_eq!(
        ch.counters().tcps_sndrexmitpack + sh.counters().tcps_sndrexmitpack,
        0
    );
}

// A flow that found the sink full is served before the segments a later receive
// triggers: its SYN leaves first when a slot frees, the receiving flow's ACK waits.
per_family!(blocked_flow_goes_before_output_triggered_by_a_receive);
fn blocked_flow_goes_before_output_triggered_by_a_receive(fam: Family) {
    let now = 1_000_000_000u64;
    let W1Pair {
        mut ch,
        mut sh,
        mut capp,
        mut sapp,
    } = w1_pair(w1_config(), 64, 0, now);
    let mut cq = Ring::new(1);
    let mut sq = Ring::new(8);
    let seg = |f: &[u8]| {
        let s = wire::parse(f).expect("a valid frame");
        assert_eq!(s.family, fam);
        (s.src_port, s.flags)
    };
    let port = |f: &[u8]| seg(f).0;
    let flags = |f: &[u8]| seg(f).1;
    // A's SYN takes the only slot; B's SYN finds the sink full and waits.
    for k in 0..2 {
        let local = (client_ip(k), client_port(k));
        let d = OptsId::DEFAULT;
        let f = fam.connect(&mut ch, now, &mut cq, local, (SERVER_IP, 80), d);
        capp.started(f.expect("connect"), k);
    }
    assert_eq!(cq.frames.len(), 1);
    assert_eq!(ch.counters().tcps_txfull, 1);
    // A's SYN reaches the server; its SYN-ACK comes back to the client.
    for f in std::mem::take(&mut cq.frames) {
        sh.rx(now, &f, &mut sapp, &mut sq);
    }
    let synack = sq.frames.pop().expect("SYN-ACK");
    ch.rx(now, &synack, &mut capp, &mut cq);
    // The freed slot went to B's SYN, not to A's handshake ACK.
    assert_eq!(cq.frames.len(), 1);
    assert_eq!(flags(&cq.frames[0]), 0x02, "a SYN");
    assert_eq!(port(&cq.frames[0]), client_port(1));
    // A's ACK (and request) follow when the ring drains.
    cq.frames.clear();
    ch.tx_resume(now, &mut cq);
    assert_eq!(cq.frames.len(), 1);
    assert_eq!(port(&cq.frames[0]), client_port(0));
    assert_eq!(flags(&cq.frames[0]) & 0x10, 0x10, "A's ACK");
}
