//! Issue #10, "TRex profiles": profiles TRex runs that Squall refused or misreported —
//! flows longer than the run (cut, not errors; only stalled flows fail), a client that
//! connects and resets at once, one `ASTFIPGenDist` shared by several templates, server
//! templates chosen by the client's first bytes (`l7_map`), and TRex's keepalive tunables.

mod common;
use common::*;

use std::sync::Arc;

use serde_json::{json, Value};
use squall_astf::Profile;

fn load(v: Value) -> Arc<Profile> {
    Arc::new(squall_astf::load_profile_value(v).unwrap_or_else(|e| panic!("{e}")))
}

fn one_template(bufs: Value, client: Value, server: Value, cps: f64) -> Value {
    json!({
        "version": 1,
        "buffers": bufs,
        "ip_gens": [{"name": "g", "clients": {"range": ["16.0.0.1", "16.0.0.50"]},
                     "servers": {"range": ["48.0.0.1", "48.0.0.1"]}}],
        "programs": [{"name": "c", "commands": client}, {"name": "s", "commands": server}],
        "templates": [{"tg_name": "t", "client_program": "c", "server_program": "s", "cps": cps}]
    })
}

/// A media stream: 40 chunks of 1000 bytes, one a second (a flow of about 40 s).
fn stream() -> Arc<Profile> {
    load(one_template(
        json!([{"name": "chunk", "size": 1000}, {"name": "hello", "text": "hello"}]),
        json!([{"op": "send", "buf": "hello"},
               {"op": "set_var", "id": 0, "val": 40},
               {"op": "set_label", "label": "l"},
               {"op": "recv", "bytes": 1000, "clear": true},
               {"op": "jmp_nz", "id": 0, "label": "l"}]),
        json!([{"op": "recv", "bytes": 5},
               {"op": "set_var", "id": 0, "val": 40},
               {"op": "set_label", "label": "l"},
               {"op": "send", "buf": "chunk"},
               {"op": "delay", "usec": 1_000_000},
               {"op": "jmp_nz", "id": 0, "label": "l"}]),
        10.0,
    ))
}

#[test]
fn flows_longer_than_the_run_are_cut_not_errors() {
    let p = stream();
    let r = sim(&p, 2.0, 1.0, |c| c.drain_ns = 1_000_000_000);
    let (c, s) = (r.client.app.total(), r.server.app.total());
    assert!(c.cut > 0 && s.cut > 0, "client {c:?} server {s:?}");
    assert_eq!((c.stalled, s.stalled), (0, 0));
    assert_clean(&r);
}

/// The client waits for 100 bytes that the server never sends: a hung flow.
fn hung() -> Arc<Profile> {
    load(one_template(
        json!([{"name": "req", "size": 10}]),
        json!([{"op": "send", "buf": "req"}, {"op": "recv", "bytes": 100}]),
        // A loop, so that the loader cannot prove the client's recv unreachable.
        json!([{"op": "set_var", "id": 0, "val": 1},
               {"op": "set_label", "label": "l"},
               {"op": "recv", "bytes": 10, "clear": true},
               {"op": "jmp_nz", "id": 0, "label": "l"},
               {"op": "wait_for_peer_close"}]),
        10.0,
    ))
}

#[test]
fn stalled_flows_fail_the_run() {
    let p = hung();
    let r = sim(&p, 0.5, 1.0, |c| {
        c.drain_ns = 2_000_000_000;
        c.stall_ns = 1_000_000_000;
    });
    let (c, s) = (r.client.app.total(), r.server.app.total());
    assert_eq!(c.stalled, c.cut, "{c:?}");
    assert!(c.stalled > 0 && s.stalled > 0, "client {c:?} server {s:?}");
    assert!(squall::report::error_count(&r) >= c.stalled + s.stalled);
    // The same run with a stall time longer than the drain: cut, not stalled.
    let r = sim(&p, 0.5, 1.0, |c| {
        c.drain_ns = 2_000_000_000;
        c.stall_ns = 10_000_000_000;
    });
    assert_eq!(r.client.app.total().stalled, 0);
    assert_eq!(squall::report::error_count(&r), 0);
    // The JSON result carries both counters.
    let info = squall::report::RunInfo {
        profile_path: "hung",
        mode: "sim",
        duration_s: 0.5,
        mult: 1.0,
        cores: 1,
    };
    let checks = squall::report::invariants(&r);
    let j = squall::report::to_json(&p, &info, &r, &checks);
    assert!(j["client"]["flows"]["cut"].as_u64().unwrap() > 0);
    assert_eq!(j["client"]["flows"]["stalled"], 0);
    assert_eq!(j["stall_sec"], 10.0);
}

#[test]
fn connect_then_reset_keeps_connects_equal_to_accepts() {
    let p = load(one_template(
        json!([]),
        json!([{"op": "connect"}, {"op": "reset"}]),
        json!([{"op": "accept"}, {"op": "wait_for_peer_close"}]),
        100.0,
    ));
    let r = sim(&p, 0.05, 1.0, |c| {
        c.impair = squall::impair::parse_impair("delay_us=50").unwrap()
    });
    assert!(r.client.tcp.tcps_connects >= 2, "{:?}", r.client.tcp);
    assert_clean(&r);
}

/// Two templates on two generators built from one client `ASTFIPGenDist` (an identical
/// client pool): one distribution (seq over the pool in turn across both templates) and
/// one port space.
#[test]
fn templates_sharing_one_client_dist_draw_from_one_allocator() {
    let dist = json!({"range": ["16.0.0.1", "16.0.0.2"], "distribution": "seq"});
    let p = load(json!({
        "version": 1,
        "buffers": [{"name": "b", "text": "hi"}],
        "ip_gens": [
            {"name": "g1", "clients": dist, "servers": {"range": ["48.0.0.1", "48.0.0.1"]}},
            {"name": "g2", "clients": dist, "servers": {"range": ["48.0.0.2", "48.0.0.2"]}}],
        "programs": [
            {"name": "c", "commands": [{"op": "send", "buf": "b"}, {"op": "recv", "bytes": 2}]},
            {"name": "s", "commands": [{"op": "recv", "bytes": 2}, {"op": "send", "buf": "b"}]}],
        "templates": [
            {"tg_name": "a", "client_program": "c", "server_program": "s", "ip_gen": "g1", "port": 80},
            {"tg_name": "b", "client_program": "c", "server_program": "s", "ip_gen": "g2", "port": 81}]
    }));
    let sc = squall_astf::sched::SchedConfig::from_profile(&p, 1.0, Some(1), 0, 1);
    let ports = squall_astf::alloc::PortRange {
        first: 1025,
        last: 1025,
    };
    let mut cg = squall::gen::ClientGen::with_ports(&p, &sc, ports).unwrap();
    let ip = |a: squall_astf::alloc::ClientAddr| std::net::Ipv4Addr::from(a.ip).to_string();
    let a = cg.alloc(0, 0, 80, |_, _| false).unwrap();
    let b = cg.alloc(1, 0, 80, |_, _| false).unwrap();
    assert_eq!((ip(a), ip(b)), ("16.0.0.1".into(), "16.0.0.2".into()));
    // One port per address, both in use: the shared pool is exhausted for template 0 too.
    assert!(cg.alloc(0, 0, 80, |_, _| false).is_err());
    cg.release(1, b);
    assert_eq!(ip(cg.alloc(0, 0, 80, |_, _| false).unwrap()), "16.0.0.2");
    // Servers are not shared (different pools).
    assert_eq!(
        (cg.pick_server(0), cg.pick_server(1)),
        (0x3000_0001, 0x3000_0002)
    );
    // And the run is clean.
    let r = sim(&p, 0.5, 10.0, |_| {});
    assert_eq!(r.client.app.total().started, 10);
    assert_clean(&r);
}

/// Templates on one port told apart by the client's first four bytes (TRex `l7_map`),
/// the values taken from each client program; a third one whose map (explicit value
/// "HEAD") matches no client is reset and counted.
fn l7_profile(with_unmatched: bool) -> Arc<Profile> {
    let l7 = json!({"offset": [0, 1, 2, 3]});
    let mut templates = vec![
        json!({"tg_name": "get", "client_program": "get_c", "server_program": "get_s", "cps": 50,
               "assoc": [{"port": 80, "l7_map": l7}]}),
        json!({"tg_name": "post", "client_program": "post_c", "server_program": "post_s", "cps": 30,
               "assoc": [{"port": 80, "l7_map": l7}]}),
    ];
    if with_unmatched {
        templates.push(
            json!({"tg_name": "put", "client_program": "put_c", "server_program": "put_s",
            "cps": 20, "assoc": [{"port": 80, "l7_map": {"offset": [0, 1, 2, 3],
            "value": [72, 69, 65, 68]}}]}),
        );
    }
    load(json!({
        "version": 1,
        "buffers": [
            {"name": "get", "text": "GET /index.html HTTP/1.1\r\n\r\n"},
            {"name": "post", "text": "POST /form HTTP/1.1\r\n\r\n"},
            {"name": "put", "text": "PUT /x HTTP/1.1\r\n\r\n"},
            {"name": "ok", "text": "HTTP/1.1 200 OK\r\n\r\n"},
            {"name": "created", "size": 3000}],
        "ip_gens": [{"name": "g", "clients": {"range": ["16.0.0.1", "16.0.0.100"]},
                     "servers": {"range": ["48.0.0.1", "48.0.0.1"]}}],
        "programs": [
            {"name": "get_c", "commands": [{"op": "send", "buf": "get"}, {"op": "recv", "bytes": 19}]},
            {"name": "get_s", "commands": [{"op": "recv", "bytes": 28}, {"op": "send", "buf": "ok"},
                                           {"op": "wait_for_peer_close"}]},
            {"name": "post_c", "commands": [{"op": "connect"}, {"op": "send", "buf": "post"},
                                            {"op": "recv", "bytes": 3000}]},
            {"name": "post_s", "commands": [{"op": "recv", "bytes": 23}, {"op": "send", "buf": "created"},
                                            {"op": "wait_for_peer_close"}]},
            {"name": "put_c", "commands": [{"op": "send", "buf": "put"}, {"op": "recv", "bytes": 19}]},
            {"name": "put_s", "commands": [{"op": "recv", "bytes": 19}, {"op": "send", "buf": "ok"}]}],
        "templates": templates
    }))
}

#[test]
fn l7_map_chooses_the_server_template_by_the_first_bytes() {
    let p = l7_profile(false);
    let r = sim(&p, 1.0, 1.0, |c| {
        c.impair = squall::impair::parse_impair("delay_us=50").unwrap()
    });
    assert_clean(&r);
    for (tg, n) in [("get", 50), ("post", 30)] {
        let g = p.tg_names.iter().position(|x| x == tg).unwrap();
        let (c, s) = (&r.client.app.tg[g].c, &r.server.app.tg[g].c);
        assert_eq!((c.started, c.completed), (n, n), "{tg}");
        assert_eq!((s.accepted, s.completed), (n, n), "{tg}");
    }
    assert_eq!(r.server.app.l7_no_match, 0);
}

#[test]
fn l7_map_without_a_match_resets_and_counts() {
    let p = l7_profile(true);
    let r = sim(&p, 1.0, 1.0, |_| {});
    let g = p.tg_names.iter().position(|x| x == "put").unwrap();
    let c = &r.client.app.tg[g].c;
    assert_eq!(c.started, 20);
    assert_eq!(r.server.app.l7_no_match, 20);
    assert_eq!((c.aborted, c.reset_by_peer), (20, 20), "{c:?}");
    assert_eq!(r.server.app.tg[g].c.accepted, 0);
    assert!(squall::report::error_count(&r) >= 20);
    // The other templates are unaffected.
    let get = p.tg_names.iter().position(|x| x == "get").unwrap();
    assert_eq!(r.server.app.tg[get].c.completed, 50);
}
