//! ICMPv6 (RFC 4443) and neighbour discovery (RFC 4861): the [`Icmpv6Packet`] view
//! (checksum over the IPv6 pseudo-header), the NDP option iterator [`NdpOptionIter`],
//! and the [`Icmpv6Repr`] builder/parser for echo, neighbour solicitation and
//! advertisement, router solicitation and advertisement (read for the gateway), and
//! packet-too-big.

use crate::checksum;
use crate::field::{get_u16, get_u32, set_u16, set_u32};
use crate::{Error, IpProtocol, Ipv6Address, MacAddress, Result};

/// Length of the ICMPv6 header (type, code, checksum, 4 bytes message-specific).
pub const ICMPV6_HEADER_LEN: usize = 8;
/// The hop limit neighbour discovery messages must be sent and received with
/// (RFC 4861 §7.1): a smaller one means the message crossed a router.
pub const NDP_HOP_LIMIT: u8 = 255;

/// ICMPv6 message types this crate names.
pub mod msg_type {
    /// Destination unreachable.
    pub const DEST_UNREACHABLE: u8 = 1;
    /// Packet too big.
    pub const PACKET_TOO_BIG: u8 = 2;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 3;
    /// Parameter problem.
    pub const PARAM_PROBLEM: u8 = 4;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 128;
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 129;
    /// Router solicitation.
    pub const ROUTER_SOLICIT: u8 = 133;
    /// Router advertisement.
    pub const ROUTER_ADVERT: u8 = 134;
    /// Neighbour solicitation.
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    /// Neighbour advertisement.
    pub const NEIGHBOR_ADVERT: u8 = 136;
}

/// NDP option types (RFC 4861 §4.6).
pub mod ndp_option {
    /// Source link-layer address.
    pub const SOURCE_LL_ADDR: u8 = 1;
    /// Target link-layer address.
    pub const TARGET_LL_ADDR: u8 = 2;
    /// Prefix information.
    pub const PREFIX_INFO: u8 = 3;
    /// MTU.
    pub const MTU: u8 = 5;
}

/// A read/write view of an ICMPv6 message (the upper-layer packet of an IPv6 packet).
/// `new_checked` guarantees at least 8 bytes; the checksum covers the whole buffer and
/// the IPv6 pseudo-header, so pass exactly the upper-layer packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Wrap without validation (accessors may panic on short buffers).
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Icmpv6Packet { buffer }
    }

    /// Wrap after checking the 8-byte header is present.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < ICMPV6_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Icmpv6Packet { buffer })
    }

    /// Give back the wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Message type.
    #[inline]
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// Message code.
    #[inline]
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), 2)
    }

    /// Echo identifier (bytes 4..6; meaningful for echo messages).
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), 4)
    }

    /// Echo sequence number (bytes 6..8; meaningful for echo messages).
    #[inline]
    pub fn echo_seq(&self) -> u16 {
        get_u16(self.buffer.as_ref(), 6)
    }

    /// The 32-bit word after the checksum (the MTU of packet-too-big, the pointer of
    /// parameter problem, the flags of a neighbour advertisement).
    #[inline]
    pub fn word1(&self) -> u32 {
        get_u32(self.buffer.as_ref(), 4)
    }

    /// Data after the 8-byte header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[ICMPV6_HEADER_LEN..]
    }

    /// The whole message.
    #[inline]
    pub fn message(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// True if the checksum verifies between `src` and `dst`.
    #[inline]
    pub fn verify_checksum(&self, src: &Ipv6Address, dst: &Ipv6Address) -> bool {
        let b = self.buffer.as_ref();
        let ph = checksum::pseudo_header_ipv6(src, dst, IpProtocol::ICMPV6.0, b.len() as u32);
        checksum::add(ph, checksum::sum(b)) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    /// Set the type.
    #[inline]
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[0] = v;
    }

    /// Set the code.
    #[inline]
    pub fn set_code(&mut self, v: u8) {
        self.buffer.as_mut()[1] = v;
    }

    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), 2, v);
    }

    /// Set the 32-bit word after the checksum.
    #[inline]
    pub fn set_word1(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), 4, v);
    }

    /// Compute and store the checksum between `src` and `dst`.
    #[inline]
    pub fn fill_checksum(&mut self, src: &Ipv6Address, dst: &Ipv6Address) {
        self.set_checksum(0);
        let b = self.buffer.as_ref();
        let ph = checksum::pseudo_header_ipv6(src, dst, IpProtocol::ICMPV6.0, b.len() as u32);
        let c = !checksum::add(ph, checksum::sum(b));
        self.set_checksum(c);
    }

    /// Mutable data after the header.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[ICMPV6_HEADER_LEN..]
    }
}

/// The prefix information option of a router advertisement (RFC 4861 §4.6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PrefixInfo {
    /// Prefix length in bits.
    pub prefix_len: u8,
    /// On-link flag (L).
    pub on_link: bool,
    /// Autonomous address-configuration flag (A).
    pub autonomous: bool,
    /// Valid lifetime, seconds.
    pub valid_lifetime: u32,
    /// Preferred lifetime, seconds.
    pub preferred_lifetime: u32,
    /// The prefix.
    pub prefix: Ipv6Address,
}

/// One NDP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NdpOption<'a> {
    /// Source link-layer address (Ethernet).
    SourceLinkAddr(MacAddress),
    /// Target link-layer address (Ethernet).
    TargetLinkAddr(MacAddress),
    /// Prefix information.
    PrefixInfo(PrefixInfo),
    /// Link MTU.
    Mtu(u32),
    /// Any other option (or a link-layer address option not 8 bytes long), kept raw:
    /// the bytes after type and length.
    Unknown {
        /// Option type.
        kind: u8,
        /// Option data.
        data: &'a [u8],
    },
}

impl NdpOption<'_> {
    /// Bytes the option takes on the wire (a multiple of 8).
    pub fn wire_len(&self) -> usize {
        match self {
            NdpOption::SourceLinkAddr(_) | NdpOption::TargetLinkAddr(_) | NdpOption::Mtu(_) => 8,
            NdpOption::PrefixInfo(_) => 32,
            NdpOption::Unknown { data, .. } => (2 + data.len()).div_ceil(8) * 8,
        }
    }

    /// Write the option (zero-padded to a multiple of 8); returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let n = self.wire_len();
        let b = buf.get_mut(..n).ok_or(Error::NoSpace)?;
        b.fill(0);
        b[1] = (n / 8) as u8;
        match *self {
            NdpOption::SourceLinkAddr(m) | NdpOption::TargetLinkAddr(m) => {
                b[0] = if matches!(self, NdpOption::SourceLinkAddr(_)) {
                    ndp_option::SOURCE_LL_ADDR
                } else {
                    ndp_option::TARGET_LL_ADDR
                };
                b[2..8].copy_from_slice(&m.0);
            }
            NdpOption::Mtu(m) => {
                b[0] = ndp_option::MTU;
                set_u32(b, 4, m);
            }
            NdpOption::PrefixInfo(p) => {
                b[0] = ndp_option::PREFIX_INFO;
                b[2] = p.prefix_len;
                b[3] = (p.on_link as u8) << 7 | (p.autonomous as u8) << 6;
                set_u32(b, 4, p.valid_lifetime);
                set_u32(b, 8, p.preferred_lifetime);
                b[16..32].copy_from_slice(&p.prefix.0);
            }
            NdpOption::Unknown { kind, data } => {
                if n / 8 > 255 {
                    return Err(Error::NoSpace);
                }
                b[0] = kind;
                b[2..2 + data.len()].copy_from_slice(data);
            }
        }
        Ok(n)
    }
}

/// Iterates over the NDP options of a message. Total: yields `Err(Error::Malformed)`
/// once (and then stops) for an option of length 0 (RFC 4861 §4.6: such a packet is
/// discarded) or `Err(Error::Truncated)` for one that runs past the buffer.
#[derive(Debug, Clone)]
pub struct NdpOptionIter<'a> {
    rest: &'a [u8],
}

impl<'a> NdpOptionIter<'a> {
    /// Iterate over the options in `opts`.
    pub fn new(opts: &'a [u8]) -> Self {
        NdpOptionIter { rest: opts }
    }
}

impl<'a> Iterator for NdpOptionIter<'a> {
    type Item = Result<NdpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let r = self.rest;
        if r.len() < 2 {
            self.rest = &[];
            return Some(Err(Error::Truncated));
        }
        let len = r[1] as usize * 8;
        if len == 0 {
            self.rest = &[];
            return Some(Err(Error::Malformed));
        }
        if r.len() < len {
            self.rest = &[];
            return Some(Err(Error::Truncated));
        }
        self.rest = &r[len..];
        let o = &r[..len];
        let opt = match (o[0], len) {
            (ndp_option::SOURCE_LL_ADDR, 8) => {
                NdpOption::SourceLinkAddr(MacAddress::from_bytes(&o[2..]).unwrap_or_default())
            }
            (ndp_option::TARGET_LL_ADDR, 8) => {
                NdpOption::TargetLinkAddr(MacAddress::from_bytes(&o[2..]).unwrap_or_default())
            }
            (ndp_option::MTU, 8) => NdpOption::Mtu(get_u32(o, 4)),
            (ndp_option::PREFIX_INFO, 32) => NdpOption::PrefixInfo(PrefixInfo {
                prefix_len: o[2],
                on_link: o[3] & 0x80 != 0,
                autonomous: o[3] & 0x40 != 0,
                valid_lifetime: get_u32(o, 4),
                preferred_lifetime: get_u32(o, 8),
                prefix: Ipv6Address::from_bytes(&o[16..]).unwrap_or_default(),
            }),
            (kind, _) => NdpOption::Unknown {
                kind,
                data: &o[2..],
            },
        };
        Some(Ok(opt))
    }
}

/// The flags of a neighbour advertisement (RFC 4861 §4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NaFlags {
    /// R: the sender is a router.
    pub router: bool,
    /// S: sent in response to a solicitation.
    pub solicited: bool,
    /// O: override an existing cache entry.
    pub override_: bool,
}

/// The fields of a router advertisement this crate reads (RFC 4861 §4.2): enough to
/// take the sender as the default gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RouterAdvert {
    /// Current hop limit advised (0: unspecified).
    pub hop_limit: u8,
    /// M and O flags and the rest of that byte, raw.
    pub flags: u8,
    /// Router lifetime in seconds (0: not a default router).
    pub router_lifetime: u16,
    /// Reachable time, ms.
    pub reachable_time: u32,
    /// Retransmission timer, ms.
    pub retrans_timer: u32,
    /// The router's link-layer address, if the source link-layer option is present.
    pub source_mac: Option<MacAddress>,
    /// Link MTU, if the MTU option is present.
    pub mtu: Option<u32>,
    /// The first prefix information option, if any.
    pub prefix: Option<PrefixInfo>,
}

/// A high-level description of the ICMPv6 messages this crate builds and reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv6Repr<'a> {
    /// Echo request or reply.
    Echo {
        /// True for a reply (129), false for a request (128).
        is_reply: bool,
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq: u16,
        /// The echoed data.
        data: &'a [u8],
    },
    /// Neighbour solicitation.
    NeighborSolicit {
        /// The address whose link-layer address is asked for.
        target: Ipv6Address,
        /// The sender's link-layer address (absent in duplicate address detection).
        source_mac: Option<MacAddress>,
    },
    /// Neighbour advertisement.
    NeighborAdvert {
        /// R, S, O flags.
        flags: NaFlags,
        /// The address advertised.
        target: Ipv6Address,
        /// Its link-layer address.
        target_mac: Option<MacAddress>,
    },
    /// Router solicitation.
    RouterSolicit {
        /// The sender's link-layer address.
        source_mac: Option<MacAddress>,
    },
    /// Router advertisement.
    RouterAdvert(RouterAdvert),
    /// Packet too big: the next-hop MTU and as much of the invoking packet as fits.
    PacketTooBig {
        /// The MTU of the next-hop link.
        mtu: u32,
        /// The start of the packet that did not fit.
        invoking: &'a [u8],
    },
}

/// The first source or target link-layer address option of `opts` (the other kinds
/// skipped); errors from the option walk are returned.
fn link_addr(opts: &[u8], want_source: bool) -> Result<Option<MacAddress>> {
    let mut found = None;
    for o in NdpOptionIter::new(opts) {
        match (o?, want_source) {
            (NdpOption::SourceLinkAddr(m), true) | (NdpOption::TargetLinkAddr(m), false) => {
                found = found.or(Some(m));
            }
            _ => {}
        }
    }
    Ok(found)
}

impl<'a> Icmpv6Repr<'a> {
    /// Parse a checked message (the checksum is not verified here). NDP messages are
    /// validated as RFC 4861 §7.1 asks of their content (code 0, minimum length, a
    /// unicast target, option lengths); the hop limit of 255 is the IP layer's check
    /// ([`NDP_HOP_LIMIT`]). Other types: [`Error::Unsupported`].
    pub fn parse(p: &Icmpv6Packet<&'a [u8]>) -> Result<Icmpv6Repr<'a>> {
        let b: &'a [u8] = p.buffer;
        let ndp = matches!(
            p.msg_type(),
            msg_type::ROUTER_SOLICIT
                | msg_type::ROUTER_ADVERT
                | msg_type::NEIGHBOR_SOLICIT
                | msg_type::NEIGHBOR_ADVERT
        );
        if ndp && p.code() != 0 {
            return Err(Error::Malformed);
        }
        let target = || -> Result<Ipv6Address> {
            let t = Ipv6Address::from_bytes(b.get(8..24).ok_or(Error::Truncated)?)
                .ok_or(Error::Truncated)?;
            if t.is_multicast() {
                return Err(Error::Malformed);
            }
            Ok(t)
        };
        match p.msg_type() {
            msg_type::ECHO_REQUEST | msg_type::ECHO_REPLY if p.code() == 0 => {
                Ok(Icmpv6Repr::Echo {
                    is_reply: p.msg_type() == msg_type::ECHO_REPLY,
                    ident: p.echo_ident(),
                    seq: p.echo_seq(),
                    data: &b[ICMPV6_HEADER_LEN..],
                })
            }
            msg_type::NEIGHBOR_SOLICIT => Ok(Icmpv6Repr::NeighborSolicit {
                target: target()?,
                source_mac: link_addr(&b[24..], true)?,
            }),
            msg_type::NEIGHBOR_ADVERT => {
                let w = p.word1();
                Ok(Icmpv6Repr::NeighborAdvert {
                    flags: NaFlags {
                        router: w & 0x8000_0000 != 0,
                        solicited: w & 0x4000_0000 != 0,
                        override_: w & 0x2000_0000 != 0,
                    },
                    target: target()?,
                    target_mac: link_addr(&b[24..], false)?,
                })
            }
            msg_type::ROUTER_SOLICIT => Ok(Icmpv6Repr::RouterSolicit {
                source_mac: link_addr(&b[8..], true)?,
            }),
            msg_type::ROUTER_ADVERT => {
                if b.len() < 16 {
                    return Err(Error::Truncated);
                }
                let mut ra = RouterAdvert {
                    hop_limit: b[4],
                    flags: b[5],
                    router_lifetime: get_u16(b, 6),
                    reachable_time: get_u32(b, 8),
                    retrans_timer: get_u32(b, 12),
                    source_mac: None,
                    mtu: None,
                    prefix: None,
                };
                for o in NdpOptionIter::new(&b[16..]) {
                    match o? {
                        NdpOption::SourceLinkAddr(m) => ra.source_mac = ra.source_mac.or(Some(m)),
                        NdpOption::Mtu(m) => ra.mtu = ra.mtu.or(Some(m)),
                        NdpOption::PrefixInfo(pi) => ra.prefix = ra.prefix.or(Some(pi)),
                        _ => {}
                    }
                }
                Ok(Icmpv6Repr::RouterAdvert(ra))
            }
            msg_type::PACKET_TOO_BIG if p.code() == 0 => Ok(Icmpv6Repr::PacketTooBig {
                mtu: p.word1(),
                invoking: &b[ICMPV6_HEADER_LEN..],
            }),
            _ => Err(Error::Unsupported),
        }
    }

    /// The message length [`emit`](Self::emit) writes.
    pub fn buffer_len(&self) -> usize {
        let ll = |m: &Option<MacAddress>| if m.is_some() { 8 } else { 0 };
        match self {
            Icmpv6Repr::Echo { data, .. } => ICMPV6_HEADER_LEN + data.len(),
            Icmpv6Repr::NeighborSolicit { source_mac, .. } => 24 + ll(source_mac),
            Icmpv6Repr::NeighborAdvert { target_mac, .. } => 24 + ll(target_mac),
            Icmpv6Repr::RouterSolicit { source_mac } => 8 + ll(source_mac),
            Icmpv6Repr::RouterAdvert(ra) => {
                16 + ll(&ra.source_mac)
                    + if ra.mtu.is_some() { 8 } else { 0 }
                    + if ra.prefix.is_some() { 32 } else { 0 }
            }
            Icmpv6Repr::PacketTooBig { invoking, .. } => {
                // The whole message stays within the minimum MTU (RFC 4443 §2.4 (c)).
                ICMPV6_HEADER_LEN + invoking.len().min(IPV6_PTB_MAX_INVOKING)
            }
        }
    }

    /// Write the message with its checksum between `src` and `dst`; returns its length.
    pub fn emit(&self, buf: &mut [u8], src: &Ipv6Address, dst: &Ipv6Address) -> Result<usize> {
        let n = self.buffer_len();
        let b = buf.get_mut(..n).ok_or(Error::NoSpace)?;
        b[..ICMPV6_HEADER_LEN].fill(0);
        let (ty, w1): (u8, u32) = match *self {
            Icmpv6Repr::Echo {
                is_reply,
                ident,
                seq,
                data,
            } => {
                b[ICMPV6_HEADER_LEN..].copy_from_slice(data);
                let t = if is_reply {
                    msg_type::ECHO_REPLY
                } else {
                    msg_type::ECHO_REQUEST
                };
                (t, (ident as u32) << 16 | seq as u32)
            }
            Icmpv6Repr::NeighborSolicit { target, source_mac } => {
                b[8..24].copy_from_slice(&target.0);
                if let Some(m) = source_mac {
                    NdpOption::SourceLinkAddr(m).emit(&mut b[24..])?;
                }
                (msg_type::NEIGHBOR_SOLICIT, 0)
            }
            Icmpv6Repr::NeighborAdvert {
                flags,
                target,
                target_mac,
            } => {
                b[8..24].copy_from_slice(&target.0);
                if let Some(m) = target_mac {
                    NdpOption::TargetLinkAddr(m).emit(&mut b[24..])?;
                }
                let w = (flags.router as u32) << 31
                    | (flags.solicited as u32) << 30
                    | (flags.override_ as u32) << 29;
                (msg_type::NEIGHBOR_ADVERT, w)
            }
            Icmpv6Repr::RouterSolicit { source_mac } => {
                if let Some(m) = source_mac {
                    NdpOption::SourceLinkAddr(m).emit(&mut b[8..])?;
                }
                (msg_type::ROUTER_SOLICIT, 0)
            }
            Icmpv6Repr::RouterAdvert(ra) => {
                set_u32(b, 8, ra.reachable_time);
                set_u32(b, 12, ra.retrans_timer);
                let mut at = 16;
                if let Some(m) = ra.source_mac {
                    at += NdpOption::SourceLinkAddr(m).emit(&mut b[at..])?;
                }
                if let Some(m) = ra.mtu {
                    at += NdpOption::Mtu(m).emit(&mut b[at..])?;
                }
                if let Some(pi) = ra.prefix {
                    NdpOption::PrefixInfo(pi).emit(&mut b[at..])?;
                }
                let w = (ra.hop_limit as u32) << 24
                    | (ra.flags as u32) << 16
                    | ra.router_lifetime as u32;
                (msg_type::ROUTER_ADVERT, w)
            }
            Icmpv6Repr::PacketTooBig { mtu, invoking } => {
                let k = n - ICMPV6_HEADER_LEN;
                b[ICMPV6_HEADER_LEN..].copy_from_slice(&invoking[..k]);
                (msg_type::PACKET_TOO_BIG, mtu)
            }
        };
        let mut p = Icmpv6Packet::new_unchecked(b);
        p.set_msg_type(ty);
        p.set_code(0);
        p.set_word1(w1);
        p.fill_checksum(src, dst);
        Ok(n)
    }
}

/// Most bytes of the invoking packet a packet-too-big message carries: the message
/// in its IPv6 packet stays within the minimum MTU (1280 - 40 - 8).
pub const IPV6_PTB_MAX_INVOKING: usize = crate::ipv6::IPV6_MIN_MTU - 48;

#[cfg(test)]
mod tests {
    use super::*;

    const A: Ipv6Address = Ipv6Address::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    const B: Ipv6Address = Ipv6Address::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
    const MAC: MacAddress = MacAddress([2, 0, 0, 0, 0, 9]);

    fn roundtrip(r: Icmpv6Repr<'_>) -> Vec<u8> {
        let mut buf = vec![0u8; 2000];
        let n = r.emit(&mut buf, &A, &B).unwrap();
        assert_eq!(n, r.buffer_len());
        buf.truncate(n);
        let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
        assert!(p.verify_checksum(&A, &B));
        assert!(!p.verify_checksum(&B, &B));
        assert_eq!(Icmpv6Repr::parse(&p).unwrap(), r);
        buf
    }

    #[test]
    fn messages_roundtrip() {
        let b = roundtrip(Icmpv6Repr::Echo {
            is_reply: false,
            ident: 0x1234,
            seq: 7,
            data: b"ping6",
        });
        assert_eq!(b[0], 128);
        roundtrip(Icmpv6Repr::NeighborSolicit {
            target: B,
            source_mac: Some(MAC),
        });
        roundtrip(Icmpv6Repr::NeighborSolicit {
            target: B,
            source_mac: None,
        });
        let b = roundtrip(Icmpv6Repr::NeighborAdvert {
            flags: NaFlags {
                router: false,
                solicited: true,
                override_: true,
            },
            target: A,
            target_mac: Some(MAC),
        });
        assert_eq!(&b[4..8], &[0x60, 0, 0, 0]);
        roundtrip(Icmpv6Repr::RouterSolicit { source_mac: None });
        roundtrip(Icmpv6Repr::RouterAdvert(RouterAdvert {
            hop_limit: 64,
            flags: 0x40,
            router_lifetime: 1800,
            reachable_time: 30_000,
            retrans_timer: 1000,
            source_mac: Some(MAC),
            mtu: Some(1500),
            prefix: Some(PrefixInfo {
                prefix_len: 64,
                on_link: true,
                autonomous: true,
                valid_lifetime: 86_400,
                preferred_lifetime: 14_400,
                prefix: Ipv6Address::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0),
            }),
        }));
        roundtrip(Icmpv6Repr::PacketTooBig {
            mtu: 1400,
            invoking: &[0x60; 100],
        });
    }

    #[test]
    fn packet_too_big_is_capped() {
        let big = [0x60u8; 1500];
        let r = Icmpv6Repr::PacketTooBig {
            mtu: 1280,
            invoking: &big,
        };
        assert_eq!(r.buffer_len() + 40, 1280);
        let mut buf = [0u8; 1500];
        let n = r.emit(&mut buf, &A, &B).unwrap();
        let p = Icmpv6Packet::new_checked(&buf[..n]).unwrap();
        assert!(p.verify_checksum(&A, &B));
        match Icmpv6Repr::parse(&p).unwrap() {
            Icmpv6Repr::PacketTooBig { mtu, invoking } => {
                assert_eq!(mtu, 1280);
                assert_eq!(invoking.len(), IPV6_PTB_MAX_INVOKING);
            }
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn ndp_validation() {
        let mut buf = [0u8; 64];
        let r = Icmpv6Repr::NeighborSolicit {
            target: B,
            source_mac: Some(MAC),
        };
        let n = r.emit(&mut buf, &A, &B).unwrap();
        // non-zero code
        let mut b = buf;
        b[1] = 1;
        let p = Icmpv6Packet::new_checked(&b[..n]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&p), Err(Error::Malformed));
        // multicast target
        let mut b = buf;
        b[8] = 0xff;
        let p = Icmpv6Packet::new_checked(&b[..n]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&p), Err(Error::Malformed));
        // option of length 0
        let mut b = buf;
        b[25] = 0;
        let p = Icmpv6Packet::new_checked(&b[..n]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&p), Err(Error::Malformed));
        // option running past the end
        let mut b = buf;
        b[25] = 2;
        let p = Icmpv6Packet::new_checked(&b[..n]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&p), Err(Error::Truncated));
        // too short for the target
        let p = Icmpv6Packet::new_checked(&buf[..20]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&p), Err(Error::Truncated));
        // an unknown type
        let mut b = buf;
        b[0] = 200;
        let p = Icmpv6Packet::new_checked(&b[..n]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&p), Err(Error::Unsupported));
        assert_eq!(Icmpv6Packet::new_checked(&buf[..7]), Err(Error::Truncated));
        assert_eq!(r.emit(&mut [0u8; 31], &A, &B), Err(Error::NoSpace));
    }

    #[test]
    fn option_iter_unknown_and_odd_lengths() {
        let mut opts = [0u8; 24];
        opts[0] = 14; // nonce option, 1 unit
        opts[1] = 1;
        opts[8] = ndp_option::SOURCE_LL_ADDR; // 2 units: not Ethernet, kept raw
        opts[9] = 2;
        let v: Vec<_> = NdpOptionIter::new(&opts).collect();
        assert_eq!(v.len(), 2);
        assert!(matches!(v[0], Ok(NdpOption::Unknown { kind: 14, data }) if data.len() == 6));
        assert!(matches!(v[1], Ok(NdpOption::Unknown { kind: 1, data }) if data.len() == 14));
        let o = NdpOption::Unknown {
            kind: 14,
            data: &[1, 2, 3, 4, 5, 6, 7],
        };
        let mut out = [0u8; 16];
        assert_eq!(o.emit(&mut out), Ok(16));
        assert_eq!(out[1], 2);
        assert_eq!(
            NdpOptionIter::new(&[1]).collect::<Vec<_>>(),
            vec![Err(Error::Truncated)]
        );
    }
}
