//! `squall serve` as the server of the T-veth and T-memif cells (`"server":"squall-serve"`):
//! the command line (the benchmark site of `site.rs`, W2's `/testu` route), the JSON line
//! it prints at the end, and the exact size of its answers (so a client can check every
//! byte count).

use std::path::Path;

use serde_json::Value;
#[cfg(feature = "squall")]
use squall_http::Version;
#[cfg(feature = "squall")]
use squall_serve::files::Files;
#[cfg(feature = "squall")]
use squall_serve::respond::{file_head, route_head, tail, Route};

use crate::site::{self, Site};

/// What `squall serve` printed at the end (its JSON line on stdout).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServeOut {
    pub accepted: u64,
    pub requests: u64,
    pub status_2xx: u64,
    /// Answers that are errors of a run: 4xx, 5xx, parse errors, refused sends,
    /// header timeouts, connections refused at the limit, cut at the stop.
    pub errors: u64,
    pub cpu_sec: f64,
    /// CPU of the loop turns that did work (idle polling left out).
    pub busy_cpu_sec: f64,
    /// CPU of the loop's idle sleeps (0 from builds without `sleep_cpu_ns`).
    pub sleep_cpu_sec: f64,
}

impl ServeOut {
    /// CPU of the polling loop in turns that did no work, microseconds (the sleeps'
    /// CPU not included: `veth::SquallOut::idle_us`).
    pub fn idle_us(&self) -> f64 {
        crate::veth::idle_turns_us(self.cpu_sec, self.busy_cpu_sec, self.sleep_cpu_sec)
    }
}

/// Parses the last JSON object line of `text` (the server's log: stderr and stdout).
pub fn parse_serve(text: &str) -> Result<ServeOut, String> {
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with("{\"accepted\""))
        .ok_or_else(|| format!("squall serve printed no counters: {text}"))?;
    let v: Value = serde_json::from_str(line).map_err(|e| format!("squall serve json: {e}"))?;
    let n = |k: &str| {
        v[k].as_u64()
            .ok_or_else(|| format!("squall serve json: no {k}"))
    };
    let errors = n("status_4xx")?
        + n("status_5xx")?
        + n("parse_errors")?
        + n("send_errors")?
        + n("header_timeouts")?
        + n("refused")?
        + n("cut_at_stop")?;
    Ok(ServeOut {
        accepted: n("accepted")?,
        requests: n("requests")?,
        status_2xx: n("status_2xx")?,
        errors,
        cpu_sec: n("cpu_ns")? as f64 / 1e9,
        busy_cpu_sec: n("busy_cpu_ns")? as f64 / 1e9,
        sleep_cpu_sec: v["sleep_cpu_ns"].as_u64().unwrap_or(0) as f64 / 1e9,
    })
}

/// The arguments after the binary: serve `site` on `listen` (ADDR:PORT) over `iface`
/// (KIND:NAME) to the peer `peer_mac`, W2's route answering `w2_body`, for `secs`
/// (then a drain of 1 s). `extra` goes last (`--eal ...`).
pub fn args(
    site: &Site,
    listen: &str,
    iface: &str,
    peer_mac: &str,
    w2_body: &str,
    secs: f64,
) -> Vec<String> {
    vec![
        "serve".into(),
        "--root".into(),
        site.dir.display().to_string(),
        "--listen".into(),
        listen.into(),
        "--iface".into(),
        iface.into(),
        "--peer-mac".into(),
        peer_mac.into(),
        "--route".into(),
        site::w2_route(w2_body),
        "--duration".into(),
        format!("{secs}"),
        "--drain-sec".into(),
        "1".into(),
        "--max-conns".into(),
        "20000".into(),
    ]
}

/// Whole answers (head and body) `squall serve` gives to an HTTP/1.1 keep-alive request
/// for W1, W2 (the route answering `w2_body`) and W4.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnswerSizes {
    pub w1: usize,
    pub w2: usize,
    pub w4: usize,
    /// The W1 and W4 files' lengths (ab's document length).
    pub w1_body: usize,
    pub w4_body: usize,
}

/// Measures the answers of `site` with `squall serve`'s own loader and header blocks.
#[cfg(feature = "squall")]
pub fn answer_sizes(site: &Site, w2_body: &str) -> Result<AnswerSizes, String> {
    let files = Files::load(&site.dir)?;
    let t = tail(site::SOME_DATE, true, Version::Http11).len();
    let file = |p: &str| -> Result<(usize, usize), String> {
        let (_, f) = files
            .lookup(p.as_bytes())
            .ok_or_else(|| format!("{}: no {p}", site.dir.display()))?;
        Ok((file_head(f).len() + t + f.data.len(), f.data.len()))
    };
    let route = Route::parse(&site::w2_route(w2_body))?;
    let (w1, w1_body) = file(site::W1_PATH)?;
    let (w4, w4_body) = file(site::W4_PATH)?;
    Ok(AnswerSizes {
        w1,
        w2: route_head(&route).len() + t + route.text.len(),
        w4,
        w1_body,
        w4_body,
    })
}

/// Without `squall serve`'s crate the answers cannot be measured.
#[cfg(not(feature = "squall"))]
pub fn answer_sizes(_site: &Site, _w2_body: &str) -> Result<AnswerSizes, String> {
    Err("built without the `squall` feature (squall-serve)".into())
}

/// Writes the site under `dir/site` and measures it.
pub fn prepare(dir: &Path, w2_body: &str) -> Result<(Site, AnswerSizes), String> {
    let site = site::write(&dir.join("site"))?;
    let sizes = answer_sizes(&site, w2_body)?;
    Ok((site, sizes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_line_parses_and_counts_errors() {
        let log = "squall serve: 2 files\n{\"accepted\":78,\"refused\":1,\"requests\":9121,\
            \"status_1xx\":0,\"status_2xx\":9115,\"status_3xx\":2,\"status_4xx\":3,\
            \"status_5xx\":1,\"parse_errors\":0,\"header_timeouts\":0,\"idle_closed\":0,\
            \"body_bytes\":5,\"send_errors\":0,\"cut_at_stop\":2,\"cpu_ns\":2000000000,\
            \"busy_cpu_ns\":500000000,\"access_log_dropped\":0}\nsquall serve: port ...\n";
        let s = parse_serve(log).unwrap();
        assert_eq!((s.accepted, s.requests, s.status_2xx), (78, 9121, 9115));
        assert_eq!(s.errors, 3 + 1 + 1 + 2);
        assert_eq!(s.idle_us(), 1.5e6);
        // The idle sleeps' CPU stays out of the idle turns' figure.
        let slept = log.replace(
            "\"access_log_dropped\"",
            "\"sleep_cpu_ns\":400000000,\"access_log_dropped\"",
        );
        let s = parse_serve(&slept).unwrap();
        assert_eq!((s.sleep_cpu_sec, s.idle_us()), (0.4, 1.1e6));
        assert!(parse_serve("nothing").is_err());
    }

    #[cfg(feature = "squall")]
    #[test]
    fn answers_are_measured_from_the_site() {
        let dir = std::env::temp_dir().join(format!("sqb-serve-cmd-{}", std::process::id()));
        let (site, z) = prepare(&dir, "0123456789").unwrap();
        assert_eq!(z.w1, 32_768);
        assert_eq!(z.w4_body, 2_649);
        assert!(z.w4 > 2_649 + 100 && z.w2 > 10 + 50);
        let a = args(
            &site,
            "198.18.48.1:80",
            "afpacket:x",
            "02:00:00:00:00:01",
            "ab",
            5.0,
        );
        assert!(a
            .windows(2)
            .any(|w| w[0] == "--route" && w[1] == "/testu return 200 \"ab\""));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
