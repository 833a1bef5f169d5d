//! AF_PACKET receive rings with a frame held by the user (root only; skipped otherwise):
//! when the ring wraps around to the slot (TPACKET_V2) or block (TPACKET_V3) of a frame
//! the user still holds, that frame is not handed out a second time — the port stops
//! there until it is released — and nothing received later is lost once it is, even
//! with the held frame's headroom written over. The veth
//! lives in a private namespace (`sqp-held`, 198.18.0.0/15 addresses only) that the test
//! creates and always removes.

use std::time::{Duration, Instant};

mod common;

use squall_port::afpacket::{AfPacketConfig, AfPacketPort, RxMode};
use squall_port::{FrameBuf, Port};

const SRC_MAC: [u8; 6] = [2, 0, 0, 0, 0, 7];

/// A 60-byte IPv4/UDP-looking frame carrying `seq` (bytes 42..46), from SRC_MAC.
fn frame(seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&SRC_MAC);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&46u16.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[198, 18, 0, 1]);
    f[30..34].copy_from_slice(&[198, 18, 0, 2]);
    f[42..46].copy_from_slice(&seq.to_be_bytes());
    f
}

fn seq_of(d: &[u8]) -> u32 {
    u32::from_be_bytes([d[42], d[43], d[44], d[45]])
}

/// Sends frames `seqs` from `tx`.
fn send(tx: &mut AfPacketPort, seqs: std::ops::Range<u32>) {
    let mut out = Vec::new();
    tx.alloc_tx(&mut out, seqs.len());
    for (f, s) in out.iter_mut().zip(seqs.clone()) {
        f.fill(&frame(s)).unwrap();
    }
    let mut left = out;
    let deadline = Instant::now() + Duration::from_secs(2);
    while !left.is_empty() && Instant::now() < deadline {
        tx.tx_burst(&mut left);
    }
    assert!(left.is_empty(), "frames not sent");
    std::thread::sleep(Duration::from_millis(30));
}

/// The test's frames `rx` hands out within `ms` (the others released at once), each
/// released unless `keep` names it.
fn take(
    rx: &mut AfPacketPort,
    ms: u64,
    keep: Option<u32>,
) -> (Vec<u32>, Vec<<AfPacketPort as Port>::Frame>) {
    let mut seqs = Vec::new();
    let mut kept = Vec::new();
    let deadline = Instant::now() + Duration::from_millis(ms);
    while Instant::now() < deadline {
        let mut got = Vec::new();
        rx.rx_burst(&mut got, 64);
        for f in got {
            let d = f.data();
            if d.len() >= 46 && d[6..12] == SRC_MAC {
                let s = seq_of(d);
                seqs.push(s);
                if keep == Some(s) {
                    kept.push(f);
                    continue;
                }
            }
            rx.release(f);
        }
    }
    (seqs, kept)
}

fn held_frame_is_not_handed_out_twice(mode: RxMode, fill: u32) {
    let mut c = AfPacketConfig::new("hd1");
    c.rx = mode;
    c.gso = false;
    c.ring_slots = 32;
    c.ring_blocks = 4;
    c.ring_block_size = 1 << 16;
    let mut rx = AfPacketPort::open(c).expect("receiving port");
    let mut c = AfPacketConfig::new("hd0");
    c.gso = false;
    c.frames = 4096;
    let mut tx = AfPacketPort::open(c).expect("sending port");
    // The first frame is held; enough frames follow to wrap the ring around to it.
    send(&mut tx, 0..1);
    let (first, mut held) = take(&mut rx, 50, Some(0));
    assert_eq!(first, vec![0], "{mode:?}");
    // The held frame's whole headroom scribbled over (a stack may put headers there):
    // it must not reach the ring's own words (a V2 slot's tp_status: with its USER bit
    // set the slot would be handed out again while held).
    let h = held[0].headroom();
    held[0].prepend(h).unwrap();
    held[0].data_mut()[..h].fill(0xff);
    held[0].adjust(h).unwrap();
    let mut seen = first;
    for round in 0..4 {
        send(&mut tx, 1 + round * fill..1 + (round + 1) * fill);
        let (s, _) = take(&mut rx, 50, None);
        seen.extend(s);
    }
    let mut sorted = seen.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(
        sorted.len(),
        seen.len(),
        "{mode:?}: a frame handed out twice: {seen:?}"
    );
    assert_eq!(
        held[0].data()[42..46],
        0u32.to_be_bytes(),
        "the held frame unchanged"
    );
    // Released, the ring goes on.
    for f in held {
        rx.release(f);
    }
    let before = rx.stats().rx_frames;
    send(&mut tx, 10_000..10_003);
    let (after, _) = take(&mut rx, 200, None);
    assert!(
        !after.is_empty(),
        "{mode:?}: nothing received after the release"
    );
    assert!(rx.stats().rx_frames > before);
}

#[test]
fn a_held_frame_is_not_handed_out_twice() {
    common::in_veth_ns("sqp-held", "hd0", "hd1", || {
        // 32 slots of 2 KiB: 31 frames fill the rest of the ring.
        held_frame_is_not_handed_out_twice(RxMode::Frames, 31);
        // 4 blocks of 64 KiB: a few hundred 60-byte frames fill a block.
        held_frame_is_not_handed_out_twice(RxMode::Blocks, 700);
    });
}
