//! Shared helpers of the integration tests: load a profile, run it in simulation.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use squall::run::{run, Live, RunConfig, RunResult};

use squall_astf::Profile;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn profile(rel: &str) -> Arc<Profile> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    Arc::new(squall::source::load(&p, &[]).unwrap_or_else(|e| panic!("{rel}: {e}")))
}

pub fn w1() -> Arc<Profile> {
    profile("../../examples/w1-astf-http.json")
}

/// A simulation run of `secs` seconds at `mult`.
pub fn sim(p: &Arc<Profile>, secs: f64, mult: f64, f: impl FnOnce(&mut RunConfig)) -> RunResult {
    let mut cfg = RunConfig {
        duration_ns: (secs * 1e9) as u64,
        mult,
        sim: true,
        seed: Some(7),
        ..RunConfig::default()
    };
    f(&mut cfg);
    run(p.clone(), &cfg, Arc::new(Live::default())).expect("run")
}

/// Panics with the failed invariants, if any.
pub fn assert_clean(r: &RunResult) {
    let bad: Vec<_> = squall::report::invariants(r)
        .into_iter()
        .filter(|c| !c.ok)
        .map(|c| format!("{}: {}", c.name, c.detail))
        .collect();
    assert!(bad.is_empty(), "invariants violated: {bad:#?}");
    assert_eq!(
        squall::report::error_count(r),
        0,
        "errors: client {:?} server {:?}",
        r.client.app.total(),
        r.server.app.total()
    );
}

/// `squall run` of the W1 profile (real time) with `args` and `--json FILE`: checks that
/// it exits 0 and returns (stdout, the results).
pub fn run_w1_json(file: &Path, args: &[&str]) -> (String, serde_json::Value) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_squall"))
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
        .args(["run", "../../examples/w1-astf-http.json"])
        .args(args)
        .arg("--json")
        .arg(file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    (stdout, v)
}
