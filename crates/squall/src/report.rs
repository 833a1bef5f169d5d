//! End-of-run reporting: the invariants TRex asks users to check (checked here
//! automatically), the summary table (stdout), the progress line and the JSON document.

use std::fmt::Write as _;

use serde_json::{json, Map, Value};
use squall_astf::Profile;

use crate::run::{RunResult, SideReport};
use crate::stats::{HttpStats, LatHist, TgCounters};

/// One invariant and whether it held.
#[derive(Clone, Debug)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

fn accounted(c: &TgCounters, opened: u64, live: u64) -> (bool, String) {
    let ended = c.completed + c.aborted + c.bad_close + c.peer_closed_early + c.cut;
    (
        opened == ended + live,
        format!(
            "opened {opened} = completed {} + aborted {} + bad_close {} + peer_closed_early {} + cut {} + running {live}",
            c.completed, c.aborted, c.bad_close, c.peer_closed_early, c.cut
        ),
    )
}

/// Checks the run's invariants.
pub fn invariants(r: &RunResult) -> Vec<Check> {
    let (c, s) = (&r.client, &r.server);
    let mut v = Vec::new();
    let cut = c.app.total().cut + s.app.total().cut;
    let mut eq = |name, a: u64, b: u64, what: &str| {
        v.push(Check {
            name,
            ok: a == b || cut > 0,
            detail: if cut > 0 && a != b {
                format!("{what}: {a} vs {b} (not checked: {cut} flows were cut)")
            } else {
                format!("{what}: {a} vs {b}")
            },
        })
    };
    eq(
        "client_sent_eq_server_received",
        c.tcp.tcps_sndbyte,
        s.tcp.tcps_rcvbyte,
        "client tcps_sndbyte vs server tcps_rcvbyte",
    );
    eq(
        "server_sent_eq_client_received",
        s.tcp.tcps_sndbyte,
        c.tcp.tcps_rcvbyte,
        "server tcps_sndbyte vs client tcps_rcvbyte",
    );
    // A client program that resets in the callback completing its handshake sends the
    // RST before the handshake's ACK: the server drops the embryonic connection (counted
    // in its tcps_conndrops) and never accepts it.
    let reset_at_connect = c.app.total().reset_at_connect;
    eq(
        "client_connects_eq_server_accepts",
        c.tcp.tcps_connects.saturating_sub(reset_at_connect),
        s.tcp.tcps_accepts,
        &format!(
            "client tcps_connects - reset_at_connect {reset_at_connect} vs server tcps_accepts"
        ),
    );
    let (cu, su) = (&c.app.udp, &s.app.udp);
    if cu.udps_connects + su.udps_accepts > 0 {
        // Datagrams are not retransmitted, nor deduplicated: a wire that loses or
        // duplicates frames legitimately breaks these.
        let lost = c.impair.lost + s.impair.lost;
        let dup = c.impair.duplicated + s.impair.duplicated;
        let mut udp_eq = |name, a: u64, b: u64, what: &str| {
            let skip = cut > 0 || lost > 0 || dup > 0;
            v.push(Check {
                name,
                ok: a == b || skip,
                detail: if skip && a != b {
                    format!(
                        "{what}: {a} vs {b} (not checked: {cut} flows cut, {lost} frames lost, \
                         {dup} duplicated)"
                    )
                } else {
                    format!("{what}: {a} vs {b}")
                },
            })
        };
        udp_eq(
            "udp_client_sent_eq_server_received",
            cu.udps_sndpkt,
            su.udps_rcvpkt,
            "client udps_sndpkt vs server udps_rcvpkt",
        );
        udp_eq(
            "udp_server_sent_eq_client_received",
            su.udps_sndpkt,
            cu.udps_rcvpkt,
            "server udps_sndpkt vs client udps_rcvpkt",
        );
        udp_eq(
            "udp_client_bytes_eq_server_bytes",
            cu.udps_sndbyte,
            su.udps_rcvbyte,
            "client udps_sndbyte vs server udps_rcvbyte",
        );
        for (name, side, r) in [
            ("udp_client_connects_eq_closed", "client", c),
            ("udp_server_accepts_eq_closed", "server", s),
        ] {
            let u = &r.app.udp;
            let opened = u.udps_connects + u.udps_accepts;
            v.push(Check {
                name,
                ok: opened == u.udps_closed + r.udp_live_end,
                detail: format!(
                    "{side} UDP flows opened {opened} vs udps_closed {} + running {}",
                    u.udps_closed, r.udp_live_end
                ),
            });
        }
    }
    v.push(Check {
        name: "client_connattempt_eq_closed",
        ok: c.tcp.tcps_connattempt == c.tcp.tcps_closed + c.still_open,
        detail: format!(
            "client tcps_connattempt {} vs tcps_closed {} + still open {}",
            c.tcp.tcps_connattempt, c.tcp.tcps_closed, c.still_open
        ),
    });
    let ct = c.app.total();
    let (ok, d) = accounted(&ct, ct.started, c.live_end);
    v.push(Check {
        name: "client_flows_accounted",
        ok,
        detail: d,
    });
    let st = s.app.total();
    let (ok, d) = accounted(&st, st.accepted, s.live_end);
    v.push(Check {
        name: "server_flows_accounted",
        ok,
        detail: d,
    });
    v
}

/// HTTP errors of template group `g` (both sides), part of its errors column.
fn http_errors(r: &RunResult, g: usize) -> u64 {
    [&r.client.app, &r.server.app]
        .iter()
        .filter_map(|a| a.tg.get(g))
        .map(|t| t.http.errors())
        .sum()
}

/// Total error count of a run (error counters of both sides).
pub fn error_count(r: &RunResult) -> u64 {
    r.client.app.errors() + r.server.app.errors()
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

fn rate(n: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        n as f64 * 1e9 / ns as f64
    }
}

/// Headline rates of a run.
pub struct Rates {
    pub cps: f64,
    pub l7_gbps: f64,
    pub wire_gbps: f64,
    pub mpps: f64,
    pub cpu_us_per_flow: f64,
    pub busy_cpu_us_per_flow: f64,
}

pub fn rates(r: &RunResult) -> Rates {
    let flows = r.client.app.total().completed;
    let l7 = r.client.tcp.tcps_sndbyte
        + r.server.tcp.tcps_sndbyte
        + r.client.app.udp.udps_sndbyte
        + r.server.app.udp.udps_sndbyte;
    let wire = r.client.port.tx_bytes + r.server.port.tx_bytes;
    let pkts = r.client.port.tx_frames + r.server.port.tx_frames;
    Rates {
        cps: rate(r.client.app.total().started, r.gen_ns.max(1)),
        l7_gbps: rate(l7 * 8, r.elapsed_ns) / 1e9,
        wire_gbps: rate(wire * 8, r.elapsed_ns) / 1e9,
        mpps: rate(pkts, r.elapsed_ns) / 1e6,
        cpu_us_per_flow: if flows == 0 {
            0.0
        } else {
            r.cpu_ns as f64 / 1e3 / flows as f64
        },
        busy_cpu_us_per_flow: if flows == 0 {
            0.0
        } else {
            r.busy_cpu_ns as f64 / 1e3 / flows as f64
        },
    }
}

fn group_name(p: &Profile, g: usize) -> String {
    crate::series::group_name(&p.tg_names, g)
}

/// Retransmission events of one template's flows (timeouts and fast retransmits).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateRexmits {
    /// The template's name (`templates[i]` when the profile gives none).
    pub template: String,
    /// Its template group.
    pub group: String,
    pub client: u64,
    pub server: u64,
}

/// A warning about a run (not an error: it does not fail the run). Printed as
/// `warning: ...` by the summary, listed under `warnings` in the JSON document and by the
/// daemon's `get_warnings`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// `over_capacity`, `behind_schedule`, `retransmissions_unimpaired` or
    /// `stall_unchecked`.
    pub kind: &'static str,
    pub message: String,
    /// The templates whose flows retransmitted (`retransmissions_unimpaired`).
    pub templates: Vec<TemplateRexmits>,
}

/// Retransmission events of a side (every retransmission starts with one of these).
fn rexmit_events(s: &SideReport) -> u64 {
    s.tcp.tcps_rexmttimeo + s.tcp.tcps_fastrexmt
}

/// The run's warnings: the generator was over capacity; and, on an unimpaired wire (where
/// nothing can be lost, so a retransmission means a flow stalled until a timer fired),
/// any retransmission, naming the templates whose flows retransmitted.
pub fn warnings(p: &Profile, r: &RunResult) -> Vec<Warning> {
    let mut w = Vec::new();
    if r.client.throttled_turns > 0 {
        w.push(Warning {
            kind: "over_capacity",
            message: format!(
                "the generator was over capacity: {} loop turns opened no flow because the wire's frame pools ran low (flows started late; their latency counts from the schedule)",
                r.client.throttled_turns
            ),
            templates: Vec::new(),
        });
    }
    let t = r.client.app.total();
    if t.started_late * 100 > t.started {
        w.push(Warning {
            kind: "behind_schedule",
            message: format!(
                "the generator fell behind its schedule: {} of {} client flows opened more than {} ms after their scheduled start (the offered rate was not delivered on time; their latency counts from the schedule)",
                t.started_late, t.started, crate::gen::LATE_START_NS / 1_000_000
            ),
            templates: Vec::new(),
        });
    }
    let (ct, st) = (t, r.server.app.total());
    if ct.cut + st.cut > 0 && r.elapsed_ns < r.stall_ns {
        w.push(Warning {
            kind: "stall_unchecked",
            message: format!(
                "{} client and {} server flows were cut at the end, and none could be found stalled: the run lasted {:.1} s, less than the stall time {:.1} s (a flow that never got an answer passes unnoticed: lower --stall-sec or lengthen --drain-sec)",
                ct.cut,
                st.cut,
                r.elapsed_ns as f64 / 1e9,
                r.stall_ns as f64 / 1e9
            ),
            templates: Vec::new(),
        });
    }
    let (c, s) = (&r.client, &r.server);
    let packets = c.tcp.tcps_sndrexmitpack + s.tcp.tcps_sndrexmitpack;
    if r.wire_unimpaired && rexmit_events(c) + rexmit_events(s) + packets > 0 {
        let per = |side: &SideReport, t: usize| side.app.retransmits.get(t).copied().unwrap_or(0);
        let templates: Vec<TemplateRexmits> = p
            .templates
            .iter()
            .enumerate()
            .filter(|&(i, _)| per(c, i) + per(s, i) > 0)
            .map(|(i, t)| TemplateRexmits {
                template: t.name.clone(),
                group: group_name(p, t.tg_id as usize),
                client: per(c, i),
                server: per(s, i),
            })
            .collect();
        let mut m = String::from(
            "retransmissions on an unimpaired wire (nothing was lost: each one is a flow that stalled until a timer fired):",
        );
        for t in &templates {
            let _ = write!(
                m,
                " template {} (group {}): client {}, server {};",
                t.template, t.group, t.client, t.server
            );
        }
        let attributed: u64 = templates.iter().map(|t| t.client + t.server).sum();
        let events = rexmit_events(c) + rexmit_events(s);
        if events > attributed {
            let _ = write!(
                m,
                " {} not attributed to a template (half-open or ending flows);",
                events - attributed
            );
        }
        let _ = write!(
            m,
            " TCP client|server: tcps_rexmttimeo {}|{}, tcps_fastrexmt {}|{}, tcps_sndrexmitpack {}|{}",
            c.tcp.tcps_rexmttimeo,
            s.tcp.tcps_rexmttimeo,
            c.tcp.tcps_fastrexmt,
            s.tcp.tcps_fastrexmt,
            c.tcp.tcps_sndrexmitpack,
            s.tcp.tcps_sndrexmitpack
        );
        w.push(Warning {
            kind: "retransmissions_unimpaired",
            message: m,
            templates,
        });
    }
    w
}

/// Header describing the run, for the summary.
pub struct RunInfo<'a> {
    pub profile_path: &'a str,
    pub mode: &'a str,
    pub duration_s: f64,
    pub mult: f64,
    pub cores: u32,
}

/// The human summary (stdout).
/// The summary printed at the end of a run. `window`: the `window` object of the
/// results (`--warmup`/`--cooldown`): the rates, the groups' rates and the latency
/// table are then the window's; counters, errors and invariants stay whole-run.
pub fn summary(
    p: &Profile,
    info: &RunInfo,
    r: &RunResult,
    checks: &[Check],
    window: Option<&Value>,
) -> String {
    let mut o = String::new();
    let rt = rates(r);
    let _ = writeln!(
        o,
        "squall run {}: {} mode, duration {:.1} s x mult {}, {} core(s)",
        info.profile_path, info.mode, info.duration_s, info.mult, info.cores
    );
    let _ = writeln!(
        o,
        "elapsed {:.3} s (generation {:.3} s{}); CPU {:.3} s = {:.2} us per completed flow ({:.2} us in busy iterations)",
        secs(r.elapsed_ns),
        secs(r.gen_ns),
        // A stop (Ctrl-C, `q`, the daemon) ended the opening of flows before the duration.
        if secs(r.gen_ns) + 1e-3 < info.duration_s {
            ", stopped early"
        } else {
            ""
        },
        secs(r.cpu_ns),
        rt.cpu_us_per_flow,
        rt.busy_cpu_us_per_flow
    );
    let wf = |k: &str| window.and_then(|w| w[k].as_f64()).unwrap_or(0.0);
    let span = format!("measurement window {:.1}-{:.1} s", wf("from"), wf("to"));
    if window.is_some() {
        let _ = writeln!(
            o,
            "rates ({span}): {:.1} CPS, L7 {:.3} Gbit/s, wire {:.3} Gbit/s, {:.3} Mpps",
            wf("cps"),
            wf("l7_gbps"),
            wf("wire_gbps"),
            wf("mpps")
        );
    }
    let _ = writeln!(
        o,
        "rates{}: {:.1} CPS, L7 {:.3} Gbit/s, wire {:.3} Gbit/s, {:.3} Mpps; active flows peak {} (client) {} (server)\n",
        if window.is_some() { " (whole run)" } else { "" },
        rt.cps, rt.l7_gbps, rt.wire_gbps, rt.mpps, r.client.peak_active, r.server.peak_active
    );
    let wgroups = window.and_then(|w| w["groups"].as_array());
    let _ = writeln!(
        o,
        "{:<16} {:>10} {:>10} {:>8} {:>10} {:>9}",
        "template group", "flows", "completed", "errors", "CPS", "L7 Gbit/s"
    );
    for g in 0..r.client.app.tg.len().max(r.server.app.tg.len()) {
        let c = r
            .client
            .app
            .tg
            .get(g)
            .map(|t| t.c.clone())
            .unwrap_or_default();
        let s = r
            .server
            .app
            .tg
            .get(g)
            .map(|t| t.c.clone())
            .unwrap_or_default();
        if c.started == 0 && s.accepted == 0 && c.errors() + s.errors() + http_errors(r, g) == 0 {
            continue;
        }
        let (cps, l7) = match wgroups {
            Some(w) => {
                let f = |k: &str| w.get(g).and_then(|x| x[k].as_f64()).unwrap_or(0.0);
                (f("cps"), f("l7_gbps"))
            }
            None => (
                rate(c.started, r.gen_ns.max(1)),
                rate((c.l7_tx_acked + s.l7_tx_acked) * 8, r.elapsed_ns) / 1e9,
            ),
        };
        let _ = writeln!(
            o,
            "{:<16} {:>10} {:>10} {:>8} {:>10.1} {:>9.3}",
            group_name(p, g),
            c.started,
            c.completed,
            c.errors() + s.errors() + http_errors(r, g),
            cps,
            l7
        );
    }
    if window.is_some() {
        let _ = writeln!(
            o,
            "(flows, completed, errors: whole run; CPS, L7 Gbit/s: the {span})"
        );
    }
    let _ = writeln!(
        o,
        "\nlatency (us, from the scheduled start{})   count      p50      p90      p99    p99.9      max",
        if window.is_some() {
            format!("; flows measured in the {span}")
        } else {
            String::new()
        }
    );
    let row = |o: &mut String, g: usize, name: &str, v: [u64; 6]| {
        let _ = writeln!(
            o,
            "  {:<16} {:<20} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8}",
            group_name(p, g),
            name,
            v[0],
            v[1],
            v[2],
            v[3],
            v[4],
            v[5]
        );
    };
    if let Some(w) = wgroups {
        for (g, x) in w.iter().enumerate() {
            let Some(lat) = x["latency_us"].as_object() else {
                continue;
            };
            let n = |k: &str| lat.get(k).and_then(|l| l["count"].as_u64()).unwrap_or(0);
            if n("connect") == 0 && n("first_byte") == 0 {
                continue;
            }
            for (name, l) in lat {
                let f = |k: &str| l[k].as_u64().unwrap_or(0);
                let v = [
                    f("count"),
                    f("p50"),
                    f("p90"),
                    f("p99"),
                    f("p99_9"),
                    f("max"),
                ];
                row(&mut o, g, name, v);
            }
        }
    } else {
        for (g, t) in r.client.app.tg.iter().enumerate() {
            if t.lat.connect.count() == 0 && t.lat.first_byte.count() == 0 {
                continue;
            }
            let http = t.lat.iter_http().into_iter().filter(|(_, h)| h.count() > 0);
            for (name, h) in t.lat.iter().into_iter().chain(http) {
                let s = h.summary();
                row(&mut o, g, name, [h.count(), s[0], s[1], s[2], s[3], s[4]]);
            }
        }
    }
    for (g, t) in r.client.app.tg.iter().enumerate() {
        if t.http.requests > 0 {
            let _ = writeln!(o, "\nHTTP {:<16} {}", group_name(p, g), http_line(&t.http));
        }
    }
    let _ = writeln!(
        o,
        "\n{:<28} {:>14} {:>14}",
        "flow counters", "client", "server"
    );
    let (ct, st) = (r.client.app.total(), r.server.app.total());
    for ((name, a, err), (_, b, _)) in ct.iter().zip(st.iter()) {
        if a != 0 || b != 0 || err {
            let _ = writeln!(o, "  {:<26} {:>14} {:>14}", name, a, b);
        }
    }
    let _ = writeln!(
        o,
        "  {:<26} {:>14} {:>14}",
        "no_template", r.client.app.no_template, r.server.app.no_template
    );
    if r.client.app.l7_no_match + r.server.app.l7_no_match > 0 {
        let _ = writeln!(
            o,
            "  {:<26} {:>14} {:>14}",
            "l7_no_match", r.client.app.l7_no_match, r.server.app.l7_no_match
        );
    }
    let _ = writeln!(
        o,
        "  {:<26} {:>14} {:>14}",
        "send_errors", r.client.app.send_errors, r.server.app.send_errors
    );
    if r.server.app.translated > 0 {
        let _ = writeln!(
            o,
            "  {:<26} {:>14} {:>14}   (accepted from addresses in no client pool, e.g. {}: translated on the way)",
            "translated",
            r.client.app.translated,
            r.server.app.translated,
            std::net::Ipv4Addr::from(r.server.app.translated_from.unwrap_or(0))
        );
    }
    let _ = writeln!(
        o,
        "\n{:<28} {:>14} {:>14}",
        "TCP counters (non-zero)", "client", "server"
    );
    for ((name, a), (_, b)) in r.client.tcp.iter().zip(r.server.tcp.iter()) {
        if a != 0 || b != 0 {
            let _ = writeln!(o, "  {:<26} {:>14} {:>14}", name, a, b);
        }
    }
    let (cu, su) = (&r.client.app.udp, &r.server.app.udp);
    if cu.udps_connects + su.udps_accepts + cu.errors() + su.errors() > 0 {
        let _ = writeln!(
            o,
            "\n{:<28} {:>14} {:>14}",
            "UDP counters", "client", "server"
        );
        for ((name, a, err), (_, b, _)) in cu.iter().zip(su.iter()) {
            if a != 0 || b != 0 || err {
                let _ = writeln!(o, "  {:<26} {:>14} {:>14}", name, a, b);
            }
        }
    }
    if r.client.redirect_mesh || r.server.redirect_mesh {
        let _ = writeln!(
            o,
            "\nredirect between workers (client | server): frames taken in from another worker's queue {} | {}, dropped {} | {}",
            r.client.rx_redirected, r.server.rx_redirected, r.client.redirect_dropped, r.server.redirect_dropped
        );
    }
    let imp = (r.client.impair, r.server.impair);
    if imp.0 != Default::default() || imp.1 != Default::default() {
        let _ = writeln!(
            o,
            "\nwire impairment (client->server | server->client): lost {} | {}, duplicated {} | {}, reordered {} | {}, corrupted {} | {}",
            imp.0.lost, imp.1.lost, imp.0.duplicated, imp.1.duplicated, imp.0.reordered, imp.1.reordered, imp.0.corrupted, imp.1.corrupted
        );
    }
    let warns = warnings(p, r);
    if !warns.is_empty() {
        let _ = writeln!(o);
    }
    for w in &warns {
        let _ = writeln!(o, "warning: {}", w.message);
    }
    let errors = error_count(r);
    let bad: Vec<_> = checks.iter().filter(|c| !c.ok).collect();
    let _ = writeln!(o);
    if bad.is_empty() {
        let _ = writeln!(o, "invariants: all {} hold", checks.len());
    }
    for c in &bad {
        let _ = writeln!(o, "ERROR: invariant {} violated: {}", c.name, c.detail);
    }
    if errors > 0 {
        let _ = writeln!(o, "ERROR: {errors} error(s) counted (see flow counters)");
    }
    let _ = writeln!(
        o,
        "result: {}",
        if errors == 0 && bad.is_empty() {
            "CLEAN"
        } else {
            "FAILED"
        }
    );
    o
}

/// Upper bounds (us) of the `histogram` buckets of the JSON latencies: 1-2-5 steps from
/// 10 us to 10 s (a last bucket, `le_us: null`, holds the values above).
pub const HIST_BOUNDS_US: &[u64] = &[
    10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000,
    500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000,
];

fn lat_json(h: &LatHist) -> Value {
    let (counts, _) = h.buckets(HIST_BOUNDS_US);
    let hist: Vec<Value> = counts
        .iter()
        .enumerate()
        .map(|(i, c)| json!({"le_us": HIST_BOUNDS_US.get(i), "count": c}))
        .collect();
    let mut v = crate::series::LatSummary::of(h).to_json();
    v["histogram"] = Value::Array(hist);
    v
}

/// One line of HTTP counters: requests, responses by class and code, body bytes, errors.
fn http_line(h: &HttpStats) -> String {
    let mut codes: Vec<(u16, u64)> = h.codes.clone();
    codes.sort_unstable();
    let codes: Vec<String> = codes.iter().map(|(c, n)| format!("{c}:{n}")).collect();
    format!(
        "requests {} responses {} (1xx {} 2xx {} 3xx {} 4xx {} 5xx {}; codes {}{}) body bytes {} parse errors {} incomplete {} not sent {} cut {} server closed {}",
        h.requests,
        h.responses,
        h.class[0],
        h.class[1],
        h.class[2],
        h.class[3],
        h.class[4],
        codes.join(" "),
        if h.codes_other > 0 {
            format!(" other:{}", h.codes_other)
        } else {
            String::new()
        },
        h.body_bytes,
        h.parse_errors,
        h.incomplete,
        h.not_sent,
        h.cut,
        h.server_closed
    )
}

/// The `http` object of a template group (client side).
fn http_json(h: &HttpStats) -> Value {
    let codes: Map<String, Value> = h
        .codes
        .iter()
        .map(|(c, n)| (c.to_string(), (*n).into()))
        .collect();
    json!({
        "requests": h.requests,
        "responses": h.responses,
        "status_class": {"1xx": h.class[0], "2xx": h.class[1], "3xx": h.class[2], "4xx": h.class[3], "5xx": h.class[4]},
        "status_codes": codes,
        "status_other": h.codes_other,
        "body_bytes": h.body_bytes,
        "parse_errors": h.parse_errors,
        "incomplete": h.incomplete,
        "not_sent": h.not_sent,
        "cut": h.cut,
        "server_closed": h.server_closed,
        "errors": h.errors(),
    })
}

fn counters_json(c: &TgCounters) -> Value {
    let mut m = Map::new();
    for (n, v, _) in c.iter() {
        m.insert(n.into(), v.into());
    }
    m.insert("errors".into(), c.errors().into());
    Value::Object(m)
}

fn side_json(s: &SideReport) -> Value {
    let mut tcp = Map::new();
    for (n, v) in s.tcp.iter() {
        tcp.insert(n.into(), v.into());
    }
    let mut udp = Map::new();
    for (n, v, _) in s.app.udp.iter() {
        udp.insert(n.into(), v.into());
    }
    udp.insert("errors".into(), s.app.udp.errors().into());
    json!({
        "flows": counters_json(&s.app.total()),
        "no_template": s.app.no_template,
        "l7_no_match": s.app.l7_no_match,
        "send_errors": s.app.send_errors,
        "translated": s.app.translated,
        "translated_from": s.app.translated_from.map(|a| std::net::Ipv4Addr::from(a).to_string()),
        "errors": s.app.errors(),
        "tcp": Value::Object(tcp),
        "udp": Value::Object(udp),
        "port": {
            "rx_frames": s.port.rx_frames, "rx_bytes": s.port.rx_bytes,
            "tx_frames": s.port.tx_frames, "tx_bytes": s.port.tx_bytes,
            "tx_full": s.port.tx_full, "alloc_fail": s.port.alloc_fail, "dropped": s.port.dropped,
            "rx_redirected": s.rx_redirected, "redirect_dropped": s.redirect_dropped,
            "ip_fragments": s.ip_fragments, "ip_reassembled": s.ip_reassembled,
            "ip_reasm_dropped": s.ip_reasm_dropped,
            "next_hop_moved": s.next_hop_moved, "next_hop_probes": s.next_hop_probes,
            "next_hop_unreachable": s.next_hop_unreachable,
        },
        "impairment": {
            "lost": s.impair.lost, "duplicated": s.impair.duplicated, "reordered": s.impair.reordered,
            "corrupted": s.impair.corrupted, "delayed": s.impair.delayed, "rate_dropped": s.impair.rate_dropped,
        },
        "cpu_sec": secs(s.cpu_ns),
        "still_open": s.still_open,
        "running_at_end": s.live_end,
        "throttled_turns": s.throttled_turns,
        "peak_active": s.peak_active,
    })
}

fn warning_json(w: &Warning) -> Value {
    let t: Vec<Value> = w
        .templates
        .iter()
        .map(|t| json!({"template": t.template, "group": t.group, "client": t.client, "server": t.server}))
        .collect();
    json!({"kind": w.kind, "message": w.message, "templates": t})
}

/// The JSON document of `--json`.
pub fn to_json(p: &Profile, info: &RunInfo, r: &RunResult, checks: &[Check]) -> Value {
    let rt = rates(r);
    let groups: Vec<Value> = (0..r.client.app.tg.len().max(r.server.app.tg.len()))
        .map(|g| {
            let c = r.client.app.tg.get(g).cloned().unwrap_or_default();
            let s = r.server.app.tg.get(g).cloned().unwrap_or_default();
            let mut v = json!({
                "name": group_name(p, g),
                "client": counters_json(&c.c),
                "server": counters_json(&s.c),
                "cps": rate(c.c.started, r.gen_ns.max(1)),
                "l7_gbps": rate((c.c.l7_tx_acked + s.c.l7_tx_acked) * 8, r.elapsed_ns) / 1e9,
                "latency_us": {
                    "connect": lat_json(&c.lat.connect),
                    "first_byte": lat_json(&c.lat.first_byte),
                    "last_byte": lat_json(&c.lat.last_byte),
                },
            });
            // HTTP groups only (other profiles' documents are unchanged).
            if c.http.requests > 0 {
                v["http"] = http_json(&c.http);
                for (name, h) in c.lat.iter_http() {
                    v["latency_us"][name] = lat_json(h);
                }
            }
            v
        })
        .collect();
    let errors = error_count(r);
    let clean = errors == 0 && checks.iter().all(|c| c.ok);
    let mut all = crate::stats::Latency::default();
    for g in &r.client.app.tg {
        all.merge(&g.lat);
    }
    let target: f64 = p.templates.iter().map(|t| t.cps).sum::<f64>() * info.mult;
    json!({
        "profile": info.profile_path,
        "mode": info.mode,
        "cores": info.cores,
        "duration_sec": info.duration_s,
        "mult": info.mult,
        "stall_sec": secs(r.stall_ns),
        "elapsed_sec": secs(r.elapsed_ns),
        "generation_sec": secs(r.gen_ns),
        "cpu_sec": secs(r.cpu_ns),
        "cpu_us_per_flow": rt.cpu_us_per_flow,
        "busy_cpu_sec": secs(r.busy_cpu_ns),
        "sleep_cpu_sec": secs(r.sleep_cpu_ns),
        "busy_cpu_us_per_flow": rt.busy_cpu_us_per_flow,
        "rates": {"cps": rt.cps, "l7_gbps": rt.l7_gbps, "wire_gbps": rt.wire_gbps, "mpps": rt.mpps},
        "target_cps": target,
        "latency_us": {
            "connect": lat_json(&all.connect),
            "first_byte": lat_json(&all.first_byte),
            "last_byte": lat_json(&all.last_byte),
        },
        "retransmits": r.client.tcp.tcps_sndrexmitpack + r.server.tcp.tcps_sndrexmitpack,
        "groups": groups,
        "client": side_json(&r.client),
        "server": side_json(&r.server),
        "errors": errors,
        "invariants": checks.iter().map(|c| json!({"name": c.name, "ok": c.ok, "detail": c.detail})).collect::<Vec<_>>(),
        "warnings": warnings(p, r).iter().map(warning_json).collect::<Vec<_>>(),
        "clean": clean,
    })
}

/// One progress line: elapsed, CPS over the last interval, active flows, Gbit/s, errors.
pub fn progress_line(
    elapsed_s: f64,
    cps: f64,
    active: u64,
    gbps: f64,
    done: u64,
    errors: u64,
) -> String {
    format!(
        "[{elapsed_s:6.1}s] {cps:>10.0} CPS  {active:>8} active  {gbps:>7.3} Gbit/s  {done:>10} done  {errors} errors"
    )
}

/// The summary's line about the measurement window (`--warmup`/`--cooldown`), from the
/// `window` object of the JSON results.
pub fn window_line(w: &Value) -> String {
    let f = |k: &str| w[k].as_f64().unwrap_or(0.0);
    let mut o = format!(
        "measurement window {:.1}-{:.1} s ({:.1} s): {:.1} CPS, wire {:.3} Gbit/s, {:.3} Mpps, {} errors, {} retransmitted segments",
        f("from"),
        f("to"),
        f("seconds"),
        f("cps"),
        f("wire_gbps"),
        f("mpps"),
        w["errors"].as_u64().unwrap_or(0),
        w["retransmits"].as_u64().unwrap_or(0),
    );
    let fb = &w["latency_us"]["first_byte"];
    if fb["count"].as_u64().unwrap_or(0) > 0 {
        let _ = write!(
            o,
            "; first byte p50 {} us, p99 {} us, max {} us",
            fb["p50"], fb["p99"], fb["max"]
        );
    }
    o
}
