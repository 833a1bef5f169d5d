//! The capture tap: the first N flows an application opens, both directions, into a pcap
//! held in memory (written to a file at the end). Frames are taken at each node's
//! transmit (as written by the sender, so frames lost on an impaired wire appear once);
//! one capture can be lent to several nodes in turn (both sides of a single-threaded
//! run).

use squall_port::pcap::PcapWriter;

/// A pcap capture of selected flows.
pub struct PcapCap {
    w: PcapWriter<Vec<u8>>,
    /// Client endpoints (ip, port) of the captured flows.
    keys: Vec<(u32, u16)>,
    max: usize,
}

impl PcapCap {
    /// Captures the first `max_flows` client flows.
    pub fn new(max_flows: usize) -> Self {
        PcapCap {
            // Writing to a Vec cannot fail.
            w: PcapWriter::new(Vec::new()).expect("pcap header into a Vec"),
            keys: Vec::new(),
            max: max_flows,
        }
    }

    /// A client flow from `ip:port` is about to be opened: capture it if still under N.
    pub fn want(&mut self, ip: u32, port: u16) {
        if self.keys.len() < self.max && !self.keys.contains(&(ip, port)) {
            self.keys.push((ip, port));
        }
    }

    /// A frame was transmitted at `now`: record it if it belongs to a captured flow.
    pub fn frame(&mut self, now: u64, f: &[u8]) {
        if self.keys.is_empty() {
            return;
        }
        if let Some((src, sport, dst, dport)) = endpoints(f) {
            if self.keys.contains(&(src, sport)) || self.keys.contains(&(dst, dport)) {
                self.w.record(now, f);
            }
        }
    }

    /// Frames recorded so far.
    pub fn records(&self) -> u64 {
        self.w.records()
    }

    /// The pcap file bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.w.into_inner().unwrap_or_default()
    }
}

impl crate::FrameTap for PcapCap {
    fn frame(&mut self, now: u64, data: &[u8]) {
        PcapCap::frame(self, now, data)
    }
    fn watch(&mut self, ip: u32, port: u16) {
        self.want(ip, port)
    }
}

/// (src ip, src port, dst ip, dst port) of an Ethernet/IPv4/TCP or UDP frame (with or
/// without an 802.1Q tag); of an IPv6 one with TCP or UDP right after the fixed header,
/// the low 32 bits of its addresses (a generator's pool values, what it watches).
fn endpoints(f: &[u8]) -> Option<(u32, u16, u32, u16)> {
    let l2 = if f.get(12..14) == Some(&[0x81, 0x00]) {
        18
    } else {
        14
    };
    let ip = |o: usize| u32::from_be_bytes([f[o], f[o + 1], f[o + 2], f[o + 3]]);
    let port = |o: usize| u16::from_be_bytes([f[o], f[o + 1]]);
    if f.len() >= l2 + 44 && f[l2 - 2..l2] == [0x86, 0xdd] && matches!(f[l2 + 6], 6 | 17) {
        let l4 = l2 + 40;
        return Some((ip(l2 + 20), port(l4), ip(l2 + 36), port(l4 + 2)));
    }
    if f.len() < l2 + 20 || f[l2 - 2..l2] != [0x08, 0x00] || !matches!(f[l2 + 9], 6 | 17) {
        return None;
    }
    let ihl = usize::from(f[l2] & 0x0f) * 4;
    let l4 = l2 + ihl;
    if ihl < 20 || f.len() < l4 + 4 {
        return None;
    }
    Some((ip(l2 + 12), port(l4), ip(l2 + 16), port(l4 + 2)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(src: u32, sport: u16, dst: u32, dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 54];
        f[12] = 8;
        f[14] = 0x45;
        f[23] = 6;
        f[26..30].copy_from_slice(&src.to_be_bytes());
        f[30..34].copy_from_slice(&dst.to_be_bytes());
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f
    }

    #[test]
    fn records_only_wanted_flows_both_directions() {
        let mut p = PcapCap::new(1);
        p.want(1, 1000);
        p.want(2, 1000); // over the limit: ignored
        p.frame(5, &frame(1, 1000, 9, 80));
        p.frame(6, &frame(9, 80, 1, 1000));
        p.frame(7, &frame(2, 1000, 9, 80));
        p.frame(8, &[0u8; 10]);
        // An 802.1Q-tagged frame of the wanted flow is recorded too.
        let f = frame(9, 80, 1, 1000);
        let mut t = f[..12].to_vec();
        t.extend_from_slice(&[0x81, 0x00, 0x00, 0x64]);
        t.extend_from_slice(&f[12..]);
        p.frame(9, &t);
        assert_eq!(p.records(), 3);
        let bytes = p.into_bytes();
        let (_, recs) = squall_port::pcap::read_pcap(&bytes).unwrap();
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[1].ts_ns, 6);
        assert_eq!(recs[2].data.len(), 58);
    }

    #[test]
    fn ipv6_flows_are_watched_by_the_low_32_bits() {
        let mut f = vec![0u8; 74];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14] = 0x60;
        f[20] = 6;
        f[22..38].copy_from_slice(&[0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 1]);
        f[38..54].copy_from_slice(&[0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0x30, 0, 0, 1]);
        f[54..56].copy_from_slice(&1025u16.to_be_bytes());
        f[56..58].copy_from_slice(&80u16.to_be_bytes());
        assert_eq!(endpoints(&f), Some((0x1000_0001, 1025, 0x3000_0001, 80)));
        let mut p = PcapCap::new(1);
        p.want(0x1000_0001, 1025);
        p.frame(1, &f);
        f[20] = 58; // ICMPv6: not a flow's
        p.frame(2, &f);
        assert_eq!(p.records(), 1);
    }
}
