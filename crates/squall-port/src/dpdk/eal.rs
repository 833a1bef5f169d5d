//! The DPDK Environment Abstraction Layer: initialised once per process with the user's
//! arguments passed through (`--eal "..."`), with readable errors (no hugepages, not
//! permitted, bad arguments).

use std::ffi::{c_char, c_int, CString};
use std::sync::{Mutex, OnceLock};

use super::ffi;

/// The outcome of the one EAL initialisation of this process, and its arguments.
static EAL: OnceLock<(Vec<String>, Result<(), String>)> = OnceLock::new();
/// Serialises the first initialisation (rte_eal_init is not re-entrant).
static INIT: Mutex<()> = Mutex::new(());

/// Splits an `--eal` string into arguments: whitespace separates, single or double quotes
/// group (`--vdev='net_memif0,socket=/tmp/a b'`), no other escapes.
pub fn split_args(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut started = false;
    for c in s.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                started = true;
            }
            None if c.is_whitespace() => {
                if started {
                    out.push(std::mem::take(&mut cur));
                    started = false;
                }
            }
            None => {
                cur.push(c);
                started = true;
            }
        }
    }
    if quote.is_some() {
        return Err(format!("--eal {s:?}: unterminated quote"));
    }
    if started {
        out.push(cur);
    }
    Ok(out)
}

/// Hugepages configured on this machine (`HugePages_Total` of /proc/meminfo), if readable.
fn hugepages_total() -> Option<u64> {
    let m = std::fs::read_to_string("/proc/meminfo").ok()?;
    m.lines()
        .find(|l| l.starts_with("HugePages_Total:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

/// The message for an EAL initialisation that failed with errno `e`, for a process
/// running as root or not, on a machine with `hugepages` hugepages configured.
fn init_error(args: &[String], e: i32, root: bool, hugepages: u64) -> String {
    let no_huge = args.iter().any(|a| a == "--no-huge");
    let missing_huge = !no_huge && hugepages == 0;
    let mut hint = String::new();
    if e == libc::EACCES || e == libc::EPERM {
        if !root {
            hint.push_str(
                "; permission denied: DPDK needs root (or CAP_SYS_ADMIN, CAP_NET_RAW, \
                 CAP_IPC_LOCK)",
            );
        } else if !missing_huge {
            // As root without the hugepage cause below: capabilities withheld.
            hint.push_str(
                "; permission denied although running as root: a container or sandbox may \
                 withhold CAP_SYS_ADMIN, CAP_NET_RAW or CAP_IPC_LOCK",
            );
        }
    }
    if missing_huge {
        hint.push_str(
            "; this machine has no hugepages: add --no-huge --in-memory to --eal (or reserve \
             hugepages: echo 512 > /proc/sys/vm/nr_hugepages)",
        );
    } else if no_huge && e == libc::ENOMEM {
        hint.push_str("; not enough memory without hugepages: raise -m (MB)");
    }
    format!(
        "dpdk: EAL initialisation failed ({}) with arguments `{}` (the EAL's own messages \
         above say more){hint}",
        ffi::strerror(e),
        args.join(" ")
    )
}

/// The arguments given to the EAL for `args`. DPDK 22.11 refuses `--in-memory` beside
/// `--no-huge` (which implies legacy memory), and `--no-shconf` would disable the
/// multi-process channel that net_memif needs at probe; so with `--no-huge`,
/// `--in-memory` becomes a file prefix of this process's own (`--file-prefix=squall-PID`,
/// unless one is given): two processes never share or lock each other's runtime files.
/// Everything else passes through unchanged.
pub fn effective_args(args: &[String]) -> Vec<String> {
    let no_huge = args.iter().any(|a| a == "--no-huge");
    let prefixed = args.iter().any(|a| a.starts_with("--file-prefix"));
    let mut out = Vec::with_capacity(args.len());
    for a in args {
        if no_huge && a == "--in-memory" {
            if !prefixed {
                out.push(format!("--file-prefix={}", own_prefix()));
            }
        } else {
            out.push(a.clone());
        }
    }
    out
}

/// Initialises the EAL with `args` (without the program name, see [`effective_args`])
/// once per process; later calls return the first call's outcome, and fail if they ask
/// for other arguments. The calling thread becomes the EAL's main lcore (pinned to its
/// core by the EAL).
pub fn init(args: &[String]) -> Result<(), String> {
    let _g = INIT.lock().unwrap_or_else(|e| e.into_inner());
    let (first, res) = EAL.get_or_init(|| (args.to_vec(), init_once(&effective_args(args))));
    if first.as_slice() != args {
        return Err(format!(
            "dpdk: the EAL was already initialised in this process with `{}` (once per process)",
            first.join(" ")
        ));
    }
    res.clone()
}

/// The file prefix [`effective_args`] gives this process.
fn own_prefix() -> String {
    format!("squall-{}", std::process::id())
}

/// Removes the EAL's runtime directory when its prefix is the one [`effective_args`]
/// made up for this process (`/var/run/dpdk/squall-PID`: nobody else uses it, and the
/// EAL leaves it behind); call once the ports are closed, before the process ends.
/// Directories the user named (`--file-prefix`) are left alone.
pub fn remove_own_runtime_dir() {
    if !is_up() {
        return;
    }
    // SAFETY: the EAL is up; it returns its NUL-terminated runtime path (static storage).
    let dir = unsafe { std::ffi::CStr::from_ptr(ffi::sq_runtime_dir()) }
        .to_string_lossy()
        .into_owned();
    let path = std::path::Path::new(&dir);
    if path.file_name().and_then(|n| n.to_str()) == Some(own_prefix().as_str()) {
        let _ = std::fs::remove_dir_all(path);
    }
}

/// Whether the EAL is up in this process.
pub fn is_up() -> bool {
    matches!(EAL.get(), Some((_, Ok(()))))
}

fn init_once(args: &[String]) -> Result<(), String> {
    let mut owned = Vec::with_capacity(args.len() + 1);
    for a in std::iter::once("squall").chain(args.iter().map(String::as_str)) {
        owned.push(
            CString::new(a).map_err(|_| format!("--eal: argument {a:?} contains a NUL byte"))?,
        );
    }
    // The EAL may keep pointers into argv (and permutes it): the strings live for the
    // process.
    let owned: &'static [CString] = Vec::leak(owned);
    let argv: &'static mut [*mut c_char] = Vec::leak(
        owned
            .iter()
            .map(|c| c.as_ptr() as *mut c_char)
            .chain(std::iter::once(std::ptr::null_mut()))
            .collect(),
    );
    // SAFETY: argv holds argc valid NUL-terminated strings and a NULL terminator, all
    // leaked (valid for the rest of the process); INIT serialises the call.
    let r = unsafe { ffi::sq_eal_init(owned.len() as c_int, argv.as_mut_ptr()) };
    if r < 0 {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        return Err(init_error(args, -r, root, hugepages_total().unwrap_or(0)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_handles_quotes_and_spaces() {
        assert_eq!(
            split_args("  --no-huge   --in-memory --vdev=net_memif0,role=server ").unwrap(),
            vec!["--no-huge", "--in-memory", "--vdev=net_memif0,role=server"]
        );
        assert_eq!(
            split_args("-l 0 --vdev='net_af_packet0,iface=a b' \"\"").unwrap(),
            vec!["-l", "0", "--vdev=net_af_packet0,iface=a b", ""]
        );
        assert!(split_args("--vdev='x").is_err());
        assert!(split_args("").unwrap().is_empty());
    }

    #[test]
    fn in_memory_without_hugepages_becomes_a_private_prefix() {
        let v = |s: &str| split_args(s).unwrap();
        let pid = std::process::id();
        assert_eq!(
            effective_args(&v("--no-huge --in-memory -l 0")),
            v(&format!("--no-huge --file-prefix=squall-{pid} -l 0"))
        );
        assert_eq!(
            effective_args(&v("--no-huge --file-prefix=x --in-memory")),
            v("--no-huge --file-prefix=x")
        );
        assert_eq!(
            effective_args(&v("--in-memory -l 1")),
            v("--in-memory -l 1")
        );
    }

    #[test]
    fn init_errors_suggest_the_fix() {
        let l0 = ["-l".to_string(), "0".to_string()];
        // Not root: privileges; with no hugepages either, both hints.
        let e = init_error(&l0, libc::EACCES, false, 0);
        assert!(e.contains("DPDK needs root"), "{e}");
        assert!(e.contains("--no-huge --in-memory"), "{e}");
        // Root on a machine without hugepages: the EAL's EACCES is the hugepage
        // information, not privileges.
        let e = init_error(&l0, libc::EACCES, true, 0);
        assert!(!e.contains("needs root"), "{e}");
        assert!(!e.contains("although running as root"), "{e}");
        assert!(e.contains("--no-huge --in-memory"), "{e}");
        // Root with hugepages: capabilities withheld.
        let e = init_error(&l0, libc::EPERM, true, 512);
        assert!(e.contains("although running as root"), "{e}");
        assert!(!e.contains("no hugepages"), "{e}");
        let e = init_error(&["--no-huge".into()], libc::ENOMEM, true, 0);
        assert!(e.contains("raise -m"), "{e}");
        assert!(!e.contains("no hugepages"), "{e}");
    }
}
