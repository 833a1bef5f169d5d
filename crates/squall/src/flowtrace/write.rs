//! Writing a run's trace: `DIR/flows.pcap` (the traced flows' frames, both directions,
//! in time order) and `DIR/timeline.jsonl` (one JSON object per traced flow and side:
//! its 5-tuple, template and TCP events). The format is documented in docs/OPERATING.md
//! ("Flow tracing").

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use squall_astf::Profile;
use squall_port::pcap::PcapWriter;
use squall_tcp::{CloseReason, State, TraceKind};

use super::{FlowTimeline, TraceData, TraceSide};

/// The files a trace was written to, and what they hold.
#[derive(Clone, Debug)]
pub struct TraceFiles {
    pub pcap: PathBuf,
    pub timeline: PathBuf,
    pub flows: usize,
    pub frames: usize,
    pub events: usize,
}

/// The state's name as RFC 9293 writes it.
pub fn state_name(s: State) -> &'static str {
    match s {
        State::Closed => "CLOSED",
        State::SynSent => "SYN_SENT",
        State::SynReceived => "SYN_RECEIVED",
        State::Established => "ESTABLISHED",
        State::FinWait1 => "FIN_WAIT_1",
        State::FinWait2 => "FIN_WAIT_2",
        State::CloseWait => "CLOSE_WAIT",
        State::Closing => "CLOSING",
        State::LastAck => "LAST_ACK",
        State::TimeWait => "TIME_WAIT",
    }
}

fn reason_name(r: CloseReason) -> &'static str {
    match r {
        CloseReason::Normal => "normal",
        CloseReason::Reset => "reset",
        CloseReason::Refused => "refused",
        CloseReason::Unreachable => "unreachable",
        CloseReason::Timeout => "timeout",
        CloseReason::Aborted => "aborted",
    }
}

/// One event as JSON: `t_ns` (the pcap's clock), `dt_us` since the flow's first event,
/// `ev` and its fields.
fn event_json(e: &squall_tcp::TraceEvent, start_ns: u64, iss: u32) -> Value {
    let mut v = match e.kind {
        TraceKind::Open => json!({"ev": "open"}),
        TraceKind::State(s) => json!({"ev": "state", "state": state_name(s)}),
        TraceKind::Rtt {
            sample_us,
            srtt_us,
            rttvar_us,
            rto_us,
        } => {
            json!({"ev": "rtt", "sample_us": sample_us, "srtt_us": srtt_us, "rttvar_us": rttvar_us, "rto_us": rto_us})
        }
        TraceKind::Cwnd { cwnd, ssthresh } => {
            json!({"ev": "cwnd", "cwnd": cwnd, "ssthresh": ssthresh})
        }
        TraceKind::Timeout { backoff, rto_us } => {
            json!({"ev": "timeout", "backoff": backoff, "rto_us": rto_us})
        }
        TraceKind::Recovery { sack } => json!({"ev": "recovery", "sack": sack}),
        TraceKind::Retransmit {
            seq,
            len,
            syn,
            cause,
        } => json!({
            "ev": "retransmit", "seq": seq, "rel_seq": seq.wrapping_sub(iss), "len": len,
            "syn": syn, "cause": cause.name()
        }),
        TraceKind::Window { wnd } => {
            json!({"ev": if wnd == 0 { "zero_window" } else { "window" }, "wnd": wnd})
        }
        TraceKind::WindowProbe => json!({"ev": "window_probe"}),
        TraceKind::RstSent => json!({"ev": "rst_sent"}),
        TraceKind::RstReceived => json!({"ev": "rst_received"}),
        TraceKind::Closed(r) => json!({"ev": "closed", "reason": reason_name(r)}),
    };
    v["t_ns"] = json!(e.t_ns);
    v["dt_us"] = json!(e.t_ns.saturating_sub(start_ns) as f64 / 1e3);
    v
}

/// One flow's line: who, what template (`templates`: the profile's template names), the
/// events and a summary of them.
pub fn timeline_json(f: &FlowTimeline, templates: &[String]) -> Value {
    let k = f.flow.key;
    let (local, remote) = match f.flow.addrs6 {
        Some((l, r)) => (Ipv6Addr::from(l).to_string(), Ipv6Addr::from(r).to_string()),
        None => (
            Ipv4Addr::from(k.local_ip).to_string(),
            Ipv4Addr::from(k.remote_ip).to_string(),
        ),
    };
    let ep = |a: &str, p: u16| json!({"ip": a, "port": p});
    let (client, server) = match f.side {
        TraceSide::Client => (ep(&local, k.local_port), ep(&remote, k.remote_port)),
        TraceSide::Server => (ep(&remote, k.remote_port), ep(&local, k.local_port)),
    };
    let start = f.flow.start_ns;
    let events: Vec<Value> = f
        .events
        .iter()
        .map(|e| event_json(e, start, f.flow.iss))
        .collect();
    let count = |p: fn(&TraceKind) -> bool| f.events.iter().filter(|e| p(&e.kind)).count();
    let last_state = f.events.iter().rev().find_map(|e| match e.kind {
        TraceKind::State(s) => Some(state_name(s)),
        _ => None,
    });
    let closed = f.events.iter().rev().find_map(|e| match e.kind {
        TraceKind::Closed(r) => Some(reason_name(r)),
        _ => None,
    });
    let tpl = f.template.map(usize::from);
    json!({
        "side": match f.side { TraceSide::Client => "client", TraceSide::Server => "server" },
        "worker": f.worker,
        "template": tpl.and_then(|i| templates.get(i)),
        "template_index": tpl,
        "proto": "tcp",
        "client": client,
        "server": server,
        "iss": f.flow.iss,
        "start_ns": start,
        "summary": {
            "events": f.events.len(),
            "retransmits": count(|k| matches!(k, TraceKind::Retransmit { .. })),
            "timeouts": count(|k| matches!(k, TraceKind::Timeout { .. })),
            "recoveries": count(|k| matches!(k, TraceKind::Recovery { .. })),
            "rtt_samples": count(|k| matches!(k, TraceKind::Rtt { .. })),
            "last_state": last_state,
            "closed": closed,
        },
        "events": events,
    })
}

/// The template names a timeline shows.
pub fn template_names(p: &Profile) -> Vec<String> {
    p.templates.iter().map(|t| t.name.clone()).collect()
}

/// Writes `data` into `dir` (created if needed); `templates`: the profile's template
/// names ([`template_names`]; none for `squall serve`).
pub fn write(dir: &Path, data: &TraceData, templates: &[String]) -> Result<TraceFiles, String> {
    std::fs::create_dir_all(dir).map_err(|e| {
        format!(
            "--trace {}: cannot create the directory: {e} (pick a writable path)",
            dir.display()
        )
    })?;
    let mut frames: Vec<&squall_port::pcap::PcapRecord> = data.frames.iter().collect();
    frames.sort_by_key(|r| r.ts_ns);
    let mut w = PcapWriter::new(Vec::new()).map_err(|e| e.to_string())?;
    for r in &frames {
        w.record(r.ts_ns, &r.data);
    }
    let pcap = dir.join("flows.pcap");
    let bytes = w.into_inner().map_err(|e| e.to_string())?;
    std::fs::write(&pcap, bytes).map_err(|e| format!("cannot write {}: {e}", pcap.display()))?;
    let mut flows: Vec<&FlowTimeline> = data.flows.iter().collect();
    flows.sort_by_key(|f| (f.flow.start_ns, f.side == TraceSide::Server));
    let mut text = String::new();
    for f in &flows {
        text.push_str(&timeline_json(f, templates).to_string());
        text.push('\n');
    }
    let timeline = dir.join("timeline.jsonl");
    std::fs::write(&timeline, text)
        .map_err(|e| format!("cannot write {}: {e}", timeline.display()))?;
    Ok(TraceFiles {
        pcap,
        timeline,
        flows: flows.len(),
        frames: frames.len(),
        events: data.flows.iter().map(|f| f.events.len()).sum(),
    })
}
