//! One ACK per receive burst (`FlowOpts::burst_ack`): the in-order segments one
//! `rx_burst` brings a flow that has nothing of its own to send are acknowledged once, at
//! the burst's end, as Linux ACKs a GRO super-packet once. Taken one `rx` at a time, or
//! with the option off, they are acknowledged every second full segment. An out-of-order
//! segment is still answered at once (duplicate ACKs for the sender's fast retransmit),
//! and a flow that answers carries the ACK on its data (no extra pure ACK).

mod common;
use common::*;
use squall_tcp::{FlowOpts, TcpConfig};

const TCP_ACK: u8 = 0x10;

/// How the client takes the server's first flight (IW10 of a W1 answer).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Take {
    /// One `rx_burst` holding the whole flight.
    Burst,
    /// One `rx` per frame.
    OneByOne,
    /// One `rx_burst` with the 4th segment held back (out of order), then the 4th alone.
    BurstWithGap,
}

struct Flight {
    /// The client's frames answering the flight (before the flow's remainder).
    acks: Vec<Vec<u8>>,
    /// SEG.SEQ + length of the flight's last segment.
    flight_end: u32,
}

fn field32(fr: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([fr[at], fr[at + 1], fr[at + 2], fr[at + 3]])
}

/// A W1 exchange whose client takes the server's first flight as `take` says, with
/// `burst_ack` on the client; the rest of the flow runs frame by frame and must complete.
fn first_flight_acks(fam: Family, burst_ack: bool, take: Take) -> Flight {
    let mut now = 1_000_000_000u64;
    let opts = FlowOpts {
        init_cwnd: 10,
        burst_ack,
        ..w1_config().opts
    };
    let cfg = TcpConfig {
        opts,
        ..w1_config()
    };
    let mut pair = w1_pair(cfg, 16, 9, now);
    let mut cs = VecSink::default();
    let mut ss = VecSink::default();
    let at = fam.tcp_at();
    let data = |fr: &Vec<u8>| fr.len() > at + 20 + 100;
    // Handshake and request, frame by frame, until the server's first flight is out.
    let flight = pair.until_first_flight(fam, now, &mut cs, &mut ss);
    assert_eq!(flight.iter().filter(|fr| data(fr)).count(), 10, "{fam:?}");
    let last = flight.last().expect("flight");
    let hl = usize::from(last[at + 12] >> 4) * 4;
    let flight_end = field32(last, at + 4).wrapping_add((last.len() - at - hl) as u32);
    now += 1_000;
    match take {
        Take::Burst => {
            let refs: Vec<&[u8]> = flight.iter().map(|a| &a[..]).collect();
            pair.ch.rx_burst(now, &refs, &mut pair.capp, &mut cs);
        }
        Take::OneByOne => {
            for fr in &flight {
                pair.ch.rx(now, fr, &mut pair.capp, &mut cs);
            }
        }
        Take::BurstWithGap => {
            let held = flight.len() - 7; // the 4th data segment
            let refs: Vec<&[u8]> = flight
                .iter()
                .enumerate()
                .filter(|(k, _)| *k != held)
                .map(|(_, a)| &a[..])
                .collect();
            pair.ch.rx_burst(now, &refs, &mut pair.capp, &mut cs);
            pair.ch
                .rx_burst(now, &[&flight[held][..]], &mut pair.capp, &mut cs);
        }
    }
    let acks: Vec<Vec<u8>> = cs.frames.clone();
    // The rest of the flow: bursts of whatever is on the wire, to completion.
    for _ in 0..100 {
        now += 1_000;
        let to_server: Vec<Vec<u8>> = cs.frames.drain(..).collect();
        let refs: Vec<&[u8]> = to_server.iter().map(|a| &a[..]).collect();
        pair.sh.rx_burst(now, &refs, &mut pair.sapp, &mut ss);
        let to_client: Vec<Vec<u8>> = ss.frames.drain(..).collect();
        let refs: Vec<&[u8]> = to_client.iter().map(|a| &a[..]).collect();
        pair.ch.rx_burst(now, &refs, &mut pair.capp, &mut cs);
        if to_client.is_empty() && to_server.is_empty() {
            break;
        }
        // Delayed ACKs and retransmissions (none are expected on this clean wire).
        now += 200_000_000;
        pair.ch.poll(now, &mut pair.capp, &mut cs);
        pair.sh.poll(now, &mut pair.sapp, &mut ss);
    }
    assert_eq!(
        (pair.capp.ok, pair.sapp.ok),
        (1, 1),
        "{fam:?} {take:?} {burst_ack}"
    );
    Flight { acks, flight_end }
}

fn pure_acks(fam: Family, frames: &[Vec<u8>]) -> Vec<u32> {
    let at = fam.tcp_at();
    frames
        .iter()
        .filter(|fr| fr[at + 13] == TCP_ACK)
        .map(|fr| field32(fr, at + 8))
        .collect()
}

/// The flight taken in one burst is acknowledged by one ACK, for all of it.
fn a_burst_of_in_order_segments_is_acked_once(fam: Family) {
    let r = first_flight_acks(fam, true, Take::Burst);
    assert_eq!(
        pure_acks(fam, &r.acks),
        vec![r.flight_end],
        "{fam:?}: one ACK for the whole burst"
    );
    assert_eq!(r.acks.len(), 1, "{fam:?}: nothing else sent");
}
per_family!(a_burst_of_in_order_segments_is_acked_once);

/// Without a burst, or with the option off, every second full segment is acknowledged.
fn without_a_burst_or_the_option_every_second_segment_is_acked(fam: Family) {
    for (burst_ack, take) in [(true, Take::OneByOne), (false, Take::Burst)] {
        let r = first_flight_acks(fam, burst_ack, take);
        let acks = pure_acks(fam, &r.acks);
        assert_eq!(
            acks.len(),
            5,
            "{fam:?} {take:?} burst_ack {burst_ack}: {acks:?}"
        );
        assert_eq!(acks.last(), Some(&r.flight_end), "{fam:?} {take:?}");
        assert!(acks.windows(2).all(|w| w[1] > w[0]), "{fam:?}: {acks:?}");
    }
}
per_family!(without_a_burst_or_the_option_every_second_segment_is_acked);

/// A gap in the burst: each segment beyond it is answered at once with a duplicate ACK
/// (the sender counts them for fast retransmit), and the segment that fills it is ACKed.
fn out_of_order_segments_in_a_burst_are_answered_at_once(fam: Family) {
    let r = first_flight_acks(fam, true, Take::BurstWithGap);
    let acks = pure_acks(fam, &r.acks);
    // Segments 1-3 in order (one ACK at most, carried by the first duplicate ACK's
    // number), then 6 beyond the gap: 6 duplicate ACKs at the 4th's start, then the 4th
    // fills the gap: one ACK for the flight.
    let dups = acks.iter().filter(|&&a| a != r.flight_end).count();
    assert!(dups >= 6, "{fam:?}: duplicate ACKs {acks:?}");
    let gap_start = acks[acks.len() - 2];
    assert_eq!(
        acks.iter().filter(|&&a| a == gap_start).count(),
        6,
        "{fam:?}: one duplicate ACK per segment beyond the gap: {acks:?}"
    );
    assert_eq!(acks.last(), Some(&r.flight_end), "{fam:?}: {acks:?}");
}
per_family!(out_of_order_segments_in_a_burst_are_answered_at_once);
