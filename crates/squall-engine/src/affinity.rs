//! Pinning threads to cores (`sched_setaffinity`).

/// Why a thread could not be pinned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AffinityError {
    /// The core is not one this process may run on (lists the ones it may).
    NoSuchCore {
        /// The core asked for.
        core: usize,
        /// The cores available to this process.
        available: Vec<usize>,
    },
    /// The kernel refused (errno text).
    Os(String),
}

impl core::fmt::Display for AffinityError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AffinityError::NoSuchCore { core, available } => {
                write!(
                    f,
                    "core {core} does not exist or is not allowed; available cores: {available:?}"
                )
            }
            AffinityError::Os(e) => write!(f, "sched_setaffinity failed: {e}"),
        }
    }
}

impl std::error::Error for AffinityError {}

/// The cores this process may run on (from `sched_getaffinity`).
pub fn available_cores() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it; CPU_ISSET reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Pins the calling thread to `core`.
pub fn pin_current_thread(core: usize) -> Result<(), AffinityError> {
    let available = available_cores();
    if !available.contains(&core) {
        return Err(AffinityError::NoSuchCore { core, available });
    }
    // SAFETY: as above; `core` < CPU_SETSIZE since it is in `available`.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(AffinityError::Os(
            std::io::Error::last_os_error().to_string(),
        ));
    }
    Ok(())
}

/// Spawns a thread named `name`, pinned to `core` when given, running `f`. The thread
/// returns the pinning error instead of running `f` if the core cannot be used.
pub fn spawn_on_core<T, F>(
    name: &str,
    core: Option<usize>,
    f: F,
) -> std::io::Result<std::thread::JoinHandle<Result<T, AffinityError>>>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            if let Some(c) = core {
                pin_current_thread(c)?;
            }
            Ok(f())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_to_an_available_core_and_refuse_a_missing_one() {
        let cores = available_cores();
        assert!(!cores.is_empty());
        let c = cores[0];
        std::thread::spawn(move || pin_current_thread(c).unwrap())
            .join()
            .unwrap();
        let err = pin_current_thread(100_000).unwrap_err();
        assert!(err.to_string().contains("core 100000"), "{err}");
        let h = spawn_on_core("w", Some(c), || 7).unwrap();
        assert_eq!(h.join().unwrap(), Ok(7));
        let h = spawn_on_core("w", Some(100_000), || 7).unwrap();
        assert!(matches!(
            h.join().unwrap(),
            Err(AffinityError::NoSuchCore { core: 100_000, .. })
        ));
    }
}
