//! `--trace-filter`: which flows flow tracing may sample. Terms `template=NAME|INDEX`,
//! `client=IP[/PREFIX]`, `server=IP[/PREFIX]`, `port=N`, separated by commas (or given
//! in several `--trace-filter` options); a flow must match every term.

use std::net::IpAddr;

use squall_astf::Profile;

/// One address term: the address (IPv4 or IPv6) and its prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

/// The top `len` bits of a `bits`-bit address, as a mask.
fn mask(bits: u32, len: u8) -> u128 {
    let len = u32::from(len).min(bits);
    let all = if bits == 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    match len {
        0 => 0,
        l if l >= bits => all,
        l => all & !(all >> l),
    }
}

impl Prefix {
    /// Does `ip` fall in the prefix? An address of the other family never does.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                (u128::from(u32::from(p) ^ u32::from(a))) & mask(32, self.len) == 0
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => {
                (u128::from(p) ^ u128::from(a)) & mask(128, self.len) == 0
            }
            _ => false,
        }
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
    let addr: IpAddr = a.trim_start_matches('[').trim_end_matches(']').parse().map_err(|_| {
        format!("--trace-filter {key}={v}: not an IPv4 or IPv6 address, e.g. {key}=16.0.0.0/24 or {key}=2001:db8::/64")
    })?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = match l {
        None => max,
        Some(l) => l.parse::<u8>().ok().filter(|n| *n <= max).ok_or_else(|| {
            format!("--trace-filter {key}={v}: the prefix length must be 0-{max}")
        })?,
    };
    Ok(Prefix { addr, len })
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
                // One client=, server= and port= each (a second was kept in place of the
                // first, silently): refused.
                let twice = match k {
                    "client" => f.client.is_some(),
                    "server" => f.server.is_some(),
                    "port" => f.port.is_some(),
                    _ => false,
                };
                if twice {
                    return Err(format!(
                        "--trace-filter: `{k}=` given twice; give one {k}= term (a prefix covers several addresses)"
                    ));
                }
                match k {
                    "template" if !v.is_empty() => f.templates.push(v.to_string()),
                    "client" => f.client = Some(prefix(k, v)?),
                    "server" => f.server = Some(prefix(k, v)?),
                    "port" => {
                        f.port = Some(v.parse().ok().filter(|&p: &u16| p != 0).ok_or_else(|| {
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
    pub fn matches(&self, client: IpAddr, cport: u16, server: IpAddr, sport: u16) -> bool {
        self.client.is_none_or(|p| p.contains(client))
            && self.server.is_none_or(|p| p.contains(server))
            && self.port.is_none_or(|p| p == sport || p == cport)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
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
        assert!(TraceFilter::default().matches(ip("1.2.3.4"), 2, ip("::1"), 4));
    }

    #[test]
    fn ipv6_prefixes_match_ipv6_flows_only() {
        let f = TraceFilter::parse(&[
            "client=2001:db8:0:2222::/64,server=[2001:db8:2:2222::3000:1]".to_string(),
        ])
        .unwrap();
        assert_eq!(f.client.map(|p| p.len), Some(64));
        assert_eq!(f.server.map(|p| p.len), Some(128));
        let s = ip("2001:db8:2:2222::3000:1");
        assert!(f.matches(ip("2001:db8:0:2222::1000:1"), 1025, s, 80));
        assert!(f.matches(ip("2001:db8:0:2222:ffff::1"), 1025, s, 80));
        assert!(!f.matches(ip("2001:db8:0:2223::1000:1"), 1025, s, 80));
        assert!(!f.matches(
            ip("2001:db8:0:2222::1000:1"),
            1025,
            ip("2001:db8:2:2222::3000:2"),
            80
        ));
        // Another family never matches: 16.0.0.1 is not ::1000:1.
        let v4 = TraceFilter::parse(&["client=16.0.0.0/8".to_string()]).unwrap();
        assert!(!v4.matches(ip("::ffff:16.0.0.1"), 1025, s, 80));
        assert!(!v4.matches(ip("2001:db8::1000:1"), 1025, s, 80));
        // Prefix lengths at the edges.
        let p = |a: &str, len| Prefix { addr: ip(a), len };
        assert!(p("2001:db8::", 0).contains(ip("fe80::1")));
        assert!(p("2001:db8::", 32).contains(ip("2001:db8:ffff::1")));
        assert!(!p("2001:db8::", 33).contains(ip("2001:db8:ffff::1")));
        assert!(p("2001:db8::1", 128).contains(ip("2001:db8::1")));
        assert!(!p("2001:db8::1", 128).contains(ip("2001:db8::2")));
        assert!(p("2001:db8::1", 127).contains(ip("2001:db8::0")));
    }

    #[test]
    fn refuses_bad_terms_with_what_to_write() {
        for (spec, hint) in [
            ("client", "KEY=VALUE"),
            ("color=red", "keys:"),
            ("client=16.0.0.0/33", "0-32"),
            ("server=2001:db8::1/129", "0-128"),
            ("server=2001:db8::zz", "or server=2001:db8::/64"),
            ("client=16.0.0", "not an IPv4 or IPv6 address"),
            ("port=70000", "port number"),
            ("port=0", "port number"),
            ("template=", "unknown or empty"),
            ("client=16.0.0.1,client=16.0.0.2", "`client=` given twice"),
            ("port=80,port=81", "`port=` given twice"),
        ] {
            let e = TraceFilter::parse(&[spec.to_string()]).unwrap_err();
            assert!(e.contains(hint), "{spec}: {e}");
        }
    }

    #[test]
    fn prefix_zero_matches_everything() {
        let p = Prefix {
            addr: ip("0.0.0.0"),
            len: 0,
        };
        assert!(p.contains(ip("1.2.3.4")));
        let p = Prefix {
            addr: ip("10.1.2.3"),
            len: 32,
        };
        assert!(p.contains(ip("10.1.2.3")) && !p.contains(ip("10.1.2.4")));
        let p = Prefix {
            addr: ip("10.1.2.3"),
            len: 31,
        };
        assert!(p.contains(ip("10.1.2.2")) && !p.contains(ip("10.1.2.4")));
    }
}
