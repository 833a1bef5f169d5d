//! `--trace-filter`: which flows flow tracing may sample. Terms `template=NAME|INDEX`,
//! `client=IP[/PREFIX]`, `server=IP[/PREFIX]`, `port=N`, separated by commas (or given
//! in several `--trace-filter` options); a flow must match every term.

use std::net::Ipv4Addr;

use squall_astf::Profile;

/// One address term: the address and its prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    pub addr: u32,
    pub len: u8,
}

impl Prefix {
    fn mask(&self) -> u32 {
        if self.len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.len))
        }
    }
    /// Does `ip` (host order) fall in the prefix?
    pub fn contains(&self, ip: u32) -> bool {
        (ip ^ self.addr) & self.mask() == 0
    }
}

/// The parsed filter (empty: every flow).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceFilter {
    /// Template names (or template group names) or indexes; any of them.
    pub templates: Vec<String>,
    pub client: Option<Prefix>,
    pub server: Option<Prefix>,
    /// The server port or the client's source port.
    pub port: Option<u16>,
}

fn prefix(key: &str, v: &str) -> Result<Prefix, String> {
    let (a, l) = match v.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (v, None),
    };
    let addr: Ipv4Addr = a.parse().map_err(|_| {
        format!("--trace-filter {key}={v}: not an IPv4 address (IPv6 flows are not generated yet), e.g. {key}=16.0.0.0/24")
    })?;
    let len =
        match l {
            None => 32,
            Some(l) => l.parse::<u8>().ok().filter(|n| *n <= 32).ok_or_else(|| {
                format!("--trace-filter {key}={v}: the prefix length must be 0-32")
            })?,
        };
    Ok(Prefix {
        addr: u32::from(addr),
        len,
    })
}

impl TraceFilter {
    /// Parses and joins every `--trace-filter` value.
    pub fn parse(specs: &[String]) -> Result<Self, String> {
        let mut f = TraceFilter::default();
        for spec in specs {
            for term in spec.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                let Some((k, v)) = term.split_once('=') else {
                    return Err(format!(
                        "--trace-filter: `{term}` is not KEY=VALUE; keys: template, client, server, port (e.g. 'template=http,port=80')"
                    ));
                };
                let (k, v) = (k.trim(), v.trim());
                match k {
                    "template" if !v.is_empty() => f.templates.push(v.to_string()),
                    "client" => f.client = Some(prefix(k, v)?),
                    "server" => f.server = Some(prefix(k, v)?),
                    "port" => {
                        f.port = Some(v.parse().map_err(|_| {
                            format!("--trace-filter port={v}: not a port number (1-65535)")
                        })?)
                    }
                    _ => {
                        return Err(format!(
                            "--trace-filter: unknown or empty term `{term}`; keys: template=NAME|INDEX, client=IP[/PREFIX], server=IP[/PREFIX], port=N"
                        ))
                    }
                }
            }
        }
        Ok(f)
    }

    /// Per template of `p`: may its flows be traced? Fails on a template name or index
    /// the profile does not have.
    pub fn templates(&self, p: &Profile) -> Result<Vec<bool>, String> {
        let n = p.templates.len();
        if self.templates.is_empty() {
            return Ok(vec![true; n]);
        }
        let mut ok = vec![false; n];
        for name in &self.templates {
            let mut found = false;
            for (i, t) in p.templates.iter().enumerate() {
                let group = p.tg_names.get(t.tg_id as usize);
                if t.name == *name || group == Some(name) || name.parse() == Ok(i) {
                    ok[i] = true;
                    found = true;
                }
            }
            if !found {
                let names: Vec<String> = p
                    .templates
                    .iter()
                    .enumerate()
                    .map(|(i, t)| format!("{i} ({})", t.name))
                    .collect();
                return Err(format!(
                    "--trace-filter template={name}: no such template; the profile has {}",
                    names.join(", ")
                ));
            }
        }
        Ok(ok)
    }

    /// Do the address and port terms match a flow from `client:cport` to
    /// `server:sport`?
    pub fn matches(&self, client: u32, cport: u16, server: u32, sport: u16) -> bool {
        self.client.is_none_or(|p| p.contains(client))
            && self.server.is_none_or(|p| p.contains(server))
            && self.port.is_none_or(|p| p == sport || p == cport)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> u32 {
        u32::from(s.parse::<Ipv4Addr>().unwrap())
    }

    #[test]
    fn parses_combined_terms_and_matches_all_of_them() {
        let f = TraceFilter::parse(&[
            "client=16.0.0.0/24, port=80".to_string(),
            "server=48.0.0.1".to_string(),
        ])
        .unwrap();
        assert_eq!(
            f.client,
            Some(Prefix {
                addr: ip("16.0.0.0"),
                len: 24
            })
        );
        assert_eq!(f.port, Some(80));
        assert!(f.matches(ip("16.0.0.9"), 1025, ip("48.0.0.1"), 80));
        assert!(!f.matches(ip("16.0.1.9"), 1025, ip("48.0.0.1"), 80));
        assert!(!f.matches(ip("16.0.0.9"), 1025, ip("48.0.0.2"), 80));
        assert!(!f.matches(ip("16.0.0.9"), 1025, ip("48.0.0.1"), 443));
        // The client's source port matches too.
        assert!(f.matches(ip("16.0.0.9"), 80, ip("48.0.0.1"), 8080));
        assert!(TraceFilter::default().matches(1, 2, 3, 4));
    }

    #[test]
    fn refuses_bad_terms_with_what_to_write() {
        for (spec, hint) in [
            ("client", "KEY=VALUE"),
            ("color=red", "keys:"),
            ("client=16.0.0.0/33", "0-32"),
            ("server=2001:db8::1", "IPv4"),
            ("port=70000", "port number"),
            ("template=", "unknown or empty"),
        ] {
            let e = TraceFilter::parse(&[spec.to_string()]).unwrap_err();
            assert!(e.contains(hint), "{spec}: {e}");
        }
    }

    #[test]
    fn prefix_zero_matches_everything() {
        let p = Prefix { addr: 0, len: 0 };
        assert!(p.contains(ip("1.2.3.4")));
        let p = Prefix {
            addr: ip("10.1.2.3"),
            len: 32,
        };
        assert!(p.contains(ip("10.1.2.3")) && !p.contains(ip("10.1.2.4")));
    }
}
