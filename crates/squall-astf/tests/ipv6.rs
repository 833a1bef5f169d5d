//! IPv6 in profiles: TRex's `ipv6.*` tunables (IPv4 pools under `src_msb`/`dst_msb`,
//! globally, per side and per template), native IPv6 pools, mixed IPv4/IPv6 templates
//! and their server association, and the errors of each.

use std::net::Ipv6Addr;

use serde_json::{json, Value};
use squall_astf::ipv6::{parse_msb, Ipv6Map};
use squall_astf::*;

fn w1() -> Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/w1-astf-http.json"
    ))
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

fn errors(v: Value) -> Vec<String> {
    match load_profile_value(v) {
        Ok(_) => panic!("profile unexpectedly valid"),
        Err(e) => e.errors().iter().map(|e| e.to_string()).collect(),
    }
}

fn has(errs: &[String], path: &str, needle: &str) {
    assert!(
        errs.iter()
            .any(|e| e.starts_with(&format!("{path}: ")) && e.contains(needle)),
        "expected an error at {path} containing {needle:?}, got {errs:#?}"
    );
}

fn a6(s: &str) -> [u8; 16] {
    s.parse::<Ipv6Addr>().unwrap().octets()
}

#[test]
fn ipv4_profiles_stay_ipv4() {
    let p = load_profile_value(w1()).unwrap();
    assert_eq!(p.templates[0].ipv6, None);
    assert!(p.templates[0].assoc.iter().all(|r| !r.v6));
    let mut v = w1();
    v["global"]["ipv6"] = json!({"enable": 0, "src_msb": "2001:db8::"});
    assert_eq!(load_profile_value(v).unwrap().templates[0].ipv6, None);
}

#[test]
fn trex_enable_maps_ipv4_pools_under_the_msbs() {
    let mut v = w1();
    v["global"]["ipv6"] =
        json!({"enable": 1, "src_msb": "2001:db8:0:2222::", "dst_msb": "2001:db8:2:2222::"});
    let p = load_profile_value(v).unwrap();
    let m = p.templates[0].ipv6.expect("IPv6 template");
    let g = &p.ip_gens[0];
    assert_eq!(
        m.client_addr(g.clients.first),
        a6("2001:db8:0:2222::1000:1"),
        "16.0.0.1 under src_msb"
    );
    assert_eq!(
        m.server_addr(g.servers.first),
        a6("2001:db8:2:2222::3000:1")
    );
    assert!(p.templates[0].assoc.iter().all(|r| r.v6));
}

#[test]
fn enable_without_msbs_uses_trex_defaults() {
    let mut v = w1();
    v["global"]["ipv6"] = json!({"enable": 1});
    let p = load_profile_value(v).unwrap();
    assert_eq!(
        p.templates[0].ipv6,
        Some(Ipv6Map {
            client: [0; 12],
            server: [0; 12]
        }),
        "TRex's CTcpTuneables: both msbs all zero"
    );
}

#[test]
fn precedence_template_over_side_over_global() {
    let mut v = w1();
    v["global"]["ipv6"] =
        json!({"enable": 0, "src_msb": "2001:db8:1::", "dst_msb": "2001:db8:2::"});
    v["global"]["client"] = json!({"ipv6": {"dst_msb": "2001:db8:3::"}});
    v["templates"][0]["client_tunables"] = json!({"ipv6": {"enable": 1}});
    let p = load_profile_value(v).unwrap();
    let m = p.templates[0].ipv6.unwrap();
    assert_eq!(m.client, parse_msb("2001:db8:1::").unwrap());
    assert_eq!(m.server, parse_msb("2001:db8:3::").unwrap());
    // The server side's ipv6 tunables do not choose the family (TRex: the client's do).
    let mut v = w1();
    v["global"]["server"] = json!({"ipv6": {"enable": 1}});
    assert_eq!(load_profile_value(v).unwrap().templates[0].ipv6, None);
    // `enable` is the exception to the precedence (TRex: "priority is given for global,
    // template come next"): a template's 0 does not turn off the profile's 1.
    for global in [
        json!({"ipv6": {"enable": 1}}),
        json!({"client": {"ipv6": {"enable": 1}}}),
    ] {
        let mut v = w1();
        v["global"] = global.clone();
        v["templates"][0]["client_tunables"] = json!({"ipv6": {"enable": 0}});
        let p = load_profile_value(v).unwrap();
        assert!(p.templates[0].ipv6.is_some(), "{global}");
    }
}

#[test]
fn native_ipv6_pools() {
    let mut v = w1();
    v["ip_gens"][0]["clients"]["range"] = json!(["2001:db8::1", "2001:db8::ff"]);
    v["ip_gens"][0]["servers"]["range"] = json!(["2001:db8:1::10", "2001:db8:1::10"]);
    let p = load_profile_value(v).unwrap();
    let g = &p.ip_gens[0];
    assert_eq!(
        (g.clients.first, g.clients.last, g.clients.len()),
        (1, 0xff, 255)
    );
    let m = p.templates[0].ipv6.unwrap();
    assert_eq!(m.client_addr(g.clients.last), a6("2001:db8::ff"));
    assert_eq!(m.server_addr(g.servers.first), a6("2001:db8:1::10"));
}

#[test]
fn bad_ipv6_pools_are_refused_with_the_reason() {
    let mut v = w1();
    v["ip_gens"][0]["clients"]["range"] = json!(["2001:db8::1", "2001:db9::1"]);
    v["ip_gens"][0]["servers"]["range"] = json!(["48.0.0.1", "2001:db8::1"]);
    let e = errors(v);
    has(&e, "ip_gens[0].clients.range", "share their first 96 bits");
    has(&e, "ip_gens[0].servers.range", "one family");
    let mut v = w1();
    v["ip_gens"][0]["clients"]["range"] = json!(["2001:db8::1", "2001:db8::ff"]);
    has(&errors(v), "ip_gens[0].servers.range", "different families");
    let mut v = w1();
    v["ip_gens"][0]["clients"]["range"] = json!(["2001:db8::g", "2001:db8::ff"]);
    has(
        &errors(v),
        "ip_gens[0].clients.range[0]",
        "invalid IPv4 or IPv6 address",
    );
}

/// One IPv4 and one IPv6 template on the same port: the families keep their server
/// association apart; an IPv6 flow with no IPv6 template still finds one by port.
#[test]
fn mixed_families_in_one_profile() {
    let mut v = w1();
    let g0 = v["ip_gens"][0].clone();
    let mut g1 = g0.clone();
    g1["name"] = json!("v6");
    g1["clients"]["range"] = json!(["2001:db8::1", "2001:db8::ff"]);
    g1["servers"]["range"] = json!(["2001:db8:1::1", "2001:db8:1::1"]);
    v["ip_gens"] = json!([g0, g1]);
    let mut t0 = v["templates"][0].clone();
    let mut t1 = t0.clone();
    t0["ip_gen"] = g0["name"].clone();
    t0["tg_name"] = json!("v4");
    t1["ip_gen"] = json!("v6");
    t1["tg_name"] = json!("v6");
    t1.as_object_mut().unwrap().remove("assoc");
    v["templates"] = json!([t0, t1]);
    let p = load_profile_value(v).unwrap();
    assert_eq!(p.templates[0].ipv6, None);
    assert!(p.templates[1].ipv6.is_some());
    assert_eq!(p.tg_names, vec!["", "v4", "v6"]);
    assert_eq!(
        p.server_assoc_in(Transport::Tcp, false, 0x3000_0001, 80),
        ServerAssoc::Template(TemplateIdx(0))
    );
    assert_eq!(
        p.server_assoc_in(Transport::Tcp, true, 1, 80),
        ServerAssoc::Template(TemplateIdx(1))
    );
    // Only the IPv4 template left: an IPv6 flow to its port (and, its rule has one, the
    // low 32 bits of its address range) still finds it (TRex associates by port).
    let mut p4 = p.clone();
    p4.templates.truncate(1);
    assert_eq!(
        p4.server_assoc_in(Transport::Tcp, true, 1, 80),
        ServerAssoc::None
    );
    assert_eq!(
        p4.server_assoc_in(Transport::Tcp, true, 0x3000_0001, 80),
        ServerAssoc::Template(TemplateIdx(0))
    );
}

#[test]
fn udp_templates_over_ipv6_load() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/udp-dns.json"
    ))
    .unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["global"]["ipv6"] = json!({"enable": 1, "src_msb": "2001:db8::", "dst_msb": "2001:db8:1::"});
    let p = load_profile_value(v).unwrap();
    assert!(p.templates.iter().all(|t| t.ipv6.is_some()));
}
