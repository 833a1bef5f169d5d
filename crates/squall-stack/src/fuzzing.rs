//! Harness shared by the `node` fuzz target (`fuzz/`) and the random-input test: arbitrary
//! frames, some patched into shapes the node takes further (its MAC and addresses, a right
//! IPv4 header checksum, IPv4 or IPv6 fragments), received by a node over the in-memory
//! wire with small reassembly limits, its next hop followed and probed, turn after turn
//! on a clock that moves. A panic is a
//! bug: the demux and the reassembly must take any frame, and the reassembly's bounds and
//! accounting must hold. Not part of the stable API.

use squall_port::mem::{pair, MemConfig, MemPort};
use squall_port::{FrameBuf, Port};
use squall_tcp::TcpConfig;
use squall_wire::checksum;

use crate::reasm::{ReasmConfig, ReasmStats, Reassembly};
use crate::{NoApp, Node, NodeConfig, Owned, Owned6};

const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const PEER: [u8; 6] = [2, 0, 0, 0, 0, 2];
/// 198.18.0.1
const IP: [u8; 4] = [198, 18, 0, 1];
/// 2001:db8::1
const IP6: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const LIMITS: ReasmConfig = ReasmConfig {
    max_datagrams: 8,
    max_bytes: 32 << 10,
    timeout4_ns: 1_000_000,
    timeout6_ns: 2_000_000,
};

/// Runs the node on the frames of `data`: records of a control byte, a length byte pair
/// (little-endian, at most 1,500) and the frame's bytes. Control bits: 0 the frame is to
/// the node's MAC, 1 to its IPv4 or IPv6 address, 2-3 its EtherType made IPv4 (1) or
/// IPv6 (2), 4 its IPv4 header made valid (version, lengths, checksum) or its IPv6
/// payload length right, 5 made a fragment (IPv4: offset and MF from the frame's own
/// bytes; IPv6: a fragment header inserted), 6 the clock moves 0.5 ms after it, 7 the
/// node turns after it. Returns the reassembly's counters.
pub fn node(data: &[u8]) -> ReasmStats {
    // (small pools and tables: built anew for every input)
    let wire = MemConfig {
        frames: 256,
        ring_size: 256,
        ..MemConfig::default()
    };
    let Ok((port, mut raw)) = pair(wire) else {
        return ReasmStats::default();
    };
    let tcp = TcpConfig {
        mac: MAC,
        gateway_mac: PEER,
        max_flows: 64,
        ..TcpConfig::default()
    };
    let ip = u32::from_be_bytes(IP);
    let ip6 = u128::from_be_bytes(IP6);
    let cfg = NodeConfig {
        owned: Owned(vec![(ip, ip)]),
        owned6: Owned6(vec![(ip6, ip6)]),
        max_udp_flows: 8,
        ..NodeConfig::default()
    };
    let mut n = Node::new(port, tcp, cfg, 0);
    n.reasm = Reassembly::new(LIMITS);
    let mut now = 1_000u64;
    // A followed next hop of each family (198.18.0.2, 2001:db8::2), watched with a
    // reachable time of 1 ms: probes go out as the clock moves, and ARP or neighbour
    // discovery among the frames may move it.
    let mut peer6 = IP6;
    peer6[15] = 2;
    n.follow_next_hop(ip + 1);
    n.follow_next_hop6(squall_wire::Ipv6Address(peer6));
    n.probe_next_hop(
        now,
        1_000_000,
        Some(ip),
        Some(squall_wire::Ipv6Address(IP6)),
    );
    let mut rest = data;
    while let [ctl, a, b, tail @ ..] = rest {
        let len = usize::from(u16::from_le_bytes([*a, *b])).min(1_500);
        let (bytes, after) = tail.split_at(len.min(tail.len()));
        rest = after;
        let f = shape(*ctl, bytes);
        let mut v = Vec::new();
        if raw.alloc_tx(&mut v, 1) == 1 {
            let mut fr = v.pop().expect("one frame");
            if fr.set_len(f.len()).is_ok() {
                fr.data_mut().copy_from_slice(&f);
                v.push(fr);
                raw.tx_burst(&mut v);
            }
            raw.release_all(&mut v);
        }
        if ctl & 0x40 != 0 {
            now += 500_000;
        }
        if ctl & 0x80 != 0 {
            turn(&mut n, &mut raw, now);
        }
    }
    turn(&mut n, &mut raw, now);
    let s = n.reasm.stats;
    assert!(
        s.reassembled + s.dropped() + s.duplicates <= s.fragments,
        "{s:?}"
    );
    // Every datagram in reassembly times out.
    turn(&mut n, &mut raw, now + 10_000_000);
    assert_eq!((n.reasm.pending(), n.reasm.held()), (0, 0));
    n.reasm.stats
}

/// One turn; the node's answers drained; the reassembly's bounds checked.
fn turn(n: &mut Node<MemPort>, raw: &mut MemPort, now: u64) {
    n.turn(now, &mut NoApp, None);
    let mut v = Vec::new();
    while raw.rx_burst(&mut v, 64) > 0 {
        raw.release_all(&mut v);
    }
    let r = &n.reasm;
    assert!(r.pending() <= LIMITS.max_datagrams && r.held() <= LIMITS.max_bytes);
    assert!(r.pending() > 0 || r.held() == 0);
}

/// The frame of `bytes` patched as control byte `ctl` says ([`node`]).
fn shape(ctl: u8, bytes: &[u8]) -> Vec<u8> {
    let mut f = bytes.to_vec();
    if f.len() < 14 {
        return f;
    }
    if ctl & 1 != 0 {
        f[..6].copy_from_slice(&MAC);
    }
    let v6 = match (ctl >> 2) & 3 {
        1 => {
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            false
        }
        2 => {
            f[12..14].copy_from_slice(&[0x86, 0xdd]);
            true
        }
        _ => f[12..14] == [0x86, 0xdd],
    };
    if v6 {
        if f.len() < 54 {
            return f;
        }
        f[14] = 0x60 | (f[14] & 0x0f);
        if ctl & 2 != 0 {
            f[38..54].copy_from_slice(&IP6);
        }
        if ctl & 0x20 != 0 && f.len() >= 62 {
            // a fragment header right after the fixed header, from the frame's own bytes
            let nh = f[20];
            f[20] = 44;
            f[54] = nh;
        }
        if ctl & 0x10 != 0 {
            let plen = (f.len() - 54) as u16;
            f[18..20].copy_from_slice(&plen.to_be_bytes());
        }
        return f;
    }
    if f[12..14] != [0x08, 0x00] || f.len() < 34 {
        return f;
    }
    if ctl & 2 != 0 {
        f[30..34].copy_from_slice(&IP);
    }
    if ctl & 0x20 != 0 {
        // keep the frame's offset bits, set MF or not from its own bit
        f[20] &= 0x3f;
        if f[20] == 0 && f[21] == 0 {
            f[20] = 0x20;
        }
    }
    if ctl & 0x10 != 0 {
        let ihl = (usize::from(f[14] & 0x0f) * 4).clamp(20, (f.len() - 14) & !3);
        f[14] = 0x40 | (ihl / 4) as u8;
        let total = (f.len() - 14) as u16;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        f[24..26].copy_from_slice(&[0, 0]);
        let sum = !checksum::sum(&f[14..14 + ihl]);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
    }
    f
}
