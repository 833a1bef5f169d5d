//! The DPDK port over two `net_memif` devices of one process (server and client ends of
//! one memif socket in a private temp dir; `--no-huge --in-memory`: no NIC, no
//! hugepages). One EAL per process, so the whole life cycle is one test: link up, frames
//! cross byte for byte and in order, a received frame goes back without a copy, partial
//! tx keeps the unsent frames in order, offload metadata lands in the mbuf, two queue
//! pairs carry separate traffic, every mbuf returns to its pool, and a frame of one
//! device released on the other is not counted back there. Needs root and
//! the `dpdk` feature.
#![cfg(feature = "dpdk")]

use std::time::{Duration, Instant};

use squall_port::dpdk::{self, DpdkConfig, DpdkFrame, DpdkPort};
use squall_port::{FrameBuf, Offload, OffloadFlags, Port};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A frame of `len` bytes: broadcast, a local experimental ethertype, sequence `seq`.
fn stamp(f: &mut DpdkFrame, len: usize, seq: u32) {
    f.set_len(len).unwrap();
    let d = f.data_mut();
    d[..6].fill(0xff);
    d[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
    d[12..14].copy_from_slice(&[0x88, 0xb5]);
    d[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in d[18..].iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(31).wrapping_add(seq) as u8;
    }
}

fn seq_of(f: &DpdkFrame) -> u32 {
    u32::from_be_bytes(f.data()[14..18].try_into().unwrap())
}

fn check(f: &DpdkFrame, seq: u32, len: usize) {
    assert_eq!(f.len(), len, "frame {seq}");
    assert_eq!(seq_of(f), seq);
    for (i, b) in f.data()[18..].iter().enumerate() {
        assert_eq!(
            *b,
            (i as u32).wrapping_mul(31).wrapping_add(seq) as u8,
            "frame {seq} byte {i}"
        );
    }
}

fn open(name: &str, queues: u16) -> Vec<DpdkPort> {
    dpdk::open(&DpdkConfig {
        device: Some(name.into()),
        queues,
        pool_frames: 4095,
        ..DpdkConfig::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn memif_pair_in_one_process() {
    if !is_root() {
        squall_port::lab::skipped("needs root (DPDK EAL, memif socket)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("squall-dpdk-memif-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let s1 = dir.join("a.sock");
    let s2 = dir.join("b.sock");
    let args = format!(
        "--no-huge --in-memory --no-pci --no-telemetry -m 1024 -l 0 --log-level=*:warning \
         --vdev=net_memif0,role=server,socket={a},id=0 \
         --vdev=net_memif1,role=client,socket={a},id=0 \
         --vdev=net_memif2,role=server,socket={b},id=0 \
         --vdev=net_memif3,role=client,socket={b},id=0",
        a = s1.display(),
        b = s2.display()
    );
    dpdk::init(&dpdk::split_args(&args).unwrap()).unwrap_or_else(|e| panic!("{e}"));
    // A second init with other arguments is refused, with the first ones named.
    let e = dpdk::init(&["--no-huge".into()]).unwrap_err();
    assert!(e.contains("already initialised"), "{e}");
    let e = dpdk::open(&DpdkConfig {
        device: Some("net_nosuch0".into()),
        ..DpdkConfig::default()
    })
    .err()
    .expect("unknown device");
    assert!(
        e.contains("no port named net_nosuch0") && e.contains("net_memif1"),
        "{e}"
    );

    let mut a = open("net_memif0", 1).pop().unwrap();
    let mut b = open("net_memif1", 1).pop().unwrap();
    assert!(
        a.wait_link(Duration::from_secs(5)),
        "memif link did not come up"
    );
    assert!(b.wait_link(Duration::from_secs(5)));
    assert_eq!(a.info().driver, "net_memif");
    let caps = a.caps();
    assert_eq!(caps.headroom, 128);
    assert!(caps.max_frame >= 1514, "{caps:?}");
    assert!(caps.mtu >= 1500, "{caps:?}");
    assert_ne!(caps.mac, [0; 6]);
    let free0 = (a.pool_free(), b.pool_free());

    // 1. A -> B: 100 frames of every size from 60 to 1514 bytes, byte for byte, in order.
    let lens: Vec<usize> = (0..100).map(|i| 60 + i * 1454 / 99).collect();
    let mut tx = Vec::with_capacity(128);
    assert_eq!(a.alloc_tx(&mut tx, 100), 100);
    for (i, f) in tx.iter_mut().enumerate() {
        assert_eq!((f.len(), f.headroom()), (0, 128));
        stamp(f, lens[i], i as u32);
    }
    // A memif server can send once the client has polled (it hands the ring's buffers
    // over on rx): poll B while A sends.
    let mut rx = Vec::new();
    let t0 = Instant::now();
    while (!tx.is_empty() || rx.len() < 100) && t0.elapsed() < Duration::from_secs(5) {
        a.tx_burst(&mut tx);
        b.rx_burst(&mut rx, 32);
    }
    assert!(tx.is_empty(), "{} left; {:?}", tx.len(), a.stats());
    assert_eq!(rx.len(), 100);
    for (i, f) in rx.iter().enumerate() {
        check(f, i as u32, lens[i]);
        assert_eq!(f.segments(), 1);
    }
    assert_eq!(a.stats().tx_frames, 100);
    assert_eq!(a.stats().tx_bytes, lens.iter().sum::<usize>() as u64);
    assert_eq!(b.stats().rx_frames, 100);
    assert_eq!(b.stats().rx_bytes, a.stats().tx_bytes);

    // 2. Echo without a copy: B rewrites each received frame in place (sequence + 1000)
    // and sends the same mbufs back.
    for f in rx.iter_mut() {
        let s = seq_of(f);
        let len = f.len();
        stamp(f, len, s + 1000);
    }
    let mut back = Vec::new();
    while (!rx.is_empty() || back.len() < 100) && t0.elapsed() < Duration::from_secs(10) {
        b.tx_burst(&mut rx);
        a.rx_burst(&mut back, 32);
    }
    assert_eq!(back.len(), 100);
    for (i, f) in back.iter().enumerate() {
        check(f, 1000 + i as u32, lens[i]);
    }
    a.release_all(&mut back);

    // 3. Partial tx: with B not reading, A's tx stops once the memif ring is full; the
    // frames not taken stay in the Vec in order, and go later, in order.
    let n = 3000;
    assert_eq!(a.alloc_tx(&mut tx, n), n);
    for (seq, f) in (5000u32..).zip(tx.iter_mut()) {
        stamp(f, 200, seq);
    }
    let full0 = a.stats().tx_full;
    let sent = a.tx_burst(&mut tx);
    assert!(sent > 0 && sent < n, "sent {sent} of {n}");
    assert_eq!(tx.len(), n - sent);
    assert_eq!(seq_of(&tx[0]), 5000 + sent as u32);
    assert_eq!(a.stats().tx_full - full0, (n - sent) as u64);
    let mut got = 0usize;
    let mut next = 5000u32;
    let t0 = Instant::now();
    while got < n && t0.elapsed() < Duration::from_secs(10) {
        a.tx_burst(&mut tx);
        let mut v = Vec::new();
        b.rx_burst(&mut v, 64);
        for f in &v {
            check(f, next, 200);
            next += 1;
        }
        got += v.len();
        b.release_all(&mut v);
    }
    assert_eq!(got, n, "every frame arrived once, in order");

    // 4. Frame operations and offload metadata live in the mbuf.
    let mut v = Vec::new();
    assert_eq!(a.alloc_tx(&mut v, 1), 1);
    let mut f = v.pop().unwrap();
    let cap = f.capacity();
    assert!(cap >= 1514);
    assert!(f.set_len(cap + 1).is_err());
    stamp(&mut f, 100, 7);
    assert!(f.prepend(129).is_err());
    f.prepend(4).unwrap();
    assert_eq!((f.len(), f.headroom(), f.pkt_len()), (104, 124, 104));
    f.adjust(4).unwrap();
    assert_eq!((f.len(), f.headroom(), f.pkt_len()), (100, 128, 100));
    check(&f, 7, 100);
    assert!(f.adjust(101).is_err());
    f.data_mut()[12..14].copy_from_slice(&[0x08, 0x00]);
    let o = Offload {
        flags: OffloadFlags::TX_TCP_CSUM | OffloadFlags::TX_IP_CSUM,
        l2_len: 14,
        l3_len: 20,
        ..Default::default()
    };
    f.set_offload(o);
    assert_eq!(f.offload(), o);
    // RTE_MBUF_F_TX_TCP_CKSUM | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_IPV4
    assert_eq!(f.ol_flags(), (1 << 52) | (1 << 54) | (1 << 55));
    f.set_offload(Offload::default());
    assert_eq!(f.ol_flags(), 0);
    a.release(f);

    // 5. Two queue pairs: what goes out on queue 1 arrives on queue 1 only.
    let mut qa = open("net_memif2", 2);
    let mut qb = open("net_memif3", 2);
    assert_eq!((qa.len(), qb.len(), qa[1].queue()), (2, 2, 1));
    assert!(qa[0].wait_link(Duration::from_secs(5)));
    assert!(qb[0].wait_link(Duration::from_secs(5)));
    for (q, count) in [(1usize, 10usize), (0, 5)] {
        assert_eq!(qa[q].alloc_tx(&mut tx, count), count);
        for (i, f) in tx.iter_mut().enumerate() {
            stamp(f, 80, (q * 100 + i) as u32);
        }
        let mut v = Vec::new();
        let t0 = Instant::now();
        while (!tx.is_empty() || v.len() < count) && t0.elapsed() < Duration::from_secs(5) {
            qa[q].tx_burst(&mut tx);
            qb[q].rx_burst(&mut v, 32);
        }
        assert!(tx.is_empty());
        assert_eq!(v.len(), count, "queue {q}");
        for (i, f) in v.iter().enumerate() {
            check(f, (q * 100 + i) as u32, 80);
        }
        let mut other = Vec::new();
        assert_eq!(
            qb[1 - q].rx_burst(&mut other, 32),
            0,
            "queue {} got queue {q}'s",
            1 - q
        );
        qb[q].release_all(&mut v);
    }

    // 6. A worker thread binds itself to DPDK: without an lcore id a thread bypasses the
    // pools' per-core caches (every frame goes to and from the pool's shared ring); once
    // bound, the frames it gives back wait in its own cache. The main thread is the EAL's
    // main lcore (0, `-l 0`) already.
    assert_eq!(qa[0].bind_thread(), Ok(()));
    assert_eq!(qa[0].lcore(), Some(0));
    let mut q1 = qa.pop().unwrap();
    let worker = std::thread::spawn(move || {
        let mut v = Vec::new();
        let mut cycle = |p: &mut DpdkPort| {
            assert_eq!(p.alloc_tx(&mut v, 32), 32);
            p.release_all(&mut v);
            p.pool_cached_here()
        };
        let before = (q1.lcore(), cycle(&mut q1));
        let bound = q1.bind_thread();
        (before, bound, q1.lcore(), cycle(&mut q1))
    });
    let ((lcore0, cached0), bound, lcore1, cached1) = worker.join().unwrap();
    assert_eq!(
        (lcore0, cached0),
        (None, 0),
        "an unbound thread has no cache"
    );
    assert_eq!(bound, Ok(()));
    assert!(matches!(lcore1, Some(l) if l > 0), "{lcore1:?}");
    assert!(
        cached1 >= 32,
        "the bound thread's frames wait in its cache: {cached1}"
    );

    // 7. Every mbuf is back in its pool; every received chain was sound (none dropped by
    // rx_burst's check).
    assert_eq!((a.frames_out(), b.frames_out()), (0, 0));
    assert_eq!(
        (a.extra_stats().rx_malformed, b.extra_stats().rx_malformed),
        (0, 0)
    );
    let t0 = Instant::now();
    while (a.pool_free(), b.pool_free()) != free0 && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!((a.pool_free(), b.pool_free()), free0, "pools refilled");
    eprintln!(
        "memif: {:?} / {:?}; device stats {:?}",
        a.stats(),
        b.stats(),
        a.device_stats()
    );
    // 8. A frame of the other device released here is freed, but counted back only by
    // its own port's device: a device never frees its pools under a frame it handed out
    // (the other's count stays high; its pools are then kept at its drop, not freed).
    let (mut fa, mut fb) = (Vec::new(), Vec::new());
    assert_eq!((a.alloc_tx(&mut fa, 1), b.alloc_tx(&mut fb, 1)), (1, 1));
    a.release(fb.pop().unwrap());
    assert_eq!((a.frames_out(), b.frames_out()), (1, 1));
    a.release(fa.pop().unwrap());
    assert_eq!((a.frames_out(), b.frames_out()), (0, 1));
    drop((a, b, qa, qb));
    dpdk::remove_own_runtime_dir();
    let _ = std::fs::remove_dir_all(&dir);
}
