//! Output paths checked before a run starts (`--json`, `--pcap`, `--trace DIR`): a path
//! that cannot be written is an error at once (exit status 2), not after the whole run.
//! Nothing is left behind by the check: an existing file is opened for appending and
//! not changed, a new one is created and removed again.

use std::fs::OpenOptions;
use std::path::Path;

/// What to do about a path that cannot be written.
fn hint(path: &Path) -> String {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.display().to_string(),
        _ => ".".into(),
    };
    format!("the directory {dir} must exist and be writable by this user; pick another path or create it first")
}

/// Can `opt`'s file `path` be written? (It is written when the run ends.)
pub fn check_file(opt: &str, path: &Path) -> Result<(), String> {
    let p = path.display();
    if path.is_dir() {
        return Err(format!(
            "{opt} {p}: is a directory; give a file name (e.g. {}/out)",
            p
        ));
    }
    if path.exists() {
        return OpenOptions::new()
            .append(true)
            .open(path)
            .map(drop)
            .map_err(|e| {
                format!(
                    "{opt} {p}: cannot write the file: {e}; make it writable or pick another path"
                )
            });
    }
    match OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(f) => {
            drop(f);
            let _ = std::fs::remove_file(path);
            Ok(())
        }
        Err(e) => Err(format!(
            "{opt} {p}: cannot create the file: {e}; {}",
            hint(path)
        )),
    }
}

/// Can files be written in directory `dir` (created now if it does not exist)?
pub fn check_dir(opt: &str, dir: &Path) -> Result<(), String> {
    let d = dir.display();
    if dir.exists() && !dir.is_dir() {
        return Err(format!(
            "{opt} {d}: not a directory; give a directory for its files (created if missing)"
        ));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("{opt} {d}: cannot create the directory: {e}; {}", hint(dir)))?;
    let probe = dir.join(format!(".squall-write-check-{}", std::process::id()));
    check_file(opt, &probe).map_err(|_| {
        format!(
            "{opt} {d}: cannot write files in this directory; make it writable by this user or pick another directory"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writable_paths_pass_and_leave_nothing_behind() {
        let dir = std::env::temp_dir().join(format!("squall-outputs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let sub = dir.join("trace");
        check_dir("--trace", &sub).unwrap();
        assert!(sub.is_dir(), "created");
        assert_eq!(std::fs::read_dir(&sub).unwrap().count(), 0, "no probe left");
        let f = dir.join("out.json");
        check_file("--json", &f).unwrap();
        assert!(!f.exists(), "the check removes the file it created");
        std::fs::write(&f, "keep").unwrap();
        check_file("--json", &f).unwrap();
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            "keep",
            "not truncated"
        );
        // Errors name the option, the path and what to do.
        let e = check_file("--json", &dir).unwrap_err();
        assert!(e.contains("--json") && e.contains("is a directory"), "{e}");
        let e = check_dir("--trace", &f).unwrap_err();
        assert!(e.contains("not a directory"), "{e}");
        let e = check_file("--pcap", &dir.join("nope/x.pcap")).unwrap_err();
        assert!(
            e.contains("cannot create the file") && e.contains("must exist"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
