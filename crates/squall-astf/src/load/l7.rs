//! TRex's `l7_map` association: offsets (with optional masks and values) into the first
//! bytes the client sends. Without values, the values are the template's own client
//! program's first bytes at those offsets.

use crate::error::Errors;
use crate::model::{Buffer, Insn, L7Map, Program, MAX_L7_OFFSETS};
use crate::raw::RawL7Map;

/// The bytes a client program sends before it first waits for anything but its own
/// sends (`connect`, variables and delays do not end it), up to `limit` bytes.
pub(super) fn first_bytes(prog: &Program, buffers: &[Buffer], limit: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for insn in prog.insns.iter() {
        if out.len() >= limit {
            break;
        }
        match insn {
            Insn::Send { buf, .. } => {
                let data = buffers.get(buf.0 as usize).map_or(&[][..], |b| &b.data[..]);
                let n = data.len().min(limit - out.len());
                out.extend_from_slice(&data[..n]);
            }
            Insn::Connect
            | Insn::SetVar { .. }
            | Insn::SetTickVar { .. }
            | Insn::SetSendBlocking { .. }
            | Insn::Delay { .. }
            | Insn::DelayRand { .. } => {}
            _ => break,
        }
    }
    out
}

fn bytes_field(
    v: &[u64],
    n: usize,
    path: String,
    errs: &mut Errors,
) -> Option<[u8; MAX_L7_OFFSETS]> {
    if v.len() != n {
        errs.push(
            path,
            format!("{} entries; give one per offset ({n})", v.len()),
        );
        return None;
    }
    let mut out = [0u8; MAX_L7_OFFSETS];
    for (k, &x) in v.iter().enumerate() {
        match u8::try_from(x) {
            Ok(b) => out[k] = b,
            Err(_) => {
                errs.push(format!("{path}[{k}]"), format!("{x} out of range 0..=255"));
                return None;
            }
        }
    }
    Some(out)
}

/// Compiles one rule's map. `client_first` is the template's client program's first
/// bytes (for maps without values); `None` when the program did not compile.
pub(super) fn compile_l7(
    raw: &RawL7Map,
    path: &str,
    client_first: Option<&[u8]>,
    errs: &mut Errors,
) -> Option<L7Map> {
    let n = raw.offset.len();
    if !(1..=MAX_L7_OFFSETS).contains(&n) {
        errs.push(
            format!("{path}.offset"),
            format!("{n} offsets; give 1..={MAX_L7_OFFSETS}"),
        );
        return None;
    }
    let offsets = bytes_field(&raw.offset, n, format!("{path}.offset"), errs)?;
    if (1..n).any(|k| offsets[..k].contains(&offsets[k])) {
        errs.push(format!("{path}.offset"), "offsets must be distinct");
        return None;
    }
    let mask = match &raw.mask {
        Some(m) => bytes_field(m, n, format!("{path}.mask"), errs)?,
        None => [0xff; MAX_L7_OFFSETS],
    };
    let value = match &raw.value {
        Some(v) => bytes_field(v, n, format!("{path}.value"), errs)?,
        None => {
            let first = client_first?;
            let mut value = [0u8; MAX_L7_OFFSETS];
            for k in 0..n {
                let Some(&b) = first.get(offsets[k] as usize) else {
                    errs.push(
                        format!("{path}.offset[{k}]"),
                        format!(
                            "offset {} is past the {} bytes the client program sends first: give \"value\"",
                            offsets[k],
                            first.len()
                        ),
                    );
                    return None;
                };
                value[k] = b;
            }
            value
        }
    };
    Some(L7Map {
        len: n as u8,
        offsets,
        mask,
        value,
    })
}
