//! `squall report`: the HTML page of two real runs, rendered by headless Chromium (Debian's
//! `chromium`, scripts/deps.sh test); every figure the rendered page shows is read back
//! and compared with the results JSON.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use squall::htmlreport::at;

mod common;

fn squall() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_squall"));
    c.current_dir(Path::new(env!("CARGO_MANIFEST_DIR")));
    c
}

fn run(dir: &Path, name: &str, mult: &str) -> (PathBuf, Value) {
    let f = dir.join(name);
    let (_, v) = common::run_w1_json(
        &f,
        &["--duration", "2", "--drain-sec", "1", "-q", "--mult", mult],
    );
    (f, v)
}

/// `(data-key, data-run, text)` of every figure cell of a page.
fn cells(dom: &str) -> Vec<(String, usize, String)> {
    let mut v = Vec::new();
    let mut rest = dom;
    while let Some(i) = rest.find("data-key=\"") {
        rest = &rest[i + 10..];
        let key = rest[..rest.find('"').unwrap()].to_string();
        let r = rest.find("data-run=\"").unwrap();
        let run: usize = rest[r + 10..r + 11].parse().unwrap();
        let gt = rest.find('>').unwrap();
        let lt = rest[gt..].find('<').unwrap();
        v.push((key, run, rest[gt + 1..gt + lt].to_string()));
    }
    v
}

#[test]
fn report_renders_in_chromium_with_the_json_figures() {
    let dir = std::env::temp_dir().join(format!("squall-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (fa, a) = run(&dir, "before.json", "300");
    let (fb, b) = run(&dir, "after.json", "600");
    let html = dir.join("report.html");
    let out = squall()
        .arg("report")
        .arg(&fa)
        .arg(&fb)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        !page.contains("<script") && !page.contains("src=\"http"),
        "self-contained"
    );
    let chrome = squall::htmlreport::chromium()
        .expect("Debian's chromium (scripts/deps.sh test) or $SQUALL_CHROMIUM");
    let dom = Command::new(chrome)
        .args(["--headless", "--disable-gpu", "--no-sandbox", "--dump-dom"])
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains("<svg"),
        "chromium rendered nothing: {dom:.200}"
    );
    let cells = cells(&dom);
    let docs = [&a, &b];
    let mut checked = 0;
    for (key, run, text) in &cells {
        let want = at(docs[*run], key);
        if key == "clean" {
            assert_eq!(text, "CLEAN");
            continue;
        }
        if key == "assertion" {
            continue;
        }
        let want = want
            .and_then(Value::as_f64)
            .unwrap_or_else(|| panic!("{key}"));
        let got: f64 = text.parse().unwrap_or_else(|_| panic!("{key}: {text}"));
        assert!(
            (got - want).abs() <= 0.0005 + 1e-9 * want.abs(),
            "{key} run {run}: page {got}, JSON {want}"
        );
        checked += 1;
    }
    assert!(checked > 40, "{checked} figures checked");
    for key in [
        "rates.cps",
        "client.flows.completed",
        "latency_us.first_byte.p99",
    ] {
        assert!(
            cells.iter().any(|c| c.0 == key && c.1 == 1),
            "{key} of B missing"
        );
    }
    let charts = dom.matches("data-chart=").count();
    assert!(charts >= 6, "{charts} charts");
    // The CPS chart has a line per run.
    let cps = &dom[dom.find("data-chart=\"cps\"").unwrap()..];
    let cps = &cps[..cps.find("</svg>").unwrap()];
    assert_eq!(cps.matches("<path").count(), 2);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn report_errors_say_what_to_give() {
    let dir = std::env::temp_dir().join(format!("squall-report-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("x.json");
    std::fs::write(&f, "{\"a\": 1}").unwrap();
    let out = squall()
        .arg("report")
        .arg(&f)
        .arg("-o")
        .arg(dir.join("r.html"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("squall run PROFILE --json"));
    let out = squall().args(["report", "/no/such.json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /no/such.json"));
    std::fs::remove_dir_all(&dir).ok();
}

/// Width and height of a PNG file from its IHDR chunk, after checking the signature.
fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    const SIG: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
    if bytes.len() < 33 || bytes[..8] != SIG || &bytes[12..16] != b"IHDR" {
        return None;
    }
    let be = |o: usize| u32::from_be_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
    Some((be(16), be(20)))
}

/// `squall report --png DIR`: every chart of the page as DIR/ID.svg and DIR/ID.png,
/// rendered by headless Chromium at the chart's size.
#[test]
fn report_png_writes_every_chart_as_a_png_of_its_size() {
    let dir = std::env::temp_dir().join(format!("squall-report-png-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (fa, _) = run(&dir, "a.json", "300");
    let png_dir = dir.join("png");
    let out = squall()
        .arg("report")
        .arg(&fa)
        .arg("-o")
        .arg(dir.join("r.html"))
        .arg("--png")
        .arg(&png_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(dir.join("r.html")).unwrap();
    let pngs: Vec<PathBuf> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("wrote "))
        .map(PathBuf::from)
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .collect();
    // One PNG per chart of the page, named by the chart's id.
    assert_eq!(pngs.len(), page.matches("data-chart=").count(), "{stdout}");
    assert!(pngs.len() >= 6, "{stdout}");
    let mut names = Vec::new();
    for p in &pngs {
        assert_eq!(p.parent(), Some(png_dir.canonicalize().unwrap().as_path()));
        let id = p.file_stem().unwrap().to_string_lossy().into_owned();
        assert!(page.contains(&format!("data-chart=\"{id}\"")), "{id}");
        let svg = std::fs::read_to_string(p.with_extension("svg")).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("</svg>"),
            "{id}.svg"
        );
        let bytes = std::fs::read(p).unwrap();
        let size = png_size(&bytes).unwrap_or_else(|| panic!("{}: not a PNG", p.display()));
        assert_eq!(size, (640, 260), "{}", p.display());
        // A drawn chart, not an empty image: axes, labels and lines take more than a
        // blank 640 x 260 PNG's few hundred bytes.
        assert!(bytes.len() > 3000, "{}: {} bytes", p.display(), bytes.len());
        names.push(id);
    }
    for id in ["cps", "throughput", "active"] {
        assert!(names.iter().any(|n| n == id), "{id} in {names:?}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
