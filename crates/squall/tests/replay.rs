//! Conversations replayed at their own pace (issue #10): on an unimpaired wire, a replayed
//! conversation never retransmits and never stalls, and every example profile runs
//! without a retransmission; a retransmission on an unimpaired wire is reported as a
//! warning naming the template.

mod common;
use common::*;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::json;
use squall::report;
use squall::run::RunResult;
use squall_astf::Profile;

/// Segment payload with timestamps on (MSS 1460 less the 12-byte option).
const SEG: u32 = 1448;

/// A request/response conversation whose bursts have an odd number of segments and a
/// short last one (what a Nagle sender used to hold while its peer delayed the ACK of the
/// odd segment), a lone short segment, and two short sends in a row; `tcp`: the global
/// TCP tunables.
fn conversation(tcp: serde_json::Value) -> Arc<Profile> {
    let sizes = [
        ("a", 2 * SEG + 700),
        ("b", 4 * SEG + 300),
        ("c", 100),
        ("c2", 60),
        ("d", 2 * SEG + 1000),
        ("e", 6 * SEG + 10),
        ("f", 40),
    ];
    let size = |n: &str| sizes.iter().find(|s| s.0 == n).map(|s| s.1).unwrap();
    let buffers: Vec<_> = sizes
        .iter()
        .map(|(n, s)| json!({"name": n, "text": n, "size": s, "fill": {"text": n}}))
        .collect();
    let v = json!({
        "version": 1,
        "buffers": buffers,
        "ip_gens": [{"name": "default",
                     "clients": {"range": ["16.0.0.1", "16.0.0.20"], "distribution": "seq"},
                     "servers": {"range": ["48.0.0.1", "48.0.0.1"], "distribution": "seq"}}],
        "programs": [
            {"name": "client", "commands": [
                {"op": "send", "buf": "a"}, {"op": "recv", "bytes": size("b")},
                {"op": "send", "buf": "c"}, {"op": "send", "buf": "c2"},
                {"op": "recv", "bytes": size("b") + size("d")},
                {"op": "send", "buf": "e"},
                {"op": "recv", "bytes": size("b") + size("d") + size("f")}]},
            {"name": "server", "commands": [
                {"op": "recv", "bytes": size("a")}, {"op": "send", "buf": "b"},
                {"op": "recv", "bytes": size("a") + size("c") + size("c2")},
                {"op": "send", "buf": "d"},
                {"op": "recv", "bytes": size("a") + size("c") + size("c2") + size("e")},
                {"op": "send", "buf": "f"},
                {"op": "wait_for_peer_close"}]}],
        "templates": [{"tg_name": "odd_bursts", "client_program": "client",
                       "server_program": "server", "port": 8080, "cps": 10}],
        "global": {"tcp": tcp}
    });
    Arc::new(squall_astf::load_profile_str(&v.to_string()).expect("valid profile"))
}

/// The longest time between two consecutive frames of one flow, in ns, and the number of
/// flows in the pcap.
fn longest_stall(pcap: &[u8]) -> (u64, usize) {
    let (_, recs) = squall_port::pcap::read_pcap(pcap).expect("valid pcap");
    let mut last: HashMap<[u8; 12], u64> = HashMap::new();
    let mut worst = 0;
    for r in recs
        .iter()
        .filter(|r| r.data.len() >= 54 && r.data[23] == 6)
    {
        let d = &r.data;
        // The 4-tuple, the same for both directions: the lower (ip, port) end first.
        let (a, b) = (
            [&d[26..30], &d[34..36]].concat(),
            [&d[30..34], &d[36..38]].concat(),
        );
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let mut k = [0u8; 12];
        k[..6].copy_from_slice(&lo);
        k[6..].copy_from_slice(&hi);
        if let Some(prev) = last.insert(k, r.ts_ns) {
            worst = worst.max(r.ts_ns - prev);
        }
    }
    (worst, last.len())
}

fn retransmissions(r: &RunResult) -> [u64; 6] {
    let (c, s) = (&r.client.tcp, &r.server.tcp);
    [
        c.tcps_rexmttimeo,
        c.tcps_fastrexmt,
        c.tcps_sndrexmitpack,
        s.tcps_rexmttimeo,
        s.tcps_fastrexmt,
        s.tcps_sndrexmitpack,
    ]
}

#[test]
fn odd_bursts_with_short_tails_replay_without_retransmission_or_stall() {
    // The defaults (Nagle on, delayed ACK), TRex's 200 ms delayed ACK (the minimum RTO),
    // and the longest delayed ACK a profile may ask for with an odd initial window.
    for tcp in [
        json!({}),
        json!({"delay_ack_msec": 200}),
        json!({"delay_ack_msec": 500, "initwnd": 3}),
    ] {
        let p = conversation(tcp.clone());
        let r = sim(&p, 1.0, 1.0, |c| c.pcap_flows = Some(10));
        assert_clean(&r);
        let done = r.client.app.total().completed;
        assert_eq!(done, 10, "{tcp}: flows completed");
        assert_eq!(retransmissions(&r), [0; 6], "{tcp}: retransmissions");
        assert!(report::warnings(&p, &r).is_empty(), "{tcp}: warnings");
        let (stall, flows) = longest_stall(r.pcap.as_deref().expect("pcap"));
        assert_eq!(flows, 10, "{tcp}");
        assert!(
            stall <= 1_000_000,
            "{tcp}: a flow stalled {stall} ns of virtual time"
        );
        // No delayed ACK was waited for either.
        let lat = &r.client.app.tg[1].lat.last_byte;
        assert!(
            lat.summary()[4] <= 1_000,
            "{tcp}: last byte {:?}",
            lat.summary()
        );
    }
}

#[test]
fn every_example_profile_runs_without_retransmission() {
    let dir = repo().join("examples");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    assert!(names.len() >= 5, "{names:?}");
    for path in names {
        let p = Arc::new(squall::source::load(&path, &[]).expect("example loads"));
        let r = sim(&p, 1.0, 5.0, |_| {});
        let name = path.display();
        assert_clean(&r);
        assert!(
            r.client.app.total().completed > 0,
            "{name}: no flow completed"
        );
        assert_eq!(retransmissions(&r), [0; 6], "{name}: retransmissions");
        assert!(
            report::warnings(&p, &r).is_empty(),
            "{name}: {:?}",
            report::warnings(&p, &r)
        );
    }
}

#[test]
fn a_retransmission_on_an_unimpaired_wire_is_a_warning_naming_the_template() {
    // One segment per flight (initwnd 1) to a peer that delays its ACK (500 ms) for longer
    // than the sender's RTO (200 ms): the server's retransmission timer fires.
    let p = conversation(json!({"initwnd": 1, "delay_ack_msec": 500}));
    let r = sim(&p, 0.2, 1.0, |_| {});
    assert_clean(&r);
    assert!(r.wire_unimpaired);
    assert!(
        r.server.tcp.tcps_rexmttimeo > 0,
        "{:?}",
        retransmissions(&r)
    );
    let w = report::warnings(&p, &r);
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0].kind, "retransmissions_unimpaired");
    assert_eq!(w[0].templates.len(), 1);
    let t = &w[0].templates[0];
    assert_eq!(
        (t.template.as_str(), t.group.as_str()),
        ("templates[0]", "odd_bursts")
    );
    assert_eq!(
        t.server,
        r.server.tcp.tcps_rexmttimeo + r.server.tcp.tcps_fastrexmt
    );
    assert_eq!(
        t.client,
        r.client.tcp.tcps_rexmttimeo + r.client.tcp.tcps_fastrexmt
    );
    // In the human summary and the JSON document.
    let info = report::RunInfo {
        profile_path: "odd.json",
        mode: "simulation",
        duration_s: 0.2,
        mult: 1.0,
        cores: 1,
    };
    let checks = report::invariants(&r);
    let text = report::summary(&p, &info, &r, &checks, None);
    assert!(
        text.contains("warning: retransmissions on an unimpaired wire")
            && text.contains("template templates[0] (group odd_bursts)"),
        "{text}"
    );
    assert!(text.contains("result: CLEAN"), "{text}");
    let doc = report::to_json(&p, &info, &r, &checks);
    assert_eq!(doc["warnings"][0]["kind"], "retransmissions_unimpaired");
    assert_eq!(doc["warnings"][0]["templates"][0]["group"], "odd_bursts");
    // The same run over an impaired wire (a delay) is not warned about.
    let r = sim(&p, 0.2, 1.0, |c| {
        c.impair = squall::impair::parse_impair("delay_us=10").unwrap()
    });
    assert!(!r.wire_unimpaired && r.server.tcp.tcps_rexmttimeo > 0);
    assert!(report::warnings(&p, &r).is_empty());
}
