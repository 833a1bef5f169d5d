//! What a run plays on: the in-memory wire (both sides), one side on a real interface
//! (`--iface KIND:NAME --mode client|server`), or both sides on two real ports with the
//! device under test between them (`--client-iface`/`--server-iface`). The one place
//! `squall run` and `squall daemon` read those options, start a run on them, choose its
//! invariants and name its mode.

use std::sync::Arc;

use squall_astf::Profile;

use crate::dut::DutConfig;
use crate::iface::RealConfig;
use crate::report::Check;
use crate::run::{Live, RunConfig, RunResult};

/// The port options as given (`squall run` / `squall daemon` command lines).
#[derive(Clone, Copy, Debug, Default)]
pub struct PortSpec<'a> {
    pub iface: &'a str,
    pub mode: Option<&'a str>,
    pub peer_ip: Option<&'a str>,
    pub peer_mac: Option<&'a str>,
    pub client_iface: Option<&'a str>,
    pub server_iface: Option<&'a str>,
    pub client_gw: Option<&'a str>,
    pub server_gw: Option<&'a str>,
    pub eal: Option<&'a str>,
    /// `--reachable-sec`: how long a next hop stays confirmed before it is probed.
    pub reachable_sec: Option<u32>,
}

/// The ports of a run: neither (the in-memory wire), one real port, or the DUT's two.
#[derive(Clone, Debug, Default)]
pub struct Ports {
    pub real: Option<RealConfig>,
    pub dut: Option<DutConfig>,
}

impl Ports {
    /// The ports `spec` names, checked (interface kinds and names, addresses, the EAL's
    /// arguments, options that exclude each other).
    pub fn parse(spec: &PortSpec) -> Result<Ports, String> {
        let mut real = crate::iface::parse(spec.iface, spec.mode, spec.peer_ip, spec.peer_mac)?;
        let mut dut = crate::dut::parse(
            spec.client_iface,
            spec.server_iface,
            spec.client_gw,
            spec.server_gw,
        )?;
        match dut.as_mut() {
            // The DUT's DPDK ports share the one EAL.
            Some(d) => d.set_eal(spec.eal)?,
            None => crate::iface::set_eal(&mut real, spec.eal)?,
        }
        if dut.is_some() && (real.is_some() || spec.mode.is_some()) {
            return Err(
                "--client-iface/--server-iface play both sides: no --iface or --mode".into(),
            );
        }
        if let Some(sec) = spec.reachable_sec {
            let r = crate::iface::reachable(sec, spec.peer_mac.is_some())?;
            match (real.as_mut(), dut.as_mut()) {
                (Some(rc), _) => rc.reachable = r,
                (_, Some(d)) => {
                    d.client.reachable = r;
                    d.server.reachable = r;
                }
                (None, None) => {
                    return Err("--reachable-sec needs a real interface".into());
                }
            }
        }
        Ok(Ports { real, dut })
    }

    /// The in-memory wire (no real port).
    pub fn is_mem(&self) -> bool {
        self.real.is_none() && self.dut.is_none()
    }

    /// Checks `cores` workers against the ports (one per core this process may use on
    /// real ports; the in-memory wire's own rules are its callers').
    pub fn check_cores(&self, cores: u32) -> Result<(), String> {
        if self.is_mem() {
            return Ok(());
        }
        crate::cores::check_cores(cores)
    }

    /// Runs `profile` on these ports (blocking; `live` carries the figures and the
    /// control: stop, cut, rate).
    pub fn run(
        &self,
        profile: Arc<Profile>,
        cfg: &RunConfig,
        live: Arc<Live>,
    ) -> Result<RunResult, String> {
        match (&self.real, &self.dut) {
            (_, Some(dc)) => crate::dut::run_dut(profile, cfg, dc, live),
            (Some(rc), None) => crate::iface::run_real(profile, cfg, rc, live),
            (None, None) => crate::run::run(profile, cfg, live),
        }
    }

    /// The invariants of a run on these ports: both sides' when Squall plays both (the
    /// in-memory wire, the DUT), one side's otherwise.
    pub fn checks(&self, r: &RunResult) -> Vec<Check> {
        match &self.real {
            Some(rc) if self.dut.is_none() => crate::iface::single_side_checks(r, rc.mode),
            _ => crate::report::invariants(r),
        }
    }

    /// The ports in a few words (`squall daemon`'s `get_status`).
    pub fn label(&self) -> String {
        match (&self.real, &self.dut) {
            (_, Some(dc)) => format!(
                "{} (client) and {} (server), DUT between",
                dc.client.label(),
                dc.server.label()
            ),
            (Some(rc), None) => format!("{}, {} only", rc.label(), rc.mode.name()),
            (None, None) => "in-memory wire".into(),
        }
    }

    /// The mode line of a run with `cfg` on these ports.
    pub fn mode(&self, cfg: &RunConfig) -> String {
        match (&self.real, &self.dut) {
            (_, Some(_)) if cfg.cores > 1 => {
                format!("real time, {}, {} workers", self.label(), cfg.cores)
            }
            (_, Some(_)) => format!("real time, {}", self.label()),
            (Some(rc), None) => format!(
                "real time, {}{}",
                self.label(),
                crate::cores::plan(rc, cfg.cores)
            ),
            (None, None) if cfg.sim => "simulation (virtual clock)".into(),
            (None, None) if cfg.split => "real time, 2 threads (T-mem2)".into(),
            (None, None) if cfg.cores > 1 => format!("real time, {} shards (T-memN)", cfg.cores),
            (None, None) => "real time, 1 thread (T-mem1)".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reachable_time_applies_to_real_ports_only() {
        let spec = |iface, mode, client: Option<&'static str>, sec| PortSpec {
            iface,
            mode,
            client_iface: client,
            server_iface: client.map(|_| "afpacket:s0"),
            reachable_sec: sec,
            ..PortSpec::default()
        };
        let p = Ports::parse(&spec("afpacket:x", Some("client"), None, None)).unwrap();
        assert_eq!(p.real.unwrap().reachable, crate::iface::DEFAULT_REACHABLE);
        let p = Ports::parse(&spec("afpacket:x", Some("client"), None, Some(2))).unwrap();
        assert_eq!(p.real.unwrap().reachable.as_secs(), 2);
        let p = Ports::parse(&spec("mem", None, Some("afpacket:c0"), Some(0))).unwrap();
        let d = p.dut.unwrap();
        assert!(d.client.reachable.is_zero() && d.server.reachable.is_zero());
        let e = Ports::parse(&spec("mem", None, None, Some(5))).unwrap_err();
        assert!(e.contains("needs a real interface"), "{e}");
        let e = Ports::parse(&spec("afpacket:x", Some("client"), None, Some(3601))).unwrap_err();
        assert!(e.contains("at most 3600"), "{e}");
        let e = Ports::parse(&PortSpec {
            peer_mac: Some("02:00:00:00:00:01"),
            ..spec("afpacket:x", Some("client"), None, Some(5))
        })
        .unwrap_err();
        assert!(e.contains("never probed"), "{e}");
    }
}
