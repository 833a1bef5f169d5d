//! Issue 13, IPv6 in `squall run` on the in-memory wire: a TRex-style profile with
//! `ipv6.enable` / `src_msb` / `dst_msb` runs unchanged with zero errors and every flow's
//! frames are IPv6 with the mapped addresses; a mixed IPv4/IPv6 profile counts each
//! family in its template group; native IPv6 pools; the pcap of an IPv6 run.

mod common;
use common::*;

use std::net::Ipv6Addr;
use std::sync::Arc;

use squall_astf::Profile;
use squall_wire::ethernet::EthernetFrame;

/// (ethertype, source, destination) of every captured frame (IPv6 addresses only).
fn ipv6_frames(pcap: &[u8]) -> Vec<(u16, Option<(Ipv6Addr, Ipv6Addr)>)> {
    let (_, recs) = squall_port::pcap::read_pcap(pcap).expect("valid pcap");
    recs.iter()
        .map(|r| {
            let e = EthernetFrame::new_checked(&r.data[..]).expect("ethernet");
            let et = e.ethertype().0;
            let d = &r.data[14..];
            let addrs = (et == 0x86dd).then(|| {
                let a = |o: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&d[o..o + 16]).unwrap());
                (a(8), a(24))
            });
            (et, addrs)
        })
        .collect()
}

fn trex_ipv6() -> Arc<Profile> {
    profile("tests/profiles/trex-ipv6.py")
}

#[test]
fn trex_ipv6_profile_runs_unchanged_with_zero_errors() {
    let p = trex_ipv6();
    assert!(
        p.templates[0].ipv6.is_some(),
        "ipv6.enable maps the template"
    );
    let r = sim(&p, 2.0, 1.0, |c| c.pcap_flows = Some(3));
    assert_clean(&r);
    let (c, s) = (r.client.app.total(), r.server.app.total());
    assert_eq!(c.started, 200, "100 cps for 2 s");
    assert_eq!((c.completed, s.completed, s.accepted), (200, 200, 200));
    assert_eq!(c.l7_rx_bytes, 200 * 4057, "57 header bytes + 4000");
    assert_eq!(
        r.server.app.translated, 0,
        "the peers are the mapped client pool"
    );
    assert_eq!(r.server.app.no_template, 0);
    // Every frame of the captured flows is IPv6, between the mapped addresses.
    let frames = ipv6_frames(r.pcap.as_ref().expect("pcap"));
    assert!(frames.len() >= 3 * 8, "{} frames", frames.len());
    let client0: Ipv6Addr = "2001:db8:0:2222::1000:1".parse().unwrap();
    let server0: Ipv6Addr = "2001:db8:2:2222::3000:1".parse().unwrap();
    assert!(frames.iter().all(|(et, _)| *et == 0x86dd));
    assert!(frames.iter().any(|(_, a)| *a == Some((client0, server0))));
    assert!(frames.iter().any(|(_, a)| *a == Some((server0, client0))));
    for (_, a) in &frames {
        let (src, dst) = a.unwrap();
        for x in [src, dst] {
            let o = x.octets();
            assert!(
                o[..8] == [0x20, 1, 0x0d, 0xb8, 0, 0, 0x22, 0x22]
                    || o[..8] == [0x20, 1, 0x0d, 0xb8, 0, 2, 0x22, 0x22],
                "{x}"
            );
        }
    }
    // The hosts gave every IPv6 address id back.
    assert_eq!(r.client.still_open + r.server.still_open, 0);
}

#[test]
fn mixed_profile_counts_each_family_in_its_group() {
    let p = profile("tests/profiles/mixed-ipv4-ipv6.json");
    assert_eq!(p.tg_names, vec!["", "v4", "v6"]);
    let r = sim(&p, 2.0, 1.0, |c| c.pcap_flows = Some(40));
    assert_clean(&r);
    let g = |side: &squall::run::SideReport, k: usize| side.app.tg[k].c.clone();
    let (c4, c6) = (g(&r.client, 1), g(&r.client, 2));
    let (s4, s6) = (g(&r.server, 1), g(&r.server, 2));
    assert_eq!((c4.started, c4.completed), (200, 200));
    assert_eq!((c6.started, c6.completed), (100, 100));
    assert_eq!(
        (s4.accepted, s6.accepted),
        (200, 100),
        "each family found its template"
    );
    assert_eq!(c4.l7_rx_bytes, 200 * 3000);
    assert_eq!(c6.l7_rx_bytes, 100 * 7000);
    assert_eq!(s6.l7_rx_bytes, 100 * 62);
    assert_eq!(r.server.app.translated, 0);
    let frames = ipv6_frames(r.pcap.as_ref().unwrap());
    let v6 = frames.iter().filter(|(et, _)| *et == 0x86dd).count();
    let v4 = frames.iter().filter(|(et, _)| *et == 0x0800).count();
    assert!(
        v4 > 0 && v6 > 0,
        "both families on the wire: {v4} IPv4, {v6} IPv6"
    );
    let c: Ipv6Addr = "2001:db8::1".parse().unwrap();
    assert!(frames.iter().any(|(_, a)| a.is_some_and(|(s, _)| s == c)));
}

#[test]
fn ipv6_over_an_impaired_wire_loses_nothing_end_to_end() {
    let p = trex_ipv6();
    let r = sim(&p, 1.0, 1.0, |c| {
        c.impair = squall::impair::parse_impair("loss=0.02,reorder=0.02,delay_us=50").unwrap();
        c.drain_ns = 20_000_000_000;
    });
    assert_clean(&r);
    let c = r.client.app.total();
    assert_eq!(c.completed, 100);
    assert_eq!(c.l7_rx_bytes, 100 * 4057);
    assert!(r.client.impair.lost + r.server.impair.lost > 0);
    assert!(r.client.tcp.tcps_sndrexmitpack + r.server.tcp.tcps_sndrexmitpack > 0);
}

/// UDP templates over IPv6 (TRex's `ipv6.enable` on the DNS example): exact counts, every
/// datagram on the wire IPv6, every address id given back.
#[test]
fn udp_over_ipv6_has_exact_counts() {
    let mut v: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("examples/udp-dns.json")).unwrap(),
    )
    .unwrap();
    v["global"] = serde_json::json!({"ipv6": {"enable": 1, "src_msb": "2001:db8:53::", "dst_msb": "2001:db8:53:1::"}});
    let p = Arc::new(squall_astf::load_profile_value(v).unwrap());
    let r = sim(&p, 1.0, 1.0, |c| c.pcap_flows = Some(5));
    assert_clean(&r);
    let (cu, su) = (&r.client.app.udp, &r.server.app.udp);
    assert_eq!((cu.udps_connects, su.udps_accepts), (1000, 1000));
    assert_eq!((cu.udps_sndpkt, su.udps_rcvpkt), (1000, 1000));
    assert_eq!((su.udps_sndpkt, cu.udps_rcvpkt), (1000, 1000));
    assert_eq!((cu.udps_sndbyte, su.udps_rcvbyte), (32_000, 32_000));
    let (c, s) = (r.client.app.total(), r.server.app.total());
    assert_eq!((c.started, c.completed), (1000, 1000));
    assert_eq!((s.accepted, s.completed), (1000, 1000));
    let frames = ipv6_frames(r.pcap.as_ref().unwrap());
    assert_eq!(frames.len(), 10, "5 flows, a query and an answer each");
    let server: Ipv6Addr = "2001:db8:53:1::3000:1".parse().unwrap();
    assert!(frames
        .iter()
        .all(|(et, a)| *et == 0x86dd && a.is_some_and(|(s, d)| s == server || d == server)));
}
