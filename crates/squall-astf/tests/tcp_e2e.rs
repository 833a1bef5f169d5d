//! End to end over real TCP: the scheduler opens flows, the allocator picks addresses,
//! two squall-tcp hosts (client and server) exchange real frames on a virtual clock, and
//! the adapter runs the profile's programs on both sides. Checks outcomes and byte totals.
#![cfg(feature = "tcp")]

use std::sync::Arc;

use squall_astf::alloc::{ClientAlloc, PortRange, ServerPick};
use squall_astf::sched::{FlowStart, SchedConfig, Scheduler};
use squall_astf::tcp::{tcp_config, AstfTcpApp, GroupStats, LatencySample};
use squall_astf::*;
use squall_tcp::{TcpConfig, TcpHost, TxSink};

#[derive(Default)]
struct Sink {
    frames: Vec<Vec<u8>>,
    cur: Vec<u8>,
}

impl TxSink for Sink {
    fn alloc(&mut self, len: usize) -> Option<&mut [u8]> {
        self.cur.clear();
        self.cur.resize(len, 0);
        Some(&mut self.cur)
    }
    fn commit(&mut self, len: usize) {
        self.frames.push(self.cur[..len].to_vec());
    }
}

struct Run {
    capp: AstfTcpApp,
    sapp: AstfTcpApp,
    opened: u64,
    now: u64,
}

fn example(name: &str) -> Arc<Profile> {
    let path = format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"));
    Arc::new(load_profile_file(std::path::Path::new(&path)).unwrap())
}

/// Runs `profile` at `mult` for `duration_ns` of flow starts, then until every program
/// ended (or 60 s of virtual time). `extra` flows of template 0 go to (server address,
/// scheduled that long before now).
fn run(profile: Arc<Profile>, mult: f64, duration_ns: u64, extra: &[(u32, u64)]) -> Run {
    run_with(profile, mult, duration_ns, extra, PortRange::default())
}

/// `run` with a given client source port range (ports are released as flows close).
fn run_with(
    profile: Arc<Profile>,
    mult: f64,
    duration_ns: u64,
    extra: &[(u32, u64)],
    ports: PortRange,
) -> Run {
    let t0 = &profile.templates[0];
    let base = TcpConfig {
        max_flows: 8192,
        ..TcpConfig::default()
    };
    let mut now = 1_000_000_000;
    let mut ch = TcpHost::new(
        tcp_config(
            &t0.client,
            TcpConfig {
                mac: [2, 0, 0, 0, 0, 1],
                gateway_mac: [2, 0, 0, 0, 0, 2],
                ..base.clone()
            },
        ),
        now,
    );
    let mut sh = TcpHost::new(
        tcp_config(
            &t0.server,
            TcpConfig {
                mac: [2, 0, 0, 0, 0, 2],
                gateway_mac: [2, 0, 0, 0, 0, 1],
                ..base
            },
        ),
        now,
    );
    let mut capp = AstfTcpApp::new(profile.clone(), &mut ch, now, 1);
    let mut sapp = AstfTcpApp::new(profile.clone(), &mut sh, now, 2);
    sapp.listen_all(&mut sh);
    let mut cfg = SchedConfig::from_profile(&profile, mult, Some(duration_ns), 0, 1);
    cfg.start_ns = now;
    let mut sched = Scheduler::new(&profile, &cfg);
    let mut allocs: Vec<ClientAlloc> = profile
        .templates
        .iter()
        .map(|t| ClientAlloc::new(&profile.ip_gens[t.ip_gen as usize], 0, 0, 1, ports, 3).unwrap())
        .collect();
    let mut servers: Vec<ServerPick> = profile
        .templates
        .iter()
        .map(|t| ServerPick::new(&profile.ip_gens[t.ip_gen as usize], 0, 0, 4))
        .collect();
    let (mut cq, mut sq) = (Sink::default(), Sink::default());
    let mut opened = 0;
    for &(dst, late) in extra {
        let a = allocs[0].alloc(|_, _| false).unwrap();
        let start = FlowStart {
            template: TemplateIdx(0),
            at_ns: now - late,
            seq: 0,
        };
        capp.open(&mut ch, &mut cq, now, &start, a, dst).unwrap();
        opened += 1;
    }
    let mut starts = Vec::new();
    let mut closed = Vec::new();
    let limit = now + 60_000_000_000;
    loop {
        starts.clear();
        sched.poll(now, &mut starts);
        for s in &starts {
            let t = s.template.0 as usize;
            let a = allocs[t].alloc(|_, _| false).expect("ports");
            let dst = servers[t].pick();
            capp.open(&mut ch, &mut cq, now, s, a, dst)
                .expect("connect");
            opened += 1;
        }
        let c2s = std::mem::take(&mut cq.frames);
        for f in &c2s {
            sapp.rx(&mut sh, &mut sq, now, f);
        }
        let s2c = std::mem::take(&mut sq.frames);
        for f in &s2c {
            capp.rx(&mut ch, &mut cq, now, f);
        }
        capp.poll(&mut ch, &mut cq, now);
        sapp.poll(&mut sh, &mut sq, now);
        capp.take_closed(&mut closed);
        for (t, a) in closed.drain(..) {
            allocs[t.0 as usize].release(a);
        }
        let idle = cq.frames.is_empty() && sq.frames.is_empty();
        if idle && sched.is_finished() && capp.running() == 0 && sapp.running() == 0 {
            break;
        }
        assert!(
            now < limit,
            "did not finish: {} client / {} server programs running",
            capp.running(),
            sapp.running()
        );
        if idle && c2s.is_empty() && s2c.is_empty() {
            let next = [capp.next_timer(&ch), sapp.next_timer(&sh), sched.next_due()]
                .into_iter()
                .flatten()
                .min();
            now = next.map_or(now + 10_000, |t| t.max(now + 1));
        } else {
            now += 10_000; // 10 us per exchange
        }
    }
    Run {
        capp,
        sapp,
        opened,
        now,
    }
}

fn group<'a>(app: &'a AstfTcpApp, p: &Profile, name: &str) -> &'a GroupStats {
    &app.groups[p.tg_names.iter().position(|n| n == name).unwrap()]
}

#[test]
fn w1_over_real_tcp() {
    let p = example("w1-astf-http.json");
    // W1 is 1 cps; x1000 for 200 ms: 200 flows.
    let r = run(p.clone(), 1000.0, 200_000_000, &[]);
    assert_eq!(r.opened, 200);
    let c = group(&r.capp, &p, "http");
    let s = group(&r.sapp, &p, "http");
    let want = GroupStats {
        started: 200,
        closed: 200,
        rx_bytes: 200 * 32768,
        tx_bytes: 200 * 100,
        ..GroupStats::default()
    };
    assert_eq!(*c, want);
    let want = GroupStats {
        started: 200,
        closed: 200,
        rx_bytes: 200 * 100,
        tx_bytes: 200 * 32768,
        ..GroupStats::default()
    };
    assert_eq!(*s, want);
    assert_eq!(r.sapp.no_template, 0);
    let mut lat: Vec<LatencySample> = Vec::new();
    let mut capp = r.capp;
    capp.take_latency(&mut lat);
    assert_eq!(lat.len(), 200);
    for l in &lat {
        let (first, last) = (l.first_byte_us.unwrap(), l.last_byte_us.unwrap());
        // The test wire delivers within the same 10 us step as the SYN was sent, so the
        // handshake completes in the flow's first step; data takes further steps.
        assert!(l.connect_us <= 10, "{l:?}");
        assert!(l.connect_us < first && first <= last, "{l:?}");
        assert_eq!(p.tg_names[l.tg_id as usize], "http");
    }
    capp.take_latency(&mut lat);
    assert_eq!(lat.len(), 200, "drained");
}

#[test]
fn unassociated_server_address_is_refused() {
    let p = example("w1-astf-http.json");
    let other = u32::from(std::net::Ipv4Addr::new(48, 0, 0, 2));
    let r = run(p.clone(), 1.0, 1, &[(other, 0)]);
    assert_eq!(r.sapp.no_template, 1);
    let c = group(&r.capp, &p, "http");
    // The flow at t=0 of the schedule works; the one to 48.0.0.2 is reset by the server.
    assert_eq!(r.opened, 2);
    assert_eq!((c.closed, c.aborted), (1, 1), "{c:?}");
}

#[test]
fn program_timers_and_loops_over_real_tcp() {
    let p = example("tick-loop.json");
    // One flow: a request every 10 ms while < 1 s.
    let r = run(p.clone(), 0.1, 1, &[]);
    assert_eq!(r.opened, 1);
    let c = group(&r.capp, &p, "ticker");
    let s = group(&r.sapp, &p, "ticker");
    assert_eq!((c.closed, s.closed), (1, 1), "{c:?} {s:?}");
    let rounds = c.tx_bytes / 6;
    assert!((80..=101).contains(&rounds), "{rounds} rounds");
    assert_eq!(
        (c.rx_bytes, s.rx_bytes, s.tx_bytes),
        (rounds * 6, rounds * 6, rounds * 6)
    );
    assert!(r.now >= 1_000_000_000);
}

#[test]
fn reset_over_real_tcp() {
    let p = example("reset.json");
    let r = run(p.clone(), 0.1, 1, &[]);
    let c = group(&r.capp, &p, "reset");
    let s = group(&r.sapp, &p, "reset");
    assert_eq!((c.reset, c.closed, c.rx_bytes), (1, 0, 1000), "{c:?}");
    assert_eq!((s.aborted, s.closed), (1, 0), "{s:?}");
}

#[test]
fn server_speaks_first_over_real_tcp() {
    let p = example("server-speaks-first.json");
    let r = run(p.clone(), 0.2, 100_000_000, &[]);
    let c = group(&r.capp, &p, "smtp");
    let s = group(&r.sapp, &p, "smtp");
    let n = r.opened;
    assert!(n >= 2);
    assert_eq!((c.closed, s.closed), (n, n), "{c:?} {s:?}");
    assert_eq!((c.rx_bytes, s.rx_bytes), (n * 51, n * 6));
}

#[test]
fn latency_counts_from_the_scheduled_start() {
    let p = example("w1-astf-http.json");
    let server = u32::from(std::net::Ipv4Addr::new(48, 0, 0, 1));
    // A flow handed out 5 ms late (the generator stalled): its latency shows it.
    let mut r = run(p, 1.0, 1, &[(server, 5_000_000)]);
    let mut lat = Vec::new();
    r.capp.take_latency(&mut lat);
    assert_eq!(lat.len(), 2);
    lat.sort_by_key(|l| l.connect_us);
    assert!(lat[0].connect_us <= 10, "{lat:?}");
    assert!((5_000..=5_010).contains(&lat[1].connect_us), "{lat:?}");
}

#[test]
fn ports_are_released_and_reused() {
    let p = example("w1-astf-http.json");
    // 200 clients x 2 ports = 400 tuples; 1000 flows need each tuple several times.
    let r = run_with(
        p.clone(),
        1000.0,
        1_000_000_000,
        &[],
        PortRange {
            first: 2000,
            last: 2001,
        },
    );
    assert_eq!(r.opened, 1000);
    assert_eq!(group(&r.capp, &p, "http").closed, 1000);
    assert_eq!(group(&r.sapp, &p, "http").closed, 1000);
}

#[test]
fn cut_stops_running_flows_without_errors() {
    let p = example("loop-elephant.json");
    let t0 = &p.templates[0];
    let base = TcpConfig {
        max_flows: 64,
        ..TcpConfig::default()
    };
    let mut now = 1_000_000_000;
    let mut ch = TcpHost::new(
        tcp_config(
            &t0.client,
            TcpConfig {
                mac: [2, 0, 0, 0, 0, 1],
                ..base.clone()
            },
        ),
        now,
    );
    let mut sh = TcpHost::new(
        tcp_config(
            &t0.server,
            TcpConfig {
                mac: [2, 0, 0, 0, 0, 2],
                ..base
            },
        ),
        now,
    );
    let mut capp = AstfTcpApp::new(p.clone(), &mut ch, now, 1);
    let mut sapp = AstfTcpApp::new(p.clone(), &mut sh, now, 2);
    sapp.listen_all(&mut sh);
    let (mut cq, mut sq) = (Sink::default(), Sink::default());
    let mut alloc = ClientAlloc::new(&p.ip_gens[0], 0, 0, 1, PortRange::default(), 1).unwrap();
    for k in 0..3 {
        let start = FlowStart {
            template: TemplateIdx(0),
            at_ns: now,
            seq: k,
        };
        let a = alloc.alloc(|_, _| false).unwrap();
        capp.open(
            &mut ch,
            &mut cq,
            now,
            &start,
            a,
            u32::from(std::net::Ipv4Addr::new(48, 0, 0, 1)),
        )
        .unwrap();
    }
    // A few milliseconds of the 1000-round elephants.
    for _ in 0..300 {
        for f in std::mem::take(&mut cq.frames) {
            sapp.rx(&mut sh, &mut sq, now, &f);
        }
        for f in std::mem::take(&mut sq.frames) {
            capp.rx(&mut ch, &mut cq, now, &f);
        }
        capp.poll(&mut ch, &mut cq, now);
        sapp.poll(&mut sh, &mut sq, now);
        now += 10_000;
    }
    assert_eq!(capp.running(), 3);
    capp.abort_all(&mut ch, &mut cq, now);
    for f in std::mem::take(&mut cq.frames) {
        sapp.rx(&mut sh, &mut sq, now, &f);
    }
    let c = group(&capp, &p, "elephant");
    assert_eq!((c.cut, c.aborted, c.closed), (3, 0, 0), "{c:?}");
    assert_eq!(capp.running(), 0);
    // The servers saw the RSTs.
    let s = group(&sapp, &p, "elephant");
    assert_eq!((s.aborted, sapp.running()), (3, 0), "{s:?}");
    assert!(c.rx_bytes > 65536, "the elephants were running: {c:?}");
}
