//! UDP: datagrams checked and demultiplexed to flows (a 4-tuple table of the flows the
//! applications opened, each with the app that owns it), datagrams written in place into
//! the port's frames (Ethernet + IPv4 + UDP, both checksums; or Ethernet + IPv6 + UDP).
//! Applications keep their per-flow state indexed by [`UdpFlowId`], as they do for TCP's
//! `FlowId`. Over IPv6 a key's addresses are ids of the layer's address table (as the
//! TCP host's keys: in 0.0.0.0/8, see [`UdpKey::is_ipv6`]), counted by the flows using
//! them; [`UdpLayer::key6`] makes such a key, [`UdpLayer::addr6`] reads an address back.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use squall_tcp::{Addr6Table, TxSink};
use squall_wire::{checksum, Ipv6Address};

use crate::ipv4::{self, Ipv4Error, IP_PROTO_UDP};
use crate::ipv6::Ipv6In;
use crate::neigh::ETH_HLEN;

const IP_LEN: usize = 20;
const UDP_LEN: usize = 8;
/// Ethernet + IPv4 + UDP headers.
pub const HDRS_LEN: usize = ETH_HLEN + IP_LEN + UDP_LEN;
/// Largest UDP payload of an unfragmented IPv4 datagram.
pub const MAX_PAYLOAD: usize = 65_507;
const IP6_LEN: usize = 40;
/// Ethernet + IPv6 + UDP headers.
pub const HDRS6_LEN: usize = ETH_HLEN + IP6_LEN + UDP_LEN;

/// A UDP flow's 4-tuple from the node's point of view (host order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdpKey {
    pub local_ip: u32,
    pub remote_ip: u32,
    pub local_port: u16,
    pub remote_port: u16,
}

impl UdpKey {
    /// True for an IPv6 flow (addresses are ids of the UDP layer's address table).
    #[inline]
    pub fn is_ipv6(&self) -> bool {
        squall_tcp::is_ipv6_id(self.local_ip)
    }
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
    /// From or to an address no datagram may use here (RFC 1122 §3.2.1.3, RFC 4291 §2.7):
    /// a group, broadcast, loopback or unspecified source, or a group, broadcast or
    /// loopback destination, or (IPv4) a unicast one in a link-layer broadcast (RFC 1122
    /// §3.3.6). Dropped before any application sees them.
    pub rx_bad_addr: u64,
    /// Datagrams sent.
    pub tx_datagrams: u64,
    /// Not sent: no TX frame, or the payload does not fit.
    pub tx_failed: u64,
    /// Datagrams larger than the MTU sent in fragments, and the fragments.
    pub tx_fragmented: u64,
    pub tx_fragments: u64,
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
    /// The link's MTU: a datagram whose IP packet is larger goes in fragments (0: not
    /// known, no fragments: a datagram must fit one frame).
    pub mtu: usize,
}

/// The node's UDP flow table and counters.
pub struct UdpLayer {
    map: HashMap<UdpKey, u32, BuildHasherDefault<KeyHasher>>,
    flows: Vec<Entry>,
    free: Vec<u32>,
    max_flows: usize,
    live: usize,
    ip_id: u16,
    /// The id of the next IPv6 datagram sent in fragments.
    frag_id6: u32,
    /// A datagram larger than the MTU, whole, before its fragments go.
    scratch: Vec<u8>,
    /// IPv6 addresses of the flows' keys (and of datagrams being delivered).
    addr6: Addr6Table,
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
            // (deterministic: a simulation's frames are reproducible; the workers of a
            // port spread theirs apart, `spread_ids`)
            ip_id: 0,
            frag_id6: 0,
            scratch: Vec::new(),
            addr6: Addr6Table::default(),
            tx,
            stats: UdpStats::default(),
        }
    }
    /// Starts the datagram ids of worker `index` of `count` sending from the same
    /// addresses at their own part of the id space, so that their fragments do not share
    /// ids (RFC 6864 §4.1).
    pub fn spread_ids(&mut self, index: u32, count: u32) {
        let count = count.max(1);
        self.ip_id = ((u64::from(index) << 16) / u64::from(count)) as u16;
        self.frag_id6 = ((u64::from(index) << 32) / u64::from(count)) as u32;
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
        if key.is_ipv6() {
            self.addr6.retain(key.local_ip);
            self.addr6.retain(key.remote_ip);
        }
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
        if e.key.is_ipv6() {
            self.addr6.release(e.key.local_ip);
            self.addr6.release(e.key.remote_ip);
        }
        self.free.push(f.0);
        self.live -= 1;
    }
    /// The key of an IPv6 4-tuple (addresses given ids); None when every id is taken.
    /// Ids no flow uses are given back by [`UdpLayer::release_unused`] (the node does it
    /// after each received datagram).
    pub fn key6(
        &mut self,
        local: [u8; 16],
        local_port: u16,
        remote: [u8; 16],
        remote_port: u16,
    ) -> Option<UdpKey> {
        let l = self.addr6.intern(&local)?;
        let Some(r) = self.addr6.intern(&remote) else {
            self.addr6.release_unused(l);
            return None;
        };
        Some(UdpKey {
            local_ip: l,
            remote_ip: r,
            local_port,
            remote_port,
        })
    }
    /// The IPv6 address of an id of an IPv6 key.
    pub fn addr6(&self, id: u32) -> [u8; 16] {
        *self.addr6.addr(id)
    }
    /// Gives back the ids of an IPv6 key that no flow took.
    pub fn release_unused(&mut self, key: &UdpKey) {
        if key.is_ipv6() {
            self.addr6.release_unused(key.local_ip);
            self.addr6.release_unused(key.remote_ip);
        }
    }
    /// IPv6 addresses with an id.
    pub fn ipv6_addresses(&self) -> usize {
        self.addr6.len()
    }
    /// Parses and verifies the UDP datagram of an IPv6 frame (`ip` checked by
    /// [`crate::ipv6::check`]): lengths, and the checksum, mandatory over IPv6. Its
    /// addresses get ids (see [`UdpLayer::key6`]).
    pub fn parse6<'a>(&mut self, f: &'a [u8], ip: &Ipv6In) -> Result<Datagram<'a>, UdpError> {
        self.parse6_checked(f, ip, true)
    }
    /// [`UdpLayer::parse6`]; `verify_udp = false` takes the port's word for the checksum
    /// (see [`parse_checked`]).
    pub fn parse6_checked<'a>(
        &mut self,
        f: &'a [u8],
        ip: &Ipv6In,
        verify_udp: bool,
    ) -> Result<Datagram<'a>, UdpError> {
        let u = f.get(ip.l4.0..ip.l4.1).ok_or(UdpError::Header)?;
        if u.len() < UDP_LEN {
            return Err(UdpError::Header);
        }
        let ulen = usize::from(be16(u, 4));
        if ulen < UDP_LEN || ulen > u.len() {
            return Err(UdpError::Header);
        }
        let u = &u[..ulen];
        let ph = checksum::pseudo_header_ipv6(&ip.src, &ip.dst, IP_PROTO_UDP, ulen as u32);
        // RFC 8200 §8.1: a zero checksum over IPv6 is discarded, even where the port
        // vouched for the checksum (a device may pass it as "good").
        if be16(u, 6) == 0 || (verify_udp && checksum::add(ph, checksum::sum(u)) != 0xffff) {
            return Err(UdpError::Checksum);
        }
        let k = self
            .key6(ip.dst.0, be16(u, 2), ip.src.0, be16(u, 0))
            .ok_or(UdpError::Header)?;
        Ok(Datagram {
            src: k.remote_ip,
            dst: k.local_ip,
            sport: k.remote_port,
            dport: k.local_port,
            payload: &u[UDP_LEN..],
        })
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
        self.frag_id6 = self.frag_id6.wrapping_add(1);
        let h = Hdr {
            mac: self.tx.mac,
            gw: self.tx.next_hop,
            ttl,
            tos,
            ident: self.ip_id,
            ident6: self.frag_id6,
        };
        let addrs = key
            .is_ipv6()
            .then(|| (self.addr6(key.local_ip), self.addr6(key.remote_ip)));
        let mtu = self.tx.mtu;
        match emit(tx, &h, key, addrs.as_ref(), payload, mtu, &mut self.scratch) {
            0 => {
                self.stats.tx_failed += 1;
                false
            }
            n => {
                self.stats.tx_datagrams += 1;
                if n > 1 {
                    self.stats.tx_fragmented += 1;
                    self.stats.tx_fragments += n as u64;
                }
                true
            }
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
    /// The id of an IPv6 datagram sent in fragments.
    ident6: u32,
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

/// Writes one datagram into a frame from `tx` (over IPv6 between `v6`'s addresses when
/// given), or in fragments when its IP packet is larger than `mtu` (not 0): the frames
/// sent, 0 when none is available or the payload does not fit.
fn emit<S: TxSink>(
    tx: &mut S,
    h: &Hdr,
    k: &UdpKey,
    v6: Option<&([u8; 16], [u8; 16])>,
    payload: &[u8],
    mtu: usize,
    scratch: &mut Vec<u8>,
) -> usize {
    if payload.len() > MAX_PAYLOAD {
        return 0;
    }
    let len = if v6.is_some() { HDRS6_LEN } else { HDRS_LEN } + payload.len();
    let write = |f: &mut [u8]| match v6 {
        Some((s, d)) => write_frame6(f, h, k, s, d, payload),
        None => write_frame(f, h, k, payload),
    };
    if mtu > 0 && len > ETH_HLEN + mtu {
        scratch.clear();
        scratch.resize(len, 0);
        write(scratch);
        return emit_fragments(tx, scratch, v6.is_some(), h.ident6, mtu);
    }
    let Some(f) = tx.alloc(len).and_then(|b| b.get_mut(..len)) else {
        return 0;
    };
    write(f);
    tx.commit(len);
    1
}

/// [`emit`] of a datagram larger than `mtu`: the whole frame `whole` (built once, its UDP
/// checksum over all of it) sent in fragments of the largest multiple of 8 bytes that fits
/// (RFC 791: IPv4, DF clear, the datagram's id; RFC 8200 §4.5 with `v6`: a fragment header
/// with id `id6`). The frames sent; 0 if they would not all fit the sink now, or one could
/// not be had (those already written go: a datagram cut short is lost to its receiver,
/// as on a lossy path; it is counted not sent).
fn emit_fragments<S: TxSink>(tx: &mut S, whole: &[u8], v6: bool, id6: u32, mtu: usize) -> usize {
    let l3 = ETH_HLEN + if v6 { IP6_LEN } else { IP_LEN };
    let frag_hdr = if v6 { 8 } else { 0 };
    let Some(max) = mtu
        .checked_sub(l3 - ETH_HLEN + frag_hdr)
        .map(|m| m & !7)
        .filter(|&m| m > 0)
    else {
        return 0;
    };
    let data = &whole[l3..];
    if data.len().div_ceil(max) > tx.room() {
        return 0;
    }
    let mut sent = 0;
    for (i, chunk) in data.chunks(max).enumerate() {
        let off = i * max;
        let more = off + chunk.len() < data.len();
        let len = l3 + frag_hdr + chunk.len();
        let Some(f) = tx.alloc(len).and_then(|b| b.get_mut(..len)) else {
            return 0;
        };
        f[..l3].copy_from_slice(&whole[..l3]);
        if v6 {
            let ip = &mut f[ETH_HLEN..l3];
            ip[4..6].copy_from_slice(&((8 + chunk.len()) as u16).to_be_bytes());
            ip[6] = 44;
            let fh = &mut f[l3..l3 + 8];
            fh[0] = IP_PROTO_UDP;
            fh[1] = 0;
            fh[2..4].copy_from_slice(&(off as u16 | u16::from(more)).to_be_bytes());
            fh[4..8].copy_from_slice(&id6.to_be_bytes());
        } else {
            let ip = &mut f[ETH_HLEN..l3];
            ip[2..4].copy_from_slice(&((IP_LEN + chunk.len()) as u16).to_be_bytes());
            let fo = (off / 8) as u16 | if more { 0x2000 } else { 0 };
            ip[6..8].copy_from_slice(&fo.to_be_bytes());
            ip[10..12].copy_from_slice(&[0, 0]);
            let c = checksum::checksum(ip);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
        }
        f[l3 + frag_hdr..].copy_from_slice(chunk);
        tx.commit(len);
        sent += 1;
    }
    sent
}

/// Fills `f` (exactly headers + payload long) with an IPv6 frame from `src` to `dst`
/// (`h.ttl` is the hop limit, `h.tos` the traffic class).
fn write_frame6(f: &mut [u8], h: &Hdr, k: &UdpKey, src: &[u8; 16], dst: &[u8; 16], payload: &[u8]) {
    let ulen = UDP_LEN + payload.len();
    f[0..6].copy_from_slice(&h.gw);
    f[6..12].copy_from_slice(&h.mac);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    let ip = &mut f[ETH_HLEN..ETH_HLEN + IP6_LEN];
    ip[0..4].copy_from_slice(&((6u32 << 28) | (h.tos as u32) << 20).to_be_bytes());
    ip[4..6].copy_from_slice(&(ulen as u16).to_be_bytes());
    ip[6] = IP_PROTO_UDP;
    ip[7] = h.ttl;
    ip[8..24].copy_from_slice(src);
    ip[24..40].copy_from_slice(dst);
    let u = &mut f[ETH_HLEN + IP6_LEN..];
    u[0..2].copy_from_slice(&k.local_port.to_be_bytes());
    u[2..4].copy_from_slice(&k.remote_port.to_be_bytes());
    u[4..6].copy_from_slice(&(ulen as u16).to_be_bytes());
    u[6..8].copy_from_slice(&[0, 0]);
    u[UDP_LEN..].copy_from_slice(payload);
    let ph = checksum::fold(checksum::pseudo_header_ipv6_acc(
        src,
        dst,
        IP_PROTO_UDP,
        ulen,
    ));
    let mut c = !checksum::add(ph, checksum::sum(u));
    if c == 0 {
        c = 0xffff;
    }
    u[6..8].copy_from_slice(&c.to_be_bytes());
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
    parse_checked(f, true)
}

/// Whether an IPv4 datagram from `src` to `dst` (host order) may reach an application:
/// both unicast addresses, neither loopback (127/8), nor a group or the class-E block
/// (224/3, 255.255.255.255 included). (0/8 never parses: [`parse_checked`].)
pub fn v4_deliverable(src: u32, dst: u32) -> bool {
    let unicast = |a: u32| a >> 24 != 127 && a < 0xe000_0000;
    unicast(src) && unicast(dst)
}

/// Whether an IPv6 datagram from `src` to `dst` may reach an application: the
/// destination not a group (all-nodes and solicited-node groups reach the node for
/// neighbour discovery, not for UDP), the source neither a group, the unspecified
/// address nor loopback (none can be answered), and the destination not loopback.
pub fn v6_deliverable(src: &Ipv6Address, dst: &Ipv6Address) -> bool {
    let (s, d) = (src.to_u128(), dst.to_u128());
    !dst.is_multicast() && !src.is_multicast() && s > 1 && d != 1
}

/// [`parse`]; `verify_udp = false` takes the port's word for the UDP checksum (a frame it
/// vouched for: the field may hold only a sender's partial sum). The IPv4 header checksum
/// is always verified.
pub fn parse_checked(f: &[u8], verify_udp: bool) -> Result<Datagram<'_>, UdpError> {
    let ip = ipv4::check(f).map_err(|e| match e {
        Ipv4Error::Header | Ipv4Error::SourceRoute => UdpError::Header,
        Ipv4Error::Checksum => UdpError::Checksum,
    })?;
    if ip.proto != IP_PROTO_UDP || ip.total < ip.ihl + UDP_LEN {
        return Err(UdpError::Header);
    }
    // 0.0.0.0/8 is no host's address; here it would alias the ids of IPv6 keys.
    if squall_tcp::is_ipv6_id(ip.src) || squall_tcp::is_ipv6_id(ip.dst) {
        return Err(UdpError::Header);
    }
    let u = &f[ETH_HLEN + ip.ihl..ETH_HLEN + ip.total];
    let ulen = usize::from(be16(u, 4));
    if ulen < UDP_LEN || ulen > u.len() {
        return Err(UdpError::Header);
    }
    let u = &u[..ulen];
    if verify_udp
        && be16(u, 6) != 0
        && checksum::add(pseudo(ip.src, ip.dst, ulen), checksum::sum(u)) != 0xffff
    {
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
        ident6: 7,
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

    /// A frame the port vouched for (a local sender left the checksum to an offload: the
    /// field holds only the pseudo-header sum) parses without the UDP checksum; the IPv4
    /// header checksum is still checked.
    #[test]
    fn a_vouched_frame_skips_the_udp_checksum_only() {
        let mut f = frame(b"hello");
        let c = ETH_HLEN + IP_LEN + 6;
        f[c..c + 2].copy_from_slice(&[0x12, 0x34]); // a partial sum, not the checksum
        assert_eq!(parse(&f), Err(UdpError::Checksum));
        assert_eq!(parse_checked(&f, false).unwrap().payload, b"hello");
        f[ETH_HLEN + 8] ^= 1; // TTL: the IP header checksum fails
        assert_eq!(parse_checked(&f, false), Err(UdpError::Checksum));
    }

    #[test]
    fn the_table_reuses_ids_and_refuses_duplicates_and_overflow() {
        let tx = UdpTx {
            mtu: 0,
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

    /// IPv6: a datagram written by the layer parses back (general views and `parse6`)
    /// with a valid mandatory checksum; the ids of a datagram no flow took are given
    /// back, those of an open flow stay until it closes; a zero checksum is refused.
    #[test]
    fn ipv6_datagrams_roundtrip_and_ids_are_counted() {
        let a: [u8; 16] = "2001:db8::1"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets();
        let b: [u8; 16] = "2001:db8::2"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets();
        let tx = UdpTx {
            mtu: 0,
            mac: [2, 0, 0, 0, 0, 1],
            next_hop: [2, 0, 0, 0, 0, 2],
        };
        let (mut la, mut lb) = (UdpLayer::new(4, 4, tx), UdpLayer::new(4, 4, tx));
        let k = la.key6(a, 5000, b, 53).unwrap();
        assert!(k.is_ipv6() && !K.is_ipv6());
        let f = la.open(k, 0).unwrap();
        la.release_unused(&k);
        assert_eq!(la.ipv6_addresses(), 2, "the flow holds its ids");
        #[derive(Default)]
        struct One(Vec<u8>, Vec<u8>);
        impl TxSink for One {
            fn alloc(&mut self, len: usize) -> Option<&mut [u8]> {
                self.0.resize(len, 0);
                Some(&mut self.0[..])
            }
            fn commit(&mut self, len: usize) {
                self.1 = self.0[..len].to_vec();
            }
        }
        let mut out = One::default();
        assert!(la.send(&mut out, f, b"query over ipv6", 64, 0));
        let fr = squall_wire::parse_frame(&out.1).unwrap();
        assert!(fr.checksums_ok());
        assert!(matches!(
            fr.l3,
            squall_wire::L3::Ipv6(_, squall_wire::L4::Udp(_))
        ));
        let ip = crate::ipv6::check(&out.1).unwrap();
        let d = lb.parse6(&out.1, &ip).unwrap();
        assert_eq!(
            (d.sport, d.dport, d.payload),
            (5000, 53, &b"query over ipv6"[..])
        );
        assert_eq!((lb.addr6(d.src), lb.addr6(d.dst)), (a, b));
        lb.release_unused(&d.key());
        assert_eq!(lb.ipv6_addresses(), 0);
        let mut z = out.1.clone();
        z[14 + 40 + 6..14 + 40 + 8].fill(0);
        assert_eq!(lb.parse6(&z, &ip), Err(UdpError::Checksum));
        la.close(f);
        assert_eq!(la.ipv6_addresses(), 0);
        // an IPv4 datagram from 0.0.0.0/8 is refused
        let k0 = UdpKey {
            local_ip: 0x0000_0005,
            ..K
        };
        let mut f0 = vec![0u8; HDRS_LEN];
        write_frame(&mut f0, &H, &k0, &[]);
        assert_eq!(parse(&f0), Err(UdpError::Header));
    }

    use crate::testing::Frames;

    /// A datagram larger than the MTU goes whole or not at all (counted not sent when its
    /// fragments would not all fit the sink now); the layers of a port's workers start
    /// their ids apart (their fragments must not share ids).
    #[test]
    fn fragments_go_all_or_none_and_ids_start_apart() {
        let tx = UdpTx {
            mtu: 1500,
            mac: [2, 0, 0, 0, 0, 1],
            next_hop: [2, 0, 0, 0, 0, 2],
        };
        let mut l = UdpLayer::new(4, 4, tx);
        let f = l.open(K, 0).unwrap();
        let big = vec![9u8; 4000];
        let mut sink = Frames {
            room: Some(2),
            ..Frames::default()
        };
        assert!(
            !l.send(&mut sink, f, &big, 64, 0),
            "3 fragments, room for 2"
        );
        assert!(sink.out.is_empty());
        assert_eq!((l.stats.tx_failed, l.stats.tx_datagrams), (1, 0));
        sink.room = Some(3);
        assert!(l.send(&mut sink, f, &big, 64, 0));
        assert_eq!((sink.out.len(), l.stats.tx_fragments), (3, 3));
        // each fragment: DF clear, MF on all but the last, the same id
        let ids: Vec<u16> = sink.out.iter().map(|f| be16(f, ETH_HLEN + 4)).collect();
        let fo: Vec<u16> = sink.out.iter().map(|f| be16(f, ETH_HLEN + 6)).collect();
        assert!(ids.iter().all(|&i| i == ids[0]));
        assert_eq!(
            fo,
            [0x2000, 0x2000 | 185, 370],
            "offsets in units of 8 (1480 bytes)"
        );
        let starts: Vec<(u16, u32)> = (0..4)
            .map(|k| {
                let mut l = UdpLayer::new(1, 1, tx);
                l.spread_ids(k, 4);
                (l.ip_id, l.frag_id6)
            })
            .collect();
        assert_eq!(
            starts,
            [
                (0, 0),
                (0x4000, 0x4000_0000),
                (0x8000, 0x8000_0000),
                (0xc000, 0xc000_0000)
            ]
        );
    }
}
