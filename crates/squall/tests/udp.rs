//! UDP flows end to end on the engine (simulation): request/response with exact counts,
//! keepalive aging (both modes), late datagrams, a mixed TCP + UDP profile, cut at stop.

mod common;
use common::*;

use std::sync::Arc;

use squall::run::RunResult;
use squall_astf::Profile;

fn inline(json: &str) -> Arc<Profile> {
    Arc::new(squall_astf::load_profile_str(json).unwrap_or_else(|e| panic!("{e:?}")))
}

fn tg(r: &RunResult, client: bool, g: usize) -> squall::stats::TgCounters {
    let s = if client { &r.client } else { &r.server };
    s.app.tg[g].c.clone()
}

#[test]
fn request_response_has_exact_counts() {
    let p = profile("../../examples/udp-dns.json");
    let r = sim(&p, 1.0, 1.0, |c| {
        c.impair = squall::impair::parse_impair("delay_us=100").unwrap();
    });
    assert_clean(&r);
    let (cu, su) = (&r.client.app.udp, &r.server.app.udp);
    assert_eq!(cu.udps_connects, 1000);
    assert_eq!(su.udps_accepts, 1000);
    assert_eq!((cu.udps_closed, su.udps_closed), (1000, 1000));
    assert_eq!((cu.udps_sndpkt, su.udps_rcvpkt), (1000, 1000));
    assert_eq!((su.udps_sndpkt, cu.udps_rcvpkt), (1000, 1000));
    // query 32 bytes, answer 48 bytes
    assert_eq!((cu.udps_sndbyte, su.udps_rcvbyte), (32_000, 32_000));
    assert_eq!((su.udps_sndbyte, cu.udps_rcvbyte), (48_000, 48_000));
    assert_eq!(cu.udps_keepdrops + su.udps_keepdrops, 0);
    let (c, s) = (r.client.app.total(), r.server.app.total());
    assert_eq!((c.started, c.completed), (1000, 1000));
    assert_eq!((s.accepted, s.completed), (1000, 1000));
    // No TCP at all.
    assert_eq!(r.client.tcp.tcps_connattempt, 0);
    // Latency: one wire round trip (2 x 100 us) from the scheduled start.
    let lat = &r.client.app.tg[1].lat;
    assert_eq!(lat.first_byte.count(), 1000);
    assert_eq!(lat.first_byte.summary()[4], 200);
    assert_eq!(r.client.live_end + r.server.live_end, 0);
}

const AGING: &str = r#"{
  "version": 1,
  "buffers": [{"name": "q", "text": "query"}, {"name": "a", "text": "answer!"}],
  "ip_gens": [{"name": "g", "clients": {"range": ["16.0.0.1", "16.0.0.10"]},
               "servers": {"range": ["48.0.0.1", "48.0.0.1"]}}],
  "programs": [
    {"name": "c_slow", "commands": [
      {"op": "set_keepalive_msg", "msec": 100},
      {"op": "send_msg", "buf": "q"},
      {"op": "recv_msg", "count": 1}]},
    {"name": "s_slow", "commands": [
      {"op": "recv_msg", "count": 1},
      {"op": "delay", "usec": 300000},
      {"op": "send_msg", "buf": "a"}]},
    {"name": "c_kept", "commands": [
      {"op": "set_keepalive_msg", "msec": 100},
      {"op": "send_msg", "buf": "q"},
      {"op": "delay", "usec": 60000},
      {"op": "send_msg", "buf": "q"},
      {"op": "delay", "usec": 60000},
      {"op": "send_msg", "buf": "q"},
      {"op": "recv_msg", "count": 1}]},
    {"name": "s_kept", "commands": [
      {"op": "set_keepalive_msg", "msec": 100, "rx_mode": true},
      {"op": "recv_msg", "count": 3},
      {"op": "send_msg", "buf": "a"}]},
    {"name": "c_gap", "commands": [
      {"op": "send_msg", "buf": "q"},
      {"op": "delay", "usec": 80000},
      {"op": "send_msg", "buf": "q"}]},
    {"name": "s_gap", "commands": [
      {"op": "set_keepalive_msg", "msec": 50, "rx_mode": true},
      {"op": "recv_msg", "count": 2}]}
  ],
  "templates": [
    {"tg_name": "slow", "transport": "udp", "client_program": "c_slow", "server_program": "s_slow",
     "port": 53, "cps": 10, "limit": 5},
    {"tg_name": "kept", "transport": "udp", "client_program": "c_kept", "server_program": "s_kept",
     "port": 54, "cps": 10, "limit": 5},
    {"tg_name": "gap", "transport": "udp", "client_program": "c_gap", "server_program": "s_gap",
     "port": 55, "cps": 10, "limit": 5}
  ]
}"#;

#[test]
fn keepalive_ages_idle_flows_and_traffic_refreshes_it() {
    let p = inline(AGING);
    let r = sim(&p, 2.0, 1.0, |_| {});
    let g = |n: &str| p.tg_names.iter().position(|x| x == n).unwrap();
    let (slow, kept, gap) = (g("slow"), g("kept"), g("gap"));
    // slow: the client ages out after 100 ms idle; the answer (300 ms) finds no flow.
    let c = tg(&r, true, slow);
    assert_eq!((c.started, c.aborted, c.completed), (5, 5, 0));
    let s = tg(&r, false, slow);
    assert_eq!((s.accepted, s.completed), (5, 5));
    // kept: datagrams every 60 ms keep both sides alive (client: sent ones refresh it,
    // server in rx_mode: received ones).
    let c = tg(&r, true, kept);
    assert_eq!((c.started, c.completed, c.aborted), (5, 5, 0));
    let s = tg(&r, false, kept);
    assert_eq!((s.accepted, s.completed, s.aborted), (5, 5, 0));
    // gap: the server (rx_mode, 50 ms) ages between the two datagrams (80 ms apart); the
    // second one creates a new server flow, which ages too.
    let c = tg(&r, true, gap);
    assert_eq!((c.started, c.completed), (5, 5));
    let s = tg(&r, false, gap);
    assert_eq!((s.accepted, s.aborted, s.completed), (10, 10, 0));
    let (cu, su) = (&r.client.app.udp, &r.server.app.udp);
    assert_eq!(cu.udps_keepdrops, 5);
    assert_eq!(su.udps_keepdrops, 10);
    assert_eq!(cu.udps_notconn, 5, "late answers of aged client flows");
    assert_eq!(su.udps_notconn, 0);
    // Every datagram sent arrived at the other side's port.
    assert_eq!(cu.udps_sndpkt, su.udps_rcvpkt);
    assert_eq!(su.udps_sndpkt, cu.udps_rcvpkt + cu.udps_notconn);
    assert_eq!(r.client.live_end + r.server.live_end, 0);
    // Aging is an error of the run.
    assert!(squall::report::error_count(&r) > 0);
}

#[test]
fn mixed_tcp_and_udp_profile_runs_clean() {
    let p = profile("../../examples/http-dns-mix.json");
    let r = sim(&p, 2.0, 1.0, |c| {
        c.impair = squall::impair::parse_impair("delay_us=50").unwrap();
    });
    assert_clean(&r);
    let (cu, su) = (&r.client.app.udp, &r.server.app.udp);
    assert!(cu.udps_connects > 0);
    assert!(r.client.tcp.tcps_connects > 0);
    assert_eq!(cu.udps_connects, su.udps_accepts);
    assert_eq!(cu.udps_sndbyte, su.udps_rcvbyte);
    assert_eq!(su.udps_sndbyte, cu.udps_rcvbyte);
    let t = r.client.app.total();
    assert_eq!(t.started, t.completed);
    assert_eq!(t.started, cu.udps_connects + r.client.tcp.tcps_connects);
}

#[test]
fn udp_flows_running_at_the_end_are_cut() {
    let p = inline(
        r#"{"version": 1,
  "buffers": [{"name": "q", "text": "q"}],
  "ip_gens": [{"name": "g", "clients": {"range": ["16.0.0.1", "16.0.0.10"]},
               "servers": {"range": ["48.0.0.1", "48.0.0.1"]}}],
  "programs": [
    {"name": "c", "commands": [{"op": "set_keepalive_msg", "msec": 10000},
                               {"op": "send_msg", "buf": "q"}, {"op": "delay", "usec": 5000000}]},
    {"name": "s", "commands": [{"op": "set_keepalive_msg", "msec": 10000},
                               {"op": "recv_msg", "count": 1}, {"op": "delay", "usec": 5000000}]}],
  "templates": [{"transport": "udp", "client_program": "c", "server_program": "s",
                 "port": 53, "cps": 10, "limit": 3}]}"#,
    );
    let r = sim(&p, 1.0, 1.0, |c| c.drain_ns = 500_000_000);
    let (c, s) = (r.client.app.total(), r.server.app.total());
    assert_eq!((c.started, c.cut), (3, 3));
    assert_eq!((s.accepted, s.cut), (3, 3));
    assert_eq!(r.client.app.udp.udps_closed, 3);
    assert_eq!(r.client.live_end + r.server.live_end, 0);
    assert!(squall::report::invariants(&r).iter().all(|c| c.ok));
}

/// A UDP flow whose program sets no keepalive ages after 1 s without traffic, as TRex's
/// do: a datagram the device under test lost ends both flows as aborted (an error) within
/// a second of the silence, counted in udps_keepdrops, instead of waiting for the run's
/// cut (here the server answers only after 3 s, when both flows are gone; its late
/// datagram finds no flow).
#[test]
fn udp_flows_without_a_keepalive_age_after_a_second() {
    let p = inline(
        r#"{"version": 1,
  "buffers": [{"name": "q", "text": "q"}],
  "ip_gens": [{"name": "g", "clients": {"range": ["16.0.0.1", "16.0.0.10"]},
               "servers": {"range": ["48.0.0.1", "48.0.0.1"]}}],
  "programs": [
    {"name": "c", "commands": [{"op": "send_msg", "buf": "q"}, {"op": "recv_msg", "count": 1}]},
    {"name": "s", "commands": [{"op": "recv_msg", "count": 1}, {"op": "delay", "usec": 3000000},
                               {"op": "send_msg", "buf": "q"}]}],
  "templates": [{"transport": "udp", "client_program": "c", "server_program": "s",
                 "port": 53, "cps": 10, "limit": 3}]}"#,
    );
    let r = sim(&p, 1.0, 3.0, |c| c.drain_ns = 2_000_000_000);
    let (c, s) = (r.client.app.total(), r.server.app.total());
    assert_eq!((c.started, c.aborted, c.cut), (3, 3, 0));
    assert_eq!((s.accepted, s.aborted, s.cut), (3, 3, 0));
    assert_eq!(r.client.app.udp.udps_keepdrops, 3);
    assert_eq!(r.server.app.udp.udps_keepdrops, 3);
}
