//! Loading: JSON text -> raw serde mirror -> semantic validation -> compiled [`Profile`].
//! The top-level object is decoded key by key and each element of the lists (buffers,
//! ip_gens, programs, templates) on its own, so every unknown or missing top-level key and
//! the first type error of every element are all reported (with their paths); semantic
//! checks run only on a profile without type errors, and their errors are all collected.
//! Each command is decoded on its own, so every malformed command is reported.
//! This module holds the entry points, names and the profile-level compilation;
//! [`data`] compiles buffers and address pools, [`program`] compiles and checks programs.

mod data;
mod http;
mod l7;
mod program;

use serde::de::Error as _;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Errors, LoadError, ProfileError};
use crate::ipv6::Ipv6Map;
use crate::model::*;
use crate::raw::*;
use crate::tunables::{apply_ip, apply_ipv6, apply_side, apply_tcp, refuse_side_wide, scheduler};

use data::{compile_buffer, compile_pool, parse_ip};
use http::HttpBuild;
use program::*;

/// The IR version this build reads.
pub const IR_VERSION: u64 = 1;

/// Loads and validates a profile file.
pub fn load_profile_file(path: &Path) -> Result<Profile, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|e| LoadError::Io {
        file: path.display().to_string(),
        message: e.to_string(),
    })?;
    load_profile_str(&text)
}

/// Loads and validates a profile from JSON text.
pub fn load_profile_str(text: &str) -> Result<Profile, LoadError> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| LoadError::Syntax {
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    load_profile_value(value)
}

/// Loads and validates a profile from a parsed JSON value.
pub fn load_profile_value(value: serde_json::Value) -> Result<Profile, LoadError> {
    let one = |p: &str, m: String| LoadError::Invalid(vec![ProfileError::new(p, m)]);
    let serde_json::Value::Object(mut obj) = value else {
        return Err(one(".", "a profile must be a JSON object".into()));
    };
    if let Some(v) = obj.get("version") {
        if v.as_u64() != Some(IR_VERSION) {
            return Err(one(
                "version",
                format!("unsupported IR version {v} (this build reads version {IR_VERSION})"),
            ));
        }
    }
    // Key by key, with the messages and paths of a whole `RawProfile` decode (its fields, in
    // order: `decoding_by_parts_matches_a_whole_decode`), but reporting every type error.
    const FIELDS: &[&str] = &[
        "version",
        "meta",
        "buffers",
        "ip_gens",
        "programs",
        "templates",
        "global",
    ];
    let mut errs = Errors::default();
    for key in obj.keys().filter(|k| !FIELDS.contains(&k.as_str())) {
        errs.push(
            key.as_str(),
            serde_json::Error::unknown_field(key, FIELDS).to_string(),
        );
    }
    let mut take = |key: &'static str, required: bool, errs: &mut Errors| {
        let v = obj.remove(key);
        if v.is_none() && required {
            errs.push(".", serde_json::Error::missing_field(key).to_string());
        }
        v
    };
    let e = &mut errs;
    let version = take("version", true, e).and_then(|v| decode(v, "version", e));
    let meta = take("meta", false, e).and_then(|v| decode(v, "meta", e));
    let buffers = take("buffers", true, e).and_then(|v| decode_list(v, "buffers", e));
    let ip_gens = take("ip_gens", true, e).and_then(|v| decode_list(v, "ip_gens", e));
    let programs = take("programs", true, e).and_then(|v| decode_list(v, "programs", e));
    let templates = take("templates", true, e).and_then(|v| decode_list(v, "templates", e));
    let global = take("global", false, e).and_then(|v| decode(v, "global", e));
    match (version, buffers, ip_gens, programs, templates) {
        (Some(version), Some(buffers), Some(ip_gens), Some(programs), Some(templates))
            if errs.is_empty() =>
        {
            compile(&RawProfile {
                version,
                meta: meta.flatten(),
                buffers,
                ip_gens,
                programs,
                templates,
                global: global.flatten(),
            })
        }
        _ => Err(LoadError::Invalid(errs.list)),
    }
}

/// Decodes `v` into a `T`, or reports its (first) type error under `path`, with the path
/// inside `v` appended as `serde_path_to_error` prints it (`buffers[0].data`).
fn decode<T: serde::de::DeserializeOwned>(
    v: serde_json::Value,
    path: &str,
    errs: &mut Errors,
) -> Option<T> {
    serde_path_to_error::deserialize(v)
        .map_err(|e| {
            let inner = e.path().to_string();
            let at = match inner.as_str() {
                "." => path.to_string(),
                i if i.starts_with('[') => format!("{path}{i}"),
                i => format!("{path}.{i}"),
            };
            errs.push(at, e.into_inner().to_string());
        })
        .ok()
}

/// Decodes a list element by element (`key[i]`), so that every bad element is reported;
/// anything but an array is one error at `key`.
fn decode_list<T: serde::de::DeserializeOwned>(
    v: serde_json::Value,
    key: &str,
    errs: &mut Errors,
) -> Option<Vec<T>> {
    let serde_json::Value::Array(items) = v else {
        return decode(v, key, errs);
    };
    let decoded: Vec<Option<T>> = items
        .into_iter()
        .enumerate()
        .map(|(i, item)| decode(item, &format!("{key}[{i}]"), errs))
        .collect();
    decoded.into_iter().collect()
}

/// Is `s` a valid name (1-64 of `A-Z a-z 0-9 _ . : / -`)?
fn valid_name(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.:/-".contains(&b))
}

pub(super) fn check_name(s: &str, path: &str, errs: &mut Errors) {
    if !valid_name(s) {
        errs.push(
            path,
            format!("invalid name {s:?} (1-64 characters from A-Z a-z 0-9 _ . : / -)"),
        );
    }
}

/// Registers `name` at index `i`; reports a duplicate.
fn register<'a>(
    map: &mut HashMap<&'a str, usize>,
    name: &'a str,
    i: usize,
    what: &str,
    list: &str,
    errs: &mut Errors,
) {
    if let Some(&j) = map.get(name) {
        errs.push(
            format!("{list}[{i}].name"),
            format!("duplicate {what} name {name:?} (also {list}[{j}])"),
        );
    } else {
        map.insert(name, i);
    }
}

fn compile(raw: &RawProfile) -> Result<Profile, LoadError> {
    let mut errs = Errors::default();
    if raw.version != IR_VERSION {
        errs.push(
            "version",
            format!(
                "unsupported IR version {} (this build reads version {IR_VERSION})",
                raw.version
            ),
        );
    }

    // Buffers.
    let mut buf_names: HashMap<&str, usize> = HashMap::new();
    let mut buffers = Vec::with_capacity(raw.buffers.len());
    let mut buf_len = Vec::with_capacity(raw.buffers.len());
    // Check the declared total before building anything, so a hostile profile cannot make
    // the loader allocate more than the cap.
    let declared: u64 = raw
        .buffers
        .iter()
        .map(|b| {
            let lead = b.text.as_ref().map_or(0, |t| t.len())
                + b.base64.as_ref().map_or(0, |t| t.len() / 4 * 3);
            b.size.unwrap_or(0).max(lead as u64)
        })
        .fold(0u64, u64::saturating_add);
    let over_cap = declared > MAX_BUFFERS_TOTAL;
    if over_cap {
        errs.push(
            "buffers",
            format!("{declared} bytes in all, more than {MAX_BUFFERS_TOTAL}"),
        );
    }
    // A buffer that does not compile counts as empty below: the flows' byte balance is
    // not checked then (it would report a hang that is only the bad buffer).
    let mut bad_buffer = over_cap;
    for (i, b) in raw.buffers.iter().enumerate() {
        register(&mut buf_names, &b.name, i, "buffer", "buffers", &mut errs);
        let data = if over_cap {
            Vec::new()
        } else {
            compile_buffer(b, &format!("buffers[{i}]"), &mut errs).unwrap_or_else(|| {
                bad_buffer = true;
                Vec::new()
            })
        };
        buf_len.push(data.len());
        buffers.push(Buffer {
            name: b.name.clone(),
            data: Arc::from(data),
        });
    }
    if raw.buffers.len() > u32::MAX as usize {
        errs.push("buffers", "too many buffers");
    }
    let total: u64 = buf_len.iter().map(|&l| l as u64).sum();
    if total > MAX_BUFFERS_TOTAL {
        errs.push(
            "buffers",
            format!("{total} bytes in all, more than {MAX_BUFFERS_TOTAL}"),
        );
    }

    // IP generators.
    let mut gen_names: HashMap<&str, usize> = HashMap::new();
    let mut ip_gens = Vec::new();
    if raw.ip_gens.is_empty() {
        errs.push("ip_gens", "at least one ip_gen is required");
    }
    if raw.ip_gens.len() > u16::MAX as usize {
        errs.push(
            "ip_gens",
            format!("{} generators, more than {}", raw.ip_gens.len(), u16::MAX),
        );
    }
    for (i, g) in raw.ip_gens.iter().enumerate() {
        let p = format!("ip_gens[{i}]");
        check_name(&g.name, &format!("{p}.name"), &mut errs);
        register(&mut gen_names, &g.name, i, "ip_gen", "ip_gens", &mut errs);
        let clients = compile_pool(&g.clients, &format!("{p}.clients"), &mut errs);
        let servers = compile_pool(&g.servers, &format!("{p}.servers"), &mut errs);
        let off = g.ip_offset.as_deref().map_or(Some(0x0100_0000), |s| {
            parse_ip(s, &format!("{p}.ip_offset"), &mut errs)
        });
        let off_s = match g.ip_offset_server.as_deref() {
            Some(s) => parse_ip(s, &format!("{p}.ip_offset_server"), &mut errs),
            None => off,
        };
        if let (Some(c), Some(s)) = (&clients, &servers) {
            if c.v6.is_some() != s.v6.is_some() {
                errs.push(
                    format!("{p}.servers.range"),
                    "the client pool and the server pool are of different families: a flow is IPv4 or IPv6 end to end (Squall does not translate)",
                );
            }
        }
        if let (Some(clients), Some(servers), Some(off), Some(off_s)) =
            (clients, servers, off, off_s)
        {
            ip_gens.push((
                i,
                IpGen {
                    name: g.name.clone(),
                    clients,
                    servers,
                    ip_offset: off,
                    ip_offset_server: off_s,
                },
            ));
        }
    }
    for (a, (i, gi)) in ip_gens.iter().enumerate() {
        for (j, gj) in ip_gens.iter().skip(a + 1) {
            // An identical pool (one TRex `ASTFIPGenDist` in several generators) is one
            // shared pool ([`Profile::client_pool_of`]); any other overlap is ambiguous.
            let overlap = gi.clients.v6 == gj.clients.v6
                && gi.clients.first <= gj.clients.last
                && gj.clients.first <= gi.clients.last;
            if overlap && gi.clients == gj.clients && gi.ip_offset != gj.ip_offset {
                errs.push(
                    format!("ip_gens[{j}].ip_offset"),
                    format!("differs from ip_gens[{i}], which shares this client pool: a shared pool has one ip_offset"),
                );
            }
            if overlap && gi.clients != gj.clients {
                errs.push(
                    format!("ip_gens[{j}].clients.range"),
                    format!("overlaps the client pool of ip_gens[{i}] (generators may share a client pool only when it is identical: range, distribution, per_core_distribution)"),
                );
            }
        }
    }
    let ip_gens: Vec<IpGen> = ip_gens.into_iter().map(|(_, g)| g).collect();

    // Programs.
    if raw.programs.is_empty() {
        errs.push("programs", "at least one program is required");
    }
    if raw.programs.len() > u16::MAX as usize {
        errs.push(
            "programs",
            format!("{} programs, more than {}", raw.programs.len(), u16::MAX),
        );
    }
    let ctx = ProgCtx {
        bufs: &buf_names,
        buf_len: &buf_len,
    };
    let mut prog_names: HashMap<&str, usize> = HashMap::new();
    let mut programs = Vec::with_capacity(raw.programs.len());
    let mut infos = Vec::with_capacity(raw.programs.len());
    let mut http = HttpBuild {
        base: buffers.len(),
        ..HttpBuild::default()
    };
    for (i, rp) in raw.programs.iter().enumerate() {
        register(
            &mut prog_names,
            &rp.name,
            i,
            "program",
            "programs",
            &mut errs,
        );
        let (prog, info) =
            compile_program(rp, &format!("programs[{i}]"), &ctx, &mut http, &mut errs);
        programs.push(prog);
        infos.push(info);
    }

    // Tunables.
    let global = raw.global.as_ref();
    let mut both = SideTunables::default();
    if let Some(g) = global {
        if let Some(t) = &g.tcp {
            apply_tcp(&mut both.tcp, t, "global.tcp", &mut errs);
        }
        if let Some(ip) = &g.ip {
            apply_ip(&mut both.ip, ip, "global.ip", &mut errs);
        }
        if let Some(v6) = &g.ipv6 {
            apply_ipv6(&mut both.ipv6, v6, "global.ipv6", &mut errs);
        }
    }
    let mut client_base = both;
    let mut server_base = both;
    apply_side(
        &mut client_base,
        global.and_then(|g| g.client.as_ref()),
        "global.client",
        &mut errs,
    );
    apply_side(
        &mut server_base,
        global.and_then(|g| g.server.as_ref()),
        "global.server",
        &mut errs,
    );
    let sched = scheduler(global.and_then(|g| g.scheduler.as_ref()), &mut errs);

    // Templates.
    if raw.templates.is_empty() {
        errs.push("templates", "at least one template is required");
    }
    if raw.templates.len() > u16::MAX as usize {
        errs.push(
            "templates",
            format!("{} templates, more than {}", raw.templates.len(), u16::MAX),
        );
    }
    let mut tg_names = vec![String::new()];
    let mut templates = Vec::with_capacity(raw.templates.len());
    for (i, t) in raw.templates.iter().enumerate() {
        let p = format!("templates[{i}]");
        if let Some(n) = &t.name {
            check_name(n, &format!("{p}.name"), &mut errs);
        }
        let tg_id = match &t.tg_name {
            None => 0,
            Some(n) => {
                check_name(n, &format!("{p}.tg_name"), &mut errs);
                match tg_names.iter().position(|x| x == n) {
                    Some(k) => k,
                    None => {
                        tg_names.push(n.clone());
                        tg_names.len() - 1
                    }
                }
            }
        };
        let transport = match t.transport.unwrap_or(RawTransport::Tcp) {
            RawTransport::Tcp => Transport::Tcp,
            RawTransport::Udp => Transport::Udp,
        };
        let lookup_prog = |name: &str, field: &str, errs: &mut Errors| -> Option<usize> {
            let r = prog_names.get(name).copied();
            if r.is_none() {
                errs.push(format!("{p}.{field}"), format!("unknown program {name:?}"));
            }
            r
        };
        let cprog = lookup_prog(&t.client_program, "client_program", &mut errs);
        let sprog = lookup_prog(&t.server_program, "server_program", &mut errs);
        for (field, prog, side) in [
            ("client_program", cprog, "client"),
            ("server_program", sprog, "server"),
        ] {
            let Some(pi) = prog else { continue };
            let info = &infos[pi];
            let pname = &raw.programs[pi].name;
            let wrong = match transport {
                Transport::Tcp => info.udp_op.map(|(ci, op)| (ci, op, "UDP", "tcp")),
                Transport::Udp => info.tcp_op.map(|(ci, op)| (ci, op, "TCP", "udp")),
            };
            if let Some((ci, op, kind, tr)) = wrong {
                errs.push(
                    format!("{p}.{field}"),
                    format!("program {pname:?} uses {kind} instruction {op:?} (programs[{pi}].commands[{ci}]) but the template's transport is {tr}"),
                );
            }
            let side_bad = if side == "client" {
                info.accept_at.map(|c| (c, "accept"))
            } else {
                info.connect_at.map(|c| (c, "connect"))
            };
            if let Some((ci, op)) = side_bad {
                errs.push(
                    format!("{p}.{field}"),
                    format!("program {pname:?} uses {op:?} (programs[{pi}].commands[{ci}]), which a {side} program cannot"),
                );
            }
        }
        if let (Some(c), Some(s), false) = (cprog, sprog, bad_buffer) {
            if let (Some(ct), Some(st)) = (infos[c].totals, infos[s].totals) {
                let (cn, sn) = (&raw.programs[c].name, &raw.programs[s].name);
                let checks = [
                    (
                        ct.rx_bytes,
                        st.tx_bytes,
                        "client",
                        cn,
                        "server",
                        sn,
                        "bytes",
                    ),
                    (
                        st.rx_bytes,
                        ct.tx_bytes,
                        "server",
                        sn,
                        "client",
                        cn,
                        "bytes",
                    ),
                    (
                        ct.rx_msgs,
                        st.tx_msgs,
                        "client",
                        cn,
                        "server",
                        sn,
                        "datagrams",
                    ),
                    (
                        st.rx_msgs,
                        ct.tx_msgs,
                        "server",
                        sn,
                        "client",
                        cn,
                        "datagrams",
                    ),
                ];
                for (need, sent, a, an, b, bn, unit) in checks {
                    if need > sent {
                        errs.push(
                            p.clone(),
                            format!("{a} program {an:?} waits for {need} {unit} in total but {b} program {bn:?} sends only {sent}: the flow would hang"),
                        );
                    }
                }
            }
        }
        let ip_gen = match &t.ip_gen {
            Some(n) => {
                let g = gen_names.get(n.as_str()).copied();
                if g.is_none() {
                    errs.push(format!("{p}.ip_gen"), format!("unknown ip_gen {n:?}"));
                }
                g
            }
            None if raw.ip_gens.len() == 1 => Some(0),
            None => {
                errs.push(
                    format!("{p}.ip_gen"),
                    format!("required when there are {} ip_gens", raw.ip_gens.len()),
                );
                None
            }
        };
        let port = t.port.unwrap_or(80);
        if !(1..=65535).contains(&port) {
            errs.push(
                format!("{p}.port"),
                format!("{port} out of range 1..=65535"),
            );
        }
        let cps = t.cps.unwrap_or(1.0);
        if !(cps.is_finite() && cps > 0.0 && cps <= 1e8) {
            errs.push(
                format!("{p}.cps"),
                format!("{cps} out of range (0, 100000000]"),
            );
        }
        let limit = t
            .limit
            .map(|l| u32_field(l, 1, u32::MAX.into(), format!("{p}.limit"), &mut errs));
        let mut assoc = Vec::new();
        match &t.assoc {
            None => assoc.push(AssocRule {
                port: port as u16,
                ips: None,
                l7: None,
                v6: false,
            }),
            Some(rules) => {
                if rules.is_empty() {
                    errs.push(
                        format!("{p}.assoc"),
                        "needs at least one rule (omit it for the default)",
                    );
                }
                for (k, r) in rules.iter().enumerate() {
                    let rp = format!("{p}.assoc[{k}]");
                    let rport = u32_field(r.port, 1, 65535, format!("{rp}.port"), &mut errs) as u16;
                    let ips = match (&r.ip_start, &r.ip_end) {
                        (None, None) => None,
                        (Some(a), Some(b)) => {
                            let a = parse_ip(a, &format!("{rp}.ip_start"), &mut errs);
                            let b = parse_ip(b, &format!("{rp}.ip_end"), &mut errs);
                            match (a, b) {
                                (Some(a), Some(b)) if a <= b => Some((a, b)),
                                (Some(_), Some(_)) => {
                                    errs.push(rp.clone(), "ip_start is above ip_end");
                                    None
                                }
                                _ => None,
                            }
                        }
                        _ => {
                            errs.push(rp.clone(), "give both ip_start and ip_end, or neither");
                            None
                        }
                    };
                    let l7 = r.l7_map.as_ref().and_then(|m| {
                        let path = format!("{rp}.l7_map");
                        if transport != Transport::Tcp {
                            errs.push(path, "l7_map selects TCP server templates only");
                            return None;
                        }
                        let first = cprog
                            .and_then(|c| programs[c].as_ref())
                            .map(|c| l7::first_bytes(c, &buffers, 256));
                        l7::compile_l7(m, &path, first.as_deref(), &mut errs)
                    });
                    assoc.push(AssocRule {
                        port: rport,
                        ips,
                        l7,
                        v6: false,
                    });
                }
            }
        }
        // (`ipv6.enable` of the profile stays on whatever a template says: TRex gives the
        // global value priority, "not as other tunable", and a template can only add it)
        let global_v6 = client_base.ipv6.enable;
        let mut client = client_base;
        let mut server = server_base;
        refuse_side_wide(
            t.client_tunables.as_ref(),
            &format!("{p}.client_tunables"),
            &mut errs,
        );
        refuse_side_wide(
            t.server_tunables.as_ref(),
            &format!("{p}.server_tunables"),
            &mut errs,
        );
        apply_side(
            &mut client,
            t.client_tunables.as_ref(),
            &format!("{p}.client_tunables"),
            &mut errs,
        );
        apply_side(
            &mut server,
            t.server_tunables.as_ref(),
            &format!("{p}.server_tunables"),
            &mut errs,
        );
        client.ipv6.enable |= global_v6;
        let ipv6 = ip_gen
            .and_then(|g| ip_gens.get(g))
            .and_then(|g| template_ipv6(g, &client));
        for r in &mut assoc {
            r.v6 = ipv6.is_some();
        }
        if let (Some(c), Some(s), Some(g)) = (cprog, sprog, ip_gen) {
            templates.push(Template {
                name: t.name.clone().unwrap_or_else(|| p.clone()),
                tg_id: tg_id as u16,
                transport,
                client_program: ProgIdx(c as u16),
                server_program: ProgIdx(s as u16),
                ip_gen: g as u16,
                port: port as u16,
                cps,
                limit,
                assoc,
                client,
                server,
                ipv6,
            });
        }
    }
    // Ambiguous server association.
    for (i, a) in templates.iter().enumerate() {
        for (j, b) in templates.iter().enumerate().skip(i + 1) {
            if a.transport != b.transport {
                continue;
            }
            'rules: for (k, rb) in b.assoc.iter().enumerate() {
                for (m, ra) in a.assoc.iter().enumerate() {
                    if ra.overlaps(rb) {
                        let path = if raw.templates[j].assoc.is_some() {
                            format!("templates[{j}].assoc[{k}]")
                        } else {
                            format!("templates[{j}].port")
                        };
                        errs.push(
                            path,
                            format!("server association for port {} overlaps templates[{i}].assoc[{m}]: a new flow could not choose its template", rb.port),
                        );
                        break 'rules;
                    }
                }
            }
        }
    }

    if !errs.is_empty() {
        return Err(LoadError::Invalid(errs.list));
    }
    for (k, data) in http.bufs.into_iter().enumerate() {
        buffers.push(Buffer {
            name: format!("_http{k}"),
            data: Arc::from(data),
        });
    }
    Ok(Profile {
        http: http.reqs,
        http_cursors: http.cursors,
        buffers,
        programs: programs
            .into_iter()
            .map(|p| p.expect("no errors, so every program compiled"))
            .collect(),
        ip_gens,
        templates,
        tg_names,
        scheduler: sched,
    })
}

/// How a template's flows are addressed: native IPv6 pools give their own high bits;
/// IPv4 pools go over IPv6 when the client side's `ipv6.enable` is on, under
/// `ipv6.src_msb` (clients) and `ipv6.dst_msb` (servers), as TRex does.
fn template_ipv6(gen: &IpGen, client: &SideTunables) -> Option<Ipv6Map> {
    match (gen.clients.v6, gen.servers.v6) {
        (Some(c), Some(s)) => Some(Ipv6Map {
            client: c,
            server: s,
        }),
        _ => client.ipv6.enable.then_some(Ipv6Map {
            client: client.ipv6.src_msb,
            server: client.ipv6.dst_msb,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(valid_name("http_req.v1:a/b-c"));
        assert!(!valid_name(""));
        assert!(!valid_name("a b"));
        assert!(!valid_name(&"x".repeat(65)));
    }

    /// The key-by-key decode gives what decoding the whole `RawProfile` at once gave: the
    /// same profile for every shipped example, the same error for a profile with one.
    #[test]
    fn decoding_by_parts_matches_a_whole_decode() {
        let whole =
            |v: serde_json::Value| match serde_path_to_error::deserialize::<_, RawProfile>(v) {
                Ok(raw) => format!("{:?}", compile(&raw)),
                Err(e) => format!(
                    "{:?}",
                    Err::<Profile, _>(LoadError::Invalid(vec![ProfileError::new(
                        e.path().to_string(),
                        e.into_inner().to_string()
                    )]))
                ),
            };
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if path.extension().and_then(|x| x.to_str()) != Some("json") {
                continue;
            }
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let mut bad = [v.clone(), v.clone(), v.clone(), v.clone(), v.clone()];
            bad[0]["extra"] = serde_json::json!(1);
            bad[1].as_object_mut().unwrap().remove("templates");
            bad[2]["buffers"] = serde_json::json!(null);
            bad[3]["templates"][0]["cps"] = serde_json::json!([1]);
            bad[4]["meta"] = serde_json::json!("m");
            for v in std::iter::once(v).chain(bad) {
                assert_eq!(
                    format!("{:?}", load_profile_value(v.clone())),
                    whole(v),
                    "{}",
                    path.display()
                );
            }
            n += 1;
        }
        assert!(n >= 1);
    }

    #[test]
    fn command_errors_keep_the_field_path() {
        let mut errs = Errors::default();
        let v = serde_json::json!({"op": "recv", "bytes": "x"});
        assert!(decode_cmd(&v, "p.c[0]", &mut errs).is_none());
        assert_eq!(errs.list[0].path, "p.c[0].bytes");
        let v = serde_json::json!({"op": "sned"});
        assert!(decode_cmd(&v, "p.c[1]", &mut errs).is_none());
        assert_eq!(errs.list[1].path, "p.c[1]");
        assert!(errs.list[1]
            .message
            .starts_with("unknown instruction \"sned\""));
        let v = serde_json::json!(["send"]);
        assert!(decode_cmd(&v, "p.c[2]", &mut errs).is_none());
        assert_eq!(errs.list.len(), 3);
        let v = serde_json::json!({"op": "reset"});
        assert_eq!(decode_cmd(&v, "p", &mut errs), Some(RawCmd::Reset {}));
    }
}
