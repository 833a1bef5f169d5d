//! Loading a profile: a `.json` IR file directly, or a `.py` profile compiled to the IR by
//! `python3 -m squall.compile PROFILE.py [-t key=value ...]` (its error text is passed
//! through). Also the engine's own restrictions on valid profiles (at least one template).

use std::path::{Path, PathBuf};
use std::process::Command;

use squall_astf::{load_profile_file, load_profile_str, LoadError, Profile, ProfileError};

/// Why a profile cannot be run. Every variant means exit status 2.
#[derive(Debug)]
pub enum SourceError {
    /// Load/validation errors (every error with its JSON path).
    Load(LoadError),
    /// Valid IR the engine cannot run yet.
    Unsupported(Vec<ProfileError>),
    /// The Python compiler failed (its stderr) or could not be started.
    Compile(String),
    /// Tunables given for a profile that takes none (JSON).
    Tunables,
}

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceError::Load(e) => write!(f, "{e}"),
            SourceError::Unsupported(v) => {
                write!(
                    f,
                    "profile not supported by this engine ({} error{})",
                    v.len(),
                    if v.len() == 1 { "" } else { "s" }
                )?;
                for e in v {
                    write!(f, "\n  {e}")?;
                }
                Ok(())
            }
            SourceError::Compile(s) => write!(f, "profile compilation failed:\n{}", s.trim_end()),
            SourceError::Tunables => write!(
                f,
                "tunables (-t KEY=VALUE) apply to Python (.py) profiles only; a JSON profile takes none (edit its values instead)"
            ),
        }
    }
}

/// Finds the repository's `python/` directory (holding the `squall` package): the
/// `SQUALL_PYTHONPATH` variable, else `python/` in the working directory or an ancestor of
/// it or of the executable.
fn python_dir() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SQUALL_PYTHONPATH") {
        return Some(PathBuf::from(p));
    }
    let mut starts = Vec::new();
    if let Ok(d) = std::env::current_dir() {
        starts.push(d);
    }
    if let Ok(e) = std::env::current_exe() {
        starts.push(e);
    }
    for s in starts {
        for a in s.ancestors() {
            let cand = a.join("python");
            if cand.join("squall").join("__init__.py").is_file() {
                return Some(cand);
            }
        }
    }
    None
}

/// Compiles a `.py` profile to JSON IR text.
pub fn compile_py(path: &Path, tunables: &[String]) -> Result<String, SourceError> {
    let mut cmd = Command::new("python3");
    cmd.arg("-m").arg("squall.compile").arg(path);
    for t in tunables {
        cmd.arg("-t").arg(t);
    }
    if let Some(dir) = python_dir() {
        let mut pp = std::ffi::OsString::from(dir.as_os_str());
        if let Some(old) = std::env::var_os("PYTHONPATH") {
            pp.push(":");
            pp.push(old);
        }
        cmd.env("PYTHONPATH", pp);
    }
    let out = cmd
        .output()
        .map_err(|e| SourceError::Compile(format!("cannot run python3: {e}")))?;
    if !out.status.success() {
        let mut msg = String::from_utf8_lossy(&out.stderr).into_owned();
        if msg.trim().is_empty() {
            msg = format!("python3 -m squall.compile exited with {}", out.status);
        }
        return Err(SourceError::Compile(msg));
    }
    String::from_utf8(out.stdout)
        .map_err(|_| SourceError::Compile("compiler output is not UTF-8".into()))
}

/// Errors for what the engine cannot run (valid IR otherwise).
pub fn unsupported(p: &Profile) -> Vec<ProfileError> {
    let mut v = Vec::new();
    if p.templates.is_empty() {
        v.push(ProfileError::new(
            "templates",
            "at least one template is needed to run",
        ));
    }
    // Each side's TCP host holds at most MAX_OPTS option sets, its own default (template
    // 0's TCP values with the default TTL and TOS) among them: beyond MAX_OPTS - 1 the
    // templates' sets could silently run with another template's settings.
    for (side, client) in [("client", true), ("server", false)] {
        let mut sets: Vec<squall_tcp::FlowOpts> = Vec::new();
        for (i, t) in p.templates.iter().enumerate() {
            let o = crate::gen::flow_opts(if client { &t.client } else { &t.server }).sanitised();
            if !sets.contains(&o) {
                if sets.len() == squall_tcp::MAX_OPTS - 1 {
                    v.push(ProfileError::new(
                        format!("templates[{i}].{side}_tunables"),
                        format!(
                            "more than {} distinct {side} TCP tunable sets (this template's would be the next): templates must share their tunables",
                            squall_tcp::MAX_OPTS - 1
                        ),
                    ));
                    break;
                }
                sets.push(o);
            }
        }
    }
    v
}

/// Loads (and for `.py` compiles) a profile and checks the engine can run it.
pub fn load(path: &Path, tunables: &[String]) -> Result<Profile, SourceError> {
    let p = if path.extension().is_some_and(|e| e == "py") {
        let text = compile_py(path, tunables)?;
        load_profile_str(&text).map_err(SourceError::Load)?
    } else if !tunables.is_empty() {
        return Err(SourceError::Tunables);
    } else {
        load_profile_file(path).map_err(SourceError::Load)?
    };
    let u = unsupported(&p);
    if u.is_empty() {
        Ok(p)
    } else {
        Err(SourceError::Unsupported(u))
    }
}
