//! Receive-side scaling as a NIC computes it: the Toeplitz hash of a frame's IPv4 or IPv6
//! 4-tuple under a 40-byte key, and the indirection table (RETA) that maps the hash to a receive
//! queue. Ports that spread traffic over queues program the device with [`RssConfig`];
//! the generator uses the same function to pick, for each new flow, a source port whose
//! *reply* lands on the queue of the core that opened the flow (as TRex does), so no
//! frame ever has to move between cores.
//!
//! The hash input for TCP/UDP is, in network byte order, source address, destination
//! address, source port, destination port (12 bytes over IPv4, 36 over IPv6). Tables of
//! 256 entries per input byte make a hash one lookup and XOR per byte.

/// Length of a Toeplitz key (the common NIC size; DPDK's `rss_key_len` 40).
pub const KEY_LEN: usize = 40;

/// A symmetric key (`0x6d5a` repeated): a flow's two directions hash alike, so one
/// queue sees both (TRex and many DPDK applications use it).
pub const SYMMETRIC_KEY: [u8; KEY_LEN] = {
    let mut k = [0u8; KEY_LEN];
    let mut i = 0;
    while i < KEY_LEN {
        k[i] = if i % 2 == 0 { 0x6d } else { 0x5a };
        i += 1;
    }
    k
};

/// Microsoft's RSS verification key (the default of many NICs and of the test vectors).
pub const MICROSOFT_KEY: [u8; KEY_LEN] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// Bytes of the IPv4 4-tuple input.
const V4_INPUT: usize = 12;
/// Bytes of the IPv6 4-tuple input (the longest input a 40-byte key covers: 36 + 4).
const V6_INPUT: usize = 36;

/// The Toeplitz hash under one key, for the IPv4 and IPv6 4-tuples.
#[derive(Clone)]
pub struct Toeplitz {
    /// `table[i][b]`: the hash contribution of byte value `b` at input position `i`.
    table: Box<[[u32; 256]; V6_INPUT]>,
}

impl std::fmt::Debug for Toeplitz {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Toeplitz")
    }
}

impl Toeplitz {
    /// Precomputes the tables of `key`.
    pub fn new(key: &[u8; KEY_LEN]) -> Self {
        let mut table = Box::new([[0u32; 256]; V6_INPUT]);
        for (i, row) in table.iter_mut().enumerate() {
            // The 32-bit window of the key that input bit (8i + j) selects starts at key
            // bit 8i + j.
            let window = |bit: usize| -> u32 {
                let mut w = 0u32;
                for k in 0..32 {
                    let b = bit + k;
                    let set = (key[b / 8] >> (7 - b % 8)) & 1;
                    w = (w << 1) | u32::from(set);
                }
                w
            };
            let bits: [u32; 8] = std::array::from_fn(|j| window(8 * i + j));
            for (v, slot) in row.iter_mut().enumerate() {
                *slot = (0..8)
                    .filter(|j| v & (0x80 >> j) != 0)
                    .fold(0, |h, j| h ^ bits[j]);
            }
        }
        Toeplitz { table }
    }

    /// Hash of `input` (at most 36 bytes: an address pair, then the port pair; bytes past
    /// 36 are not hashed).
    pub fn hash(&self, input: &[u8]) -> u32 {
        input
            .iter()
            .zip(self.table.iter())
            .fold(0, |h, (&b, row)| h ^ row[usize::from(b)])
    }

    /// Hash of an IPv4 TCP/UDP frame's 4-tuple (addresses and ports in host order).
    pub fn hash_v4(&self, src: u32, dst: u32, sport: u16, dport: u16) -> u32 {
        let mut input = [0u8; V4_INPUT];
        input[0..4].copy_from_slice(&src.to_be_bytes());
        input[4..8].copy_from_slice(&dst.to_be_bytes());
        input[8..10].copy_from_slice(&sport.to_be_bytes());
        input[10..12].copy_from_slice(&dport.to_be_bytes());
        self.hash(&input)
    }

    /// Hash of an IPv6 TCP/UDP frame's 4-tuple (addresses in network order, ports in host
    /// order).
    pub fn hash_v6(&self, src: &[u8; 16], dst: &[u8; 16], sport: u16, dport: u16) -> u32 {
        let mut input = [0u8; V6_INPUT];
        input[0..16].copy_from_slice(src);
        input[16..32].copy_from_slice(dst);
        input[32..34].copy_from_slice(&sport.to_be_bytes());
        input[34..36].copy_from_slice(&dport.to_be_bytes());
        self.hash(&input)
    }
}

/// How a port spreads received flows over its queues: the key, the indirection table
/// size and the number of queues, with the table filled round robin (entry `i` ->
/// queue `i % queues`, the default of Linux and DPDK drivers) unless the device's own
/// table was read back ([`RssConfig::table`]).
#[derive(Clone, Debug)]
pub struct RssConfig {
    pub key: [u8; KEY_LEN],
    /// Entries of the indirection table (a power of two, e.g. 128 or 512).
    pub reta_size: u32,
    pub queues: u32,
    /// Whether the device hashes IPv6 TCP/UDP on the 4-tuple too (else IPv6 flows are
    /// not steered by the hash: their replies land where the device puts them).
    pub ipv6: bool,
    /// The device's indirection table as its driver reports it (entry `i` -> queue),
    /// where it could be read: the steering then follows it entry by entry instead of
    /// assuming round robin. Used only if it has a power-of-two number of entries (the
    /// hash's low bits index it) and names every queue below `queues` and no other
    /// ([`table_is_usable`], [`RssSteer::follows_table`]).
    pub table: Option<Vec<u16>>,
}

impl RssConfig {
    /// `queues` queues with the symmetric key and a 128-entry table, IPv4 and IPv6.
    pub fn symmetric(queues: u32) -> Self {
        RssConfig {
            key: SYMMETRIC_KEY,
            reta_size: 128,
            queues: queues.max(1),
            ipv6: true,
            table: None,
        }
    }
}

/// Whether a device's indirection table can be followed by [`RssSteer`] on a port of
/// `queues` queues: a power-of-two number of entries (at most 65,536; the hash's low bits
/// index it) naming only queues below `queues`, and each of them at least once (a queue
/// the table never names would leave its worker no source port to choose).
pub fn table_is_usable(table: &[u16], queues: u32) -> bool {
    if !table.len().is_power_of_two() || table.len() > 1 << 16 || queues > 1 << 16 {
        return false;
    }
    let mut seen = vec![false; queues as usize];
    for &q in table {
        match seen.get_mut(usize::from(q)) {
            Some(s) => *s = true,
            None => return false,
        }
    }
    seen.into_iter().all(|s| s)
}

/// The queue a hash lands on, and the source-port choice that follows from it.
#[derive(Clone, Debug)]
pub struct RssSteer {
    hash: Toeplitz,
    /// The indirection table (a power-of-two number of entries, indexed by the hash's
    /// low bits): the device's where [`RssConfig::table`] was usable, else round robin.
    table: std::sync::Arc<[u16]>,
    mask: u32,
    /// Whether `table` is the device's.
    from_device: bool,
    ipv6: bool,
}

impl RssSteer {
    /// Steering of `cfg`: the device's table where `cfg` has a usable one, else round
    /// robin over `reta_size` entries (rounded up to a power of two).
    pub fn new(cfg: &RssConfig) -> Self {
        let queues = cfg.queues.max(1);
        let device = cfg.table.as_deref().filter(|t| table_is_usable(t, queues));
        let table: std::sync::Arc<[u16]> = match device {
            Some(t) => t.into(),
            None => {
                let n = cfg.reta_size.clamp(1, 1 << 16).next_power_of_two();
                (0..n).map(|i| (i % queues) as u16).collect()
            }
        };
        RssSteer {
            hash: Toeplitz::new(&cfg.key),
            mask: table.len() as u32 - 1,
            table,
            from_device: device.is_some(),
            ipv6: cfg.ipv6,
        }
    }

    /// Whether the steering follows the device's own table (else it assumes round
    /// robin over the queues).
    pub fn follows_table(&self) -> bool {
        self.from_device
    }

    /// Whether the device hashes IPv6 flows on their 4-tuple ([`RssConfig::ipv6`]).
    pub fn hashes_ipv6(&self) -> bool {
        self.ipv6
    }

    /// The receive queue of a frame with this hash.
    #[inline]
    pub fn queue_of_hash(&self, h: u32) -> u32 {
        self.table
            .get((h & self.mask) as usize)
            .map_or(0, |&q| u32::from(q))
    }

    /// The queue on which the reply of a flow opened from `client:cport` to
    /// `server:sport` arrives (the reply's source is the server).
    pub fn reply_queue(&self, client: u32, cport: u16, server: u32, sport: u16) -> u32 {
        self.queue_of_hash(self.hash.hash_v4(server, client, sport, cport))
    }

    /// Whether `cport` is a source port whose reply lands on `queue`.
    pub fn port_fits(&self, queue: u32, client: u32, cport: u16, server: u32, sport: u16) -> bool {
        self.reply_queue(client, cport, server, sport) == queue
    }

    /// [`Self::reply_queue`] of an IPv6 flow.
    pub fn reply_queue6(
        &self,
        client: &[u8; 16],
        cport: u16,
        server: &[u8; 16],
        sport: u16,
    ) -> u32 {
        self.queue_of_hash(self.hash.hash_v6(server, client, sport, cport))
    }

    /// The queue the device puts a received TCP or UDP frame (IPv4, or IPv6 with the
    /// transport header right after the fixed one, where the device hashes IPv6) on by its
    /// 4-tuple; `None` for other frames and IPv4 fragments.
    pub fn queue_of_frame(&self, f: &[u8]) -> Option<u32> {
        let be16 = |o: usize| Some(u16::from_be_bytes([*f.get(o)?, *f.get(o + 1)?]));
        match f.get(12..14)? {
            [0x08, 0x00] => {
                let ihl = usize::from(*f.get(14)? & 0x0f) * 4;
                let frag = be16(20)? & 0x3fff != 0;
                if frag || !matches!(f.get(23)?, 6 | 17) {
                    return None;
                }
                let a = |o: usize| Some(u32::from_be_bytes(f.get(o..o + 4)?.try_into().ok()?));
                let l4 = 14 + ihl;
                let h = self.hash.hash_v4(a(26)?, a(30)?, be16(l4)?, be16(l4 + 2)?);
                Some(self.queue_of_hash(h))
            }
            [0x86, 0xdd] if self.ipv6 && matches!(f.get(20)?, 6 | 17) => {
                let a = |o: usize| -> Option<[u8; 16]> { f.get(o..o + 16)?.try_into().ok() };
                let h = self.hash.hash_v6(&a(22)?, &a(38)?, be16(54)?, be16(56)?);
                Some(self.queue_of_hash(h))
            }
            _ => None,
        }
    }

    /// [`Self::port_fits`] of an IPv6 flow.
    pub fn port_fits6(
        &self,
        queue: u32,
        client: &[u8; 16],
        cport: u16,
        server: &[u8; 16],
        sport: u16,
    ) -> bool {
        self.reply_queue6(client, cport, server, sport) == queue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(a: u8, b: u8, c: u8, d: u8) -> u32 {
        u32::from_be_bytes([a, b, c, d])
    }

    /// Microsoft's RSS verification suite (IPv4 with TCP ports): (destination,
    /// destination port, source, source port, hash of the 2-tuple, hash of the 4-tuple).
    /// The same values come out of DPDK's `rte_softrss` (checked with libdpdk-dev 22.11).
    #[allow(clippy::type_complexity)]
    const VECTORS: [((u8, u8, u8, u8), u16, (u8, u8, u8, u8), u16, u32, u32); 5] = [
        (
            (161, 142, 100, 80),
            1766,
            (66, 9, 149, 187),
            2794,
            0x323e8fc2,
            0x51ccc178,
        ),
        (
            (65, 69, 140, 83),
            4739,
            (199, 92, 111, 2),
            14230,
            0xd718262a,
            0xc626b0ea,
        ),
        (
            (12, 22, 207, 184),
            38024,
            (24, 19, 198, 95),
            12898,
            0xd2d0a5de,
            0x5c2b394a,
        ),
        (
            (209, 142, 163, 6),
            2217,
            (38, 27, 205, 30),
            48228,
            0x82989176,
            0xafc7327f,
        ),
        (
            (202, 188, 127, 2),
            1303,
            (153, 39, 163, 191),
            44251,
            0x5d1809c5,
            0x10e828a2,
        ),
    ];

    #[test]
    fn microsoft_verification_vectors() {
        let t = Toeplitz::new(&MICROSOFT_KEY);
        for (d, dp, s, sp, h2, h4) in VECTORS {
            let (dst, src) = (ip(d.0, d.1, d.2, d.3), ip(s.0, s.1, s.2, s.3));
            let mut two = [0u8; 8];
            two[..4].copy_from_slice(&src.to_be_bytes());
            two[4..].copy_from_slice(&dst.to_be_bytes());
            assert_eq!(t.hash(&two), h2, "2-tuple {d:?}");
            assert_eq!(t.hash_v4(src, dst, sp, dp), h4, "4-tuple {d:?}");
        }
    }

    /// Microsoft's IPv6 verification vectors: (destination, destination port, source,
    /// source port, hash of the address pair, hash of the 4-tuple); DPDK's `rte_softrss`
    /// (libdpdk-dev 22.11) gives the same.
    const VECTORS6: [(&str, u16, &str, u16, u32, u32); 3] = [
        (
            "3ffe:2501:200:3::1",
            1766,
            "3ffe:2501:200:1fff::7",
            2794,
            0x2cc18cd5,
            0x40207d3d,
        ),
        (
            "ff02::1",
            4739,
            "3ffe:501:8::260:97ff:fe40:efab",
            14230,
            0x0f0c461c,
            0xdde51bbf,
        ),
        (
            "fe80::200:f8ff:fe21:67cf",
            38024,
            "3ffe:1900:4545:3:200:f8ff:fe21:67cf",
            44251,
            0x4b61e985,
            0x02d1feef,
        ),
    ];

    #[test]
    fn microsoft_verification_vectors_ipv6() {
        let t = Toeplitz::new(&MICROSOFT_KEY);
        for (d, dp, s, sp, h2, h4) in VECTORS6 {
            let dst = d.parse::<std::net::Ipv6Addr>().unwrap().octets();
            let src = s.parse::<std::net::Ipv6Addr>().unwrap().octets();
            let two: Vec<u8> = src.iter().chain(dst.iter()).copied().collect();
            assert_eq!(t.hash(&two), h2, "address pair {d}");
            assert_eq!(t.hash_v6(&src, &dst, sp, dp), h4, "4-tuple {d}");
        }
    }

    #[test]
    fn the_symmetric_key_hashes_both_directions_alike_over_ipv6() {
        let t = Toeplitz::new(&SYMMETRIC_KEY);
        let a: std::net::Ipv6Addr = "2001:db8:16::7".parse().unwrap();
        let b: std::net::Ipv6Addr = "2001:db8:48::1".parse().unwrap();
        for p in [1u16, 1024, 40_000, 65_535] {
            assert_eq!(
                t.hash_v6(&a.octets(), &b.octets(), p, 80),
                t.hash_v6(&b.octets(), &a.octets(), 80, p)
            );
        }
        let s = RssSteer::new(&RssConfig::symmetric(2));
        let fit = (1024..2048)
            .filter(|&p| s.port_fits6(1, &a.octets(), p, &b.octets(), 80))
            .count();
        assert!((400..=624).contains(&fit), "{fit} of 1024 ports on queue 1");
    }

    #[test]
    fn a_frame_goes_to_the_queue_of_its_4_tuple() {
        let s = RssSteer::new(&RssConfig::symmetric(4));
        let (c, srv) = (ip(198, 18, 0, 2), ip(198, 18, 48, 1));
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = 6;
        f[26..30].copy_from_slice(&srv.to_be_bytes());
        f[30..34].copy_from_slice(&c.to_be_bytes());
        f[34..36].copy_from_slice(&80u16.to_be_bytes());
        let mut seen = [false; 4];
        for cport in 1024..1100u16 {
            f[36..38].copy_from_slice(&cport.to_be_bytes());
            let q = s.queue_of_frame(&f).unwrap();
            assert_eq!(q, s.reply_queue(c, cport, srv, 80));
            seen[q as usize] = true;
        }
        assert_eq!(seen, [true; 4]);
        f[20] = 0x20; // a fragment: no ports to hash
        assert_eq!(s.queue_of_frame(&f), None);
        f[20] = 0;
        f[23] = 1; // ICMP
        assert_eq!(s.queue_of_frame(&f), None);
        // IPv6 TCP
        let mut cfg = RssConfig::symmetric(4);
        cfg.ipv6 = true;
        let s6 = RssSteer::new(&cfg);
        let mut g = vec![0u8; 14 + 40 + 20];
        g[12..14].copy_from_slice(&[0x86, 0xdd]);
        g[20] = 6;
        let (a, b) = (
            [0x20, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            [0x20; 16],
        );
        g[22..38].copy_from_slice(&b);
        g[38..54].copy_from_slice(&a);
        g[54..56].copy_from_slice(&443u16.to_be_bytes());
        g[56..58].copy_from_slice(&5555u16.to_be_bytes());
        assert_eq!(
            s6.queue_of_frame(&g),
            Some(s6.reply_queue6(&a, 5555, &b, 443))
        );
        cfg.ipv6 = false;
        let v4_only = RssSteer::new(&cfg);
        assert_eq!(
            v4_only.queue_of_frame(&g),
            None,
            "a device that does not hash IPv6"
        );
    }

    #[test]
    fn the_symmetric_key_hashes_both_directions_alike() {
        let t = Toeplitz::new(&SYMMETRIC_KEY);
        let (a, b) = (ip(198, 18, 16, 7), ip(198, 19, 48, 1));
        for p in [1u16, 1024, 40_000, 65_535] {
            assert_eq!(t.hash_v4(a, b, p, 80), t.hash_v4(b, a, 80, p));
        }
        // DPDK's rte_softrss of the reply 198.19.48.1:80 -> 198.18.16.1:1024.
        assert_eq!(
            t.hash_v4(ip(198, 19, 48, 1), ip(198, 18, 16, 1), 80, 1024),
            0x4f39_4f39
        );
    }

    #[test]
    fn replies_spread_over_every_queue_and_a_fitting_port_is_near() {
        let s = RssSteer::new(&RssConfig::symmetric(4));
        let (c, srv) = (ip(198, 18, 16, 1), ip(198, 19, 48, 1));
        let mut per_queue = [0u32; 4];
        for p in 1024..=u16::MAX {
            per_queue[s.reply_queue(c, p, srv, 80) as usize] += 1;
        }
        // Each queue gets about a quarter of the ports.
        for n in per_queue {
            assert!((14_000..=18_000).contains(&n), "{per_queue:?}");
        }
        for q in 0..4 {
            let p = (1024..=u16::MAX)
                .find(|&p| s.port_fits(q, c, p, srv, 80))
                .unwrap();
            assert!(p < 1024 + 64, "queue {q}: first port {p}");
            assert_eq!(s.reply_queue(c, p, srv, 80), q);
        }
    }

    #[test]
    fn a_table_read_from_the_device_is_followed_entry_by_entry() {
        // A device whose table is not round robin: the first half of the entries on
        // queue 1, the second half on queue 0.
        let table: Vec<u16> = (0..128).map(|i| u16::from(i < 64)).collect();
        let mut cfg = RssConfig::symmetric(2);
        cfg.table = Some(table.clone());
        let s = RssSteer::new(&cfg);
        assert!(s.follows_table());
        let rr = RssSteer::new(&RssConfig::symmetric(2));
        assert!(!rr.follows_table());
        let mut differ = 0;
        let mut h = 0x2545_f491u32;
        for _ in 0..10_000 {
            h ^= h << 13;
            h ^= h >> 17;
            h ^= h << 5;
            assert_eq!(s.queue_of_hash(h), u32::from(table[(h & 127) as usize]));
            differ += u32::from(s.queue_of_hash(h) != rr.queue_of_hash(h));
        }
        assert!(differ > 4_000, "{differ}");
        // Source ports chosen by it reply on the queue the table names.
        let (c, srv) = (ip(198, 18, 16, 1), ip(198, 18, 48, 1));
        for q in 0..2 {
            let p = (1024..=u16::MAX)
                .find(|&p| s.port_fits(q, c, p, srv, 80))
                .unwrap();
            let hash = Toeplitz::new(&cfg.key).hash_v4(srv, c, 80, p);
            assert_eq!(u32::from(table[(hash & 127) as usize]), q);
        }
        // Tables that cannot be followed: not a power of two, naming a queue the port
        // does not poll, or leaving one out. The round-robin assumption stays.
        for bad in [
            vec![0u16; 100],
            (0..128).map(|i| i % 3).collect::<Vec<u16>>(),
            vec![1u16; 128],
        ] {
            let mut cfg = RssConfig::symmetric(2);
            cfg.table = Some(bad);
            assert!(!RssSteer::new(&cfg).follows_table());
        }
    }
}
