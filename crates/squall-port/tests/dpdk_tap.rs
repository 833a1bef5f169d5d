//! Checksum offload through the DPDK port, on the `net_tap` PMD (a kernel tap interface
//! whose PMD offers IPv4/TCP/UDP checksum offload, done in software) inside a private
//! network namespace of the test thread: a TCP frame sent with `TX_IP_CSUM | TX_TCP_CSUM`
//! (pseudo-header sum in the TCP field, IP checksum zero) reaches the kernel side of the
//! tap with both checksums right; frames the kernel side sends arrive flagged
//! `RX_L4_CSUM_GOOD`, or `RX_CSUM_BAD` when their TCP checksum is wrong (the port's caps
//! say `RX_CSUM_PER_FRAME`: the verdict is per frame). The kernel side
//! is read and written through the AF_PACKET port. Needs root and the `dpdk` feature.
#![cfg(feature = "dpdk")]

use std::time::{Duration, Instant};

use squall_port::afpacket::{AfPacketConfig, AfPacketPort};
use squall_port::dpdk::{self, DpdkConfig};
use squall_port::{FrameBuf, Offload, OffloadFlags, Port};

/// The Internet checksum of `b` (ones' complement of the ones' complement sum) starting
/// from `sum`.
fn csum(mut sum: u32, b: &[u8]) -> u16 {
    for c in b.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The TCP pseudo-header sum of an IPv4 frame (not folded).
fn pseudo(f: &[u8]) -> u32 {
    let tcp_len = f.len() - 34;
    let words = [&f[26..28], &f[28..30], &f[30..32], &f[32..34]];
    words
        .iter()
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum::<u32>()
        + 6
        + tcp_len as u32
}

/// An Ethernet + IPv4 + TCP frame with a 64-byte payload; checksums zero.
fn tcp_frame(dst: [u8; 6], src: [u8; 6], id: u16) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 20 + 64];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (f.len() - 14) as u16;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[18..20].copy_from_slice(&id.to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&[198, 18, 16, 1]);
    f[30..34].copy_from_slice(&[198, 18, 48, 1]);
    f[34..36].copy_from_slice(&40000u16.to_be_bytes());
    f[36..38].copy_from_slice(&80u16.to_be_bytes());
    f[38..42].copy_from_slice(&1u32.to_be_bytes());
    f[46] = 0x50;
    f[47] = 0x18;
    f[48..50].copy_from_slice(&65535u16.to_be_bytes());
    for (i, b) in f[54..].iter_mut().enumerate() {
        *b = i as u8 ^ id as u8;
    }
    f
}

fn checksums_ok(f: &[u8]) -> (bool, bool) {
    (csum(0, &f[14..34]) == 0, csum(pseudo(f), &f[34..]) == 0)
}

#[test]
fn tap_checksum_offload_both_ways() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !std::path::Path::new("/dev/net/tun").exists() {
        squall_port::lab::skipped("needs root and /dev/net/tun");
        return;
    }
    // The EAL, its threads and the tap live in this thread's own network namespace.
    std::thread::spawn(run).join().expect("test thread");
}

fn run() {
    // SAFETY: unshare only affects this thread (and the threads and children it makes).
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        squall_port::lab::skipped("unshare(CLONE_NEWNET) failed");
        return;
    }
    let args = "--no-huge --in-memory --no-pci --no-telemetry -l 0 --log-level=*:warning \
                --vdev=net_tap0,iface=dp-tap0";
    dpdk::init(&dpdk::split_args(args).unwrap()).unwrap_or_else(|e| panic!("{e}"));
    let mut d = dpdk::open(&DpdkConfig {
        pool_frames: 2047,
        rx_desc: 256,
        tx_desc: 256,
        ..DpdkConfig::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
    .pop()
    .unwrap();
    assert_eq!(d.info().driver, "net_tap");
    let caps = d.caps();
    let want =
        OffloadFlags::TX_TCP_CSUM | OffloadFlags::TX_IP_CSUM | OffloadFlags::RX_CSUM_PER_FRAME;
    assert!(caps.offloads.contains(want), "{:?}", caps.offloads);
    let up = std::process::Command::new("ip")
        .args(["link", "set", "dp-tap0", "up"])
        .status()
        .unwrap();
    assert!(up.success());
    let mut cfg = AfPacketConfig::new("dp-tap0");
    cfg.frames = 256;
    let mut k = AfPacketPort::open(cfg).unwrap_or_else(|e| panic!("{e}"));
    let kmac = k.caps().mac;
    assert!(d.wait_link(Duration::from_secs(5)));

    // DPDK -> kernel: checksums left to the device.
    let mut v = Vec::new();
    assert_eq!(d.alloc_tx(&mut v, 8), 8);
    for (i, f) in v.iter_mut().enumerate() {
        let mut b = tcp_frame(kmac, caps.mac, 100 + i as u16);
        let p = pseudo(&b);
        let folded = !csum(p, &[]);
        b[50..52].copy_from_slice(&folded.to_be_bytes());
        f.fill(&b).unwrap();
        f.set_offload(Offload {
            flags: OffloadFlags::TX_TCP_CSUM | OffloadFlags::TX_IP_CSUM,
            l2_len: 14,
            l3_len: 20,
            ..Default::default()
        });
    }
    let t0 = Instant::now();
    while !v.is_empty() && t0.elapsed() < Duration::from_secs(5) {
        d.tx_burst(&mut v);
    }
    assert!(v.is_empty());
    let mut got = 0;
    let mut rx = Vec::new();
    while got < 8 && t0.elapsed() < Duration::from_secs(5) {
        k.rx_burst(&mut rx, 32);
        for f in rx.iter().filter(|f| f.len() == 118 && f.data()[23] == 6) {
            let id = u16::from_be_bytes([f.data()[18], f.data()[19]]);
            assert_eq!(
                checksums_ok(f.data()),
                (true, true),
                "frame {id}: {:02x?}",
                f.data()
            );
            got += 1;
        }
        k.release_all(&mut rx);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(got, 8, "frames from DPDK seen by the kernel side");

    // Kernel -> DPDK: good checksums flagged good, a bad TCP checksum flagged bad.
    let mut v = Vec::new();
    assert_eq!(k.alloc_tx(&mut v, 4), 4);
    for (i, f) in v.iter_mut().enumerate() {
        let mut b = tcp_frame(caps.mac, kmac, 200 + i as u16);
        let ip = csum(0, &b[14..34]);
        b[24..26].copy_from_slice(&ip.to_be_bytes());
        let mut tcp = csum(pseudo(&b), &b[34..]);
        if i == 3 {
            tcp ^= 0x0101;
        }
        b[50..52].copy_from_slice(&tcp.to_be_bytes());
        f.fill(&b).unwrap();
    }
    assert_eq!(k.tx_burst(&mut v), 4);
    let mut seen = Vec::new();
    let t0 = Instant::now();
    while seen.len() < 4 && t0.elapsed() < Duration::from_secs(5) {
        let mut r = Vec::new();
        d.rx_burst(&mut r, 32);
        for f in r.iter().filter(|f| f.len() == 118 && f.data()[23] == 6) {
            let id = u16::from_be_bytes([f.data()[18], f.data()[19]]);
            seen.push((id, f.offload().flags));
        }
        d.release_all(&mut r);
        std::thread::sleep(Duration::from_millis(1));
    }
    seen.sort_by_key(|s| s.0);
    assert_eq!(seen.len(), 4, "{seen:?}");
    for (id, fl) in &seen[..3] {
        assert!(fl.contains(OffloadFlags::RX_L4_CSUM_GOOD), "{id}: {fl:?}");
        assert!(!fl.contains(OffloadFlags::RX_CSUM_BAD), "{id}: {fl:?}");
    }
    assert!(seen[3].1.contains(OffloadFlags::RX_CSUM_BAD), "{seen:?}");
    assert!(
        !seen[3].1.contains(OffloadFlags::RX_L4_CSUM_GOOD),
        "{seen:?}"
    );
    assert_eq!(d.frames_out(), 0);
    drop((d, k));
    dpdk::remove_own_runtime_dir();
}
