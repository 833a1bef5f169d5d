//! Validation and resolution of tunables: every tunable's range, and the precedence
//! template side > global side (`global.client`/`global.server`) > global > default.

use crate::error::Errors;
use crate::ipv6::{parse_msb, Ipv6Tunables};
use crate::model::{IpTunables, SchedulerTunables, SideTunables, Spacing, TcpTunables};
use crate::raw::{RawIp, RawIpv6, RawScheduler, RawSide, RawSpacing, RawTcp};

/// A range-checked integer field. Returns `None` (and records an error) when out of range.
fn ranged(
    v: Option<u64>,
    lo: u64,
    hi: u64,
    path: &str,
    field: &str,
    errs: &mut Errors,
) -> Option<u64> {
    let v = v?;
    if (lo..=hi).contains(&v) {
        Some(v)
    } else {
        errs.push(
            format!("{path}.{field}"),
            format!("{v} out of range {lo}..={hi}"),
        );
        None
    }
}

/// The largest MSS (TRex's: a 9,216-byte jumbo frame's payload).
const MAX_MSS: u64 = 9216;
/// The largest receive buffer / send watermark: the largest window RFC 7323 can
/// advertise (65,535 << 14 bytes, about 1 GiB, as TRex allows).
const MAX_BUF: u64 = 65_535 << 14;

/// Applies the tunables present in `raw` onto `t`, checking ranges (path e.g. `global.tcp`).
pub(crate) fn apply_tcp(t: &mut TcpTunables, raw: &RawTcp, path: &str, errs: &mut Errors) {
    if let Some(v) = ranged(raw.mss, 64, MAX_MSS, path, "mss", errs) {
        t.mss = v as u16;
    }
    if let Some(v) = ranged(raw.initwnd, 1, 20, path, "initwnd", errs) {
        t.initwnd = v as u8;
    }
    if let Some(v) = ranged(raw.delay_ack_msec, 0, 500, path, "delay_ack_msec", errs) {
        t.delay_ack_msec = v as u16;
    }
    if let Some(v) = raw.burst_ack {
        t.burst_ack = v.0;
    }
    if let Some(v) = &raw.no_delay {
        match (v.as_bool(), v.as_u64()) {
            (Some(b), _) => (t.no_delay, t.no_delay_push) = (b, false),
            (None, Some(n @ 0..=3)) => (t.no_delay, t.no_delay_push) = (n & 1 != 0, n & 2 != 0),
            _ => errs.push(
                format!("{path}.no_delay"),
                format!("{v} is not a bool or 0..=3 (TRex: bit 0 Nagle off, bit 1 PUSH on every segment)"),
            ),
        }
    }
    if let Some(v) = ranged(
        raw.no_delay_counter,
        0,
        65535,
        path,
        "no_delay_counter",
        errs,
    ) {
        t.no_delay_counter = v as u16;
    }
    if let Some(v) = ranged(raw.rxbufsize, 1024, MAX_BUF, path, "rxbufsize", errs) {
        t.rxbufsize = v as u32;
    }
    if let Some(v) = ranged(raw.txbufsize, 1024, MAX_BUF, path, "txbufsize", errs) {
        t.txbufsize = v as u32;
    }
    if let Some(v) = ranged(raw.rexmtthresh, 1, 10, path, "rexmtthresh", errs) {
        t.rexmtthresh = v as u8;
    }
    if let Some(v) = raw.do_rfc1323 {
        t.do_rfc1323 = v.0;
    }
    if let Some(v) = raw.do_sack {
        t.do_sack = v.0;
    }
    // Seconds (TRex: keepinit, keepidle, keepintvl).
    for (v, lo, name, field) in [
        (raw.keepinit, 1, "keepinit", &mut t.keepinit),
        (raw.keepidle, 0, "keepidle", &mut t.keepidle),
        (raw.keepintvl, 1, "keepintvl", &mut t.keepintvl),
    ] {
        if let Some(v) = ranged(v, lo, 65533, path, name, errs) {
            *field = v as u16;
        }
    }
    for (v, name, why) in [
        (
            raw.blackhole,
            "blackhole",
            "squall-tcp always answers a segment for no flow with a RST, TRex's blackhole 0",
        ),
        (
            raw.cc_algo,
            "cc_algo",
            "squall-tcp's congestion control is NewReno, TRex's cc_algo 0; Cubic (1) is not implemented",
        ),
        (
            raw.do_ecn,
            "do_ecn",
            "squall-tcp does not negotiate ECN (RFC 3168), TRex's do_ecn 0",
        ),
    ] {
        match v {
            None | Some(0) => {}
            Some(v) => errs.push(
                format!("{path}.{name}"),
                format!("{v}: only 0 is supported ({why})"),
            ),
        }
    }
}

/// The side-wide TCP tunables (one value per TCP host: squall-tcp's keepalive and
/// connection timeouts are host settings), refused in a template's tunables as TRex's
/// `ASTFGlobalInfoPerTemplate` refuses them.
pub(crate) fn refuse_side_wide(raw: Option<&RawSide>, path: &str, errs: &mut Errors) {
    let Some(tcp) = raw.and_then(|r| r.tcp.as_ref()) else {
        return;
    };
    for (name, set) in [
        ("keepinit", tcp.keepinit.is_some()),
        ("keepidle", tcp.keepidle.is_some()),
        ("keepintvl", tcp.keepintvl.is_some()),
        ("blackhole", tcp.blackhole.is_some()),
        ("cc_algo", tcp.cc_algo.is_some()),
        ("do_ecn", tcp.do_ecn.is_some()),
    ] {
        if set {
            errs.push(
                format!("{path}.tcp.{name}"),
                "a side-wide tunable: give it in global.tcp, global.client or global.server (TRex: ASTFGlobalInfo, not ASTFGlobalInfoPerTemplate)",
            );
        }
    }
}

/// TRex's `ipv6.*` present in `raw` onto `t` (path e.g. `global.ipv6`): `enable` 0 or 1,
/// `src_msb`/`dst_msb` IPv6 addresses whose high 96 bits are kept.
pub(crate) fn apply_ipv6(t: &mut Ipv6Tunables, raw: &RawIpv6, path: &str, errs: &mut Errors) {
    if let Some(v) = ranged(raw.enable, 0, 1, path, "enable", errs) {
        t.enable = v == 1;
    }
    for (v, name, field) in [
        (&raw.src_msb, "src_msb", &mut t.src_msb),
        (&raw.dst_msb, "dst_msb", &mut t.dst_msb),
    ] {
        if let Some(v) = v {
            match parse_msb(v) {
                Ok(m) => *field = m,
                Err(e) => errs.push(format!("{path}.{name}"), e),
            }
        }
    }
}

pub(crate) fn apply_ip(t: &mut IpTunables, raw: &RawIp, path: &str, errs: &mut Errors) {
    if let Some(v) = ranged(raw.ttl, 1, 255, path, "ttl", errs) {
        t.ttl = v as u8;
    }
    if let Some(v) = ranged(raw.tos, 0, 255, path, "tos", errs) {
        t.tos = v as u8;
    }
}

/// Applies `{tcp, ip, ipv6}` overrides found at `path`.
pub(crate) fn apply_side(
    t: &mut SideTunables,
    raw: Option<&RawSide>,
    path: &str,
    errs: &mut Errors,
) {
    let Some(raw) = raw else { return };
    if let Some(tcp) = &raw.tcp {
        apply_tcp(&mut t.tcp, tcp, &format!("{path}.tcp"), errs);
    }
    if let Some(ip) = &raw.ip {
        apply_ip(&mut t.ip, ip, &format!("{path}.ip"), errs);
    }
    if let Some(v6) = &raw.ipv6 {
        apply_ipv6(&mut t.ipv6, v6, &format!("{path}.ipv6"), errs);
    }
}

pub(crate) fn scheduler(raw: Option<&RawScheduler>, errs: &mut Errors) -> SchedulerTunables {
    let mut s = SchedulerTunables::default();
    let Some(raw) = raw else { return s };
    if let Some(v) = ranged(
        raw.rampup_sec,
        0,
        60_000,
        "global.scheduler",
        "rampup_sec",
        errs,
    ) {
        s.rampup_sec = v as u32;
    }
    if let Some(sp) = raw.spacing {
        s.spacing = match sp {
            RawSpacing::Even => Spacing::Even,
            RawSpacing::Poisson => Spacing::Poisson,
        };
    }
    if let Some(seed) = raw.seed {
        s.seed = seed;
    }
    s
}
