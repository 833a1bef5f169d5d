//! AF_PACKET fanout on a real veth (root only; skipped otherwise): two worker sockets in
//! one fanout group on one interface receive exactly the frames whose port names them:
//! by destination port on the client side (`port % 2`), by the peer-port hash of the
//! source port on the server side (`peer_port_owner`); ARP goes to worker 0. The veth lives in a private namespace (`sqp-fan`, 198.18.0.0/15
//! addresses only) that the test creates and always removes.

mod common;

use squall_port::afpacket::{AfPacketConfig, AfPacketPort};
use squall_port::fanout::{peer_port_owner, Fanout, FanoutBy};
use squall_port::{FrameBuf, Port};

const SRC_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

/// An Ethernet + IPv4 + TCP frame 198.18.16.1:sport -> 198.19.48.1:dport (checksums are
/// not looked at on this path).
fn tcp_frame(sport: u16, dport: u16) -> Vec<u8> {
    let mut f = vec![0u8; 54];
    f[0..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&SRC_MAC);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&40u16.to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&[198, 18, 16, 1]);
    f[30..34].copy_from_slice(&[198, 19, 48, 1]);
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f[46] = 0x50;
    f
}

fn arp_frame() -> Vec<u8> {
    let mut f = vec![0u8; 42];
    f[0..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&SRC_MAC);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    f
}

/// Two worker sockets on `ifname` in a new fanout group steering `by`: the first makes
/// the group (the kernel picks its id), the second joins that id.
fn two_workers(ifname: &str, by: FanoutBy) -> Vec<AfPacketPort> {
    let mut group = None;
    let mut v = Vec::new();
    for _ in 0..2 {
        let mut c = AfPacketConfig::new(ifname);
        c.frames = 256;
        c.fanout = Some(Fanout {
            group,
            members: 2,
            by,
        });
        let p = AfPacketPort::open(c).expect("worker socket");
        group = p.fanout().expect("in a group").group;
        v.push(p);
    }
    assert_eq!(v[0].fanout(), v[1].fanout(), "both members of one group");
    v
}

/// Sends `frames` on fa0 and returns, per worker socket on fa1, the frames it got.
fn steer(by: FanoutBy, frames: &[Vec<u8>]) -> Vec<Vec<Vec<u8>>> {
    let mut workers = two_workers("fa1", by);
    let mut c = AfPacketConfig::new("fa0");
    c.frames = 256;
    let mut tx = AfPacketPort::open(c).expect("sender");
    let mut out = Vec::new();
    tx.alloc_tx(&mut out, frames.len());
    for (f, bytes) in out.iter_mut().zip(frames) {
        f.fill(bytes).unwrap();
    }
    let n = tx.tx_burst(&mut out);
    assert_eq!(n, frames.len());
    let mut got = vec![Vec::new(); 2];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while got.iter().map(Vec::len).sum::<usize>() < frames.len()
        && std::time::Instant::now() < deadline
    {
        for (k, w) in workers.iter_mut().enumerate() {
            let mut rx = Vec::new();
            w.rx_burst(&mut rx, 64);
            for f in rx.drain(..) {
                // Only the test's own frames (the kernel may send some of its own).
                if f.data()[6..12] == SRC_MAC {
                    got[k].push(f.data().to_vec());
                }
                w.release(f);
            }
        }
    }
    got
}

#[test]
fn each_worker_gets_the_frames_its_port_names() {
    common::in_veth_ns("sqp-fan", "fa0", "fa1", || {
        let port = |f: &[u8], at: usize| u16::from_be_bytes([f[at], f[at + 1]]);
        // Client side: replies 198.19.48.1:80 -> our source ports 1000..1010.
        let frames: Vec<Vec<u8>> = (1000..1010).map(|p| tcp_frame(80, p)).collect();
        let got = steer(FanoutBy::DstPort, &frames);
        for (k, fs) in got.iter().enumerate() {
            assert_eq!(fs.len(), 5, "worker {k}: {} frames", fs.len());
            assert!(fs.iter().all(|f| port(f, 36) as usize % 2 == k));
        }
        // Server side: by the peer's source port; ARP to worker 0.
        let mut frames: Vec<Vec<u8>> = (2001..2007).map(|p| tcp_frame(p, 80)).collect();
        frames.push(arp_frame());
        let got = steer(FanoutBy::SrcPort, &frames);
        let to1 = (2001..2007u16)
            .filter(|&p| peer_port_owner(p, 2) == 1)
            .count();
        assert!(to1 > 0 && to1 < 6, "the ports used here reach both workers");
        assert_eq!(got[0].len(), 6 - to1 + 1, "source ports of worker 0 + ARP");
        assert_eq!(got[1].len(), to1);
        assert!(got[1].iter().all(|f| peer_port_owner(port(f, 34), 2) == 1));
        assert!(got[0].iter().any(|f| f[12..14] == [0x08, 0x06]));
    });
}

/// Frames a worker sends leave through its super-frame socket, which is not in the
/// fanout group: the group ignores outgoing frames (`PACKET_FANOUT_FLAG_IGNORE_OUTGOING`),
/// so none comes back into a worker's ring (each would be a copy, then a drop).
#[test]
fn a_fanout_group_does_not_take_back_what_its_workers_send() {
    common::in_veth_ns("sqp-fano", "fo0", "fo1", || {
        let mut workers = two_workers("fo1", FanoutBy::DstPort);
        // A second group on the interface gets another id (no pid-derived collision).
        let other = two_workers("fo1", FanoutBy::SrcPort);
        assert_ne!(
            other[0].fanout().unwrap().group,
            workers[0].fanout().unwrap().group
        );
        let mut out = Vec::new();
        workers[0].alloc_tx(&mut out, 10);
        for (k, f) in out.iter_mut().enumerate() {
            f.fill(&tcp_frame(1000 + k as u16, 80)).unwrap();
        }
        assert_eq!(workers[0].tx_burst(&mut out), 10);
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(300);
        while std::time::Instant::now() < deadline {
            for w in workers.iter_mut() {
                let mut rx = Vec::new();
                w.rx_burst(&mut rx, 64);
                w.release_all(&mut rx);
            }
        }
        let back: u64 = workers.iter().map(|w| w.extra_stats().rx_outgoing).sum();
        assert_eq!(back, 0, "sent frames came back into the group");
    });
}
