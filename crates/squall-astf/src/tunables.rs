//! Validation and resolution of tunables: every tunable's range, and the precedence
//! template side > global side (`global.client`/`global.server`) > global > default.

use crate::error::Errors;
use crate::model::{IpTunables, SchedulerTunables, SideTunables, Spacing, TcpTunables};
use crate::raw::{RawIp, RawScheduler, RawSide, RawSpacing, RawTcp};

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

/// Applies the tunables present in `raw` onto `t`, checking ranges (path e.g. `global.tcp`).
pub(crate) fn apply_tcp(t: &mut TcpTunables, raw: &RawTcp, path: &str, errs: &mut Errors) {
    if let Some(v) = ranged(raw.mss, 64, 9000, path, "mss", errs) {
        t.mss = v as u16;
    }
    if let Some(v) = ranged(raw.initwnd, 1, 20, path, "initwnd", errs) {
        t.initwnd = v as u8;
    }
    if let Some(v) = ranged(raw.delay_ack_msec, 0, 500, path, "delay_ack_msec", errs) {
        t.delay_ack_msec = v as u16;
    }
    if let Some(v) = raw.no_delay {
        t.no_delay = v.0;
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
    if let Some(v) = ranged(raw.rxbufsize, 1024, 16 << 20, path, "rxbufsize", errs) {
        t.rxbufsize = v as u32;
    }
    if let Some(v) = ranged(raw.txbufsize, 1024, 16 << 20, path, "txbufsize", errs) {
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
}

pub(crate) fn apply_ip(t: &mut IpTunables, raw: &RawIp, path: &str, errs: &mut Errors) {
    if let Some(v) = ranged(raw.ttl, 1, 255, path, "ttl", errs) {
        t.ttl = v as u8;
    }
    if let Some(v) = ranged(raw.tos, 0, 255, path, "tos", errs) {
        t.tos = v as u8;
    }
}

/// Applies `{tcp, ip}` overrides found at `path`.
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
}

pub(crate) fn scheduler(raw: Option<&RawScheduler>, errs: &mut Errors) -> SchedulerTunables {
    let mut s = SchedulerTunables::default();
    let Some(raw) = raw else { return s };
    if let Some(v) = ranged(
        raw.rampup_sec,
        0,
        3600,
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
