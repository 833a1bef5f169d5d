//! AF_PACKET TCP super-frames (GSO) on a real veth (root only; skipped otherwise): a
//! 10,000-byte TCP frame with `TX_TCP_SEG` and a 1,000-byte segment size leaves as ten
//! wire frames, each with its own sequence number, IP total length and id, valid IPv4 and
//! TCP checksums, the options of the super-frame, and its share of the payload; a plain
//! frame sent between two super-frames keeps its place; a port without GSO offers none.
//! The veth lives in a private namespace (`sqp-gso`, offloads off as in the lab) that the
//! test creates and always removes.

use std::time::{Duration, Instant};

mod common;
use common::VethNs;

use squall_port::afpacket::{AfPacketConfig, AfPacketPort};
use squall_port::{FrameBuf, Offload, OffloadFlags, Port};

/// RFC 1071 sum of `d` added to `acc` (unfolded).
fn sum(mut acc: u32, d: &[u8]) -> u32 {
    for c in d.chunks(2) {
        acc += u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0));
    }
    acc
}

fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

const SRC: [u8; 4] = [198, 18, 16, 1];
const DST: [u8; 4] = [198, 18, 48, 1];

/// Pseudo-header sum (unfolded) for `tcp_len` bytes of TCP.
fn pseudo(tcp_len: usize) -> u32 {
    sum(sum(6 + tcp_len as u32, &SRC), &DST)
}

/// Writes an IPv4 TCP frame into `d`: headers with a 12-byte timestamp option, seq
/// `seq`, the payload, and (`partial`) only the pseudo-header sum in the TCP checksum,
/// as a port completes it, or the full checksums.
fn tcp_frame(d: &mut [u8], seq: u32, payload: &[u8], partial: bool) -> usize {
    let tcp_len = 32 + payload.len();
    let len = 14 + 20 + tcp_len;
    d[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    d[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    d[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut d[14..34];
    ip.fill(0);
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((20 + tcp_len) as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&100u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&SRC);
    ip[16..20].copy_from_slice(&DST);
    let c = !fold(sum(0, ip));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let t = &mut d[34..len];
    t[..32].fill(0);
    t[0..2].copy_from_slice(&1025u16.to_be_bytes());
    t[2..4].copy_from_slice(&80u16.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[8..12].copy_from_slice(&7u32.to_be_bytes());
    t[12] = 8 << 4;
    t[13] = 0x18; // PSH | ACK
    t[14..16].copy_from_slice(&65535u16.to_be_bytes());
    t[20..32].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 42, 0, 0, 0, 9]);
    t[32..].copy_from_slice(payload);
    let c = if partial {
        fold(pseudo(tcp_len))
    } else {
        !fold(sum(pseudo(tcp_len), t))
    };
    t[16..18].copy_from_slice(&c.to_be_bytes());
    len
}

#[test]
fn a_tcp_super_frame_leaves_as_segments_with_their_own_headers() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        squall_port::lab::skipped("needs root (namespaces, AF_PACKET)");
        return;
    }
    let Some(ns) = VethNs::up("sqp-gso", "g0", "g1", true) else {
        squall_port::lab::skipped("cannot create the namespace and its veth (ip, ethtool)");
        return;
    };
    ns.enter();
    let mut a = AfPacketPort::open(AfPacketConfig::new("g0")).expect("open g0");
    let mut b = AfPacketPort::open(AfPacketConfig {
        gso: false,
        ..AfPacketConfig::new("g1")
    })
    .expect("open g1");
    assert!(a.tso_max() >= 65_000, "{}", a.tso_max());
    assert_eq!(b.tso_max(), 0, "no GSO, no super-frames");
    assert!(b.alloc_tso().is_none());

    let payload: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut out = Vec::new();
    // Super-frame 1 (10 x 1,000 bytes), a plain frame, super-frame 2 (2,500 bytes: 3
    // segments, the last short).
    for (k, (seq, body)) in [
        (1000u32, &payload[..]),
        (20_000, &payload[..300]),
        (30_000, &payload[..2500]),
    ]
    .into_iter()
    .enumerate()
    {
        let mut f = if k == 1 {
            let mut v = Vec::new();
            assert_eq!(a.alloc_tx(&mut v, 1), 1);
            v.pop().unwrap()
        } else {
            a.alloc_tso().expect("a super-frame slot")
        };
        f.set_len(14 + 20 + 32 + body.len()).unwrap();
        let n = tcp_frame(f.data_mut(), seq, body, k != 1);
        f.set_len(n).unwrap();
        if k != 1 {
            f.set_offload(Offload {
                flags: OffloadFlags::TX_TCP_SEG,
                l2_len: 14,
                l3_len: 20,
                tso_mss: 1000,
            });
        }
        out.push(f);
    }
    assert_eq!(a.tx_burst(&mut out), 3);
    let mut rx = Vec::new();
    let t0 = Instant::now();
    while rx.len() < 14 && t0.elapsed() < Duration::from_secs(3) {
        b.rx_burst(&mut rx, 64);
    }
    assert_eq!(rx.len(), 14, "10 + 1 + 3 wire frames");
    let mut ids = Vec::new();
    let mut got: Vec<(u32, Vec<u8>)> = Vec::new();
    for f in &rx {
        let d = f.data();
        assert!(d.len() <= 1514, "a wire frame: {}", d.len());
        let ip = &d[14..34];
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        assert_eq!(total + 14, d.len());
        assert_eq!(fold(sum(0, ip)), 0xffff, "IPv4 checksum");
        ids.push(u16::from_be_bytes([ip[4], ip[5]]));
        let t = &d[34..];
        assert_eq!(fold(sum(pseudo(t.len()), t)), 0xffff, "TCP checksum");
        assert_eq!(t[12] >> 4, 8, "options kept");
        assert_eq!(&t[20..32], &[1, 1, 8, 10, 0, 0, 0, 42, 0, 0, 0, 9]);
        got.push((
            u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
            t[32..].to_vec(),
        ));
    }
    let seqs: Vec<u32> = got.iter().map(|g| g.0).collect();
    let mut want: Vec<u32> = (0..10).map(|i| 1000 + i * 1000).collect();
    want.push(20_000);
    want.extend([30_000, 31_000, 32_000]);
    assert_eq!(
        seqs, want,
        "segments in order, the plain frame in its place"
    );
    let first: Vec<u8> = got[..10].iter().flat_map(|g| g.1.clone()).collect();
    assert_eq!(first, payload, "the payload, cut in order");
    assert_eq!(got[10].1, payload[..300]);
    assert_eq!(got[13].1.len(), 500, "the last segment is short");
    assert!(
        ids[..10].windows(2).all(|w| w[1] == w[0].wrapping_add(1)),
        "{ids:?}"
    );
    b.release_all(&mut rx);
    assert_eq!(a.stats().tx_frames, 3);
}
