//! Profile data: IPv4 addresses (and the IPv6 bounds of native IPv6 pools), buffers (text, base64, hex, repeated patterns) and
//! client/server address pools, each checked with the JSON path of its errors.

use std::net::{Ipv4Addr, Ipv6Addr};

use base64::Engine as _;

use crate::error::Errors;
use crate::ipv6::Msb;
use crate::model::*;
use crate::raw::*;

use super::check_name;

pub(super) fn parse_ip(s: &str, path: &str, errs: &mut Errors) -> Option<u32> {
    match s.parse::<Ipv4Addr>() {
        Ok(a) => Some(u32::from(a)),
        Err(_) => {
            errs.push(path, format!("invalid IPv4 address {s:?}"));
            None
        }
    }
}

pub(super) fn decode_bytes(
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

pub(super) fn compile_buffer(b: &RawBuffer, p: &str, errs: &mut Errors) -> Option<Vec<u8>> {
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

/// A pool bound: an IPv4 address, or an IPv6 one split into its high 96 and low 32 bits.
fn parse_bound(s: &str, path: &str, errs: &mut Errors) -> Option<(Option<Msb>, u32)> {
    if let Ok(a) = s.parse::<Ipv4Addr>() {
        return Some((None, u32::from(a)));
    }
    match s.parse::<Ipv6Addr>() {
        Ok(a) => {
            let (m, low) = crate::ipv6::split(&a.octets());
            Some((Some(m), low))
        }
        Err(_) => {
            errs.push(path, format!("invalid IPv4 or IPv6 address {s:?}"));
            None
        }
    }
}

pub(super) fn compile_pool(d: &RawDist, p: &str, errs: &mut Errors) -> Option<IpPool> {
    let first = parse_bound(&d.range[0], &format!("{p}.range[0]"), errs);
    let last = parse_bound(&d.range[1], &format!("{p}.range[1]"), errs);
    let ((v6, first), (v6_last, last)) = (first?, last?);
    if v6 != v6_last {
        let msg = if v6.is_some() != v6_last.is_some() {
            "one bound is IPv4 and the other IPv6: a pool has one family"
        } else {
            "an IPv6 pool varies only the low 32 bits (TRex's 32-bit generator): first and last must share their first 96 bits"
        };
        errs.push(format!("{p}.range"), msg);
        return None;
    }
    if first > last {
        errs.push(
            format!("{p}.range"),
            format!("empty pool (first {} > last {})", d.range[0], d.range[1]),
        );
        return None;
    }
    if let Some(why) = unusable(v6.as_ref(), first, last) {
        errs.push(
            format!("{p}.range"),
            format!("holds {why}: not a host's address (RFC 1122 §3.2.1.3, RFC 4291)"),
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
        v6,
    })
}

/// What a pool `first..=last` (IPv4, or the low 32 bits under `v6`'s 96) holds that no
/// host may use as its address, if anything. (IPv6 prefixes of ff00::/8 are taken: TRex's
/// own IPv6 examples map flows under `ff02::` and `ff03::`.)
fn unusable(v6: Option<&Msb>, first: u32, last: u32) -> Option<&'static str> {
    let hits = |lo: u32, hi: u32| first <= hi && lo <= last;
    match v6 {
        None if hits(0, 0x00ff_ffff) => Some("0.0.0.0/8 (this network)"),
        None if hits(0x7f00_0000, 0x7fff_ffff) => Some("127.0.0.0/8 (loopback)"),
        None if last >= 0xe000_0000 => Some("224.0.0.0 or above (multicast, reserved, broadcast)"),
        Some(m) if *m == [0; 12] && first <= 1 => Some(":: or ::1 (unspecified, loopback)"),
        _ => None,
    }
}
