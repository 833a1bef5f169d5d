//! Programs: each command decoded on its own (every malformed one reported), compiled
//! to instructions, and checked (loops wait, watermarks rise, totals per direction for
//! the templates to compare).

use std::collections::HashMap;

use crate::error::Errors;
use crate::model::*;
use crate::raw::*;

use super::check_name;
use super::http::{HttpBuild, RawRequest};

/// Facts about a program that templates check against.
#[derive(Default, Clone)]
pub(super) struct ProgInfo {
    /// First TCP-only / UDP-only instruction: (command index, op name).
    pub(super) tcp_op: Option<(usize, &'static str)>,
    pub(super) udp_op: Option<(usize, &'static str)>,
    pub(super) connect_at: Option<usize>,
    pub(super) accept_at: Option<usize>,
    /// For programs without jumps: bytes sent, bytes the recvs need, datagrams sent and needed.
    pub(super) totals: Option<Totals>,
}

#[derive(Default, Clone, Copy)]
pub(super) struct Totals {
    pub(super) tx_bytes: u64,
    pub(super) rx_bytes: u64,
    pub(super) tx_msgs: u64,
    pub(super) rx_msgs: u64,
}

pub(super) fn op_name(c: &RawCmd) -> &'static str {
    match c {
        RawCmd::Send { .. } => "send",
        RawCmd::Recv { .. } => "recv",
        RawCmd::Delay { .. } => "delay",
        RawCmd::DelayRand { .. } => "delay_rand",
        RawCmd::Reset {} => "reset",
        RawCmd::WaitForPeerClose {} => "wait_for_peer_close",
        RawCmd::Connect {} => "connect",
        RawCmd::Accept {} => "accept",
        RawCmd::Close {} => "close",
        RawCmd::SetVar { .. } => "set_var",
        RawCmd::JmpNz { .. } => "jmp_nz",
        RawCmd::SetLabel { .. } => "set_label",
        RawCmd::SetTickVar { .. } => "set_tick_var",
        RawCmd::JmpDp { .. } => "jmp_dp",
        RawCmd::SendMsg { .. } => "send_msg",
        RawCmd::RecvMsg { .. } => "recv_msg",
        RawCmd::SetKeepaliveMsg { .. } => "set_keepalive_msg",
        RawCmd::SetSendBlocking { .. } => "set_send_blocking",
        RawCmd::HttpRequest { .. } => "http_request",
        RawCmd::HttpWaitResponse {} => "http_wait_response",
    }
}

pub(super) fn is_tcp_only(c: &RawCmd) -> bool {
    matches!(
        c,
        RawCmd::Send { .. }
            | RawCmd::Recv { .. }
            | RawCmd::Reset {}
            | RawCmd::WaitForPeerClose {}
            | RawCmd::Connect {}
            | RawCmd::Accept {}
            | RawCmd::SetSendBlocking { .. }
            | RawCmd::HttpRequest { .. }
            | RawCmd::HttpWaitResponse {}
    )
}

pub(super) fn is_udp_only(c: &RawCmd) -> bool {
    matches!(
        c,
        RawCmd::SendMsg { .. } | RawCmd::RecvMsg { .. } | RawCmd::SetKeepaliveMsg { .. }
    )
}

/// Decodes one command, turning serde's messages into the profile's words.
pub(super) fn decode_cmd(v: &serde_json::Value, p: &str, errs: &mut Errors) -> Option<RawCmd> {
    let Some(obj) = v.as_object() else {
        errs.push(p, "a command must be an object with an \"op\" field");
        return None;
    };
    let op = match obj.get("op") {
        None => {
            errs.push(p, "missing field `op` (the instruction name)");
            return None;
        }
        Some(serde_json::Value::String(s)) => s.as_str(),
        Some(other) => {
            errs.push(
                format!("{p}.op"),
                format!("expected an instruction name, found {other}"),
            );
            return None;
        }
    };
    if !OPS.contains(&op) {
        errs.push(
            p,
            format!("unknown instruction {op:?} (known: {})", OPS.join(", ")),
        );
        return None;
    }
    let mut fields = obj.clone();
    fields.remove("op");
    let mut tagged = serde_json::Map::new();
    tagged.insert(op.to_string(), serde_json::Value::Object(fields));
    match serde_path_to_error::deserialize::<_, RawCmd>(serde_json::Value::Object(tagged)) {
        Ok(c) => Some(c),
        Err(e) => {
            // The path starts with the variant name; drop it.
            let inner = e.path().to_string();
            let inner = inner.split_once('.').map(|(_, rest)| rest).unwrap_or("");
            let path = if inner.is_empty() {
                p.to_string()
            } else {
                format!("{p}.{inner}")
            };
            errs.push(path, e.into_inner().to_string());
            None
        }
    }
}

pub(super) fn u32_field(v: u64, lo: u64, hi: u64, path: String, errs: &mut Errors) -> u32 {
    if !(lo..=hi).contains(&v) {
        errs.push(path, format!("{v} out of range {lo}..={hi}"));
        return 0;
    }
    v as u32
}

pub(super) fn var_id(id: u64, path: String, errs: &mut Errors) -> u8 {
    if id as usize >= MAX_VARS {
        errs.push(path, format!("{id} out of range 0..={}", MAX_VARS - 1));
        return 0;
    }
    id as u8
}

pub(super) struct ProgCtx<'a> {
    pub(super) bufs: &'a HashMap<&'a str, usize>,
    pub(super) buf_len: &'a [usize],
}

pub(super) fn compile_program(
    rp: &RawProgram,
    p: &str,
    ctx: &ProgCtx,
    http: &mut HttpBuild,
    errs: &mut Errors,
) -> (Option<Program>, ProgInfo) {
    let mut info = ProgInfo::default();
    let start_errs = errs.list.len();
    check_name(&rp.name, &format!("{p}.name"), errs);
    if rp.commands.len() > MAX_COMMANDS {
        errs.push(
            format!("{p}.commands"),
            format!("{} commands, more than {MAX_COMMANDS}", rp.commands.len()),
        );
        return (None, info);
    }
    let cmds: Vec<Option<RawCmd>> = rp
        .commands
        .iter()
        .enumerate()
        .map(|(ci, v)| decode_cmd(v, &format!("{p}.commands[{ci}]"), errs))
        .collect();
    // Program counter of each command index (labels take no slot); pc_of[len] = end.
    let mut pc_of = Vec::with_capacity(cmds.len() + 1);
    let mut labels: HashMap<&str, usize> = HashMap::new();
    let mut npc = 0usize;
    for (ci, c) in cmds.iter().enumerate() {
        pc_of.push(npc);
        match c {
            Some(RawCmd::SetLabel { label }) => {
                let lp = format!("{p}.commands[{ci}].label");
                check_name(label, &lp, errs);
                if let Some(prev) = labels.insert(label.as_str(), ci) {
                    errs.push(
                        lp,
                        format!("duplicate label {label:?} (also commands[{prev}])"),
                    );
                }
            }
            _ => npc += 1,
        }
    }
    pc_of.push(npc);
    let mut insns = Vec::with_capacity(npc);
    let mut src = Vec::with_capacity(npc); // command index of each insn
    let mut has_jumps = false;
    let mut has_http = false;
    for (ci, c) in cmds.iter().enumerate() {
        let Some(c) = c else { continue };
        let cp = format!("{p}.commands[{ci}]");
        if is_tcp_only(c) && info.tcp_op.is_none() {
            info.tcp_op = Some((ci, op_name(c)));
        }
        if is_udp_only(c) && info.udp_op.is_none() {
            info.udp_op = Some((ci, op_name(c)));
        }
        let buf = |name: &str, errs: &mut Errors| -> Option<usize> {
            let b = ctx.bufs.get(name).copied();
            if b.is_none() {
                errs.push(format!("{cp}.buf"), format!("unknown buffer {name:?}"));
            }
            b
        };
        let target = |label: &Option<String>, offset: Option<i64>, errs: &mut Errors| -> u16 {
            match (label, offset) {
                (Some(_), Some(_)) => errs.push(cp.clone(), "give label or offset, not both"),
                (None, None) => errs.push(cp.clone(), "a jump needs label or offset"),
                (Some(l), None) => match labels.get(l.as_str()) {
                    Some(&tci) => return pc_of[tci] as u16,
                    None => errs.push(format!("{cp}.label"), format!("undefined label {l:?}")),
                },
                (None, Some(off)) => {
                    let t = (ci as i64).saturating_add(off);
                    if (0..=cmds.len() as i64).contains(&t) {
                        return pc_of[t as usize] as u16;
                    }
                    errs.push(
                        format!("{cp}.offset"),
                        format!(
                            "{off} jumps outside the program (to command {t} of 0..={})",
                            cmds.len()
                        ),
                    );
                }
            }
            0
        };
        let insn = match c {
            RawCmd::SetLabel { .. } => continue,
            RawCmd::Send {
                buf: name,
                blocking,
            } => {
                let b = buf(name, errs).unwrap_or(0);
                let mode = match blocking {
                    None => SendMode::Current,
                    Some(true) => SendMode::Blocking,
                    Some(false) => SendMode::NonBlocking,
                };
                Insn::Send {
                    buf: BufIdx(b as u32),
                    mode,
                }
            }
            RawCmd::Recv { bytes, clear } => Insn::Recv {
                bytes: u32_field(*bytes, 1, u32::MAX.into(), format!("{cp}.bytes"), errs),
                clear: *clear,
            },
            RawCmd::Delay { usec } => Insn::Delay {
                usec: u32_field(*usec, 0, u32::MAX.into(), format!("{cp}.usec"), errs),
            },
            RawCmd::DelayRand { min_usec, max_usec } => {
                let lo = u32_field(
                    *min_usec,
                    0,
                    u32::MAX.into(),
                    format!("{cp}.min_usec"),
                    errs,
                );
                let hi = u32_field(
                    *max_usec,
                    0,
                    u32::MAX.into(),
                    format!("{cp}.max_usec"),
                    errs,
                );
                if min_usec > max_usec {
                    errs.push(
                        cp.clone(),
                        format!("min_usec {min_usec} > max_usec {max_usec}"),
                    );
                }
                Insn::DelayRand {
                    min_usec: lo,
                    max_usec: hi,
                }
            }
            RawCmd::Reset {} => Insn::Reset,
            RawCmd::WaitForPeerClose {} => Insn::WaitForPeerClose,
            RawCmd::Connect {} => {
                info.connect_at.get_or_insert(ci);
                Insn::Connect
            }
            RawCmd::Accept {} => {
                info.accept_at.get_or_insert(ci);
                Insn::Accept
            }
            RawCmd::Close {} => Insn::Close,
            RawCmd::SetVar { id, val } => Insn::SetVar {
                id: var_id(*id, format!("{cp}.id"), errs),
                val: u32_field(*val, 0, u32::MAX.into(), format!("{cp}.val"), errs),
            },
            RawCmd::JmpNz { id, label, offset } => {
                has_jumps = true;
                Insn::JmpNz {
                    id: var_id(*id, format!("{cp}.id"), errs),
                    target: target(label, *offset, errs),
                }
            }
            RawCmd::SetTickVar { id } => Insn::SetTickVar {
                id: var_id(*id, format!("{cp}.id"), errs),
            },
            RawCmd::JmpDp {
                id,
                label,
                offset,
                duration_usec,
            } => {
                has_jumps = true;
                Insn::JmpDp {
                    id: var_id(*id, format!("{cp}.id"), errs),
                    target: target(label, *offset, errs),
                    duration_usec: u32_field(
                        *duration_usec,
                        1,
                        i32::MAX as u64,
                        format!("{cp}.duration_usec"),
                        errs,
                    ),
                }
            }
            RawCmd::SendMsg { buf: name } => {
                let b = buf(name, errs);
                if let Some(b) = b {
                    if ctx.buf_len[b] > MAX_DATAGRAM {
                        errs.push(
                            format!("{cp}.buf"),
                            format!("buffer {name:?} has {} bytes, more than a UDP datagram carries ({MAX_DATAGRAM})", ctx.buf_len[b]),
                        );
                    }
                }
                Insn::SendMsg {
                    buf: BufIdx(b.unwrap_or(0) as u32),
                }
            }
            RawCmd::RecvMsg { count, clear } => Insn::RecvMsg {
                count: u32_field(*count, 1, u32::MAX.into(), format!("{cp}.count"), errs),
                clear: *clear,
            },
            RawCmd::SetKeepaliveMsg { msec, rx_mode } => Insn::SetKeepaliveMsg {
                msec: u32_field(*msec, 1, 3_600_000, format!("{cp}.msec"), errs),
                rx_mode: *rx_mode,
            },
            RawCmd::SetSendBlocking { block } => Insn::SetSendBlocking { block: *block },
            RawCmd::HttpRequest {
                method,
                url,
                urls,
                pick,
                weights,
                headers,
                body,
                version,
            } => {
                has_http = true;
                let body = body.as_deref().and_then(|name| {
                    let b = ctx.bufs.get(name).copied();
                    if b.is_none() {
                        errs.push(format!("{cp}.body"), format!("unknown buffer {name:?}"));
                    }
                    b.map(|b| (b, ctx.buf_len[b]))
                });
                let raw = RawRequest {
                    method: method.as_deref(),
                    url: url.as_deref(),
                    urls: urls.as_deref(),
                    pick: *pick,
                    weights: weights.as_deref(),
                    headers,
                    body,
                    version: version.as_deref(),
                };
                Insn::HttpRequest {
                    req: http.request(&raw, &cp, errs),
                }
            }
            RawCmd::HttpWaitResponse {} => {
                has_http = true;
                Insn::HttpWaitResponse
            }
        };
        insns.push(insn);
        src.push(ci);
    }
    if let (Some((tci, top)), Some((uci, uop))) = (info.tcp_op, info.udp_op) {
        errs.push(
            format!("{p}.commands[{}]", tci.max(uci)),
            format!("mixes TCP instruction {top:?} (commands[{tci}]) and UDP instruction {uop:?} (commands[{uci}])"),
        );
    }
    if errs.list.len() > start_errs {
        return (None, info);
    }
    check_flow(&insns, &src, p, errs);
    check_watermarks(&insns, &src, p, errs);
    // HTTP requests differ per URL and responses per status: no static totals.
    if !has_jumps && !has_http {
        info.totals = Some(totals(&insns, ctx));
    }
    if errs.list.len() > start_errs {
        return (None, info);
    }
    (
        Some(Program {
            name: rp.name.clone(),
            insns: insns.into_boxed_slice(),
            has_jumps,
            has_http,
        }),
        info,
    )
}

/// Loops must wait; a recv inside a loop must clear its watermark.
pub(super) fn check_flow(insns: &[Insn], src: &[usize], p: &str, errs: &mut Errors) {
    for (pc, insn) in insns.iter().enumerate() {
        let target = match insn {
            Insn::JmpNz { target, .. } | Insn::JmpDp { target, .. } => *target as usize,
            _ => continue,
        };
        if target > pc {
            continue;
        }
        let body = &insns[target..=pc];
        let cp = format!("{p}.commands[{}]", src[pc]);
        // A counted loop of datagrams is a burst (TRex sends it so): each round sends,
        // and the count ends it. A loop on a duration must wait.
        let counted = matches!(insn, Insn::JmpNz { .. });
        let progresses = |i: &Insn| i.may_wait() || (counted && matches!(i, Insn::SendMsg { .. }));
        if !body.iter().any(progresses) {
            errs.push(
                cp.clone(),
                format!(
                    "loop back to commands[{}] never waits (put a send, recv or delay in it)",
                    src[target]
                ),
            );
        }
        let last_recv = body.iter().rev().find_map(|i| match i {
            Insn::Recv { clear, .. } => Some(("recv", *clear)),
            _ => None,
        });
        let last_msg = body.iter().rev().find_map(|i| match i {
            Insn::RecvMsg { clear, .. } => Some(("recv_msg", *clear)),
            _ => None,
        });
        for (op, clear) in [last_recv, last_msg].into_iter().flatten() {
            if !clear {
                errs.push(
                    cp.clone(),
                    format!("the loop's last {op} has no clear: its cumulative watermark is already met in the second round"),
                );
            }
        }
    }
}

/// Cumulative watermarks must rise between clears.
pub(super) fn check_watermarks(insns: &[Insn], src: &[usize], p: &str, errs: &mut Errors) {
    let (mut last_b, mut last_m) = (0u32, 0u32);
    for (pc, insn) in insns.iter().enumerate() {
        let (last, v, clear, field, op) = match insn {
            Insn::Recv { bytes, clear } => (&mut last_b, *bytes, *clear, "bytes", "recv"),
            Insn::RecvMsg { count, clear } => (&mut last_m, *count, *clear, "count", "recv_msg"),
            _ => continue,
        };
        if v <= *last {
            errs.push(
                format!("{p}.commands[{}].{field}", src[pc]),
                format!(
                    "watermark {v} is not above the previous {op}'s {} ({op} watermarks are cumulative; set clear on the previous one to count from zero)",
                    *last
                ),
            );
        }
        *last = if clear { 0 } else { v };
    }
}

/// Bytes and datagrams sent and needed by a program without jumps, up to its end.
pub(super) fn totals(insns: &[Insn], ctx: &ProgCtx) -> Totals {
    let mut t = Totals::default();
    let (mut cur_b, mut cur_m) = (0u64, 0u64);
    for insn in insns {
        match *insn {
            Insn::Send { buf, .. } => t.tx_bytes += ctx.buf_len[buf.0 as usize] as u64,
            Insn::SendMsg { .. } => t.tx_msgs += 1,
            Insn::Recv { bytes, clear } => {
                if clear {
                    t.rx_bytes += u64::from(bytes);
                    cur_b = 0;
                } else {
                    cur_b = u64::from(bytes);
                }
            }
            Insn::RecvMsg { count, clear } => {
                if clear {
                    t.rx_msgs += u64::from(count);
                    cur_m = 0;
                } else {
                    cur_m = u64::from(count);
                }
            }
            Insn::Reset | Insn::Close => break,
            _ => {}
        }
    }
    t.rx_bytes += cur_b;
    t.rx_msgs += cur_m;
    t
}
