//! AF_XDP port tests in a private network namespace (this thread only): a veth pair
//! `xa-t0` (AF_XDP, owning 198.18.99.0/24) / `xa-t1` (an AF_PACKET port playing the
//! wire's other end). They need root and a kernel with AF_XDP; they are skipped, saying
//! why, otherwise.

use super::*;
use crate::afpacket::{AfPacketConfig, AfPacketPort};

const OWNED: (u32, u32) = (0xc612_6300, 0xc612_63ff); // 198.18.99.0/24
const MAC_A: [u8; 6] = [2, 0, 0, 0, 0xa, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0xa, 2];

fn sh(args: &[&str]) -> bool {
    std::process::Command::new(args[0])
        .args(&args[1..])
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Runs `f` in a fresh network namespace holding the veth pair; `false` if skipped.
fn in_netns(f: impl FnOnce() + Send + 'static) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        crate::lab::skipped("needs root (unshare CLONE_NEWNET, AF_XDP)");
        return false;
    }
    std::thread::spawn(move || {
        // SAFETY: unshare only affects this thread's network namespace.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            crate::lab::skipped("unshare(CLONE_NEWNET) failed");
            return false;
        }
        let ok = sh(&[
            "ip", "link", "add", "xa-t0", "type", "veth", "peer", "name", "xa-t1",
        ]) && sh(&[
            "ip",
            "link",
            "set",
            "xa-t0",
            "address",
            "02:00:00:00:0a:01",
            "up",
        ]) && sh(&[
            "ip",
            "link",
            "set",
            "xa-t1",
            "address",
            "02:00:00:00:0a:02",
            "up",
        ]);
        if !ok {
            crate::lab::skipped("cannot create a veth pair");
            return false;
        }
        f();
        true
    })
    .join()
    .expect("test thread")
}

fn cfg() -> AfXdpConfig {
    let mut c = AfXdpConfig::new("xa-t0", 0);
    c.frames = 256;
    c.ring = 64;
    c.tx_reserve = 64;
    c.owned = vec![OWNED];
    c
}

fn peer() -> AfPacketPort {
    let mut c = AfPacketConfig::new("xa-t1");
    c.frames = 512;
    AfPacketPort::open(c).expect("AF_PACKET on xa-t1")
}

fn ipv4(dst: [u8; 4], tag: u8) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&MAC_A);
    f[6..12].copy_from_slice(&MAC_B);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&46u16.to_be_bytes());
    f[22] = 64;
    f[23] = 253; // experimental protocol
    f[26..30].copy_from_slice(&[198, 18, 0, 9]);
    f[30..34].copy_from_slice(&dst);
    f[34] = tag;
    f
}

fn arp(target: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&MAC_B);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    f[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f[22..28].copy_from_slice(&MAC_B);
    f[28..32].copy_from_slice(&[198, 18, 0, 9]);
    f[38..42].copy_from_slice(&target);
    f
}

fn send<P: Port>(p: &mut P, frames: &[Vec<u8>]) {
    let mut v = Vec::new();
    assert_eq!(p.alloc_tx(&mut v, frames.len()), frames.len());
    for (f, b) in v.iter_mut().zip(frames) {
        f.fill(b).unwrap();
    }
    assert_eq!(p.tx_burst(&mut v), frames.len());
}

/// Polls `p` until `n` frames matching `keep` arrived (or 2 s); returns their bytes.
fn recv<P: Port>(p: &mut P, n: usize, keep: impl Fn(&[u8]) -> bool) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut rx = Vec::new();
    let t0 = std::time::Instant::now();
    while got.len() < n && t0.elapsed() < std::time::Duration::from_secs(2) {
        p.rx_burst(&mut rx, 64);
        got.extend(rx.iter().map(|f| f.data().to_vec()).filter(|d| keep(d)));
        p.release_all(&mut rx);
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    got
}

/// A test frame sent by the AF_XDP side (the kernel of xa-t0 sends IPv6 chatter too).
fn mine(d: &[u8]) -> bool {
    d.len() >= 35 && d[6..12] == MAC_A && d[12..14] == [8, 0] && d[23] == 253
}

fn ours(d: &[u8]) -> bool {
    d.len() >= 14 && d[6..12] == MAC_B
}

/// 2001:db8:99::/120 as numbers.
const OWNED6: (u128, u128) = (0x2001_0db8_0099 << 80, (0x2001_0db8_0099 << 80) + 255);

fn ip6(a: u128) -> [u8; 16] {
    a.to_be_bytes()
}

/// An IPv6 frame from B to `dst` with next header `next` and 24 bytes of payload
/// (`payload` at its start).
fn ipv6(dst: [u8; 16], next: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 40 + 24];
    f[..6].copy_from_slice(&MAC_A);
    f[6..12].copy_from_slice(&MAC_B);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    f[14] = 0x60;
    f[18..20].copy_from_slice(&24u16.to_be_bytes());
    f[20] = next;
    f[21] = 255;
    f[22..38].copy_from_slice(&ip6(OWNED6.0 - 7)); // a peer's address
    f[38..54].copy_from_slice(&dst);
    f[54..54 + payload.len()].copy_from_slice(payload);
    f
}

/// A neighbour solicitation for `target`, to its solicited-node group.
fn ns(target: u128) -> Vec<u8> {
    let mut group = [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 0];
    group[13..].copy_from_slice(&ip6(target)[13..]);
    let mut m = vec![135, 0, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(&ip6(target));
    let mut f = ipv6(group, 58, &m);
    f[..6].copy_from_slice(&[0x33, 0x33, 0xff, group[13], group[14], group[15]]);
    f
}

#[test]
fn steers_owned_ipv6_and_solicitations_for_owned_addresses() {
    in_netns(|| {
        let mut c = cfg();
        c.owned6 = vec![OWNED6];
        let mut x = AfXdpPort::open(c).expect("open AF_XDP on a veth");
        let mut b = peer();
        let (inside, outside) = (OWNED6.0 + 9, OWNED6.1 + 1);
        send(
            &mut b,
            &[
                ipv6(ip6(inside), 253, &[1]),
                ipv6(ip6(outside), 253, &[2]),
                ns(inside),
                ns(outside),
                ipv6(ip6(OWNED6.1), 58, &[128, 0, 0, 0, 0, 0, 0, 3]), // echo request
            ],
        );
        let got = recv(&mut x, 3, ours);
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0], ipv6(ip6(inside), 253, &[1]));
        assert_eq!(got[1], ns(inside));
        assert_eq!(got[2][54..62], [128, 0, 0, 0, 0, 0, 0, 3]);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            recv(&mut x, 1, ours).is_empty(),
            "IPv6 for other addresses reached the socket"
        );
        assert_eq!(x.extra_stats().xdp_redirected, 3);
    });
}

#[test]
fn steers_only_owned_traffic_and_moves_frames_both_ways() {
    in_netns(|| {
        let mut x = AfXdpPort::open(cfg()).expect("open AF_XDP on a veth");
        let ifindex = x.ifindex();
        assert!(
            !x.zero_copy(),
            "veth has no zero-copy: Auto must fall back to copy"
        );
        assert_eq!(x.caps().mac, MAC_A);
        assert_eq!(x.caps().offloads, Default::default());
        let mut b = peer();
        // Owned IPv4 and ARP for an owned address reach the socket; the rest does not.
        send(
            &mut b,
            &[
                ipv4([198, 18, 99, 5], 1),
                ipv4([198, 18, 98, 1], 2),
                arp([198, 18, 99, 7]),
                arp([198, 18, 98, 1]),
                ipv4([198, 18, 99, 255], 3),
            ],
        );
        let got = recv(&mut x, 3, ours);
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0], ipv4([198, 18, 99, 5], 1));
        assert_eq!(got[1], arp([198, 18, 99, 7]));
        assert_eq!(got[2], ipv4([198, 18, 99, 255], 3));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            recv(&mut x, 1, ours).is_empty(),
            "non-owned traffic reached the socket"
        );
        let e = x.extra_stats();
        assert_eq!(e.xdp_redirected, 3);
        assert!(e.xdp_passed >= 2, "{e:?}");
        // Echo without a copy: rewrite received frames in place and send them back.
        send(&mut b, &[ipv4([198, 18, 99, 6], 9)]);
        let mut rx = Vec::new();
        let t0 = std::time::Instant::now();
        while rx.is_empty() && t0.elapsed() < std::time::Duration::from_secs(2) {
            x.rx_burst(&mut rx, 8);
        }
        assert_eq!(rx.len(), 1);
        let d = rx[0].data_mut();
        d[..6].copy_from_slice(&MAC_B);
        d[6..12].copy_from_slice(&MAC_A);
        d[34] = 0xec;
        assert_eq!(x.tx_burst(&mut rx), 1);
        let back = recv(&mut b, 1, |d| mine(d) && d[34] == 0xec);
        assert_eq!(back.len(), 1);
        assert_eq!(back[0][34], 0xec);
        // 40 rounds of 100 frames through a 256-chunk UMEM: the completion ring must give
        // every tx chunk back.
        for round in 0..40u8 {
            let mut v = Vec::new();
            let mut left = 100;
            while left > 0 || !v.is_empty() {
                let n = x.alloc_tx(&mut v, left);
                let l = v.len();
                for f in &mut v[l - n..] {
                    let mut bytes = ipv4([198, 18, 0, 9], round);
                    bytes[..6].copy_from_slice(&MAC_B);
                    bytes[6..12].copy_from_slice(&MAC_A);
                    f.fill(&bytes).unwrap();
                }
                left -= n;
                x.tx_burst(&mut v);
            }
            let n = recv(&mut b, 100, |d| mine(d) && d[34] == round).len();
            assert_eq!(n, 100, "round {round}");
        }
        // A frame longer than the MTU allows is refused and counted, not lost.
        let mut v = Vec::new();
        x.alloc_tx(&mut v, 1);
        v[0].set_len(1600).unwrap();
        assert_eq!(x.tx_burst(&mut v), 0);
        assert!(v.is_empty());
        assert_eq!(x.extra_stats().tx_refused, 1);
        assert_eq!(x.stats().tx_frames, 4001);
        // A second socket on the same queue is refused clearly.
        let e = AfXdpPort::open(cfg()).err().expect("queue busy");
        assert!(e.contains("busy"), "{e}");
        drop(x);
        assert!(detached(ifindex), "program detached on drop");
        // Reopened right away: the kernel frees the queue in a deferred work item, and
        // the bind waits for it (EBUSY retried) instead of failing.
        let y = AfXdpPort::open(cfg()).expect("queue bound again right after a close");
        drop(y);
        assert!(detached(ifindex), "program detached on the second drop");
    });
}

/// Whether `ifindex` has no XDP program, within 2 s: the link goes when its last
/// descriptor closes, and a child process another test thread is forking holds a copy of
/// the descriptor table until it execs.
fn detached(ifindex: i32) -> bool {
    let t0 = std::time::Instant::now();
    while sys::attached(ifindex) != Ok(None) {
        if t0.elapsed() > std::time::Duration::from_secs(2) {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    true
}

/// Attaches the `xdp` section of BPF object `obj` to xa-t0 through netlink (generic mode),
/// as `ip` does: what a stale or foreign program looks like.
fn attach_generic(obj: &str) -> bool {
    sh(&[
        "ip",
        "link",
        "set",
        "dev",
        "xa-t0",
        "xdpgeneric",
        "obj",
        obj,
        "sec",
        "xdp",
    ])
}

/// A copy of Squall's program left attached through netlink (loaded by hand, or by an
/// older Squall) is detached and replaced on open; a foreign program is refused; the
/// port's own attachment disappears with the port.
#[test]
fn a_stale_copy_is_replaced_and_a_foreign_program_refused() {
    in_netns(|| {
        let obj = concat!(env!("OUT_DIR"), "/squall_xdp.o");
        assert!(attach_generic(obj));
        let cname = std::ffi::CString::new("xa-t0").unwrap();
        // SAFETY: `cname` is NUL-terminated.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) } as i32;
        let stale = sys::attached(ifindex)
            .unwrap()
            .expect("stale copy attached");
        assert_eq!(stale.1, prog::PROG_NAME);
        let x = AfXdpPort::open(cfg()).expect("replaces the stale copy");
        let now = sys::attached(ifindex).unwrap().expect("our program");
        assert_ne!(now.0, stale.0, "a fresh program, not the stale one");
        drop(x);
        assert!(detached(ifindex), "program detached on drop");
        // Somebody else's program (a plain XDP_PASS one, built here) is refused.
        let dir = std::env::temp_dir().join(format!("xa-foreign-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("pass.c");
        let o = dir.join("pass.o");
        std::fs::write(
            &src,
            "__attribute__((section(\"xdp\"), used)) int other_pass(void *c) { return 2; }\n\
             char _license[] __attribute__((section(\"license\"), used)) = \"GPL\";\n",
        )
        .unwrap();
        let built = sh(&[
            "clang",
            "-O2",
            "-target",
            "bpf",
            "-c",
            src.to_str().unwrap(),
            "-o",
            o.to_str().unwrap(),
        ]);
        assert!(built, "clang -target bpf (a build dependency) failed");
        assert!(attach_generic(o.to_str().unwrap()));
        let e = AfXdpPort::open(cfg())
            .err()
            .expect("a foreign program is not replaced");
        assert!(
            e.contains("another XDP program") && e.contains("other_pass"),
            "{e}"
        );
        assert_eq!(
            sys::attached(ifindex).unwrap().map(|a| a.1).as_deref(),
            Some("other_pass")
        );
        let _ = std::fs::remove_dir_all(&dir);
    });
}

#[test]
fn missing_interface_and_bad_geometry_are_clear_errors() {
    let e = AfXdpPort::open(AfXdpConfig::new("xa-nosuch9", 0))
        .err()
        .expect("no interface");
    assert!(e.contains("no such interface"), "{e}");
    let mut c = AfXdpConfig::new("lo", 0);
    c.ring = 100;
    let e = AfXdpPort::open(c).err().expect("bad ring");
    assert!(e.contains("ring geometry"), "{e}");
}

#[test]
fn a_received_descriptor_must_lie_inside_its_chunk() {
    assert!(desc_fits(0, 60, 2048));
    assert!(desc_fits(256, 1792, 2048));
    assert!(!desc_fits(256, 1793, 2048));
    assert!(!desc_fits(0, 0, 2048), "empty");
    // A length near 2^32 from the kernel: it would wrap a 32-bit sum past the check.
    assert!(!desc_fits(256, u32::MAX, 2048));
    assert!(!desc_fits(u32::MAX, 1, 2048));
}
