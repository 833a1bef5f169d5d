//! AF_PACKET fanout for several workers on one interface: N sockets join one fanout
//! group and a classic BPF program picks, for every received frame, the socket of the
//! worker that owns its flow — the one a port number names. The client side steers by
//! destination port, `port % N`, the rule by which `squall_astf::alloc` gives source ports
//! to cores (a reply's destination port is the source port its core chose). The server
//! side steers by the peer's source port, fixed for the life of the flow so every frame of
//! a flow reaches the same worker, through a multiplicative hash ([`peer_port_owner`]):
//! Linux gives `connect()` only even ephemeral ports, so a plain `% 2` would put every
//! connection of a Linux client on worker 0. Frames that are not IPv4 TCP/UDP (ARP, ICMP,
//! IPv6) go to worker 0. Socket `k` is the `k`-th to join the group, so workers must open
//! their ports in order.
//!
//! The program reads the IPv4 header through the kernel's `SKF_NET_OFF` window, so it does
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
    /// Group id (unique per interface among the processes using fanout on it).
    pub group: u16,
    /// Workers in the group (N).
    pub members: u16,
    pub by: FanoutBy,
}

impl Fanout {
    /// A group id derived from the process id and a salt (one per port of the process).
    pub fn group_for_process(salt: u16) -> u16 {
        (std::process::id() as u16)
            .wrapping_mul(31)
            .wrapping_add(salt)
    }
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
    vec![
        // 0: A = ntohs(skb->protocol); not IPv4 -> the IPv6 test (11).
        st(
            BPF_LD | BPF_H | BPF_ABS,
            (SKF_AD_OFF + SKF_AD_PROTOCOL) as u32,
        ),
        jeq(ETH_P_IP, 0, 9),
        // 2: A = IP protocol; TCP or UDP, else worker 0 (20).
        st(BPF_LD | BPF_B | BPF_ABS, net(9)),
        jeq(IPPROTO_TCP, 1, 0),
        jeq(IPPROTO_UDP, 0, 15),
        // 5: X = IP header length; A = the port (server side: mixed, A *= K, A >>= 16);
        // A %= N.
        st(BPF_LDX | BPF_B | BPF_MSH, net(0)),
        st(BPF_LD | BPF_H | BPF_IND, net(port_off)),
        st(BPF_ALU | BPF_MUL | BPF_K, mul),
        st(BPF_ALU | BPF_RSH | BPF_K, shift),
        st(BPF_ALU | BPF_MOD | BPF_K, u32::from(f.members.max(1))),
        st(BPF_RET | libc::BPF_A, 0),
        // 11: IPv6 with TCP or UDP right after the fixed header (what Squall sends), else
        // worker 0 (20).
        jeq(ETH_P_IPV6, 0, 8),
        st(BPF_LD | BPF_B | BPF_ABS, net(6)),
        jeq(IPPROTO_TCP, 1, 0),
        jeq(IPPROTO_UDP, 0, 5),
        // 15: A = the port after the 40-byte header, mixed and reduced as above.
        st(BPF_LD | BPF_H | BPF_ABS, net(40 + port_off)),
        st(BPF_ALU | BPF_MUL | BPF_K, mul),
        st(BPF_ALU | BPF_RSH | BPF_K, shift),
        st(BPF_ALU | BPF_MOD | BPF_K, u32::from(f.members.max(1))),
        st(BPF_RET | libc::BPF_A, 0),
        // 20: worker 0.
        st(BPF_RET | BPF_K, 0),
    ]
}

/// Joins socket `fd` to the group of `f` and sets its program. Errors name the step.
pub fn join(fd: libc::c_int, f: &Fanout) -> Result<(), String> {
    use crate::afpacket::setopt;
    let kind = if f.by == FanoutBy::KernelHash {
        libc::PACKET_FANOUT_HASH
    } else {
        libc::PACKET_FANOUT_CBPF
    };
    let arg: libc::c_int = (u32::from(f.group) | (kind << 16)) as libc::c_int;
    if !setopt(fd, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg) {
        return Err(format!(
            "PACKET_FANOUT (group {}): {}",
            f.group,
            std::io::Error::last_os_error()
        ));
    }
    if f.by == FanoutBy::KernelHash {
        return Ok(());
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_jumps_stay_inside_it() {
        for by in [FanoutBy::DstPort, FanoutBy::SrcPort] {
            let p = program(&Fanout {
                group: 1,
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

    /// Runs the subset of classic BPF the program uses on an Ethernet frame (the
    /// kernel's view: `skb->protocol` is the ethertype, the network header at 14).
    fn run(p: &[libc::sock_filter], frame: &[u8]) -> u32 {
        use libc::*;
        let net = |k: u32| (k as i32 - SKF_NET_OFF) as usize + 14;
        let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
        loop {
            let i = p[pc];
            let (code, k) = (i.code as u32, i.k);
            pc += 1;
            match code {
                c if c == BPF_LD | BPF_H | BPF_ABS
                    && k == (SKF_AD_OFF + SKF_AD_PROTOCOL) as u32 =>
                {
                    a = u32::from(u16::from_be_bytes([frame[12], frame[13]]))
                }
                c if c == BPF_LD | BPF_B | BPF_ABS => a = u32::from(frame[net(k)]),
                c if c == BPF_LD | BPF_H | BPF_ABS => {
                    let o = net(k);
                    a = u32::from(u16::from_be_bytes([frame[o], frame[o + 1]]))
                }
                c if c == BPF_LDX | BPF_B | BPF_MSH => x = u32::from(frame[net(k)] & 0xf) * 4,
                c if c == BPF_LD | BPF_H | BPF_IND => {
                    let o = net(k) + x as usize;
                    a = u32::from(u16::from_be_bytes([frame[o], frame[o + 1]]))
                }
                c if c == BPF_ALU | BPF_MUL | BPF_K => a = a.wrapping_mul(k),
                c if c == BPF_ALU | BPF_RSH | BPF_K => a >>= k,
                c if c == BPF_ALU | BPF_MOD | BPF_K => a %= k,
                c if c == BPF_JMP | BPF_JEQ | BPF_K => {
                    pc += usize::from(if a == k { i.jt } else { i.jf })
                }
                c if c == BPF_RET | BPF_A => return a,
                c if c == BPF_RET | BPF_K => return k,
                c => panic!("unexpected BPF op {c:#x}"),
            }
        }
    }

    fn frame(v6: bool, proto: u8, sport: u16, dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 40 + 8];
        let l4 = if v6 {
            f[12..14].copy_from_slice(&[0x86, 0xdd]);
            f[14] = 0x60;
            f[20] = proto;
            54
        } else {
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = 0x46; // 24-byte header: the IHL is used
            f[23] = proto;
            38
        };
        f[l4..l4 + 2].copy_from_slice(&sport.to_be_bytes());
        f[l4 + 2..l4 + 4].copy_from_slice(&dport.to_be_bytes());
        f
    }

    #[test]
    fn both_families_are_steered_by_port() {
        for members in [2u16, 3] {
            let n = u32::from(members);
            for (by, owner) in [
                (
                    FanoutBy::DstPort,
                    Box::new(move |_s: u16, d: u16| u32::from(d) % n)
                        as Box<dyn Fn(u16, u16) -> u32>,
                ),
                (
                    FanoutBy::SrcPort,
                    Box::new(move |s: u16, _d: u16| peer_port_owner(s, n)),
                ),
            ] {
                let p = program(&Fanout {
                    group: 1,
                    members,
                    by,
                });
                for v6 in [false, true] {
                    for (sport, dport) in [
                        (80, 1025),
                        (80, 1026),
                        (40_000, 80),
                        (40_002, 80),
                        (53, 4097),
                    ] {
                        for proto in [6, 17] {
                            assert_eq!(
                                run(&p, &frame(v6, proto, sport, dport)),
                                owner(sport, dport),
                                "{by:?} v6 {v6} proto {proto} {sport}->{dport}"
                            );
                        }
                        assert_eq!(run(&p, &frame(v6, 58, sport, dport)), 0, "ICMP: worker 0");
                    }
                }
                let mut arp = frame(false, 6, 1, 3);
                arp[12..14].copy_from_slice(&[0x08, 0x06]);
                assert_eq!(run(&p, &arp), 0);
            }
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
