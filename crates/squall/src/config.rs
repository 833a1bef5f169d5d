//! The configuration file (`squall.toml`): the `[run]` table holds defaults for
//! `squall run`'s options and the `[serve]` table those of `squall serve`, one key per long option (`iface = "afpacket:eth1"`,
//! `client-iface`, `cores = 2`, `quiet = true`, `tunables = ["a=1"]`; `-` or `_` in
//! names). The file is read from `--config FILE`, else from `$SQUALL_CONFIG`, else from
//! `./squall.toml` if it exists. Its keys become options placed before the command line's
//! own, so the command line wins (list options such as `-t` add up). Keys are checked
//! against the options the command has: an unknown key, a value of the wrong kind or a
//! key that cannot come from a file (`profile`, `config`) is an error naming the file.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The file name looked for in the current directory.
pub const DEFAULT_FILE: &str = "squall.toml";

/// Which configuration file applies to `args` (the whole command line), if any.
fn config_path(args: &[OsString]) -> Result<Option<PathBuf>, String> {
    let mut it = args.iter().skip(2);
    while let Some(a) = it.next() {
        let a = a.to_string_lossy();
        if a == "--" {
            break;
        }
        if a == "--config" {
            return match it.next() {
                Some(v) => Ok(Some(PathBuf::from(v))),
                None => Err("--config needs a file name".into()),
            };
        }
        if let Some(v) = a.strip_prefix("--config=") {
            return Ok(Some(PathBuf::from(v)));
        }
    }
    if let Some(v) = std::env::var_os("SQUALL_CONFIG") {
        return Ok(Some(PathBuf::from(v)));
    }
    let here = Path::new(DEFAULT_FILE);
    Ok(here.is_file().then(|| here.to_path_buf()))
}

/// The tables a configuration file may hold: one per command that reads it.
pub const TABLES: [&str; 2] = ["run", "serve"];

/// For `squall run` / `squall serve` (`run` is that subcommand): inserts the options of
/// the configuration file's table of that name right after the command's name. Returns
/// the file used, if any.
pub fn apply(args: &mut Vec<OsString>, run: &clap::Command) -> Result<Option<PathBuf>, String> {
    if args.get(1).map(|a| a != run.get_name()).unwrap_or(true) {
        return Ok(None);
    }
    let Some(path) = config_path(args)? else {
        return Ok(None);
    };
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("config {}: {e}", path.display()))?;
    let extra = options(&text, run).map_err(|e| format!("config {}: {e}", path.display()))?;
    args.splice(2..2, extra.into_iter().map(OsString::from));
    Ok(Some(path))
}

/// The command-line options that the table of `text` named after command `run` (`[run]`,
/// `[serve]`) stands for.
pub fn options(text: &str, run: &clap::Command) -> Result<Vec<String>, String> {
    let doc: toml::Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
    let t = run.get_name();
    for (k, v) in &doc {
        if !TABLES.contains(&k.as_str()) {
            return Err(format!(
                "unknown table or key `{k}` (options go in [run] or [serve])"
            ));
        }
        if !v.is_table() {
            return Err(format!("`{k}` must be a table ([{k}])"));
        }
    }
    let Some(table) = doc.get(t) else {
        return Ok(Vec::new());
    };
    let table = table
        .as_table()
        .ok_or_else(|| format!("`{t}` must be a table ([{t}])"))?;
    let mut out = Vec::new();
    for (key, value) in table {
        let name = key.replace('_', "-");
        if name == "profile" || name == "config" {
            return Err(format!(
                "[{t}] {key}: give it on the command line, not in the file"
            ));
        }
        let arg = run
            .get_arguments()
            .find(|a| a.get_long() == Some(name.as_str()) || a.get_id() == key.as_str())
            .ok_or_else(|| format!("[{t}] {key}: `squall {t}` has no such option"))?;
        let flag = match (arg.get_long(), arg.get_short()) {
            (Some(l), _) => format!("--{l}"),
            (None, Some(s)) => format!("-{s}"),
            (None, None) => return Err(format!("[{t}] {key}: not an option")),
        };
        let takes_value = arg.get_action().takes_values();
        let scalar = |v: &toml::Value| -> Result<String, String> {
            match v {
                toml::Value::String(s) => Ok(s.clone()),
                toml::Value::Integer(i) => Ok(i.to_string()),
                toml::Value::Float(f) => Ok(f.to_string()),
                _ => Err(format!("[{t}] {key}: expected a string or a number")),
            }
        };
        match (value, takes_value) {
            (toml::Value::Boolean(b), false) => {
                if *b {
                    out.push(flag);
                }
            }
            (_, false) => return Err(format!("[{t}] {key}: a switch, expected true or false")),
            (toml::Value::Array(_), true)
                if !matches!(arg.get_action(), clap::ArgAction::Append) =>
            {
                return Err(format!(
                    "[{t}] {key}: a single value expected (a list is for the repeatable options, such as `tunables` or `route`)"
                ));
            }
            (toml::Value::Array(items), true) => {
                for v in items {
                    out.push(format!("{flag}={}", scalar(v)?));
                }
            }
            (v, true) => out.push(format!("{flag}={}", scalar(v)?)),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd() -> clap::Command {
        clap::Command::new("run")
            .args_override_self(true)
            .arg(clap::Arg::new("profile"))
            .arg(clap::Arg::new("iface").long("iface"))
            .arg(clap::Arg::new("cores").long("cores"))
            .arg(clap::Arg::new("client_iface").long("client-iface"))
            .arg(
                clap::Arg::new("quiet")
                    .long("quiet")
                    .action(clap::ArgAction::SetTrue),
            )
            .arg(
                clap::Arg::new("tunables")
                    .short('t')
                    .action(clap::ArgAction::Append),
            )
    }

    #[test]
    fn keys_become_options() {
        let o = options(
            "[run]\niface = \"afpacket:eth1\"\ncores = 2\nclient_iface = \"afpacket:a\"\n\
             quiet = true\ntunables = [\"a=1\", \"b=2\"]\n",
            &cmd(),
        )
        .unwrap();
        assert_eq!(
            o,
            // In key order (a TOML table is sorted).
            [
                "--client-iface=afpacket:a",
                "--cores=2",
                "--iface=afpacket:eth1",
                "--quiet",
                "-t=a=1",
                "-t=b=2"
            ]
        );
        assert!(options("[run]\nquiet = false\n", &cmd())
            .unwrap()
            .is_empty());
        assert!(options("", &cmd()).unwrap().is_empty());
    }

    #[test]
    fn bad_files_are_errors_that_say_why() {
        let e = |t: &str| options(t, &cmd()).unwrap_err();
        assert!(e("[run]\nbogus = 1\n").contains("no such option"));
        assert!(e("[run]\nprofile = \"x.json\"\n").contains("command line"));
        assert!(e("[run]\nquiet = 1\n").contains("true or false"));
        assert!(e("[run]\niface = true\n").contains("string or a number"));
        assert!(e("[run]\ncores = [1, 2]\n").contains("a single value expected"));
        assert!(e("[other]\n").contains("[run]"));
        assert!(e("run = 3\n").contains("table"));
        assert!(e("serve = 3\n").contains("table"));
        // The other command's table is left alone.
        assert!(options("[serve]\nroot = \"/srv\"\n", &cmd())
            .unwrap()
            .is_empty());
        let serve = clap::Command::new("serve").arg(clap::Arg::new("root").long("root"));
        assert_eq!(
            options("[run]\ncores = 2\n[serve]\nroot = \"/srv\"\n", &serve).unwrap(),
            ["--root=/srv"]
        );
        assert!(options("[serve]\nbogus = 1\n", &serve)
            .unwrap_err()
            .contains("[serve] bogus: `squall serve` has no such option"));
        assert!(e("[run\n").contains("TOML parse error") || !e("[run\n").is_empty());
    }

    #[test]
    fn the_command_line_wins_over_the_file() {
        let mut args: Vec<OsString> = ["squall", "run", "p.json", "--cores", "1"]
            .iter()
            .map(OsString::from)
            .collect();
        let dir = std::env::temp_dir().join(format!("squall-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("squall.toml");
        std::fs::write(&f, "[run]\ncores = 2\niface = \"afpacket:x\"\n").unwrap();
        args.push("--config".into());
        args.push(f.clone().into());
        let used = apply(
            &mut args,
            &cmd().arg(clap::Arg::new("config").long("config")),
        )
        .unwrap();
        assert_eq!(used.as_deref(), Some(f.as_path()));
        let m = cmd()
            .arg(clap::Arg::new("config").long("config"))
            .no_binary_name(true)
            .try_get_matches_from(&args[2..])
            .unwrap();
        assert_eq!(m.get_one::<String>("cores").unwrap(), "1");
        assert_eq!(m.get_one::<String>("iface").unwrap(), "afpacket:x");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
