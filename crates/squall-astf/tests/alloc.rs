//! Client address and port allocation: pool shares per core, the port-ownership rule,
//! exhaustion counting and release.

use serde_json::json;
use squall_astf::alloc::*;
use squall_astf::*;
use std::collections::HashSet;
use std::net::Ipv4Addr;

fn gen(first: &str, last: &str, dist: &str, per_core: &str) -> IpGen {
    let v = json!({
        "version": 1,
        "buffers": [{"name": "b", "text": "x"}],
        "ip_gens": [{"name": "g", "clients": {"range": [first, last], "distribution": dist, "per_core_distribution": per_core},
                     "servers": {"range": ["48.0.0.1", "48.0.0.3"]}, "ip_offset": "1.0.0.0"}],
        "programs": [{"name": "c", "commands": [{"op": "send", "buf": "b"}]}, {"name": "s", "commands": [{"op": "recv", "bytes": 1}]}],
        "templates": [{"client_program": "c", "server_program": "s"}]
    });
    load_profile_value(v).unwrap().ip_gens[0].clone()
}

fn ip(s: &str) -> u32 {
    u32::from(s.parse::<Ipv4Addr>().unwrap())
}

#[test]
fn seq_cycles_through_the_pool() {
    let g = gen("16.0.0.1", "16.0.0.200", "seq", "default");
    let mut a = ClientAlloc::new(&g, 0, 0, 1, PortRange::default(), 1).unwrap();
    assert_eq!(a.addresses(), 200);
    assert_eq!(a.ports_per_address(), 64511);
    let got: Vec<ClientAddr> = (0..400).map(|_| a.alloc(|_, _| false).unwrap()).collect();
    for (k, c) in got.iter().enumerate() {
        assert_eq!(c.ip, ip("16.0.0.1") + (k % 200) as u32);
        assert_eq!(c.port, 1025 + (k / 200) as u16);
    }
    assert_eq!(a.in_use(ip("16.0.0.1")), 2);
}

#[test]
fn ports_belong_to_the_allocating_core() {
    let g = gen("16.0.0.1", "16.0.0.200", "seq", "default");
    let mut seen = HashSet::new();
    for core in 0..3 {
        let mut a = ClientAlloc::new(&g, 0, core, 3, PortRange::default(), 1).unwrap();
        for _ in 0..1000 {
            let c = a.alloc(|_, _| false).unwrap();
            assert_eq!(
                owner_core(c.port, 3),
                core,
                "port {} on core {core}",
                c.port
            );
            assert!(seen.insert((c.ip, c.port)), "tuple handed out twice");
        }
    }
}

#[test]
fn interleaved_and_contiguous_shares() {
    for (per_core, expect_core1) in [
        ("default", vec!["16.0.0.2", "16.0.0.4"]),
        ("seq", vec!["16.0.0.6", "16.0.0.7"]),
    ] {
        let g = gen("16.0.0.1", "16.0.0.10", "seq", per_core);
        let mut union = HashSet::new();
        for core in 0..2 {
            let mut a = ClientAlloc::new(&g, 0, core, 2, PortRange::default(), 1).unwrap();
            assert_eq!(a.addresses(), 5);
            let ips: Vec<u32> = (0..5).map(|_| a.alloc(|_, _| false).unwrap().ip).collect();
            if core == 1 {
                assert_eq!(
                    ips[..2],
                    [ip(expect_core1[0]), ip(expect_core1[1])],
                    "{per_core}"
                );
            }
            union.extend(ips);
        }
        assert_eq!(
            union.len(),
            10,
            "{per_core}: the cores' shares cover the pool"
        );
    }
}

#[test]
fn small_pool_is_shared_by_all_cores() {
    let g = gen("16.0.0.1", "16.0.0.1", "seq", "default");
    for core in 0..4 {
        let mut a = ClientAlloc::new(&g, 0, core, 4, PortRange::default(), 1).unwrap();
        assert_eq!(a.alloc(|_, _| false).unwrap().ip, ip("16.0.0.1"));
    }
}

#[test]
fn exhaustion_is_counted_and_release_frees() {
    let g = gen("16.0.0.1", "16.0.0.1", "seq", "default");
    let mut a = ClientAlloc::new(
        &g,
        0,
        0,
        1,
        PortRange {
            first: 2000,
            last: 2009,
        },
        1,
    )
    .unwrap();
    let got: Vec<ClientAddr> = (0..10).map(|_| a.alloc(|_, _| false).unwrap()).collect();
    assert_eq!(
        got.iter().map(|c| c.port).collect::<Vec<_>>(),
        (2000..2010).collect::<Vec<_>>()
    );
    assert_eq!(
        a.alloc(|_, _| false),
        Err(AllocError::PortsExhausted { ip: ip("16.0.0.1") })
    );
    assert_eq!(
        a.alloc(|_, _| false),
        Err(AllocError::PortsExhausted { ip: ip("16.0.0.1") })
    );
    assert_eq!(a.exhausted, 2);
    a.release(got[3]);
    assert_eq!(
        a.alloc(|_, port| port != 2003),
        Ok(ClientAddr {
            ip: ip("16.0.0.1"),
            port: 2003
        })
    );
}

#[test]
fn busy_ports_are_skipped() {
    let g = gen("16.0.0.1", "16.0.0.1", "seq", "default");
    let mut a = ClientAlloc::new(
        &g,
        0,
        0,
        1,
        PortRange {
            first: 2000,
            last: 2009,
        },
        1,
    )
    .unwrap();
    let c = a.alloc(|_, p| p < 2005).unwrap();
    assert_eq!(c.port, 2005);
    // Everything vetoed: counted as exhausted.
    assert!(a.alloc(|_, _| true).is_err());
    assert_eq!(a.exhausted, 1);
}

#[test]
fn rand_covers_the_pool_and_is_seeded() {
    let g = gen("16.0.0.1", "16.0.0.50", "rand", "default");
    let draw = |seed| {
        let mut a = ClientAlloc::new(&g, 0, 0, 1, PortRange::default(), seed).unwrap();
        (0..2000)
            .map(|_| a.alloc(|_, _| false).unwrap().ip)
            .collect::<Vec<_>>()
    };
    let d = draw(5);
    assert_eq!(d, draw(5));
    assert_ne!(d, draw(6));
    let distinct: HashSet<_> = d.iter().collect();
    assert_eq!(distinct.len(), 50);
    assert!(d
        .iter()
        .all(|&x| (ip("16.0.0.1")..=ip("16.0.0.50")).contains(&x)));
}

#[test]
fn ip_offset_for_port_pairs() {
    let g = gen("16.0.0.1", "16.0.0.2", "seq", "default");
    let mut a = ClientAlloc::new(&g, 2, 0, 1, PortRange::default(), 1).unwrap();
    let c = a.alloc(|_, _| false).unwrap();
    assert_eq!(c.ip, ip("18.0.0.1"));
    assert_eq!(a.in_use(ip("18.0.0.1")), 1);
    a.release(c);
    assert_eq!(a.in_use(ip("18.0.0.1")), 0);
    let mut s = ServerPick::new(&g, 1, 0, 1);
    assert_eq!(
        (0..4).map(|_| s.pick()).collect::<Vec<_>>(),
        vec![
            ip("49.0.0.1"),
            ip("49.0.0.2"),
            ip("49.0.0.3"),
            ip("49.0.0.1")
        ]
    );
}

#[test]
fn bad_port_ranges() {
    let g = gen("16.0.0.1", "16.0.0.1", "seq", "default");
    assert_eq!(
        ClientAlloc::new(&g, 0, 0, 1, PortRange { first: 0, last: 10 }, 1).unwrap_err(),
        AllocSetupError::BadPortRange
    );
    assert_eq!(
        ClientAlloc::new(&g, 0, 0, 1, PortRange { first: 10, last: 9 }, 1).unwrap_err(),
        AllocSetupError::BadPortRange
    );
    assert_eq!(
        ClientAlloc::new(&g, 0, 3, 4, PortRange { first: 8, last: 9 }, 1).unwrap_err(),
        AllocSetupError::NoPortsForCore
    );
    // The full range on one core: 65535 ports.
    let a = ClientAlloc::new(
        &g,
        0,
        0,
        1,
        PortRange {
            first: 1,
            last: 65535,
        },
        1,
    )
    .unwrap();
    assert_eq!(a.ports_per_address(), 65535);
}
