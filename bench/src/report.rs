//! Result records: one JSON line per benchmark cell (BENCHMARKS.md "Output"), and the
//! median over repeated runs.

use std::fmt::Write as _;
use std::sync::OnceLock;

/// One measured cell. `None` fields are omitted from the JSON line.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Record {
    pub workload: String,
    pub topology: String,
    pub client: String,
    pub server: String,
    pub conns: Option<u64>,
    /// Extra (T-veth): the port type the Squall sides used (`afpacket`, `afxdp`).
    pub port: Option<String>,
    /// Extra (raw-veth): bytes per frame of the raw line.
    pub frame_bytes: Option<u64>,
    /// Extra: initial congestion window in segments, on rows that vary it.
    pub initwnd: Option<u64>,
    /// Worker cores of a multi-core run (T-memN).
    pub cores: Option<u64>,
    /// Extra: the address family of the flows when not IPv4 (`"ipv6"`).
    pub family: Option<String>,
    /// Extra: `true` on the keep-alive variant of a workload defined with one request per
    /// connection (W4); omitted otherwise.
    pub keepalive: Option<bool>,
    pub cps: Option<f64>,
    pub rps: Option<f64>,
    pub gbps: Option<f64>,
    pub mpps: Option<f64>,
    pub bytes_per_flow: Option<f64>,
    /// Extra (not in the spec table): bytes per TCP endpoint when both ends live in the
    /// measured process (T-mem1 W3), so it compares with the "per socket" anchor.
    pub bytes_per_endpoint: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub frames_per_op: Option<f64>,
    pub cpu_us_per_op: Option<f64>,
    pub client_us_per_op: Option<f64>,
    pub server_us_per_op: Option<f64>,
    /// Extra: the benchmark threads' own CPU time per op, a cross-check
    /// for `/proc/stat` figures on a shared machine (T-loop).
    pub thread_us_per_op: Option<f64>,
    /// raw-veth: busy time of both pinned cores per frame received.
    pub us_per_frame: Option<f64>,
    /// Extra (T-veth, a Squall side): that side's pinned-core busy time per op before
    /// Squall's idle polling is taken out (`*_us_per_op` excludes it).
    pub client_raw_us_per_op: Option<f64>,
    pub server_raw_us_per_op: Option<f64>,
    /// Extra (T-veth): each side's own process CPU per op (user + system of ab, wrk,
    /// nginx; Squall's busy CPU), the cross-check of the core figures on a shared machine.
    pub client_thread_us_per_op: Option<f64>,
    pub server_thread_us_per_op: Option<f64>,
    pub errors: u64,
    pub seconds: f64,
    /// Extra: number of runs the median was taken over.
    pub runs: Option<u64>,
    /// Extra: free-form note (configuration that differs from the spec, limits hit).
    pub note: Option<String>,
}

fn num(out: &mut String, key: &str, v: Option<f64>) {
    if let Some(v) = v {
        if v.is_finite() {
            let _ = write!(out, ",\"{key}\":{}", round_sig(v));
        }
    }
}

/// Rounds to a readable precision: 3 decimals below 10, 2 below 1000, else integer.
fn round_sig(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 {
        format!("{:.0}", v)
    } else if a >= 10.0 {
        format!("{:.2}", v)
    } else {
        format!("{:.3}", v)
    }
}

fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o
}

impl Record {
    /// The JSON object on one line, keys in the order of BENCHMARKS.md.
    pub fn to_json(&self) -> String {
        let mut o = String::with_capacity(256);
        let _ = write!(
            o,
            "{{\"workload\":\"{}\",\"topology\":\"{}\",\"client\":\"{}\",\"server\":\"{}\"",
            escape(&self.workload),
            escape(&self.topology),
            escape(&self.client),
            escape(&self.server)
        );
        if let Some(c) = self.conns {
            let _ = write!(o, ",\"conns\":{c}");
        }
        if let Some(p) = &self.port {
            let _ = write!(o, ",\"port\":\"{}\"", escape(p));
        }
        if let Some(b) = self.frame_bytes {
            let _ = write!(o, ",\"frame_bytes\":{b}");
        }
        if let Some(w) = self.initwnd {
            let _ = write!(o, ",\"initwnd\":{w}");
        }
        if let Some(n) = self.cores {
            let _ = write!(o, ",\"cores\":{n}");
        }
        if let Some(f) = &self.family {
            let _ = write!(o, ",\"family\":\"{}\"", escape(f));
        }
        if let Some(k) = self.keepalive {
            let _ = write!(o, ",\"keepalive\":{k}");
        }
        num(&mut o, "cps", self.cps);
        num(&mut o, "rps", self.rps);
        num(&mut o, "gbps", self.gbps);
        num(&mut o, "mpps", self.mpps);
        num(&mut o, "bytes_per_flow", self.bytes_per_flow);
        num(&mut o, "bytes_per_endpoint", self.bytes_per_endpoint);
        num(&mut o, "p50_us", self.p50_us);
        num(&mut o, "p99_us", self.p99_us);
        num(&mut o, "frames_per_op", self.frames_per_op);
        num(&mut o, "cpu_us_per_op", self.cpu_us_per_op);
        num(&mut o, "client_us_per_op", self.client_us_per_op);
        num(&mut o, "server_us_per_op", self.server_us_per_op);
        num(&mut o, "thread_us_per_op", self.thread_us_per_op);
        num(&mut o, "us_per_frame", self.us_per_frame);
        num(&mut o, "client_raw_us_per_op", self.client_raw_us_per_op);
        num(&mut o, "server_raw_us_per_op", self.server_raw_us_per_op);
        num(
            &mut o,
            "client_thread_us_per_op",
            self.client_thread_us_per_op,
        );
        num(
            &mut o,
            "server_thread_us_per_op",
            self.server_thread_us_per_op,
        );
        let _ = write!(o, ",\"errors\":{}", self.errors);
        let _ = write!(o, ",\"seconds\":{}", round_sig(self.seconds));
        if let Some(r) = self.runs {
            let _ = write!(o, ",\"runs\":{r}");
        }
        if let Some(b) = build_label() {
            let _ = write!(o, ",\"build\":\"{}\"", escape(b));
        }
        if let Some(n) = &self.note {
            let _ = write!(o, ",\"note\":\"{}\"", escape(n));
        }
        o.push('}');
        o
    }
}

/// The build that made this binary, from `squall-build.txt` beside it (written by
/// `scripts/pgo.sh`: `pgo:` and what its training ran); `None` for a plain release build,
/// whose lines carry no `build` field.
pub fn build_label() -> Option<&'static str> {
    static LABEL: OnceLock<Option<String>> = OnceLock::new();
    LABEL
        .get_or_init(|| read_build_label(std::env::current_exe().ok()?.parent()?))
        .as_deref()
}

/// The first line of `dir/squall-build.txt`, if there is one and it is not blank.
fn read_build_label(dir: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("squall-build.txt")).ok()?;
    let line = text.lines().next()?.trim();
    (!line.is_empty()).then(|| line.to_string())
}

/// Median of the values (mean of the two middle ones for an even count); `None` if empty.
pub fn median(vals: &mut [f64]) -> Option<f64> {
    if vals.is_empty() {
        return None;
    }
    vals.sort_by(|a, b| a.total_cmp(b));
    let n = vals.len();
    Some(if n % 2 == 1 {
        vals[n / 2]
    } else {
        (vals[n / 2 - 1] + vals[n / 2]) / 2.0
    })
}

/// Combines several runs of one cell: each numeric field becomes the median over the runs
/// that have it, `errors` the sum (a line with errors is not a result), `seconds` the median.
pub fn median_record(runs: &[Record]) -> Option<Record> {
    let first = runs.first()?;
    let pick = |f: &dyn Fn(&Record) -> Option<f64>| {
        let mut v: Vec<f64> = runs.iter().filter_map(f).collect();
        median(&mut v)
    };
    let mut secs: Vec<f64> = runs.iter().map(|r| r.seconds).collect();
    Some(Record {
        workload: first.workload.clone(),
        topology: first.topology.clone(),
        client: first.client.clone(),
        server: first.server.clone(),
        conns: first.conns,
        port: first.port.clone(),
        frame_bytes: first.frame_bytes,
        initwnd: first.initwnd,
        cores: first.cores,
        family: first.family.clone(),
        keepalive: first.keepalive,
        cps: pick(&|r| r.cps),
        rps: pick(&|r| r.rps),
        gbps: pick(&|r| r.gbps),
        mpps: pick(&|r| r.mpps),
        bytes_per_flow: pick(&|r| r.bytes_per_flow),
        bytes_per_endpoint: pick(&|r| r.bytes_per_endpoint),
        p50_us: pick(&|r| r.p50_us),
        p99_us: pick(&|r| r.p99_us),
        frames_per_op: pick(&|r| r.frames_per_op),
        cpu_us_per_op: pick(&|r| r.cpu_us_per_op),
        client_us_per_op: pick(&|r| r.client_us_per_op),
        server_us_per_op: pick(&|r| r.server_us_per_op),
        thread_us_per_op: pick(&|r| r.thread_us_per_op),
        us_per_frame: pick(&|r| r.us_per_frame),
        client_raw_us_per_op: pick(&|r| r.client_raw_us_per_op),
        server_raw_us_per_op: pick(&|r| r.server_raw_us_per_op),
        client_thread_us_per_op: pick(&|r| r.client_thread_us_per_op),
        server_thread_us_per_op: pick(&|r| r.server_thread_us_per_op),
        errors: runs.iter().map(|r| r.errors).sum(),
        seconds: median(&mut secs).unwrap_or(0.0),
        runs: Some(runs.len() as u64),
        note: first.note.clone(),
    })
}

/// The median line of a cell; a line with errors keeps its counts but no figure
/// (../shared/BENCHMARKS.md: a run with errors has no figure), on every topology.
pub fn median_line(runs: &[Record]) -> Option<Record> {
    let mut r = median_record(runs)?;
    if r.errors > 0 {
        r.cps = None;
        r.rps = None;
        r.gbps = None;
        r.cpu_us_per_op = None;
        r.client_us_per_op = None;
        r.server_us_per_op = None;
        r.client_raw_us_per_op = None;
        r.server_raw_us_per_op = None;
        r.thread_us_per_op = None;
        r.client_thread_us_per_op = None;
        r.server_thread_us_per_op = None;
        r.bytes_per_flow = None;
        r.bytes_per_endpoint = None;
        let n = r.note.take().unwrap_or_default();
        r.note = Some(format!("errors: no figure; {n}"));
    }
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }

    #[test]
    fn json_omits_missing_fields_and_keeps_order() {
        let r = Record {
            workload: "W2".into(),
            topology: "T-mem1".into(),
            client: "smoltcp".into(),
            server: "smoltcp".into(),
            conns: Some(100),
            rps: Some(1_234_567.8),
            cpu_us_per_op: Some(0.4321),
            errors: 0,
            seconds: 2.0,
            ..Default::default()
        };
        let j = r.to_json();
        assert_eq!(
            j,
            "{\"workload\":\"W2\",\"topology\":\"T-mem1\",\"client\":\"smoltcp\",\
             \"server\":\"smoltcp\",\"conns\":100,\"rps\":1234568,\"cpu_us_per_op\":0.432,\
             \"errors\":0,\"seconds\":2.000}"
        );
        assert!(!j.contains("cps"));
    }

    #[test]
    fn the_build_label_is_the_first_line_of_the_marker_beside_the_binary() {
        let dir = std::env::temp_dir().join(format!("squall-label-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A plain build: no marker, no label.
        assert_eq!(read_build_label(&dir), None);
        std::fs::write(dir.join("squall-build.txt"), "pgo:mem-w2,memif\nmore\n").unwrap();
        assert_eq!(read_build_label(&dir).as_deref(), Some("pgo:mem-w2,memif"));
        std::fs::write(dir.join("squall-build.txt"), "  \n").unwrap();
        assert_eq!(read_build_label(&dir), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn median_record_sums_errors_and_takes_medians() {
        let mk = |cpu: f64, err: u64| Record {
            workload: "W1".into(),
            cpu_us_per_op: Some(cpu),
            errors: err,
            seconds: 2.0,
            ..Default::default()
        };
        let m = median_record(&[mk(10.0, 0), mk(30.0, 1), mk(20.0, 0)]).unwrap();
        assert_eq!(m.cpu_us_per_op, Some(20.0));
        assert_eq!(m.errors, 1);
        assert_eq!(m.runs, Some(3));
        assert!(median_record(&[]).is_none());
    }

    #[test]
    fn note_is_escaped() {
        let r = Record {
            note: Some("a \"b\"\n".into()),
            ..Default::default()
        };
        assert!(r.to_json().contains("\"note\":\"a \\\"b\\\"\\n\""));
    }
}
