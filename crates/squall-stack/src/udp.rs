//! UDP: datagrams checked and demultiplexed to flows (a 4-tuple table of the flows the
//! applications opened, each with the app that owns it), datagrams written in place into
//! the port's frames (Ethernet + IPv4 + UDP, both checksums). Applications keep their
//! per-flow state indexed by [`UdpFlowId`], as they do for TCP's `FlowId`.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use squall_tcp::TxSink;
use squall_wire::checksum;

use crate::ipv4::{self, Ipv4Error, IP_PROTO_UDP};
use crate::neigh::ETH_HLEN;

const IP_LEN: usize = 20;
const UDP_LEN: usize = 8;
/// Ethernet + IPv4 + UDP headers.
pub const HDRS_LEN: usize = ETH_HLEN + IP_LEN + UDP_LEN;
/// Largest UDP payload of an unfragmented IPv4 datagram.
pub const MAX_PAYLOAD: usize = 65_507;

/// A UDP flow's 4-tuple from the node's point of view (host order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdpKey {
    pub local_ip: u32,
    pub remote_ip: u32,
    pub local_port: u16,
    pub remote_port: u16,
}

impl Hash for UdpKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(u64::from(self.local_ip) << 32 | u64::from(self.remote_ip));
        h.write_u64(u64::from(self.local_port) << 16 | u64::from(self.remote_port));
    }
}

/// A multiplicative hasher for [`UdpKey`] (two words; no per-lookup setup).
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(26) ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A UDP flow: its index in the node's UDP table (reused after `close`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct UdpFlowId(pub u32);

/// A received datagram (host-order addresses and ports, payload in the frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Datagram<'a> {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub dport: u16,
    pub payload: &'a [u8],
}

impl Datagram<'_> {
    /// The flow key of this datagram at its receiver.
    pub fn key(&self) -> UdpKey {
        UdpKey {
            local_ip: self.dst,
            remote_ip: self.src,
            local_port: self.dport,
            remote_port: self.sport,
        }
    }
}

/// Why a UDP frame was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UdpError {
    /// Malformed headers or lengths, or a fragment.
    Header,
    /// IPv4 or UDP checksum.
    Checksum,
}

/// UDP counters of a node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdpStats {
    /// Datagrams delivered to an application.
    pub rx_delivered: u64,
    /// Bad checksum (IPv4 or UDP).
    pub rx_bad_sum: u64,
    /// Malformed or fragmented.
    pub rx_bad_hdr: u64,
    /// No flow and no application took the datagram.
    pub rx_no_port: u64,
    /// Datagrams sent.
    pub tx_datagrams: u64,
    /// Not sent: no TX frame, or the payload does not fit.
    pub tx_failed: u64,
    /// Flows refused: table full.
    pub no_flow_room: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    key: UdpKey,
    owner: u8,
    live: bool,
}

/// Header fields of transmitted datagrams that are not per flow.
#[derive(Clone, Copy, Debug)]
pub struct UdpTx {
    pub mac: [u8; 6],
    pub next_hop: [u8; 6],
}

/// The node's UDP flow table and counters.
pub struct UdpLayer {
    map: HashMap<UdpKey, u32, BuildHasherDefault<KeyHasher>>,
    flows: Vec<Entry>,
    free: Vec<u32>,
    max_flows: usize,
    live: usize,
    ip_id: u16,
    pub(crate) tx: UdpTx,
    pub stats: UdpStats,
}

impl UdpLayer {
    /// A table of at most `max_flows` flows; `prealloc` of them allocated at once.
    pub fn new(max_flows: usize, prealloc: usize, tx: UdpTx) -> Self {
        let cap = prealloc.min(max_flows);
        UdpLayer {
            map: HashMap::with_capacity_and_hasher(cap, Default::default()),
            flows: Vec::with_capacity(cap),
            free: Vec::new(),
            max_flows,
            live: 0,
            ip_id: 0,
            tx,
            stats: UdpStats::default(),
        }
    }
    /// Flows open now.
    pub fn live(&self) -> usize {
        self.live
    }
    /// Size of the flow slab (an upper bound of every `UdpFlowId` + 1).
    pub fn capacity(&self) -> usize {
        self.flows.len()
    }
    /// The flow with this 4-tuple.
    #[inline]
    pub fn lookup(&self, key: &UdpKey) -> Option<UdpFlowId> {
        self.map.get(key).map(|&i| UdpFlowId(i))
    }
    /// Is the 4-tuple used by a flow?
    pub fn in_use(&self, key: &UdpKey) -> bool {
        self.map.contains_key(key)
    }
    /// Opens a flow for `key` owned by app `owner`; `None` if the tuple is in use or the
    /// table is full (counted).
    pub fn open(&mut self, key: UdpKey, owner: u8) -> Option<UdpFlowId> {
        if self.map.contains_key(&key) {
            return None;
        }
        if self.map.len() >= self.max_flows {
            self.stats.no_flow_room += 1;
            return None;
        }
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.flows.push(Entry::default());
                (self.flows.len() - 1) as u32
            }
        };
        self.flows[i as usize] = Entry {
            key,
            owner,
            live: true,
        };
        self.map.insert(key, i);
        self.live += 1;
        Some(UdpFlowId(i))
    }
    /// Closes a flow (its id may be reused by the next `open`).
    pub fn close(&mut self, f: UdpFlowId) {
        let Some(e) = self.flows.get_mut(f.0 as usize) else {
            return;
        };
        if !e.live {
            return;
        }
        e.live = false;
        self.map.remove(&e.key);
        self.free.push(f.0);
        self.live -= 1;
    }
    /// The 4-tuple of a live flow.
    pub fn key(&self, f: UdpFlowId) -> Option<UdpKey> {
        self.flows
            .get(f.0 as usize)
            .filter(|e| e.live)
            .map(|e| e.key)
    }
    /// The app that opened a live flow.
    pub fn owner(&self, f: UdpFlowId) -> Option<u8> {
        self.flows
            .get(f.0 as usize)
            .filter(|e| e.live)
            .map(|e| e.owner)
    }

    /// Sends `payload` on flow `f` with IPv4 `ttl` and `tos`; false (counted) when the
    /// flow is not open, no frame is available or the payload does not fit.
    pub fn send<S: TxSink>(
        &mut self,
        tx: &mut S,
        f: UdpFlowId,
        payload: &[u8],
        ttl: u8,
        tos: u8,
    ) -> bool {
        let Some(k) = self.key(f) else {
            self.stats.tx_failed += 1;
            return false;
        };
        self.send_to(tx, &k, payload, ttl, tos)
    }

    /// Sends `payload` from `key.local` to `key.remote` without a flow.
    pub fn send_to<S: TxSink>(
        &mut self,
        tx: &mut S,
        key: &UdpKey,
        payload: &[u8],
        ttl: u8,
        tos: u8,
    ) -> bool {
        self.ip_id = self.ip_id.wrapping_add(1);
        let h = Hdr {
            mac: self.tx.mac,
            gw: self.tx.next_hop,
            ttl,
            tos,
            ident: self.ip_id,
        };
        if emit(tx, &h, key, payload) {
            self.stats.tx_datagrams += 1;
            true
        } else {
            self.stats.tx_failed += 1;
            false
        }
    }
}

/// Header fields of one transmitted datagram.
#[derive(Clone, Copy)]
struct Hdr {
    mac: [u8; 6],
    gw: [u8; 6],
    ttl: u8,
    tos: u8,
    ident: u16,
}

fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}

/// The UDP pseudo-header sum (RFC 768).
fn pseudo(src: u32, dst: u32, udp_len: usize) -> u16 {
    checksum::pseudo_header_ipv4(
        &squall_wire::Ipv4Address(src.to_be_bytes()),
        &squall_wire::Ipv4Address(dst.to_be_bytes()),
        IP_PROTO_UDP,
        udp_len as u32,
    )
}

/// Writes one datagram into a frame from `tx`; false when none is available or the
/// payload does not fit a frame.
fn emit<S: TxSink>(tx: &mut S, h: &Hdr, k: &UdpKey, payload: &[u8]) -> bool {
    if payload.len() > MAX_PAYLOAD {
        return false;
    }
    let len = HDRS_LEN + payload.len();
    let Some(f) = tx.alloc(len).and_then(|b| b.get_mut(..len)) else {
        return false;
    };
    write_frame(f, h, k, payload);
    tx.commit(len);
    true
}

/// Fills `f` (exactly headers + payload long) with the frame.
fn write_frame(f: &mut [u8], h: &Hdr, k: &UdpKey, payload: &[u8]) {
    let ulen = UDP_LEN + payload.len();
    f[0..6].copy_from_slice(&h.gw);
    f[6..12].copy_from_slice(&h.mac);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[ETH_HLEN..ETH_HLEN + IP_LEN];
    ip[0] = 0x45;
    ip[1] = h.tos;
    ip[2..4].copy_from_slice(&((IP_LEN + ulen) as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&h.ident.to_be_bytes());
    ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes());
    ip[8] = h.ttl;
    ip[9] = IP_PROTO_UDP;
    ip[10..12].copy_from_slice(&[0, 0]);
    ip[12..16].copy_from_slice(&k.local_ip.to_be_bytes());
    ip[16..20].copy_from_slice(&k.remote_ip.to_be_bytes());
    let c = checksum::checksum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let u = &mut f[ETH_HLEN + IP_LEN..];
    u[0..2].copy_from_slice(&k.local_port.to_be_bytes());
    u[2..4].copy_from_slice(&k.remote_port.to_be_bytes());
    u[4..6].copy_from_slice(&(ulen as u16).to_be_bytes());
    u[6..8].copy_from_slice(&[0, 0]);
    u[UDP_LEN..].copy_from_slice(payload);
    let mut c = !checksum::add(pseudo(k.local_ip, k.remote_ip, ulen), checksum::sum(u));
    if c == 0 {
        c = 0xffff;
    }
    u[6..8].copy_from_slice(&c.to_be_bytes());
}

/// Parses and verifies an Ethernet/IPv4/UDP frame (IPv4 checksum; UDP checksum unless 0).
pub fn parse(f: &[u8]) -> Result<Datagram<'_>, UdpError> {
    let ip = ipv4::check(f).map_err(|e| match e {
        Ipv4Error::Header => UdpError::Header,
        Ipv4Error::Checksum => UdpError::Checksum,
    })?;
    if ip.proto != IP_PROTO_UDP || ip.total < ip.ihl + UDP_LEN {
        return Err(UdpError::Header);
    }
    let u = &f[ETH_HLEN + ip.ihl..ETH_HLEN + ip.total];
    let ulen = usize::from(be16(u, 4));
    if ulen < UDP_LEN || ulen > u.len() {
        return Err(UdpError::Header);
    }
    let u = &u[..ulen];
    if be16(u, 6) != 0 && checksum::add(pseudo(ip.src, ip.dst, ulen), checksum::sum(u)) != 0xffff {
        return Err(UdpError::Checksum);
    }
    Ok(Datagram {
        src: ip.src,
        dst: ip.dst,
        sport: be16(u, 0),
        dport: be16(u, 2),
        payload: &u[UDP_LEN..],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: Hdr = Hdr {
        mac: [2, 0, 0, 0, 0, 1],
        gw: [2, 0, 0, 0, 0, 2],
        ttl: 64,
        tos: 0,
        ident: 7,
    };
    const K: UdpKey = UdpKey {
        local_ip: 0x1000_0001,
        remote_ip: 0x3000_0001,
        local_port: 40_000,
        remote_port: 53,
    };

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; HDRS_LEN + payload.len()];
        write_frame(&mut f, &H, &K, payload);
        f
    }

    #[test]
    fn written_frames_parse_back_with_valid_checksums() {
        for n in [0usize, 1, 2, 33, 512] {
            let p: Vec<u8> = (0..n).map(|i| (i * 13) as u8).collect();
            let f = frame(&p);
            let d = parse(&f).unwrap();
            assert_eq!(
                (d.src, d.dst, d.sport, d.dport),
                (K.local_ip, K.remote_ip, 40_000, 53)
            );
            assert_eq!(d.payload, &p[..]);
            assert_eq!(ipv4::classify(&f), ipv4::Class::Udp);
        }
    }

    #[test]
    fn checksums_match_a_known_frame() {
        let mut f = vec![0u8; HDRS_LEN];
        let k = UdpKey {
            local_ip: 0xc612_0001,
            remote_ip: 0xc612_0002,
            local_port: 1,
            remote_port: 2,
        };
        write_frame(&mut f, &Hdr { ident: 0, ..H }, &k, &[]);
        // 4500 001c 0000 4000 4011 csum c612 0001 c612 0002
        let s: u32 = [0x4500u32, 0x001c, 0, 0x4000, 0x4011, 0xc612, 1, 0xc612, 2]
            .iter()
            .sum();
        let s = (s & 0xffff) + (s >> 16);
        assert_eq!(be16(&f, ETH_HLEN + 10), !(s as u16));
        let u: u32 = 0xc612 + 1 + 0xc612 + 2 + 17 + 8 + 1 + 2 + 8;
        let u = (u & 0xffff) + (u >> 16);
        assert_eq!(be16(&f, ETH_HLEN + IP_LEN + 6), !(u as u16));
    }

    #[test]
    fn corrupted_or_malformed_frames_are_refused() {
        let mut f = frame(b"hello");
        let last = f.len() - 1;
        f[last] ^= 1;
        assert_eq!(parse(&f), Err(UdpError::Checksum));
        let mut f = frame(b"hello");
        f[ETH_HLEN + 8] ^= 1; // TTL: IP checksum
        assert_eq!(parse(&f), Err(UdpError::Checksum));
        let f = frame(b"hello");
        assert_eq!(parse(&f[..30]), Err(UdpError::Header));
        let mut f = frame(b"hello");
        f[ETH_HLEN + 6] = 0x20; // more fragments
        assert_eq!(parse(&f), Err(UdpError::Header));
        let mut f = frame(b"hello");
        f[ETH_HLEN + 2] = 0xff; // total length beyond the frame
        assert_eq!(parse(&f), Err(UdpError::Header));
        // A zero UDP checksum means "none" and is accepted.
        let mut f = frame(b"hello");
        f[ETH_HLEN + IP_LEN + 6..ETH_HLEN + IP_LEN + 8].copy_from_slice(&[0, 0]);
        assert_eq!(parse(&f).unwrap().payload, b"hello");
    }

    #[test]
    fn the_table_reuses_ids_and_refuses_duplicates_and_overflow() {
        let tx = UdpTx {
            mac: [0; 6],
            next_hop: [0; 6],
        };
        let mut t = UdpLayer::new(2, 2, tx);
        let a = t.open(K, 1).unwrap();
        assert_eq!(t.open(K, 0), None);
        let k2 = UdpKey {
            local_port: 40_001,
            ..K
        };
        let b = t.open(k2, 0).unwrap();
        let k3 = UdpKey {
            local_port: 40_002,
            ..K
        };
        assert_eq!(t.open(k3, 0), None);
        assert_eq!(t.stats.no_flow_room, 1);
        assert_eq!((t.owner(a), t.lookup(&k2)), (Some(1), Some(b)));
        t.close(a);
        t.close(a);
        assert_eq!(t.live(), 1);
        assert_eq!(t.key(a), None);
        assert_eq!(t.open(k3, 0), Some(a));
    }
}
