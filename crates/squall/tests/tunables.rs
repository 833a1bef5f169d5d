//! Per-template tunables on the wire: a two-template profile whose templates differ in
//! MSS, initial window, TTL, TOS, RFC 7323 and the client's ACK count (TRex's
//! `no_delay_counter`) per side is run in simulation with a pcap,
//! and every captured frame is checked (squall-port's pcap reader, squall-wire's views)
//! against its own template's values.

mod common;
use common::*;

use squall_wire::{Ipv4Packet, TcpFlags, TcpPacket};
use std::collections::BTreeMap;

/// What one template's frames must show, per direction.
struct Want {
    client_mss: u16,
    server_mss: u16,
    client_ip: (u8, u8),
    server_ip: (u8, u8),
    server_initwnd: usize,
    timestamps: bool,
    /// Largest payload of a server segment.
    max_payload: usize,
    /// The client acknowledges every data segment (`no_delay_counter` 1), not one per
    /// receive burst.
    ack_each: bool,
}

const SMALL: Want = Want {
    client_mss: 536,
    server_mss: 536,
    client_ip: (33, 16),
    server_ip: (44, 32),
    server_initwnd: 10,
    timestamps: true,
    max_payload: 536 - 12,
    ack_each: false,
};
const BIG: Want = Want {
    client_mss: 1200,
    server_mss: 1200,
    client_ip: (100, 0),
    server_ip: (101, 0),
    server_initwnd: 3,
    timestamps: false,
    max_payload: 1200,
    ack_each: true,
};

#[derive(Default, Debug)]
struct FlowSeen {
    syn_mss: Option<u16>,
    synack_mss: Option<u16>,
    syn_ts: bool,
    /// Timestamps of server data frames.
    data_ts: Vec<u64>,
    max_payload: usize,
    frames: usize,
    /// Client segments without payload, SYN, FIN or RST.
    pure_acks: usize,
}

#[test]
fn each_template_uses_its_own_tunables_on_the_wire() {
    let p = profile("tests/profiles/two-tunables.json");
    let r = sim(&p, 2.0, 1.0, |c| {
        c.impair = squall::impair::parse_impair("delay_us=50").unwrap();
        c.pcap_flows = Some(8);
    });
    assert_clean(&r);
    let pcap = r.pcap.expect("pcap requested");
    let (_, recs) = squall_port::pcap::read_pcap(&pcap).expect("valid pcap");
    // (client ip, client port) -> what was seen.
    let mut flows: BTreeMap<(u32, u16), FlowSeen> = BTreeMap::new();
    let mut checked = [0usize; 2];
    for rec in &recs {
        let ip = Ipv4Packet::new_checked(&rec.data[14..]).expect("IPv4");
        assert!(ip.verify_checksum());
        let tcp = TcpPacket::new_checked(ip.payload()).expect("TCP");
        let ip4 = |a| u32::from(std::net::Ipv4Addr::from(a));
        let (src, dst) = (ip4(ip.src()), ip4(ip.dst()));
        let from_client = src >> 24 == 16 || src >> 24 == 17;
        let client = if from_client { src } else { dst };
        let cport = if from_client {
            tcp.src_port()
        } else {
            tcp.dst_port()
        };
        let (w, k) = match client >> 24 {
            16 => (&SMALL, 0),
            17 => (&BIG, 1),
            _ => panic!("frame of no template: {src:#x} -> {dst:#x}"),
        };
        checked[k] += 1;
        let want_ip = if from_client {
            w.client_ip
        } else {
            w.server_ip
        };
        assert_eq!(
            (ip.ttl(), ip.tos()),
            want_ip,
            "TTL/TOS of a template-{k} frame"
        );
        let opts = tcp.parse_options().expect("options");
        assert_eq!(opts.timestamps.is_some(), w.timestamps, "template {k}");
        let f = flows.entry((client, cport)).or_default();
        f.frames += 1;
        if tcp.flags().contains(TcpFlags::SYN) {
            if from_client {
                f.syn_mss = opts.mss;
                f.syn_ts = opts.timestamps.is_some();
            } else {
                f.synack_mss = opts.mss;
            }
        }
        let control = TcpFlags::SYN | TcpFlags::FIN | TcpFlags::RST;
        if from_client && tcp.payload().is_empty() && !tcp.flags().intersects(control) {
            f.pure_acks += 1;
        }
        if !from_client && !tcp.payload().is_empty() {
            f.data_ts.push(rec.ts_ns);
            f.max_payload = f.max_payload.max(tcp.payload().len());
        }
    }
    assert!(checked[0] > 50 && checked[1] > 50, "frames {checked:?}");
    let mut seen = [0usize; 2];
    for (&(client, _), f) in &flows {
        let (w, k) = if client >> 24 == 16 {
            (&SMALL, 0)
        } else {
            (&BIG, 1)
        };
        seen[k] += 1;
        assert_eq!(f.syn_mss, Some(w.client_mss), "template {k} SYN MSS");
        assert_eq!(f.synack_mss, Some(w.server_mss), "template {k} SYN-ACK MSS");
        assert_eq!(f.syn_ts, w.timestamps);
        assert_eq!(f.max_payload, w.max_payload, "template {k} segment size");
        // The first flight: data frames sent at the instant of the first one (the wire
        // delays the client's ACKs by 50 us).
        let first = f.data_ts[0];
        let flight = f.data_ts.iter().filter(|&&t| t == first).count();
        assert_eq!(flight, w.server_initwnd, "template {k} initial window");
        let payload: usize = 32_768;
        assert!(f.data_ts.len() >= payload / w.max_payload);
        // Every data segment acknowledged on its own (the last one perhaps by the FIN),
        // or one ACK for a burst of them.
        let data = f.data_ts.len();
        if w.ack_each {
            assert!(
                f.pure_acks + 1 >= data,
                "template {k}: {} ACKs for {data}",
                f.pure_acks
            );
        } else {
            assert!(
                f.pure_acks * 2 < data,
                "template {k}: {} ACKs for {data}",
                f.pure_acks
            );
        }
    }
    assert!(seen[0] >= 2 && seen[1] >= 2, "flows per template {seen:?}");
}
