//! Frames and wire helpers the node's integration tests share: the two hosts' MACs and
//! addresses, frames written into the in-memory wire by hand and read off it, and the
//! ARP, ICMPv6 and UDP frames a peer sends.
#![allow(dead_code)]

use squall_port::mem::MemPort;
use squall_port::{FrameBuf, Port};
use squall_wire::{ArpRepr, Icmpv6Repr, Ipv4Address, Ipv6Address, MacAddress, RouterAdvert};

pub const MA: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
pub const MB: [u8; 6] = [2, 0, 0, 0, 0, 0xb];
pub const IP_A: u32 = 0xc612_0001; // 198.18.0.1
pub const IP_B: u32 = 0xc612_0002; // 198.18.0.2
pub const IP6_A: &str = "2001:db8::1";

pub fn ip6(s: &str) -> Ipv6Address {
    s.parse().unwrap()
}

/// An ARP request from `mac` / `sender` for `target`, as a 60-byte frame.
pub fn arp_request_from(mac: [u8; 6], sender: u32, target: u32) -> [u8; 60] {
    let r = ArpRepr::request(
        MacAddress(mac),
        Ipv4Address(sender.to_be_bytes()),
        Ipv4Address(target.to_be_bytes()),
    );
    let mut buf = [0u8; 60];
    squall_stack::neigh::emit_frame(&r, mac, &mut buf).unwrap();
    buf
}

/// Writes `bytes` into the wire as one frame.
pub fn raw_frame(port: &mut MemPort, bytes: &[u8]) {
    let mut v = Vec::new();
    assert_eq!(port.alloc_tx(&mut v, 1), 1);
    let mut f = v.pop().unwrap();
    f.set_len(bytes.len()).unwrap();
    f.data_mut().copy_from_slice(bytes);
    v.push(f);
    assert_eq!(port.tx_burst(&mut v), 1);
}

/// One burst (at most 64 frames) off the wire.
pub fn raw_rx(port: &mut MemPort) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    port.rx_burst(&mut v, 64);
    let out = v.iter().map(|f| f.data().to_vec()).collect();
    port.release_all(&mut v);
    out
}

/// An ICMPv6 frame from MB.
pub fn icmp6_frame(
    dst_mac: [u8; 6],
    src: Ipv6Address,
    dst: Ipv6Address,
    hl: u8,
    m: &Icmpv6Repr<'_>,
) -> Vec<u8> {
    let mut b = vec![0u8; 1600];
    let n = squall_stack::neigh6::emit_icmpv6_frame(&mut b, dst_mac, MB, src, dst, hl, m).unwrap();
    b.truncate(n);
    b
}

/// A UDP datagram from MB (`src` -> `dst`, ports 4000 -> `dport`) to `dst_mac`: IPv4
/// without a UDP checksum (RFC 768 allows it), IPv6 with one.
pub fn udp_frame(dst_mac: [u8; 6], src: &[u8], dst: &[u8], dport: u16, data: &[u8]) -> Vec<u8> {
    let v6 = src.len() == 16;
    let ulen = 8 + data.len();
    let mut f = vec![0u8; 14 + if v6 { 40 } else { 20 } + ulen];
    f[0..6].copy_from_slice(&dst_mac);
    f[6..12].copy_from_slice(&MB);
    let l4 = if v6 {
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        let ip = &mut f[14..54];
        ip[0] = 0x60;
        ip[4..6].copy_from_slice(&(ulen as u16).to_be_bytes());
        ip[6] = 17;
        ip[7] = 64;
        ip[8..24].copy_from_slice(src);
        ip[24..40].copy_from_slice(dst);
        54
    } else {
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((20 + ulen) as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(src);
        ip[16..20].copy_from_slice(dst);
        let c = squall_wire::checksum::checksum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        34
    };
    let u = &mut f[l4..];
    u[0..2].copy_from_slice(&4000u16.to_be_bytes());
    u[2..4].copy_from_slice(&dport.to_be_bytes());
    u[4..6].copy_from_slice(&(ulen as u16).to_be_bytes());
    u[8..].copy_from_slice(data);
    if v6 {
        let (s, d): ([u8; 16], [u8; 16]) = (src.try_into().unwrap(), dst.try_into().unwrap());
        let acc = squall_wire::checksum::pseudo_header_ipv6_acc(&s, &d, 17, ulen);
        let c = !squall_wire::checksum::fold(squall_wire::checksum::accumulate(acc, u));
        u[6..8].copy_from_slice(&c.to_be_bytes());
    }
    f
}

/// A router advertisement from `src` at `mac` (its frame's source and its option).
pub fn router_advert_from(src: &str, mac: [u8; 6], lifetime: u16) -> Vec<u8> {
    let all = Ipv6Address::LINK_LOCAL_ALL_NODES;
    let ra = Icmpv6Repr::RouterAdvert(RouterAdvert {
        hop_limit: 64,
        flags: 0,
        router_lifetime: lifetime,
        reachable_time: 0,
        retrans_timer: 0,
        source_mac: Some(MacAddress(mac)),
        mtu: None,
        prefix: None,
    });
    let mut f = icmp6_frame(all.multicast_mac().0, ip6(src), all, 255, &ra);
    f[6..12].copy_from_slice(&mac);
    f
}
