//! Two generator apps on one node (`squall_stack::Pair`): node X carries the W1 HTTP
//! client (TCP, port 80) and the DNS server template (UDP, port 53); node Y carries the
//! W1 server and the DNS client. Every flow of both profiles completes on the in-memory
//! wire with no error on any side: passive TCP flows reach the app owning the port,
//! active flows the app that opened them, datagrams the app owning their UDP flow.

mod common;
use common::*;

use squall::gen::{tcp_config, ClientGen, GenSide};
use squall_astf::sched::SchedConfig;
use squall_port::mem::{self, MemConfig, MemPort};
use squall_stack::{Node, NodeConfig, Pair};

fn node(port: MemPort, cfg: squall_tcp::TcpConfig) -> Node<MemPort> {
    let n = NodeConfig {
        max_udp_flows: 4096,
        udp_prealloc: 1024,
        ..NodeConfig::default()
    };
    Node::new(port, cfg, n, 0)
}

#[test]
fn a_generator_client_and_a_server_template_share_each_node() {
    let http = w1();
    let dns = profile("../../examples/udp-dns.json");
    let mc = MemConfig::default();
    let (pa, pb) = mem::pair(mc.clone()).unwrap();
    let t0 = 1_000_000_000u64;
    // 200 flows of each profile in 0.1 s (HTTP: 1 flow/s x 2,000; DNS: 1,000/s x 2).
    let gen = |p: &std::sync::Arc<squall_astf::Profile>, mult: f64, seed: u64| {
        let mut sc = SchedConfig::from_profile(p, mult, Some(100_000_000), 0, 1);
        sc.start_ns = t0;
        sc.seed = seed;
        ClientGen::new(p, &sc).unwrap()
    };
    let th = &http.templates[0];
    let mut x = node(pa, tcp_config(&th.client, mc.mac_a, mc.mac_b, 4096, 1));
    let mut y = node(pb, tcp_config(&th.server, mc.mac_b, mc.mac_a, 4096, 2));
    let mut on_x = Pair::new(
        GenSide::new(
            http.clone(),
            &mut x.tcp,
            4096,
            Some(gen(&http, 2_000.0, 5)),
            t0,
            11,
        ),
        GenSide::new(dns.clone(), &mut x.tcp, 4096, None, t0, 12),
    );
    let mut on_y = Pair::new(
        GenSide::new(http.clone(), &mut y.tcp, 4096, None, t0, 13),
        GenSide::new(
            dns.clone(),
            &mut y.tcp,
            4096,
            Some(gen(&dns, 2.0, 6)),
            t0,
            14,
        ),
    );
    let mut now = t0;
    let hard = t0 + 5_000_000_000;
    while now < hard {
        x.turn(now, &mut on_x, None);
        y.turn(now, &mut on_y, None);
        let done = |g: &GenSide| g.app.live == 0 && g.udp.live == 0;
        let finished = on_x.a.client.as_ref().is_some_and(|c| c.is_finished())
            && on_y.b.client.as_ref().is_some_and(|c| c.is_finished());
        if finished
            && done(&on_x.a)
            && done(&on_x.b)
            && done(&on_y.a)
            && done(&on_y.b)
            && x.tcp.flow_count() == 0
            && y.tcp.flow_count() == 0
        {
            break;
        }
        let next = [x.next_event(now, &on_x), y.next_event(now, &on_y)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now + 1_000_000);
        now = next.max(now + 1);
    }
    assert!(now < hard, "the run did not finish");
    let (hc, hs) = (on_x.a.app.stats.total(), on_y.a.app.stats.total());
    let (dc, ds) = (on_y.b.app.stats.total(), on_x.b.app.stats.total());
    eprintln!("http client {hc:?}\nhttp server {hs:?}\ndns client {dc:?}\ndns server {ds:?}");
    assert_eq!(hc.started, 200, "HTTP flows opened by X's generator client");
    assert_eq!(hc.completed, 200);
    assert_eq!(
        hs.accepted, 200,
        "HTTP flows accepted by Y's server template"
    );
    assert_eq!(hs.completed, 200);
    assert_eq!(dc.started, 200, "DNS flows opened by Y's generator client");
    assert_eq!(dc.completed, 200);
    assert_eq!(ds.accepted, 200, "DNS flows created by X's server template");
    assert_eq!(ds.completed, 200);
    for (name, g) in [
        ("x http", &on_x.a),
        ("x dns", &on_x.b),
        ("y http", &on_y.a),
        ("y dns", &on_y.b),
    ] {
        assert_eq!(g.app.stats.errors(), 0, "{name}: errors");
    }
    assert_eq!(x.udp.stats.rx_no_port + y.udp.stats.rx_no_port, 0);
    assert_eq!(x.counters.rx_not_ours + y.counters.rx_not_ours, 0);
}
