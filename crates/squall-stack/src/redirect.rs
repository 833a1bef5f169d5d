//! Software redirect between the workers of one port, for ports whose hardware cannot put
//! each flow's frames on the queue of the core that owns the flow (one queue, or a hash
//! Squall cannot steer). Every worker owns the flows one port number names (`port % N`,
//! the rule of `squall_astf::alloc`): for a flow this node accepted (its local port is one
//! an app serves) the peer's port through the hash of `squall_port::fanout::peer_port_owner`
//! (the server side's fanout rule), otherwise the node's own port — the source port the
//! client core chose. A worker that receives a frame of another worker's flow copies it
//! into a single-producer ring towards that worker and counts it; the owner takes it in
//! at its next turn as if its own port had received it. With RSS steering in place the
//! count stays zero. Datagrams reassembled from fragments (any size) go to their owner
//! whole through a bounded channel per worker, beside the rings.

use squall_port::frame::OffloadFlags;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use squall_port::ring::{ring, Consumer, Producer};

/// Reassembled datagrams a worker's channel holds (more are dropped, counted).
const WHOLE_DEPTH: usize = 256;

/// Bytes a redirected frame may have (an MTU-1500 frame with a VLAN tag fits; larger
/// frames are counted `too_big` and dropped).
pub const PARCEL_BYTES: usize = 2040;

/// One redirected frame.
#[derive(Clone, Copy)]
pub struct Parcel {
    len: u16,
    /// The frame's receive offload flags (its checksum verdict).
    flags: OffloadFlags,
    bytes: [u8; PARCEL_BYTES],
}

impl Parcel {
    /// The frame's bytes.
    pub fn data(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// Counters of one worker's redirects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RedirectStats {
    /// Frames handed to another worker.
    pub sent: u64,
    /// Frames taken in from other workers.
    pub received: u64,
    /// Frames dropped because the ring to their owner was full.
    pub dropped_full: u64,
    /// Frames too large for a parcel (dropped).
    pub too_big: u64,
    /// Reassembled datagrams handed to their owner, and taken in from other workers.
    pub whole_sent: u64,
    pub whole_received: u64,
    /// Reassembled datagrams dropped: the owner's channel full.
    pub whole_dropped: u64,
}

impl RedirectStats {
    /// Frames and reassembled datagrams handed to other workers.
    pub fn handed(&self) -> u64 {
        self.sent + self.whole_sent
    }
    /// Frames and reassembled datagrams taken in from other workers.
    pub fn taken(&self) -> u64 {
        self.received + self.whole_received
    }
    /// Frames and reassembled datagrams dropped on the way.
    pub fn dropped(&self) -> u64 {
        self.dropped_full + self.too_big + self.whole_dropped
    }
}

/// One worker's ends of the redirect mesh.
pub struct Redirect {
    me: u32,
    n: u32,
    /// `to[k]`: the ring towards worker `k` (none towards itself).
    to: Vec<Option<Producer<Parcel>>>,
    /// Rings from the other workers.
    from: Vec<Consumer<Parcel>>,
    /// `whole_to[k]`: the channel of reassembled datagrams towards worker `k`.
    whole_to: Vec<Option<SyncSender<Vec<u8>>>>,
    /// Reassembled datagrams from the other workers.
    whole_from: Receiver<Vec<u8>>,
    pub stats: RedirectStats,
}

/// The redirect ends of `n` workers, each ring `depth` frames deep.
pub fn mesh(n: u32, depth: usize) -> Vec<Redirect> {
    let n = n.max(1);
    let (whole_tx, whole_rx): (Vec<_>, Vec<_>) = (0..n).map(|_| sync_channel(WHOLE_DEPTH)).unzip();
    let mut ws: Vec<Redirect> = whole_rx
        .into_iter()
        .zip(0..n)
        .map(|(whole_from, me)| Redirect {
            me,
            n,
            to: (0..n).map(|_| None).collect(),
            from: Vec::new(),
            whole_to: (0..n)
                .map(|k| (k != me).then(|| whole_tx[k as usize].clone()))
                .collect(),
            whole_from,
            stats: RedirectStats::default(),
        })
        .collect();
    for a in 0..n as usize {
        for b in 0..n as usize {
            if a != b {
                let (p, c) = ring(depth);
                ws[a].to[b] = Some(p);
                ws[b].from.push(c);
            }
        }
    }
    ws
}

/// The worker (of `n`) that owns an IPv4 or IPv6 TCP or UDP frame, by the port rule;
/// `None` for other frames (they stay where they arrived: fragments too, so that a
/// datagram's fragments meet in one worker's reassembly, which hands the whole datagram to
/// its owner). `serves(proto, port)` says
/// whether an app of the node accepts flows on a local port. An IPv6 frame with TCP or
/// UDP right after its fixed header is read in place (the fanout program's rule); behind
/// extension headers the bounded walk of [`crate::ipv6::check`] finds the ports.
pub fn owner(frame: &[u8], n: u32, serves: impl Fn(u8, u16) -> bool) -> Option<u32> {
    let (proto, l4) = match frame.get(12..14)? {
        [0x08, 0x00] if frame.len() >= 14 + 20 + 4 => {
            if frame[20] & 0x3f != 0 || frame[21] != 0 {
                return None;
            }
            (frame[23], 14 + usize::from(frame[14] & 0x0f) * 4)
        }
        [0x86, 0xdd] if frame.len() >= 14 + 40 + 4 => match frame[20] {
            p @ (6 | 17) => (p, 14 + 40),
            _ => {
                let ip = crate::ipv6::check(frame)
                    .ok()
                    .filter(|i| i.frag_at.is_none())?;
                (ip.proto.0, ip.l4.0)
            }
        },
        _ => return None,
    };
    if proto != 6 && proto != 17 {
        return None;
    }
    let port = |o: usize| -> Option<u16> {
        Some(u16::from_be_bytes([*frame.get(o)?, *frame.get(o + 1)?]))
    };
    let (sport, dport) = (port(l4)?, port(l4 + 2)?);
    Some(if serves(proto, dport) {
        squall_port::fanout::peer_port_owner(sport, n)
    } else {
        u32::from(dport) % n.max(1)
    })
}

impl Redirect {
    /// This worker's index.
    pub fn worker(&self) -> u32 {
        self.me
    }

    /// Workers in the mesh.
    pub fn workers(&self) -> u32 {
        self.n
    }

    /// Copies `frame` and its receive offload `flags` towards worker `to` (published at
    /// [`Redirect::publish`]).
    pub fn send(&mut self, to: u32, frame: &[u8], flags: OffloadFlags) {
        let Some(Some(p)) = self.to.get_mut(to as usize) else {
            return;
        };
        if frame.len() > PARCEL_BYTES {
            self.stats.too_big += 1;
            return;
        }
        let mut parcel = Parcel {
            len: frame.len() as u16,
            flags: OffloadFlags(flags.0 & OffloadFlags::RX_MASK.0),
            bytes: [0; PARCEL_BYTES],
        };
        parcel.bytes[..frame.len()].copy_from_slice(frame);
        if p.push(parcel).is_ok() {
            self.stats.sent += 1;
        } else {
            self.stats.dropped_full += 1;
        }
    }

    /// Hands reassembled datagram `frame` (any size) to worker `to`.
    pub fn send_whole(&mut self, to: u32, frame: Vec<u8>) {
        let Some(Some(tx)) = self.whole_to.get(to as usize) else {
            return;
        };
        match tx.try_send(frame) {
            Ok(()) => self.stats.whole_sent += 1,
            Err(_) => self.stats.whole_dropped += 1,
        }
    }

    /// Takes in the reassembled datagrams other workers handed to this one.
    pub fn receive_whole(&mut self, out: &mut Vec<Vec<u8>>) -> usize {
        let before = out.len();
        out.extend(self.whole_from.try_iter().take(WHOLE_DEPTH));
        let n = out.len() - before;
        self.stats.whole_received += n as u64;
        n
    }

    /// Makes the frames sent so far visible to their owners.
    pub fn publish(&mut self) {
        for p in self.to.iter_mut().flatten() {
            p.publish();
        }
    }

    /// Hands up to `max` frames redirected to this worker to `take`; returns how many.
    pub fn receive(&mut self, max: usize, mut take: impl FnMut(&[u8], OffloadFlags)) -> usize {
        let mut n = 0;
        for c in &mut self.from {
            while n < max {
                let Some(p) = c.pop() else { break };
                take(p.data(), p.flags);
                n += 1;
            }
            c.publish();
        }
        self.stats.received += n as u64;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(sport: u16, dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 54];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = 6;
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f
    }

    /// A reassembled datagram goes whole, whatever its size; a full channel drops and
    /// counts.
    #[test]
    fn whole_datagrams_of_any_size_reach_their_worker() {
        let mut m = mesh(2, 4);
        let mut w1 = m.pop().unwrap();
        let mut w0 = m.pop().unwrap();
        let big: Vec<u8> = (0..9_000u32).map(|i| i as u8).collect();
        w0.send_whole(1, big.clone());
        w0.send_whole(0, big.clone()); // (to itself: no channel)
        let mut got = Vec::new();
        assert_eq!(w1.receive_whole(&mut got), 1);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0], big);
        for _ in 0..WHOLE_DEPTH + 3 {
            w0.send_whole(1, vec![1]);
        }
        let s = w0.stats;
        assert_eq!((s.whole_sent, s.whole_dropped), (1 + WHOLE_DEPTH as u64, 3));
        got.clear();
        assert_eq!(w1.receive_whole(&mut got), WHOLE_DEPTH);
        assert_eq!(
            (w1.stats.whole_received, w1.stats.taken()),
            (1 + WHOLE_DEPTH as u64, 1 + WHOLE_DEPTH as u64)
        );
    }

    #[test]
    fn the_owner_is_named_by_our_port_or_by_the_peer_port_of_served_flows() {
        let serves = |_p: u8, port: u16| port == 80;
        // A reply to our client port 1001: worker 1001 % 4.
        assert_eq!(owner(&tcp(80, 1001), 4, serves), Some(1));
        // A request to our server port 80 from peer port 5002: by the peer-port hash.
        assert_eq!(
            owner(&tcp(5002, 80), 4, serves),
            Some(squall_port::fanout::peer_port_owner(5002, 4))
        );
        // IPv6: TCP right after the fixed header, and behind a destination-options header.
        let mut v6 = vec![0u8; 14 + 40 + 8 + 20];
        v6[12..14].copy_from_slice(&[0x86, 0xdd]);
        v6[14] = 0x60;
        v6[18..20].copy_from_slice(&28u16.to_be_bytes());
        v6[20] = 6;
        v6[21] = 64;
        v6[54..56].copy_from_slice(&5002u16.to_be_bytes());
        v6[56..58].copy_from_slice(&80u16.to_be_bytes());
        let want = Some(squall_port::fanout::peer_port_owner(5002, 4));
        assert_eq!(owner(&v6, 4, serves), want);
        v6[54..56].copy_from_slice(&80u16.to_be_bytes());
        v6[56..58].copy_from_slice(&1001u16.to_be_bytes());
        assert_eq!(owner(&v6, 4, serves), Some(1));
        let mut ext = v6.clone();
        ext[20] = 60; // destination options: next TCP, length 0 (8 bytes), PadN
        ext[54..62].copy_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]);
        ext[62..64].copy_from_slice(&5002u16.to_be_bytes());
        ext[64..66].copy_from_slice(&80u16.to_be_bytes());
        assert_eq!(owner(&ext, 4, serves), want);
        ext[20] = 58; // ICMPv6 stays where it arrived
        assert_eq!(owner(&ext, 4, serves), None);
        let mut arp = tcp(1, 2);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(owner(&arp, 4, serves), None);
        assert_eq!(owner(&[0u8; 20], 4, serves), None);
        // IPv6, TCP right after the fixed header: the same rule.
        let v6 = |sport: u16, dport: u16, next: u8| {
            let mut f = vec![0u8; 74];
            f[12..14].copy_from_slice(&[0x86, 0xdd]);
            f[14] = 0x60;
            f[20] = next;
            f[54..56].copy_from_slice(&sport.to_be_bytes());
            f[56..58].copy_from_slice(&dport.to_be_bytes());
            f
        };
        assert_eq!(owner(&v6(80, 1001, 6), 4, serves), Some(1));
        assert_eq!(
            owner(&v6(5002, 80, 17), 4, serves),
            Some(squall_port::fanout::peer_port_owner(5002, 4))
        );
        assert_eq!(owner(&v6(80, 1001, 58), 4, serves), None, "ICMPv6 stays");
        assert_eq!(owner(&v6(80, 1001, 6)[..57], 4, serves), None, "too short");
    }

    #[test]
    fn frames_reach_their_owner_in_order_and_are_counted() {
        let mut ws = mesh(3, 4);
        let f1 = tcp(1, 2);
        let f2 = tcp(3, 4);
        ws[0].send(2, &f1, OffloadFlags::NONE);
        ws[0].send(
            2,
            &f2,
            OffloadFlags::RX_L4_CSUM_GOOD | OffloadFlags::TX_TCP_CSUM,
        );
        ws[0].send(0, &f1, OffloadFlags::NONE); // to itself: nothing
        ws[0].publish();
        let mut got = Vec::new();
        let mut flags = Vec::new();
        assert_eq!(
            ws[2].receive(16, |d, f| {
                got.push(d.to_vec());
                flags.push(f)
            }),
            2
        );
        // The receive verdict travels with the frame; transmit flags do not.
        assert_eq!(flags, [OffloadFlags::NONE, OffloadFlags::RX_L4_CSUM_GOOD]);
        assert_eq!(got, vec![f1.clone(), f2]);
        assert_eq!(ws[0].stats.sent, 2);
        assert_eq!(ws[2].stats.received, 2);
        assert_eq!(ws[1].receive(16, |_, _| {}), 0);
        for _ in 0..5 {
            ws[1].send(0, &f1, OffloadFlags::NONE);
        }
        assert_eq!(ws[1].stats.dropped_full, 1, "ring of 4");
        ws[1].send(0, &vec![0u8; PARCEL_BYTES + 1], OffloadFlags::NONE);
        assert_eq!(ws[1].stats.too_big, 1);
    }
}
