//! Loading: JSON text -> raw serde mirror -> semantic validation -> compiled [`Profile`].
//! Type errors stop at the first one (with its path); semantic errors are all collected.
//! Each command is decoded on its own, so every malformed command is reported.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;

use crate::error::{Errors, LoadError, ProfileError};
use crate::model::*;
use crate::raw::*;
use crate::tunables::{apply_ip, apply_side, apply_tcp, scheduler};

/// The IR version this build reads.
pub const IR_VERSION: u64 = 1;

/// Loads and validates a profile file.
pub fn load_profile_file(path: &Path) -> Result<Profile, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|e| LoadError::Io {
        file: path.display().to_string(),
        message: e.to_string(),
    })?;
    load_profile_str(&text)
}

/// Loads and validates a profile from JSON text.
pub fn load_profile_str(text: &str) -> Result<Profile, LoadError> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| LoadError::Syntax {
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    load_profile_value(value)
}

/// Loads and validates a profile from a parsed JSON value.
pub fn load_profile_value(value: serde_json::Value) -> Result<Profile, LoadError> {
    let one = |p: &str, m: String| LoadError::Invalid(vec![ProfileError::new(p, m)]);
    let Some(obj) = value.as_object() else {
        return Err(one(".", "a profile must be a JSON object".into()));
    };
    if let Some(v) = obj.get("version") {
        if v.as_u64() != Some(IR_VERSION) {
            return Err(one(
                "version",
                format!("unsupported IR version {v} (this build reads version {IR_VERSION})"),
            ));
        }
    }
    let raw: RawProfile = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        one(&path, e.into_inner().to_string())
    })?;
    compile(&raw)
}

/// Is `s` a valid name (1-64 of `A-Z a-z 0-9 _ . : / -`)?
fn valid_name(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.:/-".contains(&b))
}

fn check_name(s: &str, path: &str, errs: &mut Errors) {
    if !valid_name(s) {
        errs.push(
            path,
            format!("invalid name {s:?} (1-64 characters from A-Z a-z 0-9 _ . : / -)"),
        );
    }
}

/// Registers `name` at index `i`; reports a duplicate.
fn register<'a>(
    map: &mut HashMap<&'a str, usize>,
    name: &'a str,
    i: usize,
    what: &str,
    list: &str,
    errs: &mut Errors,
) {
    if let Some(&j) = map.get(name) {
        errs.push(
            format!("{list}[{i}].name"),
            format!("duplicate {what} name {name:?} (also {list}[{j}])"),
        );
    } else {
        map.insert(name, i);
    }
}

fn parse_ip(s: &str, path: &str, errs: &mut Errors) -> Option<u32> {
    match s.parse::<Ipv4Addr>() {
        Ok(a) => Some(u32::from(a)),
        Err(_) => {
            errs.push(path, format!("invalid IPv4 address {s:?}"));
            None
        }
    }
}

fn decode_bytes(
    text: &Option<String>,
    b64: &Option<String>,
    path: &str,
    errs: &mut Errors,
) -> Option<Vec<u8>> {
    match (text, b64) {
        (Some(_), Some(_)) => {
            errs.push(path, "give text or base64, not both");
            None
        }
        (Some(t), None) => Some(t.as_bytes().to_vec()),
        (None, Some(b)) => match base64::engine::general_purpose::STANDARD.decode(b) {
            Ok(v) => Some(v),
            Err(e) => {
                errs.push(format!("{path}.base64"), format!("invalid base64: {e}"));
                None
            }
        },
        (None, None) => Some(Vec::new()),
    }
}

fn compile_buffer(b: &RawBuffer, p: &str, errs: &mut Errors) -> Option<Vec<u8>> {
    check_name(&b.name, &format!("{p}.name"), errs);
    if b.text.is_none() && b.base64.is_none() && b.size.is_none() {
        errs.push(p, "needs text, base64 or size");
        return None;
    }
    let lead = decode_bytes(&b.text, &b.base64, p, errs)?;
    let Some(size) = b.size else {
        if b.fill.is_some() {
            errs.push(format!("{p}.fill"), "fill needs size");
            return None;
        }
        if lead.is_empty() {
            errs.push(p, "empty buffer");
            return None;
        }
        return Some(lead);
    };
    if !(1..=MAX_BUFFER).contains(&size) {
        errs.push(
            format!("{p}.size"),
            format!("{size} out of range 1..={MAX_BUFFER}"),
        );
        return None;
    }
    if (size as usize) < lead.len() {
        errs.push(
            format!("{p}.size"),
            format!("{size} is smaller than the {} leading bytes", lead.len()),
        );
        return None;
    }
    let fill = match &b.fill {
        None => b"*".to_vec(),
        Some(f) => {
            let fp = format!("{p}.fill");
            if f.text.is_none() && f.base64.is_none() {
                errs.push(fp, "needs text or base64");
                return None;
            }
            let v = decode_bytes(&f.text, &f.base64, &fp, errs)?;
            if v.is_empty() {
                errs.push(fp, "empty fill pattern");
                return None;
            }
            v
        }
    };
    let mut data = lead;
    let size = size as usize;
    data.reserve_exact(size - data.len());
    let start = data.len();
    data.extend_from_slice(&fill[..fill.len().min(size - start)]);
    // Double the filled region: it stays a repetition of the pattern from `start`.
    while data.len() < size {
        let n = (data.len() - start).min(size - data.len());
        data.extend_from_within(start..start + n);
    }
    Some(data)
}

fn compile_pool(d: &RawDist, p: &str, errs: &mut Errors) -> Option<IpPool> {
    let first = parse_ip(&d.range[0], &format!("{p}.range[0]"), errs);
    let last = parse_ip(&d.range[1], &format!("{p}.range[1]"), errs);
    let (first, last) = (first?, last?);
    if first > last {
        errs.push(
            format!("{p}.range"),
            format!("empty pool (first {} > last {})", d.range[0], d.range[1]),
        );
        return None;
    }
    let len = u64::from(last - first) + 1;
    if len > MAX_POOL {
        errs.push(
            format!("{p}.range"),
            format!("pool of {len} addresses is larger than {MAX_POOL}"),
        );
        return None;
    }
    Some(IpPool {
        first,
        last,
        distribution: match d.distribution.unwrap_or(RawDistribution::Seq) {
            RawDistribution::Seq => Distribution::Seq,
            RawDistribution::Rand => Distribution::Rand,
        },
        per_core: match d.per_core_distribution.unwrap_or(RawPerCore::Default) {
            RawPerCore::Default => PerCore::Interleaved,
            RawPerCore::Seq => PerCore::Contiguous,
        },
    })
}

/// Facts about a program that templates check against.
#[derive(Default, Clone)]
struct ProgInfo {
    /// First TCP-only / UDP-only instruction: (command index, op name).
    tcp_op: Option<(usize, &'static str)>,
    udp_op: Option<(usize, &'static str)>,
    connect_at: Option<usize>,
    accept_at: Option<usize>,
    /// For programs without jumps: bytes sent, bytes the recvs need, datagrams sent and needed.
    totals: Option<Totals>,
}

#[derive(Default, Clone, Copy)]
struct Totals {
    tx_bytes: u64,
    rx_bytes: u64,
    tx_msgs: u64,
    rx_msgs: u64,
}

fn op_name(c: &RawCmd) -> &'static str {
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
    }
}

fn is_tcp_only(c: &RawCmd) -> bool {
    matches!(
        c,
        RawCmd::Send { .. }
            | RawCmd::Recv { .. }
            | RawCmd::Reset {}
            | RawCmd::WaitForPeerClose {}
            | RawCmd::Connect {}
            | RawCmd::Accept {}
            | RawCmd::SetSendBlocking { .. }
    )
}

fn is_udp_only(c: &RawCmd) -> bool {
    matches!(
        c,
        RawCmd::SendMsg { .. } | RawCmd::RecvMsg { .. } | RawCmd::SetKeepaliveMsg { .. }
    )
}

/// Decodes one command, turning serde's messages into the profile's words.
fn decode_cmd(v: &serde_json::Value, p: &str, errs: &mut Errors) -> Option<RawCmd> {
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

fn u32_field(v: u64, lo: u64, hi: u64, path: String, errs: &mut Errors) -> u32 {
    if !(lo..=hi).contains(&v) {
        errs.push(path, format!("{v} out of range {lo}..={hi}"));
        return 0;
    }
    v as u32
}

fn var_id(id: u64, path: String, errs: &mut Errors) -> u8 {
    if id as usize >= MAX_VARS {
        errs.push(path, format!("{id} out of range 0..={}", MAX_VARS - 1));
        return 0;
    }
    id as u8
}

struct ProgCtx<'a> {
    bufs: &'a HashMap<&'a str, usize>,
    buf_len: &'a [usize],
}

fn compile_program(
    rp: &RawProgram,
    p: &str,
    ctx: &ProgCtx,
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
                    let t = ci as i64 + off;
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
    if !has_jumps {
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
        }),
        info,
    )
}

/// Loops must wait; a recv inside a loop must clear its watermark.
fn check_flow(insns: &[Insn], src: &[usize], p: &str, errs: &mut Errors) {
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
        if !body.iter().any(Insn::may_wait) {
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
fn check_watermarks(insns: &[Insn], src: &[usize], p: &str, errs: &mut Errors) {
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
fn totals(insns: &[Insn], ctx: &ProgCtx) -> Totals {
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

fn compile(raw: &RawProfile) -> Result<Profile, LoadError> {
    let mut errs = Errors::default();
    if raw.version != IR_VERSION {
        errs.push(
            "version",
            format!(
                "unsupported IR version {} (this build reads version {IR_VERSION})",
                raw.version
            ),
        );
    }

    // Buffers.
    let mut buf_names: HashMap<&str, usize> = HashMap::new();
    let mut buffers = Vec::with_capacity(raw.buffers.len());
    let mut buf_len = Vec::with_capacity(raw.buffers.len());
    // Check the declared total before building anything, so a hostile profile cannot make
    // the loader allocate more than the cap.
    let declared: u64 = raw
        .buffers
        .iter()
        .map(|b| {
            let lead = b.text.as_ref().map_or(0, |t| t.len())
                + b.base64.as_ref().map_or(0, |t| t.len() / 4 * 3);
            b.size.unwrap_or(0).max(lead as u64)
        })
        .sum();
    let over_cap = declared > MAX_BUFFERS_TOTAL;
    if over_cap {
        errs.push(
            "buffers",
            format!("{declared} bytes in all, more than {MAX_BUFFERS_TOTAL}"),
        );
    }
    for (i, b) in raw.buffers.iter().enumerate() {
        register(&mut buf_names, &b.name, i, "buffer", "buffers", &mut errs);
        let data = if over_cap {
            Vec::new()
        } else {
            compile_buffer(b, &format!("buffers[{i}]"), &mut errs).unwrap_or_default()
        };
        buf_len.push(data.len());
        buffers.push(Buffer {
            name: b.name.clone(),
            data: Arc::from(data),
        });
    }
    if raw.buffers.len() > u32::MAX as usize {
        errs.push("buffers", "too many buffers");
    }
    let total: u64 = buf_len.iter().map(|&l| l as u64).sum();
    if total > MAX_BUFFERS_TOTAL {
        errs.push(
            "buffers",
            format!("{total} bytes in all, more than {MAX_BUFFERS_TOTAL}"),
        );
    }

    // IP generators.
    let mut gen_names: HashMap<&str, usize> = HashMap::new();
    let mut ip_gens = Vec::new();
    if raw.ip_gens.is_empty() {
        errs.push("ip_gens", "at least one ip_gen is required");
    }
    if raw.ip_gens.len() > u16::MAX as usize {
        errs.push(
            "ip_gens",
            format!("{} generators, more than {}", raw.ip_gens.len(), u16::MAX),
        );
    }
    for (i, g) in raw.ip_gens.iter().enumerate() {
        let p = format!("ip_gens[{i}]");
        check_name(&g.name, &format!("{p}.name"), &mut errs);
        register(&mut gen_names, &g.name, i, "ip_gen", "ip_gens", &mut errs);
        let clients = compile_pool(&g.clients, &format!("{p}.clients"), &mut errs);
        let servers = compile_pool(&g.servers, &format!("{p}.servers"), &mut errs);
        let off = g.ip_offset.as_deref().map_or(Some(0x0100_0000), |s| {
            parse_ip(s, &format!("{p}.ip_offset"), &mut errs)
        });
        let off_s = match g.ip_offset_server.as_deref() {
            Some(s) => parse_ip(s, &format!("{p}.ip_offset_server"), &mut errs),
            None => off,
        };
        if let (Some(clients), Some(servers), Some(off), Some(off_s)) =
            (clients, servers, off, off_s)
        {
            ip_gens.push((
                i,
                IpGen {
                    name: g.name.clone(),
                    clients,
                    servers,
                    ip_offset: off,
                    ip_offset_server: off_s,
                },
            ));
        }
    }
    for (a, (i, gi)) in ip_gens.iter().enumerate() {
        for (j, gj) in ip_gens.iter().skip(a + 1) {
            if gi.clients.first <= gj.clients.last && gj.clients.first <= gi.clients.last {
                errs.push(
                    format!("ip_gens[{j}].clients.range"),
                    format!("overlaps the client pool of ip_gens[{i}]"),
                );
            }
        }
    }
    let ip_gens: Vec<IpGen> = ip_gens.into_iter().map(|(_, g)| g).collect();

    // Programs.
    if raw.programs.is_empty() {
        errs.push("programs", "at least one program is required");
    }
    if raw.programs.len() > u16::MAX as usize {
        errs.push(
            "programs",
            format!("{} programs, more than {}", raw.programs.len(), u16::MAX),
        );
    }
    let ctx = ProgCtx {
        bufs: &buf_names,
        buf_len: &buf_len,
    };
    let mut prog_names: HashMap<&str, usize> = HashMap::new();
    let mut programs = Vec::with_capacity(raw.programs.len());
    let mut infos = Vec::with_capacity(raw.programs.len());
    for (i, rp) in raw.programs.iter().enumerate() {
        register(
            &mut prog_names,
            &rp.name,
            i,
            "program",
            "programs",
            &mut errs,
        );
        let (prog, info) = compile_program(rp, &format!("programs[{i}]"), &ctx, &mut errs);
        programs.push(prog);
        infos.push(info);
    }

    // Tunables.
    let global = raw.global.as_ref();
    let mut both = SideTunables::default();
    if let Some(g) = global {
        if let Some(t) = &g.tcp {
            apply_tcp(&mut both.tcp, t, "global.tcp", &mut errs);
        }
        if let Some(ip) = &g.ip {
            apply_ip(&mut both.ip, ip, "global.ip", &mut errs);
        }
    }
    let mut client_base = both;
    let mut server_base = both;
    apply_side(
        &mut client_base,
        global.and_then(|g| g.client.as_ref()),
        "global.client",
        &mut errs,
    );
    apply_side(
        &mut server_base,
        global.and_then(|g| g.server.as_ref()),
        "global.server",
        &mut errs,
    );
    let sched = scheduler(global.and_then(|g| g.scheduler.as_ref()), &mut errs);

    // Templates.
    if raw.templates.is_empty() {
        errs.push("templates", "at least one template is required");
    }
    if raw.templates.len() > u16::MAX as usize {
        errs.push(
            "templates",
            format!("{} templates, more than {}", raw.templates.len(), u16::MAX),
        );
    }
    let mut tg_names = vec![String::new()];
    let mut templates = Vec::with_capacity(raw.templates.len());
    for (i, t) in raw.templates.iter().enumerate() {
        let p = format!("templates[{i}]");
        if let Some(n) = &t.name {
            check_name(n, &format!("{p}.name"), &mut errs);
        }
        let tg_id = match &t.tg_name {
            None => 0,
            Some(n) => {
                check_name(n, &format!("{p}.tg_name"), &mut errs);
                match tg_names.iter().position(|x| x == n) {
                    Some(k) => k,
                    None => {
                        tg_names.push(n.clone());
                        tg_names.len() - 1
                    }
                }
            }
        };
        let transport = match t.transport.unwrap_or(RawTransport::Tcp) {
            RawTransport::Tcp => Transport::Tcp,
            RawTransport::Udp => Transport::Udp,
        };
        let lookup_prog = |name: &str, field: &str, errs: &mut Errors| -> Option<usize> {
            let r = prog_names.get(name).copied();
            if r.is_none() {
                errs.push(format!("{p}.{field}"), format!("unknown program {name:?}"));
            }
            r
        };
        let cprog = lookup_prog(&t.client_program, "client_program", &mut errs);
        let sprog = lookup_prog(&t.server_program, "server_program", &mut errs);
        for (field, prog, side) in [
            ("client_program", cprog, "client"),
            ("server_program", sprog, "server"),
        ] {
            let Some(pi) = prog else { continue };
            let info = &infos[pi];
            let pname = &raw.programs[pi].name;
            let wrong = match transport {
                Transport::Tcp => info.udp_op.map(|(ci, op)| (ci, op, "UDP", "tcp")),
                Transport::Udp => info.tcp_op.map(|(ci, op)| (ci, op, "TCP", "udp")),
            };
            if let Some((ci, op, kind, tr)) = wrong {
                errs.push(
                    format!("{p}.{field}"),
                    format!("program {pname:?} uses {kind} instruction {op:?} (programs[{pi}].commands[{ci}]) but the template's transport is {tr}"),
                );
            }
            let side_bad = if side == "client" {
                info.accept_at.map(|c| (c, "accept"))
            } else {
                info.connect_at.map(|c| (c, "connect"))
            };
            if let Some((ci, op)) = side_bad {
                errs.push(
                    format!("{p}.{field}"),
                    format!("program {pname:?} uses {op:?} (programs[{pi}].commands[{ci}]), which a {side} program cannot"),
                );
            }
        }
        if let (Some(c), Some(s)) = (cprog, sprog) {
            if let (Some(ct), Some(st)) = (infos[c].totals, infos[s].totals) {
                let (cn, sn) = (&raw.programs[c].name, &raw.programs[s].name);
                let checks = [
                    (
                        ct.rx_bytes,
                        st.tx_bytes,
                        "client",
                        cn,
                        "server",
                        sn,
                        "bytes",
                    ),
                    (
                        st.rx_bytes,
                        ct.tx_bytes,
                        "server",
                        sn,
                        "client",
                        cn,
                        "bytes",
                    ),
                    (
                        ct.rx_msgs,
                        st.tx_msgs,
                        "client",
                        cn,
                        "server",
                        sn,
                        "datagrams",
                    ),
                    (
                        st.rx_msgs,
                        ct.tx_msgs,
                        "server",
                        sn,
                        "client",
                        cn,
                        "datagrams",
                    ),
                ];
                for (need, sent, a, an, b, bn, unit) in checks {
                    if need > sent {
                        errs.push(
                            p.clone(),
                            format!("{a} program {an:?} waits for {need} {unit} in total but {b} program {bn:?} sends only {sent}: the flow would hang"),
                        );
                    }
                }
            }
        }
        let ip_gen = match &t.ip_gen {
            Some(n) => {
                let g = gen_names.get(n.as_str()).copied();
                if g.is_none() {
                    errs.push(format!("{p}.ip_gen"), format!("unknown ip_gen {n:?}"));
                }
                g
            }
            None if raw.ip_gens.len() == 1 => Some(0),
            None => {
                errs.push(
                    format!("{p}.ip_gen"),
                    format!("required when there are {} ip_gens", raw.ip_gens.len()),
                );
                None
            }
        };
        let port = t.port.unwrap_or(80);
        if !(1..=65535).contains(&port) {
            errs.push(
                format!("{p}.port"),
                format!("{port} out of range 1..=65535"),
            );
        }
        let cps = t.cps.unwrap_or(1.0);
        if !(cps.is_finite() && cps > 0.0 && cps <= 1e8) {
            errs.push(
                format!("{p}.cps"),
                format!("{cps} out of range (0, 100000000]"),
            );
        }
        let limit = t
            .limit
            .map(|l| u32_field(l, 1, u32::MAX.into(), format!("{p}.limit"), &mut errs));
        let mut assoc = Vec::new();
        match &t.assoc {
            None => assoc.push(AssocRule {
                port: port as u16,
                ips: None,
            }),
            Some(rules) => {
                if rules.is_empty() {
                    errs.push(
                        format!("{p}.assoc"),
                        "needs at least one rule (omit it for the default)",
                    );
                }
                for (k, r) in rules.iter().enumerate() {
                    let rp = format!("{p}.assoc[{k}]");
                    let rport = u32_field(r.port, 1, 65535, format!("{rp}.port"), &mut errs) as u16;
                    let ips = match (&r.ip_start, &r.ip_end) {
                        (None, None) => None,
                        (Some(a), Some(b)) => {
                            let a = parse_ip(a, &format!("{rp}.ip_start"), &mut errs);
                            let b = parse_ip(b, &format!("{rp}.ip_end"), &mut errs);
                            match (a, b) {
                                (Some(a), Some(b)) if a <= b => Some((a, b)),
                                (Some(_), Some(_)) => {
                                    errs.push(rp.clone(), "ip_start is above ip_end");
                                    None
                                }
                                _ => None,
                            }
                        }
                        _ => {
                            errs.push(rp.clone(), "give both ip_start and ip_end, or neither");
                            None
                        }
                    };
                    assoc.push(AssocRule { port: rport, ips });
                }
            }
        }
        let mut client = client_base;
        let mut server = server_base;
        apply_side(
            &mut client,
            t.client_tunables.as_ref(),
            &format!("{p}.client_tunables"),
            &mut errs,
        );
        apply_side(
            &mut server,
            t.server_tunables.as_ref(),
            &format!("{p}.server_tunables"),
            &mut errs,
        );
        if let (Some(c), Some(s), Some(g)) = (cprog, sprog, ip_gen) {
            templates.push(Template {
                name: t.name.clone().unwrap_or_else(|| p.clone()),
                tg_id: tg_id as u16,
                transport,
                client_program: ProgIdx(c as u16),
                server_program: ProgIdx(s as u16),
                ip_gen: g as u16,
                port: port as u16,
                cps,
                limit,
                assoc,
                client,
                server,
            });
        }
    }
    // Ambiguous server association.
    for (i, a) in templates.iter().enumerate() {
        for (j, b) in templates.iter().enumerate().skip(i + 1) {
            if a.transport != b.transport {
                continue;
            }
            'rules: for (k, rb) in b.assoc.iter().enumerate() {
                for (m, ra) in a.assoc.iter().enumerate() {
                    if ra.overlaps(rb) {
                        let path = if raw.templates[j].assoc.is_some() {
                            format!("templates[{j}].assoc[{k}]")
                        } else {
                            format!("templates[{j}].port")
                        };
                        errs.push(
                            path,
                            format!("server association for port {} overlaps templates[{i}].assoc[{m}]: a new flow could not choose its template", rb.port),
                        );
                        break 'rules;
                    }
                }
            }
        }
    }

    if !errs.is_empty() {
        return Err(LoadError::Invalid(errs.list));
    }
    Ok(Profile {
        buffers,
        programs: programs
            .into_iter()
            .map(|p| p.expect("no errors, so every program compiled"))
            .collect(),
        ip_gens,
        templates,
        tg_names,
        scheduler: sched,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(valid_name("http_req.v1:a/b-c"));
        assert!(!valid_name(""));
        assert!(!valid_name("a b"));
        assert!(!valid_name(&"x".repeat(65)));
    }

    #[test]
    fn command_errors_keep_the_field_path() {
        let mut errs = Errors::default();
        let v = serde_json::json!({"op": "recv", "bytes": "x"});
        assert!(decode_cmd(&v, "p.c[0]", &mut errs).is_none());
        assert_eq!(errs.list[0].path, "p.c[0].bytes");
        let v = serde_json::json!({"op": "sned"});
        assert!(decode_cmd(&v, "p.c[1]", &mut errs).is_none());
        assert_eq!(errs.list[1].path, "p.c[1]");
        assert!(errs.list[1]
            .message
            .starts_with("unknown instruction \"sned\""));
        let v = serde_json::json!(["send"]);
        assert!(decode_cmd(&v, "p.c[2]", &mut errs).is_none());
        assert_eq!(errs.list.len(), 3);
        let v = serde_json::json!({"op": "reset"});
        assert_eq!(decode_cmd(&v, "p", &mut errs), Some(RawCmd::Reset {}));
    }
}
