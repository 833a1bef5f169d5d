//! TCP super-frames (TSO): with a sink that takes them, the host sends runs of full
//! segments of new data as one frame the sink cuts into segments (here as a kernel's GSO
//! does, `common::gso_segment`). W1 flows complete byte for byte over IPv4 and IPv6, on a
//! clean wire and through loss and reordering (retransmissions are single segments), the
//! segment counters count wire segments, and a sink without TSO gets none (its runs of
//! segments are the same segments, written one by one). The ACKs of one receive burst
//! open one run.

mod common;
use common::*;
use squall_tcp::TcpConfig;

const TSO_MAX: usize = 65_535;

fn impaired() -> Impair {
    Impair {
        loss: 0.02,
        reorder: 0.05,
        reorder_extra_ns: 3_000_000,
        delay_ns: 1_000_000,
        jitter_ns: 200_000,
        ..Impair::default()
    }
}

#[test]
fn w1_over_super_frames_on_a_clean_wire() {
    for fam in [Family::V4, Family::V6] {
        let cfg = TcpConfig {
            opts: squall_tcp::FlowOpts {
                init_cwnd: 10,
                ..w1_config().opts
            },
            ..w1_config()
        };
        let (r, _, tso) = run_w1_sinks(
            fam,
            2_000,
            200,
            Impair::default(),
            7,
            cfg.clone(),
            false,
            TSO_MAX,
            false,
        );
        assert_every_flow_done(&r);
        let (frames, segs) = tso[1];
        assert!(frames > 0, "the server sent super-frames");
        assert!(segs >= 2 * frames);
        // The client sends 100-byte requests: nothing to cut.
        assert_eq!(tso[0], (0, 0));
        // Counters count wire segments: a 32,768-byte answer is 23 segments of 1,448.
        assert_eq!(r.server.tcps_sndbyte, 2_000 * RESP_LEN as u64);
        assert_eq!(
            r.server.tcps_sndpack,
            2_000 * RESP_LEN.div_ceil(1448) as u64
        );
        assert_eq!(r.server.tcps_sndrexmitpack, 0);
        // The same run without super-frames sends the same segments.
        let (plain, _, none) =
            run_w1_sinks(fam, 2_000, 200, Impair::default(), 7, cfg, false, 0, false);
        assert_every_flow_done(&plain);
        assert_eq!(none, [(0, 0), (0, 0)]);
        assert_eq!(plain.server.tcps_sndpack, r.server.tcps_sndpack);
        assert_eq!(plain.wire.sent, r.wire.sent, "{fam:?}: same wire frames");
    }
}

#[test]
fn w1_over_super_frames_through_loss_and_reordering() {
    for fam in [Family::V4, Family::V6] {
        let (r, _, tso) = run_w1_sinks(
            fam,
            3_000,
            100,
            impaired(),
            11,
            w1_config(),
            false,
            TSO_MAX,
            false,
        );
        assert_every_flow_done(&r);
        assert!(tso[1].0 > 0, "super-frames were sent");
        assert!(r.server.tcps_sndrexmitpack > 0, "losses were repaired");
    }
}

/// With timestamps a segment carries 1,448 bytes while the congestion window counts the
/// negotiated 1,460: every flight of 10 would end in a 120-byte runt without the sender's
/// silly-window avoidance, which holds a segment cut short by the window while data is
/// in flight (BSD and Linux do, Nagle or not). Every answer is then 23 segments.
#[test]
fn timestamped_flights_send_no_runts() {
    for tso in [0, TSO_MAX] {
        let cfg = TcpConfig {
            opts: squall_tcp::FlowOpts {
                init_cwnd: 10,
                timestamps: true,
                wscale: Some(0),
                sack: true,
                ..w1_config().opts
            },
            ..w1_config()
        };
        let (r, _, _) = run_w1_sinks(
            Family::V4,
            1_000,
            100,
            Impair::default(),
            3,
            cfg,
            false,
            tso,
            false,
        );
        assert_every_flow_done(&r);
        assert_eq!(
            r.server.tcps_sndpack,
            1_000 * RESP_LEN.div_ceil(1448) as u64,
            "tso {tso}: full segments only, but the last of each answer"
        );
    }
}

/// One W1 flow (IW10) up to the server's answer to the client's ACKs of its first flight:
/// the ACKs reach the server in one `rx_burst` (`burst`) or one `rx` at a time. Returns the
/// super-frames the server sent for them and the wire frames they became (cut as a
/// kernel's GSO does with `tso_max` > 0), after checking that the flow then completes.
fn answer_to_first_acks(fam: Family, tso_max: usize, burst: bool) -> (u64, Vec<Vec<u8>>) {
    let mut now = 1_000_000_000u64;
    let cfg = TcpConfig {
        opts: squall_tcp::FlowOpts {
            init_cwnd: 10,
            ..w1_config().opts
        },
        ..w1_config()
    };
    let mut pair = w1_pair(cfg, 16, 9, now);
    let mut cs = VecSink::default();
    let mut ss = VecSink::default();
    ss.tso_max = tso_max;
    let data = |fr: &Vec<u8>| fr.len() > fam.tcp_at() + 20 + 100;
    // Handshake and request, frame by frame, until the server's first flight is out.
    let first_flight = pair.until_first_flight(fam, now, &mut cs, &mut ss);
    let W1Pair {
        mut ch,
        mut sh,
        mut capp,
        mut sapp,
    } = pair;
    assert_eq!(first_flight.iter().filter(|fr| data(fr)).count(), 10);
    let first_super = ss.tso_frames;
    // The client takes the first flight and acknowledges it.
    now += 1_000;
    for fr in &first_flight {
        ch.rx(now, fr, &mut capp, &mut cs);
    }
    let acks: Vec<Vec<u8>> = cs.frames.drain(..).collect();
    assert!(acks.len() >= 5, "{fam:?}: {} ACKs", acks.len());
    now += 1_000;
    if burst {
        let refs: Vec<&[u8]> = acks.iter().map(|a| &a[..]).collect();
        sh.rx_burst(now, &refs, &mut sapp, &mut ss);
    } else {
        for a in &acks {
            sh.rx(now, a, &mut sapp, &mut ss);
        }
    }
    let answer = ss.frames.clone();
    assert_eq!(answer.iter().filter(|fr| data(fr)).count(), 13);
    let supers = ss.tso_frames - first_super;
    // The flow completes: the rest of the exchange frame by frame.
    for _ in 0..50 {
        now += 1_000;
        let to_client: Vec<Vec<u8>> = ss.frames.drain(..).collect();
        for fr in &to_client {
            ch.rx(now, fr, &mut capp, &mut cs);
        }
        let to_server: Vec<Vec<u8>> = cs.frames.drain(..).collect();
        for fr in &to_server {
            sh.rx(now, fr, &mut sapp, &mut ss);
        }
        if to_client.is_empty() && to_server.is_empty() {
            break;
        }
    }
    assert_eq!(
        (capp.ok, sapp.ok),
        (1, 1),
        "{fam:?} tso {tso_max} burst {burst}"
    );
    (supers, answer)
}

/// Output that an ACK makes possible waits for the end of the receive burst the ACK came
/// in (`rx_burst`): the client's ACKs of the first flight (IW10), taken in one burst, open
/// the rest of the answer (13 segments) as one super-frame; taken one `rx` at a time they
/// open it a few segments per ACK, in several. Either way the flow completes.
fn acks_of_one_burst_open_one_super_frame(fam: Family) {
    let (burst, _) = answer_to_first_acks(fam, TSO_MAX, true);
    let (one_by_one, _) = answer_to_first_acks(fam, TSO_MAX, false);
    assert_eq!(burst, 1, "{fam:?}: one burst of ACKs, one super-frame");
    assert!(
        one_by_one > 1,
        "{fam:?}: ACK by ACK, {one_by_one} super-frames"
    );
}
per_family!(acks_of_one_burst_open_one_super_frame);

/// Without TSO the same run is written segment after segment (`write_run`): the same
/// segments as the super-frame cut by GSO — sequence numbers, lengths, flags (PSH on the
/// last only) — and each a plain frame.
fn a_run_without_tso_is_the_super_frames_segments(fam: Family) {
    let (supers, plain) = answer_to_first_acks(fam, 0, true);
    let (_, cut) = answer_to_first_acks(fam, TSO_MAX, true);
    assert_eq!(supers, 0);
    let at = fam.tcp_at();
    let shape = |fr: &Vec<u8>| {
        let seq = u32::from_be_bytes([fr[at + 4], fr[at + 5], fr[at + 6], fr[at + 7]]);
        let hl = usize::from(fr[at + 12] >> 4) * 4;
        (seq, fr.len() - at - hl, fr[at + 13])
    };
    let p: Vec<_> = plain.iter().map(shape).collect();
    let c: Vec<_> = cut.iter().map(shape).collect();
    assert_eq!(p, c, "{fam:?}");
    let psh = p.iter().filter(|s| s.2 & 0x08 != 0).count();
    assert_eq!(psh, 1, "{fam:?}: PSH on the last segment only");
    assert!(p.last().is_some_and(|s| s.2 & 0x08 != 0));
    assert!(p
        .windows(2)
        .all(|w| w[1].0 == w[0].0.wrapping_add(w[0].1 as u32)));
}
per_family!(a_run_without_tso_is_the_super_frames_segments);
