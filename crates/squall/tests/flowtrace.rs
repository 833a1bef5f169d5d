//! Flow tracing (`squall run --trace DIR`): the timeline's retransmissions match the
//! frames in the trace's pcap on a lossy wire; filters select exactly the matching flows
//! (against a run tracing every flow, same seed); several shards; the command writes
//! both files and tshark finds no malformed frame.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use common::{profile, sim, w1};
use squall::flowtrace::{FlowTimeline, TraceData, TraceFilter, TraceSide, TraceSpec};
use squall_port::pcap::PcapRecord;
use squall_tcp::{CloseReason, State, TraceKind};

fn spec(flows: usize, filter: &[&str]) -> TraceSpec {
    let f: Vec<String> = filter.iter().map(|s| s.to_string()).collect();
    TraceSpec::new(
        std::env::temp_dir().join("unused"),
        flows,
        TraceFilter::parse(&f).unwrap(),
    )
}

/// (src ip, src port, dst ip, dst port).
type Dir = (u32, u16, u32, u16);
/// One TCP segment of a frame: its direction, seq, payload length, flags.
type Seg = (Dir, u32, u32, u8);

fn parse(f: &[u8]) -> Option<Seg> {
    if f.len() < 54 || f[12..14] != [8, 0] || f[23] != 6 {
        return None;
    }
    let ihl = usize::from(f[14] & 15) * 4;
    let tot = usize::from(u16::from_be_bytes([f[16], f[17]]));
    let l4 = 14 + ihl;
    let doff = usize::from(f[l4 + 12] >> 4) * 4;
    let ip = |o: usize| u32::from_be_bytes([f[o], f[o + 1], f[o + 2], f[o + 3]]);
    let port = |o: usize| u16::from_be_bytes([f[o], f[o + 1]]);
    Some((
        (ip(26), port(l4), ip(30), port(l4 + 2)),
        ip(l4 + 4),
        (tot - ihl - doff) as u32,
        f[l4 + 13],
    ))
}

/// Per direction, the (seq, payload length) of every segment that re-sends sequence
/// space already sent (the capture is at the sender: lost frames are in it).
fn pcap_rexmits(frames: &[PcapRecord]) -> BTreeMap<Dir, Vec<(u32, u32)>> {
    let mut high: BTreeMap<Dir, u32> = BTreeMap::new();
    let mut out: BTreeMap<_, Vec<(u32, u32)>> = BTreeMap::new();
    for r in frames {
        let Some((dir, seq, len, flags)) = parse(&r.data) else {
            continue;
        };
        let used = len + u32::from(flags & 0x02 != 0) + u32::from(flags & 0x01 != 0);
        if used == 0 {
            continue;
        }
        match high.get(&dir) {
            Some(&h) if (seq.wrapping_sub(h) as i32) < 0 => {
                out.entry(dir).or_default().push((seq, len));
            }
            _ => {}
        }
        let end = seq.wrapping_add(used);
        let h = high.entry(dir).or_insert(end);
        if (end.wrapping_sub(*h) as i32) > 0 {
            *h = end;
        }
    }
    out
}

fn dir_of(f: &FlowTimeline) -> Dir {
    let k = f.flow.key;
    (k.local_ip, k.local_port, k.remote_ip, k.remote_port)
}

fn rexmits(f: &FlowTimeline) -> Vec<(u32, u32)> {
    f.events
        .iter()
        .filter_map(|e| match e.kind {
            TraceKind::Retransmit { seq, len, .. } => Some((seq, len)),
            _ => None,
        })
        .collect()
}

fn traced_sim(
    p: &std::sync::Arc<squall_astf::Profile>,
    secs: f64,
    mult: f64,
    sp: TraceSpec,
    impair: &str,
) -> TraceData {
    let r = sim(p, secs, mult, |c| {
        c.trace = Some(sp);
        if !impair.is_empty() {
            c.impair = squall::impair::parse_impair(impair).unwrap();
        }
    });
    r.trace.expect("trace data")
}

#[test]
fn the_timeline_retransmissions_are_the_pcap_ones_on_a_lossy_wire() {
    // 300 flows over 255 client addresses: the first 40 are traced, and the later flows
    // reusing their addresses and ports must not enter the capture.
    let d = traced_sim(&w1(), 1.0, 300.0, spec(40, &[]), "loss=0.04");
    let clients: Vec<_> = d
        .flows
        .iter()
        .filter(|f| f.side == TraceSide::Client)
        .collect();
    let servers: Vec<_> = d
        .flows
        .iter()
        .filter(|f| f.side == TraceSide::Server)
        .collect();
    assert_eq!((clients.len(), servers.len()), (40, 40));
    let wire = pcap_rexmits(&d.frames);
    let (mut total, mut causes) = (0, BTreeSet::new());
    for f in &d.flows {
        let mut a = rexmits(f);
        let mut b = wire.get(&dir_of(f)).cloned().unwrap_or_default();
        a.sort();
        b.sort();
        assert_eq!(
            a, b,
            "{:?} flow {:?}: timeline vs pcap retransmissions",
            f.side, f.flow.key
        );
        total += a.len();
        for e in &f.events {
            if let TraceKind::Retransmit { cause, .. } = e.kind {
                causes.insert(cause.name());
            }
        }
        // Each traced flow's life: open, its first state, the end.
        assert_eq!(f.events[0].kind, TraceKind::Open);
        let first = if f.flow.passive {
            State::SynReceived
        } else {
            State::SynSent
        };
        assert_eq!(f.events[1].kind, TraceKind::State(first));
        assert!(
            matches!(
                f.events.last().unwrap().kind,
                TraceKind::Closed(CloseReason::Normal)
            ),
            "{:?}",
            f.events.last()
        );
        assert!(f.events.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
        assert!(f
            .events
            .iter()
            .any(|e| e.kind == TraceKind::State(State::Established)));
    }
    assert!(total > 5, "loss gave retransmissions: {total}");
    assert!(causes.contains("rto"), "{causes:?}");
    assert!(
        causes.contains("fast_retransmit") || causes.contains("sack"),
        "{causes:?}"
    );
    // Only the traced flows are in the capture: one SYN (its traced ISS, maybe
    // retransmitted) per client direction.
    let dirs: BTreeSet<_> = d.flows.iter().map(dir_of).collect();
    let mut syns: BTreeMap<_, BTreeSet<u32>> = BTreeMap::new();
    for r in &d.frames {
        let (dir, seq, _, flags) = parse(&r.data).expect("a TCP frame");
        assert!(dirs.contains(&dir), "frame of an untraced flow {dir:?}");
        if flags & 0x12 == 0x02 {
            syns.entry(dir).or_default().insert(seq);
        }
    }
    for c in &clients {
        assert_eq!(syns.get(&dir_of(c)), Some(&BTreeSet::from([c.flow.iss])));
    }
    // The server side of each client flow, with its template.
    for c in &clients {
        let k = c.flow.key;
        assert!(servers.iter().any(|s| s.flow.key.remote_ip == k.local_ip
            && s.flow.key.remote_port == k.local_port
            && s.template == c.template
            && c.template == Some(0)));
    }
}

/// The client flows of a traced run: (template, client ip, port, server ip, port,
/// start).
fn client_set(d: &TraceData) -> BTreeSet<(Option<u16>, u32, u16, u32, u16, u64)> {
    d.flows
        .iter()
        .filter(|f| f.side == TraceSide::Client)
        .map(|f| {
            let k = f.flow.key;
            (
                f.template,
                k.local_ip,
                k.local_port,
                k.remote_ip,
                k.remote_port,
                f.flow.start_ns,
            )
        })
        .collect()
}

#[test]
fn filters_select_exactly_the_matching_flows() {
    let p = profile("tests/profiles/two-tunables.json");
    let all = client_set(&traced_sim(&p, 2.0, 20.0, spec(100_000, &[]), ""));
    assert!(all.len() > 100, "{}", all.len());
    let ip = |s: &str| u32::from(s.parse::<std::net::Ipv4Addr>().unwrap());
    type Pred = Box<dyn Fn(&(Option<u16>, u32, u16, u32, u16, u64)) -> bool>;
    let cases: Vec<(&[&str], Pred)> = vec![
        (&["template=big"], Box::new(|f| f.0 == Some(1))),
        (&["template=0"], Box::new(|f| f.0 == Some(0))),
        (&["port=8080"], Box::new(|f| f.4 == 8080)),
        (
            &["client=16.0.0.0/29"],
            Box::new(move |f| f.1 >= ip("16.0.0.0") && f.1 < ip("16.0.0.8")),
        ),
        (
            &["server=48.0.0.2"],
            Box::new(move |f| f.3 == ip("48.0.0.2")),
        ),
        (
            &["template=small,client=16.0.0.4/30", "port=80"],
            Box::new(move |f| f.0 == Some(0) && (f.1 & !3) == ip("16.0.0.4")),
        ),
        (&["template=small", "server=48.0.0.2"], Box::new(|_| false)),
    ];
    for (terms, pred) in cases {
        let got = client_set(&traced_sim(&p, 2.0, 20.0, spec(100_000, terms), ""));
        let want: BTreeSet<_> = all.iter().filter(|f| pred(f)).cloned().collect();
        assert_eq!(got, want, "{terms:?}");
        if !terms.contains(&"server=48.0.0.2") {
            assert!(!want.is_empty(), "{terms:?}");
        }
    }
    // N caps the matching flows: the first ones opened.
    let got = client_set(&traced_sim(&p, 2.0, 20.0, spec(5, &["template=big"]), ""));
    let mut big: Vec<_> = all.iter().filter(|f| f.0 == Some(1)).cloned().collect();
    big.sort_by_key(|f| f.5);
    assert_eq!(got.len(), 5);
    let last = got.iter().map(|f| f.5).max().unwrap();
    assert!(
        big.iter().filter(|f| f.5 < last).count() < 5,
        "the first five"
    );
}

#[test]
fn several_shards_trace_their_share_and_merge() {
    let cfg = squall::run::RunConfig {
        duration_ns: 500_000_000,
        mult: 400.0,
        cores: 2,
        drain_ns: 3_000_000_000,
        trace: Some(spec(150, &[])),
        ..Default::default()
    };
    let r = squall::run::run(
        w1(),
        &cfg,
        std::sync::Arc::new(squall::run::Live::default()),
    )
    .unwrap();
    common::assert_clean(&r);
    let d = r.trace.expect("trace");
    let clients: Vec<_> = d
        .flows
        .iter()
        .filter(|f| f.side == TraceSide::Client)
        .collect();
    // 200 flows: the run's first 150 are traced, whichever shard opens them.
    assert_eq!(clients.len(), 150);
    assert_eq!(d.flows.len(), 300, "a server timeline per client one");
    // Both shards took part.
    let shards: BTreeSet<u32> = clients.iter().map(|f| f.worker).collect();
    assert_eq!(shards.len(), 2, "{shards:?}");
    let dirs: BTreeSet<_> = d.flows.iter().map(dir_of).collect();
    for f in &d.flows {
        assert!(matches!(
            f.events.last().map(|e| e.kind),
            Some(TraceKind::Closed(CloseReason::Normal))
        ));
    }
    // Every frame is a traced flow's, every flow has frames both ways, in time order.
    assert!(d.frames.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
    let seen: BTreeSet<_> = d
        .frames
        .iter()
        .filter_map(|r| parse(&r.data))
        .map(|s| s.0)
        .collect();
    assert!(seen.is_subset(&dirs));
    assert_eq!(seen, dirs);
}

fn squall(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_squall"))
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn the_command_writes_the_timeline_and_a_pcap_tshark_reads() {
    let dir = std::env::temp_dir().join(format!("squall-trace-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    let (code, out) = squall(&[
        "run",
        "../../examples/w1-astf-http.json",
        "--sim",
        "-d",
        "1",
        "-m",
        "200",
        "-q",
        "--impair",
        "loss=0.03",
        "--trace",
        d,
        "--trace-flows",
        "6",
        "--trace-filter",
        "template=0,client=16.0.0.0/8",
        "--json",
        dir.join("out.json").to_str().unwrap(),
    ]);
    assert!(code == 0 || code == 1, "{out}");
    assert!(out.contains("squall: traced 12 flow timeline(s)"), "{out}");
    let res: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out.json")).unwrap()).unwrap();
    assert_eq!(res["trace"]["flows"], 12);
    assert_eq!(res["trace"]["dropped_events"], 0);
    let text = std::fs::read_to_string(dir.join("timeline.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 12);
    let mut rexmits = 0;
    for l in &lines {
        assert_eq!(l["proto"], "tcp");
        assert!(l["client"]["ip"].as_str().unwrap().starts_with("16.0.0."));
        assert_eq!(l["server"]["port"], 80);
        assert_eq!(l["template_index"], 0);
        let ev = l["events"].as_array().unwrap();
        assert_eq!(ev[0]["ev"], "open");
        assert!(ev
            .iter()
            .any(|e| e["ev"] == "state" && e["state"] == "ESTABLISHED"));
        assert!(ev.iter().any(|e| e["ev"] == "rtt" && e["srtt_us"].is_u64()));
        assert!(ev.iter().any(|e| e["ev"] == "cwnd" && e["cwnd"].is_u64()));
        assert_eq!(ev.last().unwrap()["ev"], "closed");
        rexmits += l["summary"]["retransmits"].as_u64().unwrap();
        let n = ev.iter().filter(|e| e["ev"] == "retransmit").count() as u64;
        assert_eq!(l["summary"]["retransmits"], n);
    }
    eprintln!("{rexmits} retransmissions in the 12 timelines");
    let pcap = dir.join("flows.pcap");
    if squall_port::lab::have("tshark") {
        // Per-frame checks: sequence analysis and reassembly off (the capture at the
        // sender holds a lost segment and its retransmission, which HTTP reassembly
        // would flag as overlapping).
        let t = Command::new("tshark")
            .args([
                "-n",
                "-r",
                pcap.to_str().unwrap(),
                "-o",
                "tcp.analyze_sequence_numbers:FALSE",
            ])
            .args([
                "-o",
                "tcp.desegment_tcp_streams:FALSE",
                "-o",
                "tcp.check_checksum:TRUE",
            ])
            .args([
                "-o",
                "ip.check_checksum:TRUE",
                "-T",
                "fields",
                "-e",
                "frame.number",
            ])
            .args([
                "-Y",
                "_ws.malformed || ip.checksum.status == 0 || tcp.checksum.status == 0",
            ])
            .output()
            .unwrap();
        assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
        assert_eq!(
            String::from_utf8_lossy(&t.stdout).trim(),
            "",
            "malformed or bad checksums"
        );
        let all = Command::new("tshark")
            .args([
                "-n",
                "-r",
                pcap.to_str().unwrap(),
                "-T",
                "fields",
                "-e",
                "tcp.stream",
            ])
            .output()
            .unwrap();
        let streams: BTreeSet<String> = String::from_utf8_lossy(&all.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(streams.len(), 6, "six TCP conversations");
    } else {
        eprintln!("tshark not installed: the pcap is checked by the reader only");
        let (_, recs) = squall_port::pcap::read_pcap(&std::fs::read(&pcap).unwrap()).unwrap();
        assert!(!recs.is_empty());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_command_refuses_what_it_cannot_trace_and_says_what_to_do() {
    let w1 = "../../examples/w1-astf-http.json";
    for (args, hint) in [
        (vec!["--trace-filter", "port=80"], "add --trace"),
        (
            vec!["--trace", "/tmp/x", "--trace-filter", "template=nosuch"],
            "no such template",
        ),
        (
            vec!["--trace", "/tmp/x", "--trace-filter", "colour=red"],
            "keys:",
        ),
        (
            vec!["--trace", "/tmp/x", "--pcap", "/tmp/y.pcap"],
            "leave out --pcap",
        ),
        (
            vec!["--trace", "/tmp/x", "--trace-flows", "0"],
            "at least 1",
        ),
    ] {
        let mut a = vec!["run", w1, "--sim", "-d", "1"];
        a.extend(args.iter());
        let (code, out) = squall(&a);
        assert_eq!(code, 2, "{args:?}: {out}");
        assert!(out.contains(hint), "{args:?}: {out}");
    }
}

/// `squall run trex-ipv6.py --sim --trace DIR` with `extra` options: its timelines and
/// the frames of its pcap.
fn trace_ipv6(dir: &Path, extra: &[&str]) -> (Vec<serde_json::Value>, Vec<PcapRecord>) {
    let _ = std::fs::remove_dir_all(dir);
    let mut args = vec![
        "run",
        "tests/profiles/trex-ipv6.py",
        "--sim",
        "-d",
        "1",
        "-q",
        "--trace",
        dir.to_str().unwrap(),
        "--trace-flows",
        "3",
    ];
    args.extend(extra);
    let (code, out) = squall(&args);
    assert_eq!(code, 0, "{out}");
    let (_, frames) =
        squall_port::pcap::read_pcap(&std::fs::read(dir.join("flows.pcap")).unwrap()).unwrap();
    (read_timeline(dir), frames)
}

/// The IPv6 (source, source port, destination, destination port) of a TCP frame.
fn ipv6_ends(f: &[u8]) -> Option<(std::net::Ipv6Addr, u16, std::net::Ipv6Addr, u16)> {
    if f.len() < 74 || f[12..14] != [0x86, 0xdd] || f[20] != 6 {
        return None;
    }
    let a = |o: usize| std::net::Ipv6Addr::from(<[u8; 16]>::try_from(&f[o..o + 16]).unwrap());
    let port = |o: usize| u16::from_be_bytes([f[o], f[o + 1]]);
    Some((a(22), port(54), a(38), port(56)))
}

/// IPv6 flows are traced on both sides (the server host names addresses by ids of its
/// own: the watch and the filter use full addresses), their frames are in the pcap, and
/// an IPv6 `--trace-filter` selects them.
#[test]
fn ipv6_flows_are_traced_on_both_sides_and_ipv6_filters_select_them() {
    let dir = std::env::temp_dir().join(format!("squall-trace-v6-{}", std::process::id()));
    let check = |lines: &[serde_json::Value], frames: &[PcapRecord]| {
        // Per flow (client address and port): one client and one server timeline.
        let mut sides: BTreeMap<(String, u64), Vec<String>> = BTreeMap::new();
        for l in lines {
            let c = &l["client"];
            let ip = c["ip"].as_str().unwrap().to_string();
            assert!(ip.starts_with("2001:db8:0:2222::"), "{l}");
            assert!(l["server"]["ip"]
                .as_str()
                .unwrap()
                .starts_with("2001:db8:2:2222::"));
            assert_eq!(l["template_index"], 0, "the server's flow has its template");
            let ev = l["events"].as_array().unwrap();
            assert!(ev.iter().any(|e| e["state"] == "ESTABLISHED"), "{l}");
            assert_eq!(ev.last().unwrap()["ev"], "closed", "{l}");
            let side = l["side"].as_str().unwrap().to_string();
            sides
                .entry((ip, c["port"].as_u64().unwrap()))
                .or_default()
                .push(side);
        }
        for (flow, s) in &sides {
            let mut s = s.clone();
            s.sort();
            assert_eq!(s, ["client", "server"], "{flow:?}");
        }
        // The pcap: the traced flows' IPv6 frames, both directions, and nothing else.
        let mut seen = BTreeSet::new();
        for r in frames {
            let (src, sp, dst, dp) = ipv6_ends(&r.data).expect("an IPv6 TCP frame");
            let to_server = dp == 80;
            let (c, cp) = if to_server { (src, sp) } else { (dst, dp) };
            assert!(
                sides.contains_key(&(c.to_string(), u64::from(cp))),
                "{c}:{cp}"
            );
            seen.insert((to_server, c, cp));
        }
        assert_eq!(seen.len(), 2 * sides.len(), "both directions of every flow");
        sides
    };
    let (lines, frames) = trace_ipv6(&dir, &[]);
    assert_eq!(lines.len(), 6, "3 flows x 2 sides");
    assert_eq!(check(&lines, &frames).len(), 3);
    // An IPv6 prefix takes the flows of its clients only: the pool is handed out in
    // sequence (::1000:1, ::1000:2, ...), so ::1000:4/126 holds the 4th to 7th flows'.
    let (lines, frames) = trace_ipv6(
        &dir,
        &["--trace-filter", "client=2001:db8:0:2222::1000:4/126"],
    );
    let sides = check(&lines, &frames);
    let ips: BTreeSet<&str> = sides.keys().map(|k| k.0.as_str()).collect();
    assert_eq!(
        ips,
        BTreeSet::from([
            "2001:db8:0:2222::1000:4",
            "2001:db8:0:2222::1000:5",
            "2001:db8:0:2222::1000:6"
        ])
    );
    // The servers are handed out in sequence too (::3000:1 to ::3000:4).
    let (lines, frames) = trace_ipv6(&dir, &["--trace-filter", "server=2001:db8:2:2222::3000:2"]);
    assert_eq!(check(&lines, &frames).len(), 3);
    assert!(lines
        .iter()
        .all(|l| l["server"]["ip"] == "2001:db8:2:2222::3000:2"));
    // An IPv4 prefix never takes an IPv6 flow, even one whose low 32 bits match.
    let (lines, frames) = trace_ipv6(&dir, &["--trace-filter", "client=16.0.0.0/8"]);
    assert!(lines.is_empty() && frames.is_empty(), "{lines:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_two_thread_run_traces_both_sides_each_with_its_capture() {
    let cfg = squall::run::RunConfig {
        duration_ns: 500_000_000,
        mult: 100.0,
        cores: 2,
        split: true,
        drain_ns: 5_000_000_000,
        impair: squall::impair::parse_impair("loss=0.03").unwrap(),
        trace: Some(spec(10, &[])),
        ..Default::default()
    };
    let r = squall::run::run(
        w1(),
        &cfg,
        std::sync::Arc::new(squall::run::Live::default()),
    )
    .unwrap();
    let d = r.trace.expect("trace");
    assert_eq!(d.flows.len(), 20, "both sides of 10 flows");
    assert!(d.frames.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
    // Each side's capture holds what it sent: the timelines' retransmissions are there.
    let wire = pcap_rexmits(&d.frames);
    for f in &d.flows {
        let mut a = rexmits(f);
        let mut b = wire.get(&dir_of(f)).cloned().unwrap_or_default();
        a.sort();
        b.sort();
        assert_eq!(a, b, "{:?} {:?}", f.side, f.flow.key);
        assert!(f
            .events
            .iter()
            .any(|e| e.kind == TraceKind::State(State::Established)));
    }
}

mod lab;

/// Two namespaces of this test's own (`trace-cli`, `trace-srv`) joined by a veth
/// (`trace-c0` / `trace-s0`, offloads off, no addresses: Squall answers ARP for its
/// pools on both ends), removed on drop.
struct TraceLab;

impl TraceLab {
    /// With `kernel_client`: the client namespace's kernel gets 198.18.0.2/24 and the
    /// server address on-link (curl plays the client).
    fn up(kernel_client: bool) -> TraceLab {
        let l = TraceLab;
        l.down();
        let sh = |a: &[&str]| {
            let st = Command::new(a[0]).args(&a[1..]).status().expect("run ip");
            assert!(st.success(), "{a:?}");
        };
        for n in ["trace-cli", "trace-srv"] {
            sh(&["ip", "netns", "add", n]);
            sh(&["ip", "-n", n, "link", "set", "lo", "up"]);
        }
        sh(&[
            "ip",
            "link",
            "add",
            "trace-c0",
            "netns",
            "trace-cli",
            "type",
            "veth",
            "peer",
            "name",
            "trace-s0",
            "netns",
            "trace-srv",
        ]);
        for (n, i) in [("trace-cli", "trace-c0"), ("trace-srv", "trace-s0")] {
            let _ = lab::ns(
                n,
                &[
                    "ethtool", "-K", i, "tso", "off", "gso", "off", "gro", "off", "tx", "off",
                    "rx", "off",
                ],
            )
            .stdout(std::process::Stdio::null())
            .status();
            sh(&[
                "ip",
                "netns",
                "exec",
                n,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
            ]);
            sh(&["ip", "-n", n, "link", "set", i, "up"]);
        }
        if kernel_client {
            sh(&[
                "ip",
                "-n",
                "trace-cli",
                "addr",
                "add",
                "198.18.0.2/24",
                "dev",
                "trace-c0",
            ]);
            sh(&[
                "ip",
                "-n",
                "trace-cli",
                "route",
                "add",
                "198.18.48.0/24",
                "dev",
                "trace-c0",
            ]);
        }
        l
    }
    fn down(&self) {
        for n in ["trace-cli", "trace-srv"] {
            let _ = Command::new("ip")
                .args(["netns", "del", n])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

impl Drop for TraceLab {
    fn drop(&mut self) {
        self.down();
    }
}

/// W1 with lab addresses (198.18.16.0/24 clients, 198.18.48.1 server).
fn lab_w1(dir: &Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(common::repo().join("examples/w1-astf-http.json")).unwrap();
    let mut p: serde_json::Value = serde_json::from_str(&text).unwrap();
    p["ip_gens"] = serde_json::json!([{"name": "default",
        "clients": {"range": ["198.18.16.1", "198.18.16.200"], "distribution": "seq"},
        "servers": {"range": ["198.18.48.1", "198.18.48.1"], "distribution": "seq"}}]);
    p["templates"][0]["assoc"] =
        serde_json::json!([{"port": 80, "ip_start": "198.18.48.1", "ip_end": "198.18.48.1"}]);
    let f = dir.join("w1-lab.json");
    std::fs::write(&f, p.to_string()).unwrap();
    f
}

fn read_timeline(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("timeline.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn afpacket_client_and_server_trace_their_flows_both_directions() {
    if let Some(why) = lab::skip(&["ip", "ethtool"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let Some(_lock) = lab::machine_lock(std::time::Duration::from_secs(300)) else {
        squall_port::lab::skipped("the lab lock stayed busy");
        return;
    };
    let dir = lab::tmpdir("trace");
    let prof = lab_w1(&dir);
    let _lab = TraceLab::up(false);
    let (ct, st) = (dir.join("client-trace"), dir.join("server-trace"));
    let srv = lab::server_thread(
        "trace-srv",
        prof.to_str().unwrap(),
        "afpacket:trace-s0",
        &[
            "--trace",
            st.to_str().unwrap(),
            "--trace-flows",
            "5",
            "--trace-filter",
            "port=80",
            "--duration",
            "5",
        ],
        None,
    );
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let (code, out) = lab::squall_in(
        "trace-cli",
        &[
            "run",
            prof.to_str().unwrap(),
            "--iface",
            "afpacket:trace-c0",
            "--mode",
            "client",
            "-d",
            "1",
            "-m",
            "100",
            "--drain-sec",
            "2",
            "-q",
            "--trace",
            ct.to_str().unwrap(),
            "--trace-flows",
            "6",
        ],
        30,
    );
    let (scode, sout) = srv.join().unwrap();
    assert_eq!(code, 0, "client: {out}\nserver: {sout}");
    assert_eq!(scode, 0, "server: {sout}");
    assert!(out.contains("traced 6 flow timeline(s)"), "{out}");
    assert!(sout.contains("traced 5 flow timeline(s)"), "{sout}");
    for (d, side, n, first) in [
        (&ct, "client", 6, "SYN_SENT"),
        (&st, "server", 5, "SYN_RECEIVED"),
    ] {
        let lines = read_timeline(d);
        assert_eq!(lines.len(), n, "{side}");
        let (_, frames) =
            squall_port::pcap::read_pcap(&std::fs::read(d.join("flows.pcap")).unwrap()).unwrap();
        for l in &lines {
            assert_eq!(l["side"], side);
            assert_eq!(l["template_index"], 0);
            let ev = l["events"].as_array().unwrap();
            assert_eq!(ev[1]["state"], first, "{l}");
            assert!(ev.iter().any(|e| e["state"] == "ESTABLISHED"), "{l}");
            assert_eq!(ev.last().unwrap()["ev"], "closed", "{l}");
            // Both directions of the flow are in the pcap: ours sent, the peer's received.
            let (c, s) = (&l["client"], &l["server"]);
            let ip = |v: &serde_json::Value| {
                u32::from(
                    v["ip"]
                        .as_str()
                        .unwrap()
                        .parse::<std::net::Ipv4Addr>()
                        .unwrap(),
                )
            };
            let cdir = (
                ip(c),
                c["port"].as_u64().unwrap() as u16,
                ip(s),
                s["port"].as_u64().unwrap() as u16,
            );
            let sdir = (cdir.2, cdir.3, cdir.0, cdir.1);
            let segs: Vec<Seg> = frames.iter().filter_map(|r| parse(&r.data)).collect();
            let up = segs.iter().filter(|x| x.0 == cdir).count();
            let down = segs.iter().filter(|x| x.0 == sdir).count();
            assert!(
                up >= 4 && down >= 20,
                "{side} {cdir:?}: {up} up, {down} down"
            );
            // The handshake in order: the SYN first.
            let first = segs.iter().find(|x| x.0 == cdir || x.0 == sdir).unwrap();
            assert_eq!((first.0, first.3 & 0x12), (cdir, 0x02), "{side}: SYN first");
        }
        if squall_port::lab::have("tshark") {
            let t = Command::new("tshark")
                .args(["-n", "-r", d.join("flows.pcap").to_str().unwrap()])
                .args([
                    "-o",
                    "tcp.analyze_sequence_numbers:FALSE",
                    "-o",
                    "tcp.desegment_tcp_streams:FALSE",
                ])
                .args(["-T", "fields", "-e", "frame.number", "-Y", "_ws.malformed"])
                .output()
                .unwrap();
            assert!(t.status.success());
            assert_eq!(
                String::from_utf8_lossy(&t.stdout).trim(),
                "",
                "{side}: malformed frames"
            );
        }
    }
}

#[test]
fn squall_serve_traces_the_connections_its_filter_takes() {
    if let Some(why) = lab::skip(&["ip", "ethtool", "curl"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let Some(_lock) = lab::machine_lock(std::time::Duration::from_secs(300)) else {
        squall_port::lab::skipped("the lab lock stayed busy");
        return;
    };
    let dir = lab::tmpdir("trace-serve");
    let tdir = dir.join("trace");
    let out_json = dir.join("serve.json");
    let _lab = TraceLab::up(true);
    let mut srv = lab::Proc(
        lab::ns(
            "trace-srv",
            &[
                lab::squall_bin(),
                "serve",
                "--listen",
                "198.18.48.1:80",
                "--iface",
                "afpacket:trace-s0",
                "--peer-ip",
                "198.18.0.2",
                "--route",
                "/ping return 200 \"pong\"",
                "--duration",
                "4",
                "--drain-sec",
                "1",
                "--trace",
                tdir.to_str().unwrap(),
                "--trace-flows",
                "3",
                "--trace-filter",
                "client=198.18.0.0/24,port=80",
            ],
        )
        .stdout(std::fs::File::create(&out_json).unwrap())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start squall serve"),
    );
    std::thread::sleep(std::time::Duration::from_millis(1500));
    for _ in 0..5 {
        let o = lab::ns(
            "trace-cli",
            &["curl", "-s", "-m", "5", "http://198.18.48.1/ping"],
        )
        .output()
        .unwrap();
        assert_eq!(String::from_utf8_lossy(&o.stdout), "pong");
    }
    let (doc, err) = lab::serve_report(&mut srv, &out_json);
    assert_eq!(doc["requests"], 5, "{err}");
    assert!(err.contains("traced 3 flow timeline(s)"), "{err}");
    let lines = read_timeline(&tdir);
    assert_eq!(lines.len(), 3);
    let (_, frames) =
        squall_port::pcap::read_pcap(&std::fs::read(tdir.join("flows.pcap")).unwrap()).unwrap();
    let segs: Vec<Seg> = frames.iter().filter_map(|r| parse(&r.data)).collect();
    for l in &lines {
        assert_eq!(l["side"], "server");
        assert_eq!(l["client"]["ip"], "198.18.0.2");
        assert_eq!(l["template"], serde_json::Value::Null);
        let ev = l["events"].as_array().unwrap();
        assert_eq!(ev[1]["state"], "SYN_RECEIVED", "{l}");
        assert!(ev.iter().any(|e| e["state"] == "ESTABLISHED"), "{l}");
        assert_eq!(ev.last().unwrap()["ev"], "closed", "{l}");
        let cport = l["client"]["port"].as_u64().unwrap() as u16;
        let up: Vec<_> = segs.iter().filter(|s| s.0 .1 == cport).collect();
        let down: Vec<_> = segs.iter().filter(|s| s.0 .3 == cport).collect();
        assert!(
            up.len() >= 3 && down.len() >= 2,
            "{cport}: {} up, {} down",
            up.len(),
            down.len()
        );
        assert_eq!(up[0].3 & 0x12, 0x02, "the SYN first");
    }
}

/// The T-dut topology with names of this test's own: Squall's two ports in `trace-tg`
/// (`trace-c0`, `trace-s0`, no addresses), a Linux router in `trace-dut` between them
/// (198.18.0.1 on the client link, 198.19.0.1 on the server link); removed on drop.
struct TraceDut;

impl TraceDut {
    fn up() -> TraceDut {
        let l = TraceDut;
        l.down();
        let sh = |a: &[&str]| {
            let st = Command::new(a[0]).args(&a[1..]).status().expect("run ip");
            assert!(st.success(), "{a:?}");
        };
        for n in ["trace-tg", "trace-dut"] {
            sh(&["ip", "netns", "add", n]);
            sh(&["ip", "-n", n, "link", "set", "lo", "up"]);
            sh(&[
                "ip",
                "netns",
                "exec",
                n,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
            ]);
        }
        for (a, b) in [("trace-c0", "trace-dc0"), ("trace-s0", "trace-ds0")] {
            sh(&[
                "ip",
                "link",
                "add",
                a,
                "netns",
                "trace-tg",
                "type",
                "veth",
                "peer",
                "name",
                b,
                "netns",
                "trace-dut",
            ]);
            for (n, i) in [("trace-tg", a), ("trace-dut", b)] {
                let _ = lab::ns(
                    n,
                    &[
                        "ethtool", "-K", i, "tso", "off", "gso", "off", "gro", "off", "tx", "off",
                        "rx", "off",
                    ],
                )
                .stdout(std::process::Stdio::null())
                .status();
                sh(&["ip", "-n", n, "link", "set", i, "up"]);
            }
        }
        sh(&[
            "ip",
            "-n",
            "trace-dut",
            "addr",
            "add",
            "198.18.0.1/24",
            "dev",
            "trace-dc0",
        ]);
        sh(&[
            "ip",
            "-n",
            "trace-dut",
            "addr",
            "add",
            "198.19.0.1/24",
            "dev",
            "trace-ds0",
        ]);
        sh(&[
            "ip",
            "-n",
            "trace-dut",
            "route",
            "add",
            "198.18.16.0/24",
            "dev",
            "trace-dc0",
        ]);
        sh(&[
            "ip",
            "-n",
            "trace-dut",
            "route",
            "add",
            "198.19.48.0/24",
            "dev",
            "trace-ds0",
        ]);
        for k in [
            "net.ipv4.ip_forward=1",
            "net.ipv4.conf.all.rp_filter=0",
            "net.ipv4.conf.default.rp_filter=0",
            "net.ipv4.conf.trace-dc0.rp_filter=0",
            "net.ipv4.conf.trace-ds0.rp_filter=0",
        ] {
            sh(&["ip", "netns", "exec", "trace-dut", "sysctl", "-qw", k]);
        }
        l
    }
    fn down(&self) {
        for n in ["trace-tg", "trace-dut"] {
            let _ = Command::new("ip")
                .args(["netns", "del", n])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

impl Drop for TraceDut {
    fn drop(&mut self) {
        self.down();
    }
}

#[test]
fn through_a_dut_both_sides_are_traced_and_the_pcap_is_the_client_port() {
    if let Some(why) = lab::skip(&["ip", "ethtool"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let Some(_lock) = lab::machine_lock(std::time::Duration::from_secs(300)) else {
        squall_port::lab::skipped("the lab lock stayed busy");
        return;
    };
    let dir = lab::tmpdir("trace-dut");
    let tdir = dir.join("trace");
    let _lab = TraceDut::up();
    let prof = lab::root().join("crates/squall/tests/profiles/dut-w1.json");
    let (code, out) = lab::squall_in(
        "trace-tg",
        &[
            "run",
            prof.to_str().unwrap(),
            "--client-iface",
            "afpacket:trace-c0",
            "--server-iface",
            "afpacket:trace-s0",
            "--client-gw",
            "198.18.0.1",
            "--server-gw",
            "198.19.0.1",
            "-d",
            "1",
            "-m",
            "100",
            "-q",
            "--trace",
            tdir.to_str().unwrap(),
            "--trace-flows",
            "4",
        ],
        60,
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("traced 8 flow timeline(s)"), "{out}");
    let lines = read_timeline(&tdir);
    let (_, frames) =
        squall_port::pcap::read_pcap(&std::fs::read(tdir.join("flows.pcap")).unwrap()).unwrap();
    for l in lines.iter().filter(|l| l["side"] == "client") {
        let cport = l["client"]["port"].as_u64().unwrap() as u16;
        let cip = l["client"]["ip"].as_str().unwrap().to_string();
        // The server's view of the same flow (routed, not translated: same 4-tuple).
        assert!(lines.iter().any(|s| s["side"] == "server"
            && s["client"]["ip"] == cip.as_str()
            && s["client"]["port"] == cport
            && s["events"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["state"] == "ESTABLISHED")));
        // The client port's wire: what the client sent (TTL 64) and what came back
        // through the router (TTL one less).
        let ttls: BTreeSet<(bool, u8)> = frames
            .iter()
            .filter_map(|r| parse(&r.data).map(|s| (s, r.data[22])))
            .filter(|(s, _)| s.0 .1 == cport || s.0 .3 == cport)
            .map(|(s, ttl)| (s.0 .1 == cport, ttl))
            .collect();
        let sent: Vec<u8> = ttls.iter().filter(|x| x.0).map(|x| x.1).collect();
        let back: Vec<u8> = ttls.iter().filter(|x| !x.0).map(|x| x.1).collect();
        assert_eq!(sent.len(), 1, "{ttls:?}");
        assert_eq!(back.len(), 1, "{ttls:?}");
        assert_eq!(back[0], sent[0] - 1, "routed once: {ttls:?}");
    }
}
