//! AF_PACKET fanout for several workers on one interface: N sockets join one fanout
//! group and a classic BPF program picks, for every received frame, the socket of the
//! worker that owns its flow — the one a port number names. The client side steers by
//! destination port, `port % N`, the rule by which `squall_astf::alloc` gives source ports
//! to cores (a reply's destination port is the source port its core chose). The server
//! side steers by the peer's source port, fixed for the life of the flow so every frame of
//! a flow reaches the same worker, through a multiplicative hash ([`peer_port_owner`]):
//! Linux gives `connect()` only even ephemeral ports, so a plain `% 2` would put every
//! connection of a Linux client on worker 0. IPv6 frames with TCP or UDP right after the
//! fixed header are steered by the same rule; other frames (ARP, ICMP, ICMPv6 and
//! neighbour discovery, IPv6 behind extension headers) go to worker 0, whose software
//! redirect passes flow frames on to their owner. Socket `k` is the `k`-th to join the
//! group, so workers must open their ports in order.
//!
//! The program reads the IP header through the kernel's `SKF_NET_OFF` window, so it does
//! not depend on where the socket's frame starts.
//!
//! [`FanoutBy::KernelHash`] is the plain kernel fanout (`PACKET_FANOUT_HASH`, the skb's flow
//! hash, no program): frames of one flow stay on one socket, but not on the worker that
//! owns the flow; the workers then pass them on through the software redirect (the
//! `--no-steering` run, and the functional test that shows the redirect count).

/// Which port of a frame names its worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanoutBy {
    /// The destination port (the client side: replies to our source ports).
    DstPort,
    /// The source port (the server side: the peer's port).
    SrcPort,
    /// No steering: the kernel's flow hash picks the socket (`PACKET_FANOUT_HASH`).
    KernelHash,
}

/// Membership in a fanout group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fanout {
    /// Group id (unique per interface among the processes using fanout on it); `None`:
    /// a new group whose id the kernel picks, unique in the network namespace
    /// (`PACKET_FANOUT_FLAG_UNIQUEID`) — the first member's, which the others then join
    /// ([`crate::afpacket::AfPacketPort::fanout`] reads it back).
    pub group: Option<u16>,
    /// Workers in the group (N).
    pub members: u16,
    pub by: FanoutBy,
}

/// Multiplier of the peer-port hash (Knuth's golden-ratio constant).
const PEER_MIX: u32 = 0x9E37_79B1;

/// The worker (of `n`) that owns the flows of a peer's source port (server side): bits
/// 16.. of `port * 0x9E3779B1` (32-bit), modulo `n`. The steering program computes the
/// same.
pub fn peer_port_owner(port: u16, n: u32) -> u32 {
    (u32::from(port).wrapping_mul(PEER_MIX) >> 16) % n.max(1)
}

const ETH_P_IP: u32 = 0x0800;
const ETH_P_IPV6: u32 = 0x86dd;
/// IPv6 fixed header length: the ports of TCP/UDP right after it.
const IPV6_HLEN: i32 = 40;
const IPPROTO_TCP: u32 = 6;
const IPPROTO_UDP: u32 = 17;

/// The classic BPF program of `f`: the index of the socket for a frame.
pub fn program(f: &Fanout) -> Vec<libc::sock_filter> {
    use libc::{
        BPF_ABS, BPF_ALU, BPF_B, BPF_H, BPF_IND, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_LDX, BPF_MOD,
        BPF_MSH, BPF_MUL, BPF_RET, BPF_RSH, SKF_AD_OFF, SKF_AD_PROTOCOL, SKF_NET_OFF,
    };
    let st = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jeq = |k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: (BPF_JMP | BPF_JEQ | BPF_K) as u16,
        jt,
        jf,
        k,
    };
    let net = |off: i32| (SKF_NET_OFF + off) as u32;
    // (KernelHash joins without a program; this one would steer by destination.)
    let (port_off, mul, shift) = match f.by {
        FanoutBy::SrcPort => (0, PEER_MIX, 16),
        FanoutBy::DstPort | FanoutBy::KernelHash => (2, 1, 0),
    };
    // A = the port in A: mixed (server side: A *= K, A >>= 16), A %= N, returned.
    let pick = [
        st(BPF_ALU | BPF_MUL | BPF_K, mul),
        st(BPF_ALU | BPF_RSH | BPF_K, shift),
        st(BPF_ALU | BPF_MOD | BPF_K, u32::from(f.members.max(1))),
        st(BPF_RET | libc::BPF_A, 0),
    ];
    let mut p = vec![
        // 0: A = ntohs(skb->protocol); not IPv4 -> 13 (IPv6?).
        st(
            BPF_LD | BPF_H | BPF_ABS,
            (SKF_AD_OFF + SKF_AD_PROTOCOL) as u32,
        ),
        jeq(ETH_P_IP, 0, 11),
        // 2: a fragment (more fragments, or an offset: no ports, or not at the header's
        // end) -> worker 0 (22), where the datagram is reassembled and handed to its
        // flow's worker.
        st(BPF_LD | BPF_H | BPF_ABS, net(6)),
        libc::sock_filter {
            code: (BPF_JMP | libc::BPF_JSET | BPF_K) as u16,
            jt: 18,
            jf: 0,
            k: 0x3fff,
        },
        // 4: A = IP protocol; TCP or UDP, else worker 0 (22).
        st(BPF_LD | BPF_B | BPF_ABS, net(9)),
        jeq(IPPROTO_TCP, 1, 0),
        jeq(IPPROTO_UDP, 0, 15),
        // 7: X = IP header length; A = the port; 9..=12: pick.
        st(BPF_LDX | BPF_B | BPF_MSH, net(0)),
        st(BPF_LD | BPF_H | BPF_IND, net(port_off)),
    ];
    p.extend(pick);
    p.extend([
        // 13: IPv6 with TCP or UDP as the next header, else worker 0 (fragments too: a
        // fragment header comes first).
        jeq(ETH_P_IPV6, 0, 8),
        st(BPF_LD | BPF_B | BPF_ABS, net(6)),
        jeq(IPPROTO_TCP, 1, 0),
        jeq(IPPROTO_UDP, 0, 5),
        // 17: A = the port after the fixed header; 18..=21: pick.
        st(BPF_LD | BPF_H | BPF_ABS, net(IPV6_HLEN + port_off)),
    ]);
    p.extend(pick);
    // 22: worker 0.
    p.push(st(BPF_RET | BPF_K, 0));
    p
}

/// Joins socket `fd` to the group of `f` (a new one with a kernel-picked id for
/// [`NEW_GROUP`]) and sets its program: the group's id. Errors name the step.
pub fn join(fd: libc::c_int, f: &Fanout) -> Result<u16, String> {
    use crate::afpacket::setopt;
    let kind = if f.by == FanoutBy::KernelHash {
        libc::PACKET_FANOUT_HASH
    } else {
        libc::PACKET_FANOUT_CBPF
    };
    // A group's hook replaces its members' own, so their PACKET_IGNORE_OUTGOING no longer
    // applies: without the group's flag, every frame sent by a socket outside the group
    // (the port's super-frame socket) comes back into some member's ring. Kernels before
    // the flag refuse it (EINVAL): the group is then joined without it.
    let (id, unique) = match f.group {
        Some(g) => (g, 0),
        None => (0, libc::PACKET_FANOUT_FLAG_UNIQUEID),
    };
    let arg = |flags: u32| (u32::from(id) | ((kind | flags | unique) << 16)) as libc::c_int;
    let joined = setopt(
        fd,
        libc::SOL_PACKET,
        libc::PACKET_FANOUT,
        &arg(libc::PACKET_FANOUT_FLAG_IGNORE_OUTGOING),
    ) || (std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL)
        && setopt(fd, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg(0)));
    if !joined {
        return Err(format!(
            "PACKET_FANOUT (group {}): {}",
            f.group.map_or("new".into(), |g| g.to_string()),
            std::io::Error::last_os_error()
        ));
    }
    // The id the group got (the kernel's pick for a new one): id | type << 16 | flags << 24.
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid for writes of an int and its length.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_FANOUT,
            &mut v as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    if r != 0 {
        return Err(format!(
            "PACKET_FANOUT (reading the group id): {}",
            std::io::Error::last_os_error()
        ));
    }
    let group = (v as u32 & 0xffff) as u16;
    if f.by == FanoutBy::KernelHash {
        return Ok(group);
    }
    let mut prog = program(f);
    // The kernel copies the program during the call; `prog` outlives it.
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    if !setopt(fd, libc::SOL_PACKET, libc::PACKET_FANOUT_DATA, &fprog) {
        return Err(format!(
            "PACKET_FANOUT_DATA (steering program): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(group)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_jumps_stay_inside_it() {
        for by in [FanoutBy::DstPort, FanoutBy::SrcPort] {
            let p = program(&Fanout {
                group: Some(1),
                members: 3,
                by,
            });
            for (i, ins) in p.iter().enumerate() {
                if ins.code as u32 & 0x07 == libc::BPF_JMP {
                    assert!(i + 1 + (ins.jt.max(ins.jf) as usize) < p.len());
                }
            }
            let last = p.last().unwrap();
            assert_eq!(last.code as u32, libc::BPF_RET | libc::BPF_K);
            assert!(p.iter().any(|i| i.k == 3), "mod N");
        }
    }

    /// Runs classic BPF program `p` on an IP packet `net` (the network header onwards)
    /// of EtherType `proto`, as the kernel would with `SKF_NET_OFF`: the socket index.
    fn run(p: &[libc::sock_filter], proto: u16, net: &[u8]) -> u32 {
        use libc::*;
        let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
        let at = |k: u32| -> usize { (k as i32 - SKF_NET_OFF) as usize };
        loop {
            let i = p[pc];
            let c = u32::from(i.code);
            pc += 1;
            if c == BPF_LD | BPF_H | BPF_ABS && i.k == (SKF_AD_OFF + SKF_AD_PROTOCOL) as u32 {
                a = u32::from(proto);
            } else if c == BPF_LD | BPF_B | BPF_ABS {
                a = u32::from(net[at(i.k)]);
            } else if c == BPF_LD | BPF_H | BPF_ABS {
                a = u32::from(u16::from_be_bytes([net[at(i.k)], net[at(i.k) + 1]]));
            } else if c == BPF_LDX | BPF_B | BPF_MSH {
                x = u32::from(net[at(i.k)] & 0x0f) * 4;
            } else if c == BPF_LD | BPF_H | BPF_IND {
                let o = at(i.k) + x as usize;
                a = u32::from(u16::from_be_bytes([net[o], net[o + 1]]));
            } else if c == BPF_ALU | BPF_MUL | BPF_K {
                a = a.wrapping_mul(i.k);
            } else if c == BPF_ALU | BPF_RSH | BPF_K {
                a >>= i.k;
            } else if c == BPF_ALU | BPF_MOD | BPF_K {
                a %= i.k;
            } else if c == BPF_JMP | BPF_JEQ | BPF_K {
                pc += usize::from(if a == i.k { i.jt } else { i.jf });
            } else if c == BPF_JMP | BPF_JSET | BPF_K {
                pc += usize::from(if a & i.k != 0 { i.jt } else { i.jf });
            } else if c == BPF_RET | BPF_A {
                return a;
            } else if c == BPF_RET | BPF_K {
                return i.k;
            } else {
                panic!("opcode {c:#x} at {}", pc - 1);
            }
        }
    }

    #[test]
    fn both_families_are_steered_by_the_port_rule() {
        let (sport, dport) = (40_002u16, 1_001u16);
        let mut v4 = vec![0u8; 20 + 8];
        v4[0] = 0x45;
        v4[9] = 6;
        v4[20..22].copy_from_slice(&sport.to_be_bytes());
        v4[22..24].copy_from_slice(&dport.to_be_bytes());
        let mut v6 = vec![0u8; 40 + 8];
        v6[0] = 0x60;
        v6[6] = 17;
        v6[40..42].copy_from_slice(&sport.to_be_bytes());
        v6[42..44].copy_from_slice(&dport.to_be_bytes());
        for n in [2u16, 3, 4] {
            let f = |by| Fanout {
                group: Some(1),
                members: n,
                by,
            };
            let (dst, src) = (
                program(&f(FanoutBy::DstPort)),
                program(&f(FanoutBy::SrcPort)),
            );
            let by_src = peer_port_owner(sport, u32::from(n));
            for (proto, pkt) in [(0x0800, &v4), (0x86dd, &v6)] {
                assert_eq!(run(&dst, proto, pkt), u32::from(dport) % u32::from(n));
                assert_eq!(run(&src, proto, pkt), by_src);
            }
            // ICMPv6 (neighbour discovery), IPv6 behind an extension header, ARP: worker 0.
            for next in [58u8, 60] {
                let mut o = v6.clone();
                o[6] = next;
                assert_eq!(run(&src, 0x86dd, &o), 0);
            }
            assert_eq!(run(&src, 0x0806, &v4), 0);
        }
    }

    /// Fragments carry no ports (but the first, at the header's end), so a datagram's
    /// fragments all go to worker 0, which reassembles it (and hands it to its flow's
    /// worker): on both sides, whatever bytes follow their headers.
    #[test]
    fn ipv4_fragments_of_one_datagram_reach_worker_0() {
        for by in [FanoutBy::SrcPort, FanoutBy::DstPort] {
            let p = program(&Fanout {
                group: Some(1),
                members: 4,
                by,
            });
            let frag = |fo: u16, first4: [u8; 4]| {
                let mut v = vec![0u8; 20 + 8];
                v[0] = 0x45;
                v[6..8].copy_from_slice(&fo.to_be_bytes());
                v[9] = 17;
                v[20..24].copy_from_slice(&first4);
                v
            };
            // the first (more fragments; ports 4000 -> 53), then others (payload bytes)
            assert_eq!(
                run(&p, ETH_P_IP as u16, &frag(0x2000, [0x0f, 0xa0, 0, 53])),
                0
            );
            for (k, fo) in [0x20b9u16, 0x2172, 0x022b].into_iter().enumerate() {
                let g = frag(fo, [k as u8 * 77, 13 + k as u8, 200 - k as u8 * 31, 1]);
                assert_eq!(run(&p, ETH_P_IP as u16, &g), 0, "{by:?} fragment {fo:#x}");
            }
            // DF alone is no fragment: steered by its port
            let whole = frag(0x4000, [0x0f, 0xa1, 0x0f, 0xa1]);
            let w = run(&p, ETH_P_IP as u16, &whole);
            assert_eq!(
                w,
                run(&p, ETH_P_IP as u16, &frag(0, [0x0f, 0xa1, 0x0f, 0xa1]))
            );
        }
    }

    #[test]
    fn even_peer_ports_spread_over_the_workers() {
        // Linux clients connect from even ports only.
        for n in [2u32, 3, 4] {
            let mut per = vec![0u32; n as usize];
            for p in (32_768u16..60_000).step_by(2) {
                per[peer_port_owner(p, n) as usize] += 1;
            }
            let each = 13_616 / n;
            for c in &per {
                assert!(c.abs_diff(each) < each / 10, "{n} workers: {per:?}");
            }
        }
    }
}
