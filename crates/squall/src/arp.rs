//! ARP for runs on a real interface: [`ArpPort`] wraps a port, answers ARP requests for
//! the addresses Squall owns (client pool or server addresses) with the port's MAC,
//! learns MACs from ARP it sees, and keeps frames that are neither ARP nor IPv4 to us
//! (IPv6, LLDP, other hosts' unicast) away from the TCP host (counted and dropped).
//! [`resolve`] asks for the peer's MAC before the run starts.

use std::time::{Duration, Instant};

use squall_port::{FrameBuf, Port, PortCaps, PortStats};
use squall_wire::{ArpOperation, ArpPacket, ArpRepr, Ipv4Address, MacAddress, ARP_LEN};

const ETH_HLEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const BROADCAST: [u8; 6] = [0xff; 6];

/// Inclusive IPv4 ranges (host order) Squall answers ARP for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Owned(pub Vec<(u32, u32)>);

impl Owned {
    /// Whether `ip` (host order) is in one of the ranges.
    pub fn contains(&self, ip: u32) -> bool {
        self.0.iter().any(|&(a, b)| a <= ip && ip <= b)
    }
}

/// ARP and filter counters of an [`ArpPort`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArpStats {
    /// Requests for our addresses answered.
    pub requests_answered: u64,
    /// ARP frames not for us (other targets, replies, malformed).
    pub arp_ignored: u64,
    /// Non-ARP frames dropped: not IPv4, or unicast to another MAC.
    pub unrelated: u64,
    /// Replies that could not be sent (no tx frame).
    pub reply_failed: u64,
}

/// What to do with a received frame.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// IPv4 to us: give it to the stack.
    Pass,
    /// An ARP request for an address we own: answer with this reply.
    Answer(ArpRepr),
    /// ARP not for us (the sender is reported for learning).
    ArpOther(Option<(Ipv4Address, MacAddress)>),
    /// Anything else.
    Unrelated,
}

fn ethertype(d: &[u8]) -> Option<u16> {
    Some(u16::from_be_bytes([*d.get(12)?, *d.get(13)?]))
}

/// Classifies frame `d` for a port with MAC `mac` owning `owned`.
pub fn classify(d: &[u8], mac: [u8; 6], owned: &Owned) -> Verdict {
    match ethertype(d) {
        Some(ETHERTYPE_IPV4) if d[..6] == mac || d[..6] == BROADCAST => Verdict::Pass,
        Some(ETHERTYPE_ARP) => {
            let Ok(p) = ArpPacket::new_checked(&d[ETH_HLEN..]) else {
                return Verdict::ArpOther(None);
            };
            let a = ArpRepr::parse(&p);
            let target = u32::from_be_bytes(a.target_ip.0);
            if a.operation == ArpOperation::REQUEST && owned.contains(target) {
                Verdict::Answer(ArpRepr::reply_to(&a, MacAddress(mac)))
            } else {
                Verdict::ArpOther(Some((a.sender_ip, a.sender_mac)))
            }
        }
        _ => Verdict::Unrelated,
    }
}

/// Writes an Ethernet + ARP frame for `a` into `buf` (at least 60 bytes, padded);
/// returns its length.
pub fn emit_frame(a: &ArpRepr, src: [u8; 6], buf: &mut [u8]) -> Option<usize> {
    let len = 60;
    let b = buf.get_mut(..len)?;
    b.fill(0);
    let dst = if a.operation == ArpOperation::REQUEST {
        BROADCAST
    } else {
        a.target_mac.0
    };
    b[..6].copy_from_slice(&dst);
    b[6..12].copy_from_slice(&src);
    b[12..14].copy_from_slice(&ETHERTYPE_ARP.to_be_bytes());
    a.emit(&mut b[ETH_HLEN..ETH_HLEN + ARP_LEN]).ok()?;
    Some(len)
}

/// Sends one ARP frame through `port`; false if no frame was available or it was not taken.
fn send<P: Port>(port: &mut P, a: &ArpRepr, mac: [u8; 6], v: &mut Vec<P::Frame>) -> bool {
    if port.alloc_tx(v, 1) == 0 {
        return false;
    }
    let Some(mut f) = v.pop() else { return false };
    let ok = f.set_len(60).is_ok() && emit_frame(a, mac, f.data_mut()).is_some();
    if !ok {
        port.release(f);
        return false;
    }
    v.push(f);
    port.tx_burst(v);
    if v.is_empty() {
        true
    } else {
        port.release_all(v);
        false
    }
}

/// A port that handles ARP for Squall's addresses and filters unrelated frames.
pub struct ArpPort<P: Port> {
    pub inner: P,
    mac: [u8; 6],
    owned: Owned,
    pub arp: ArpStats,
    tmp: Vec<P::Frame>,
    txv: Vec<P::Frame>,
}

impl<P: Port> ArpPort<P> {
    /// Wraps `inner`; answers for `owned`.
    pub fn new(inner: P, owned: Owned) -> Self {
        let mac = inner.caps().mac;
        ArpPort {
            inner,
            mac,
            owned,
            arp: ArpStats::default(),
            tmp: Vec::with_capacity(64),
            txv: Vec::with_capacity(2),
        }
    }
}

impl<P: Port> Port for ArpPort<P> {
    type Frame = P::Frame;

    fn rx_burst(&mut self, out: &mut Vec<P::Frame>, max: usize) -> usize {
        let mut tmp = std::mem::take(&mut self.tmp);
        let n = self.inner.rx_burst(&mut tmp, max);
        let mut k = 0;
        for f in tmp.drain(..n) {
            match classify(f.data(), self.mac, &self.owned) {
                Verdict::Pass => {
                    out.push(f);
                    k += 1;
                }
                Verdict::Answer(r) => {
                    self.inner.release(f);
                    if send(&mut self.inner, &r, self.mac, &mut self.txv) {
                        self.arp.requests_answered += 1;
                    } else {
                        self.arp.reply_failed += 1;
                    }
                }
                Verdict::ArpOther(_) => {
                    self.arp.arp_ignored += 1;
                    self.inner.release(f);
                }
                Verdict::Unrelated => {
                    self.arp.unrelated += 1;
                    self.inner.release(f);
                }
            }
        }
        self.tmp = tmp;
        k
    }
    fn alloc_tx(&mut self, out: &mut Vec<P::Frame>, n: usize) -> usize {
        self.inner.alloc_tx(out, n)
    }
    fn tx_burst(&mut self, frames: &mut Vec<P::Frame>) -> usize {
        self.inner.tx_burst(frames)
    }
    fn release(&mut self, frame: P::Frame) {
        self.inner.release(frame)
    }
    fn caps(&self) -> PortCaps {
        self.inner.caps()
    }
    fn stats(&self) -> PortStats {
        self.inner.stats()
    }
    fn set_time(&mut self, now_ns: u64) {
        self.inner.set_time(now_ns)
    }
    fn next_event_ns(&self) -> Option<u64> {
        self.inner.next_event_ns()
    }
}

/// Asks for `target`'s MAC (from `my_ip`) through `port`, every 200 ms until `timeout`;
/// answers requests for `owned` meanwhile (the peer may ask first). Other frames are
/// dropped (nothing runs yet).
pub fn resolve<P: Port>(
    port: &mut P,
    owned: &Owned,
    my_ip: [u8; 4],
    target: [u8; 4],
    timeout: Duration,
) -> Result<[u8; 6], String> {
    let mac = port.caps().mac;
    let req = ArpRepr::request(MacAddress(mac), Ipv4Address(my_ip), Ipv4Address(target));
    let t0 = Instant::now();
    let mut last: Option<Instant> = None;
    let mut rx = Vec::with_capacity(64);
    let mut txv = Vec::with_capacity(2);
    while t0.elapsed() < timeout {
        if last.is_none_or(|l| l.elapsed() >= Duration::from_millis(200)) {
            send(port, &req, mac, &mut txv);
            last = Some(Instant::now());
        }
        let n = port.rx_burst(&mut rx, 64);
        let mut found = None;
        for f in rx.drain(..) {
            match classify(f.data(), mac, owned) {
                Verdict::Answer(r) => {
                    if r.target_ip.0 == target {
                        found = Some(r.target_mac.0);
                    }
                    send(port, &r, mac, &mut txv);
                }
                Verdict::ArpOther(Some((ip, m))) if ip.0 == target && m.0 != [0; 6] => {
                    found = Some(m.0);
                }
                _ => {}
            }
            port.release(f);
        }
        if let Some(m) = found {
            return Ok(m);
        }
        if n == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    Err(format!(
        "no ARP reply from {} within {:.1} s (give --peer-mac, or check the peer's address)",
        Ipv4Address(target),
        timeout.as_secs_f64()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use squall_port::mem::{self, MemConfig};

    const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

    fn owned() -> Owned {
        Owned(vec![(0xc612_1000, 0xc612_10ff)]) // 198.18.16.0/24
    }

    #[test]
    fn answers_only_requests_for_owned_addresses() {
        let req = ArpRepr::request(
            MacAddress(B),
            Ipv4Address([198, 18, 0, 1]),
            Ipv4Address([198, 18, 16, 7]),
        );
        let mut buf = [0u8; 64];
        let n = emit_frame(&req, B, &mut buf).unwrap();
        assert_eq!(n, 60);
        assert_eq!(buf[..6], BROADCAST);
        match classify(&buf[..n], A, &owned()) {
            Verdict::Answer(r) => {
                assert_eq!(r.operation, ArpOperation::REPLY);
                assert_eq!(r.sender_mac.0, A);
                assert_eq!(r.sender_ip.0, [198, 18, 16, 7]);
                assert_eq!(r.target_mac.0, B);
                assert_eq!(r.target_ip.0, [198, 18, 0, 1]);
            }
            v => panic!("{v:?}"),
        }
        let other = ArpRepr::request(
            MacAddress(B),
            Ipv4Address([198, 18, 0, 1]),
            Ipv4Address([198, 18, 17, 7]),
        );
        emit_frame(&other, B, &mut buf).unwrap();
        assert_eq!(
            classify(&buf[..60], A, &owned()),
            Verdict::ArpOther(Some((Ipv4Address([198, 18, 0, 1]), MacAddress(B))))
        );
        // Truncated ARP, IPv6, unicast IPv4 to another MAC.
        assert_eq!(classify(&buf[..20], A, &owned()), Verdict::ArpOther(None));
        let mut f = [0u8; 60];
        f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        assert_eq!(classify(&f, A, &owned()), Verdict::Unrelated);
        f[..6].copy_from_slice(&B);
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        assert_eq!(classify(&f, A, &owned()), Verdict::Unrelated);
        f[..6].copy_from_slice(&A);
        assert_eq!(classify(&f, A, &owned()), Verdict::Pass);
        assert_eq!(classify(&f[..5], A, &owned()), Verdict::Unrelated);
    }

    /// Two ArpPorts over the in-memory wire: `resolve` on one learns the other's MAC
    /// from its reply.
    #[test]
    fn resolve_learns_the_peer_mac_over_a_wire() {
        let (a, b) = mem::pair(MemConfig::default()).unwrap();
        let (ma, mb) = (a.caps().mac, b.caps().mac);
        assert_ne!(ma, mb);
        let srv = Owned(vec![(0xc612_3001, 0xc612_3001)]); // 198.18.48.1
        let mut b = ArpPort::new(b, srv);
        let h = std::thread::spawn(move || {
            let mut v = Vec::new();
            for _ in 0..2000 {
                b.rx_burst(&mut v, 16);
                b.release_all(&mut v);
                if b.arp.requests_answered > 0 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            b.arp
        });
        let mut a = a;
        let got = resolve(
            &mut a,
            &owned(),
            [198, 18, 16, 1],
            [198, 18, 48, 1],
            Duration::from_secs(5),
        );
        let st = h.join().unwrap();
        assert_eq!(got, Ok(mb));
        assert_eq!(st.requests_answered, 1);
        let (mut c, _d) = mem::pair(MemConfig::default()).unwrap();
        let e = resolve(
            &mut c,
            &owned(),
            [198, 18, 16, 1],
            [198, 18, 48, 1],
            Duration::from_millis(300),
        );
        assert!(e.unwrap_err().contains("no ARP reply from 198.18.48.1"));
    }
}
