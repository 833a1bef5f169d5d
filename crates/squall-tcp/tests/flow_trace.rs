//! Flow tracing in the host: a traced run behaves exactly as an untraced one (same
//! counters, same virtual time), and the timelines account for every retransmitted
//! segment with its cause, every RTT sample and every flow's states, on lossy wires with
//! and without SACK.

mod common;

use common::{run_w1_sinks, w1_config, Family, Impair};
use squall_tcp::{CloseReason, FlowTracer, State, TcpConfig, TraceKind};

fn retransmitted_segments(t: &FlowTracer) -> u64 {
    t.events()
        .iter()
        .filter(|e| matches!(e.kind, TraceKind::Retransmit { len, .. } if len > 0))
        .count() as u64
}

fn causes(t: &FlowTracer) -> Vec<&'static str> {
    let mut v: Vec<_> = t
        .events()
        .iter()
        .filter_map(|e| match e.kind {
            TraceKind::Retransmit { cause, .. } => Some(cause.name()),
            _ => None,
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

fn check(cfg: TcpConfig, sack: bool) {
    let imp = Impair {
        loss: 0.08,
        delay_ns: 200_000,
        ..Impair::default()
    };
    let (plain, none, _) = run_w1_sinks(Family::V4, 200, 20, imp, 9, cfg.clone(), false, 0, false);
    assert!(none.is_none());
    let (traced, tr, _) = run_w1_sinks(Family::V4, 200, 20, imp, 9, cfg, true, 0, false);
    let (c, s) = tr.expect("tracers");
    // Tracing changes nothing the hosts do.
    assert_eq!(plain.client, traced.client);
    assert_eq!(plain.server, traced.server);
    assert_eq!(plain.virtual_ns, traced.virtual_ns);
    assert_eq!(traced.client_ok, 200);
    for (t, counters) in [(&c, &traced.client), (&s, &traced.server)] {
        assert_eq!(t.flows().len(), 200);
        assert_eq!(t.dropped(), 0);
        assert_eq!(retransmitted_segments(t), counters.tcps_sndrexmitpack);
        let rtts = t
            .events()
            .iter()
            .filter(|e| matches!(e.kind, TraceKind::Rtt { .. }))
            .count() as u64;
        assert_eq!(rtts, counters.tcps_rttupdated);
        let timeouts = t
            .events()
            .iter()
            .filter(|e| matches!(e.kind, TraceKind::Timeout { .. }))
            .count() as u64;
        // Timeouts that ended a flow are counted but retransmit nothing.
        assert!(timeouts <= counters.tcps_rexmttimeo);
        let recoveries = t
            .events()
            .iter()
            .filter(|e| matches!(e.kind, TraceKind::Recovery { .. }))
            .count() as u64;
        assert_eq!(recoveries, counters.tcps_fastrexmt);
        // Every flow: opened, established, closed normally; events in time order.
        for f in t.flows() {
            let ev: Vec<_> = t.events().iter().filter(|e| e.flow == f.id).collect();
            assert_eq!(ev[0].kind, TraceKind::Open);
            assert!(ev
                .iter()
                .any(|e| e.kind == TraceKind::State(State::Established)));
            // Closed normally, or still in TIME_WAIT when the run stopped.
            let last_state = ev.iter().rev().find_map(|e| match e.kind {
                TraceKind::State(s) => Some(s),
                _ => None,
            });
            assert!(
                ev.last().unwrap().kind == TraceKind::Closed(CloseReason::Normal)
                    || last_state == Some(State::TimeWait),
                "{:?}",
                ev.last()
            );
            assert!(ev.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
        }
    }
    let all: Vec<_> = [causes(&c), causes(&s)].concat();
    assert!(all.contains(&"rto"), "{all:?}");
    if sack {
        assert!(all.contains(&"sack"), "{all:?}");
    } else {
        assert!(!all.contains(&"sack"), "{all:?}");
        assert!(all.contains(&"fast_retransmit"), "{all:?}");
    }
}

#[test]
fn traced_runs_match_untraced_ones_and_account_for_every_retransmission_with_sack() {
    let mut cfg = w1_config();
    cfg.opts.sack = true;
    check(cfg, true);
}

#[test]
fn traced_runs_match_untraced_ones_and_account_for_every_retransmission_newreno() {
    let mut cfg = w1_config();
    cfg.opts.sack = false;
    check(cfg, false);
}

#[test]
fn untraced_flows_of_a_traced_host_record_nothing() {
    let mut h = squall_tcp::TcpHost::new(TcpConfig::default(), 0);
    assert!(!h.trace_flow(squall_tcp::FlowId(0)), "no tracer");
    h.set_tracer(Some(FlowTracer::new(16)));
    assert!(!h.trace_flow(squall_tcp::FlowId(0)), "no such flow");
    assert!(h.tracer().unwrap().events().is_empty());
}
