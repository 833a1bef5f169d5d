//! Loader tests: the shipped examples load; each class of bad profile is rejected with an
//! error naming the field at fault; all semantic errors are reported together.

use serde_json::{json, Value};
use squall_astf::*;

fn w1() -> Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/w1-astf-http.json"
    ))
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Loads `v` expecting failure; returns the errors as "path: message" strings.
fn errors(v: Value) -> Vec<String> {
    match load_profile_value(v) {
        Ok(_) => panic!("profile unexpectedly valid"),
        Err(e) => {
            let list: Vec<String> = e.errors().iter().map(|e| e.to_string()).collect();
            assert!(!list.is_empty(), "no errors in {e}");
            list
        }
    }
}

fn has(errs: &[String], path: &str, needle: &str) {
    assert!(
        errs.iter()
            .any(|e| e.starts_with(&format!("{path}: ")) && e.contains(needle)),
        "expected an error at {path} containing {needle:?}, got {errs:#?}"
    );
}

#[test]
fn w1_example_loads_and_compiles() {
    let p = load_profile_value(w1()).unwrap();
    assert_eq!(p.buffers.len(), 2);
    let req = &p.buffers[0].data;
    let resp = &p.buffers[1].data;
    assert_eq!(req.len(), 100);
    assert!(req.starts_with(b"GET /w1 HTTP/1.1\r\n"));
    assert!(req.ends_with(b"\r\n\r\n"));
    assert_eq!(resp.len(), 32768);
    // Content-Length is correct: headers + body = 32768.
    let text = std::str::from_utf8(resp).unwrap();
    let hdr_end = text.find("\r\n\r\n").unwrap() + 4;
    let cl: usize = text
        .split("Content-Length: ")
        .nth(1)
        .unwrap()
        .split("\r\n")
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(hdr_end + cl, 32768);
    assert!(resp[hdr_end..].iter().all(|&b| b == b'x'));

    let t = &p.templates[0];
    assert_eq!(t.port, 80);
    assert_eq!(t.transport, Transport::Tcp);
    assert_eq!(p.tg_names[t.tg_id as usize], "http");
    assert_eq!(t.client.tcp.initwnd, 2);
    assert_eq!(t.server.tcp.initwnd, 2);
    assert_eq!(t.client.tcp.delay_ack_msec, 100);
    assert_eq!(t.client.tcp.mss, 1460);
    let g = &p.ip_gens[t.ip_gen as usize];
    assert_eq!(g.clients.len(), 200);
    assert_eq!(g.clients.first_addr().to_string(), "16.0.0.1");
    assert_eq!(g.servers.len(), 1);
    let c = p.program(t.client_program);
    assert_eq!(
        &*c.insns,
        &[
            Insn::Send {
                buf: BufIdx(0),
                mode: SendMode::Current
            },
            Insn::Recv {
                bytes: 32768,
                clear: false
            }
        ]
    );
    let s = p.program(t.server_program);
    assert_eq!(s.insns.len(), 3);
    assert_eq!(
        p.server_template_for(
            Transport::Tcp,
            u32::from(std::net::Ipv4Addr::new(48, 0, 0, 1)),
            80
        ),
        Some(TemplateIdx(0))
    );
    assert_eq!(
        p.server_template_for(
            Transport::Tcp,
            u32::from(std::net::Ipv4Addr::new(48, 0, 0, 2)),
            80
        ),
        None
    );
    assert_eq!(
        p.server_template_for(
            Transport::Udp,
            u32::from(std::net::Ipv4Addr::new(48, 0, 0, 1)),
            80
        ),
        None
    );
}

#[test]
fn all_shipped_examples_load() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().and_then(|x| x.to_str()) == Some("json") {
            if let Err(e) = load_profile_file(&path) {
                panic!("{}: {e}", path.display());
            }
            n += 1;
        }
    }
    assert!(n >= 1);
}

#[test]
fn syntax_error_has_line() {
    match load_profile_str("{\n \"version\": 1,\n ]") {
        Err(LoadError::Syntax { line, .. }) => assert_eq!(line, 3),
        other => panic!("{other:?}"),
    }
}

#[test]
fn unsupported_version() {
    let mut v = w1();
    v["version"] = json!(2);
    has(&errors(v), "version", "unsupported IR version 2");
}

#[test]
fn wrong_type_names_field() {
    let mut v = w1();
    v["templates"][0]["cps"] = json!("fast");
    has(&errors(v), "templates[0].cps", "invalid type");
    let mut v = w1();
    v["global"]["tcp"]["mss"] = json!(-5);
    has(&errors(v), "global.tcp.mss", "invalid value");
    let mut v = w1();
    v["ip_gens"][0]["clients"]["range"] = json!(["16.0.0.1"]);
    has(&errors(v), "ip_gens[0].clients.range", "invalid length 1");
}

#[test]
fn unknown_field_is_an_error() {
    let mut v = w1();
    v["templates"][0]["cpss"] = json!(5);
    has(&errors(v), "templates[0].cpss", "unknown field `cpss`");
    let mut v = w1();
    v["programs"][0]["commands"][0]["bufer"] = json!("x");
    has(
        &errors(v),
        "programs[0].commands[0].bufer",
        "unknown field `bufer`",
    );
}

#[test]
fn missing_field() {
    let mut v = w1();
    v["templates"][0]
        .as_object_mut()
        .unwrap()
        .remove("server_program");
    has(&errors(v), "templates[0]", "missing field `server_program`");
}

/// Type errors are all reported: one per list element (each decoded on its own), with the
/// path serde gives it, in document order; `compile` does not run.
#[test]
fn type_errors_in_different_sections_all_reported() {
    let mut v = w1();
    v["buffers"][1]["sise"] = json!(10);
    v["ip_gens"][0]["ip_offset"] = json!(16777216);
    v["templates"][0]
        .as_object_mut()
        .unwrap()
        .remove("client_program");
    // A semantic error too: not reported, since the type errors stop before `compile`.
    v["programs"][0]["commands"][0]["buf"] = json!("nope");
    let e = load_profile_value(v).unwrap_err();
    let paths: Vec<&str> = e.errors().iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        ["buffers[1].sise", "ip_gens[0].ip_offset", "templates[0]"]
    );
    let e: Vec<String> = e.errors().iter().map(|e| e.to_string()).collect();
    has(&e, "buffers[1].sise", "unknown field `sise`");
    has(
        &e,
        "ip_gens[0].ip_offset",
        "invalid type: integer `16777216`, expected a string",
    );
    has(&e, "templates[0]", "missing field `client_program`");
}

#[test]
fn top_level_type_errors_all_reported() {
    let mut v = w1();
    let obj = v.as_object_mut().unwrap();
    obj.remove("ip_gens");
    obj.insert("templatse".into(), json!([]));
    v["global"]["tcp"]["mss"] = json!("big");
    v["buffers"][0]["name"] = json!(7);
    v["buffers"][1]["name"] = json!(8);
    let e = load_profile_value(v).unwrap_err();
    let got: Vec<String> = e.errors().iter().map(|e| e.to_string()).collect();
    assert_eq!(got.len(), 5, "{got:#?}");
    assert!(
        got[0].starts_with(
            "templatse: unknown field `templatse`, expected one of `version`, `meta`, `buffers`"
        ),
        "{got:#?}"
    );
    assert!(
        got[1].starts_with("buffers[0].name: invalid type: integer `7`"),
        "{got:#?}"
    );
    assert!(
        got[2].starts_with("buffers[1].name: invalid type: integer `8`"),
        "{got:#?}"
    );
    assert_eq!(got[3], ".: missing field `ip_gens`");
    assert!(
        got[4].starts_with("global.tcp.mss: invalid type: string \"big\""),
        "{got:#?}"
    );
}

#[test]
fn a_list_that_is_not_an_array_is_one_error() {
    let mut v = w1();
    v["programs"] = json!({"name": "p"});
    v["templates"][0]["port"] = json!("http");
    let e = errors(v);
    assert_eq!(e.len(), 2, "{e:#?}");
    has(&e, "programs", "invalid type: map, expected a sequence");
    has(&e, "templates[0].port", "invalid type: string \"http\"");
}

#[test]
fn unknown_instruction_and_all_bad_commands_reported() {
    let mut v = w1();
    v["programs"][1]["commands"][0]["op"] = json!("sned");
    v["programs"][0]["commands"][1] = json!({"op": "recv", "bytes": "many"});
    let e = errors(v);
    has(
        &e,
        "programs[1].commands[0]",
        "unknown instruction \"sned\"",
    );
    has(&e, "programs[0].commands[1].bytes", "invalid type");
    let mut v = w1();
    v["programs"][0]["commands"][0] = json!({"buf": "x"});
    v["programs"][0]["commands"][1] = json!({"op": "recv"});
    v["programs"][1]["commands"][0] = json!({"op": 5});
    let e = errors(v);
    has(&e, "programs[0].commands[0]", "missing field `op`");
    has(&e, "programs[0].commands[1]", "missing field `bytes`");
    has(
        &e,
        "programs[1].commands[0].op",
        "expected an instruction name",
    );
}

#[test]
fn unknown_program_and_buffer_all_collected() {
    let mut v = w1();
    v["templates"][0]["client_program"] = json!("p9");
    v["programs"][1]["commands"][1]["buf"] = json!("nope");
    v["global"]["tcp"]["initwnd"] = json!(30);
    v["ip_gens"][0]["clients"]["range"] = json!(["16.0.0.200", "16.0.0.1"]);
    let e = errors(v);
    has(&e, "templates[0].client_program", "unknown program \"p9\"");
    has(&e, "programs[1].commands[1].buf", "unknown buffer \"nope\"");
    has(&e, "global.tcp.initwnd", "30 out of range 1..=20");
    has(&e, "ip_gens[0].clients.range", "empty pool");
    assert_eq!(e.len(), 4, "{e:#?}");
}

#[test]
fn tunable_ranges() {
    let mut v = w1();
    v["global"]["client"] = json!({"tcp": {"mss": 10}, "ip": {"ttl": 0}});
    v["global"]["scheduler"]["rampup_sec"] = json!(100000);
    v["templates"][0]["server_tunables"] =
        json!({"tcp": {"rxbufsize": 10, "no_delay": 1}, "ip": {"tos": 256}});
    let e = errors(v);
    has(&e, "global.client.tcp.mss", "10 out of range 64..=9216");
    has(&e, "global.client.ip.ttl", "0 out of range 1..=255");
    has(&e, "global.scheduler.rampup_sec", "out of range 0..=60000");
    has(
        &e,
        "templates[0].server_tunables.tcp.rxbufsize",
        "out of range",
    );
    has(
        &e,
        "templates[0].server_tunables.ip.tos",
        "256 out of range 0..=255",
    );
    let mut v = w1();
    v["global"]["tcp"]["no_delay"] = json!(4);
    has(&errors(v), "global.tcp.no_delay", "not a bool or 0..=3");
    let mut v = w1();
    v["global"]["tcp"]["burst_ack"] = json!(2);
    has(
        &errors(v),
        "global.tcp.burst_ack",
        "expected a boolean or 0/1",
    );
}

/// TRex's tunables table (trex_astf.html): every tunable TRex accepts is supported,
/// accepted with no effect, or refused with the reason.
#[test]
fn trex_tunables() {
    let mut v = w1();
    v["global"] = json!({
        "tcp": {"keepinit": 5, "keepidle": 128, "keepintvl": 10, "blackhole": 0, "no_delay": 2},
        "ip": {"dont_use_inbound_mac": 1},
        "scheduler": {"accurate": 1},
        "ipv6": {"enable": 0},
        "server": {"tcp": {"keepidle": 0, "no_delay": 3}}
    });
    let p = load_profile_value(v).unwrap();
    let (c, s) = (&p.templates[0].client.tcp, &p.templates[0].server.tcp);
    assert_eq!((c.keepinit, c.keepidle, c.keepintvl), (5, 128, 10));
    assert_eq!((c.no_delay, c.no_delay_push), (false, true));
    assert_eq!((s.keepidle, s.no_delay, s.no_delay_push), (0, true, true));
    assert_eq!(
        TcpTunables::default().keepidle,
        0,
        "keepalive off by default"
    );
    // SACK on unless the profile says otherwise, as TRex's FreeBSD stack (tcp_do_sack = 1):
    // a profile written for TRex negotiates it there and here.
    assert!(c.do_sack && s.do_sack, "SACK on by default");
    let mut v = w1();
    v["global"] = json!({"tcp": {"do_sack": 0}, "server": {"tcp": {"do_sack": true}}});
    let p = load_profile_value(v).unwrap();
    assert_eq!(
        (
            p.templates[0].client.tcp.do_sack,
            p.templates[0].server.tcp.do_sack
        ),
        (false, true)
    );

    let mut v = w1();
    v["global"] = json!({"tcp": {"cc_algo": 0, "do_ecn": 0}});
    load_profile_value(v).unwrap();
    let mut v = w1();
    v["global"] = json!({"tcp": {"cc_algo": 1, "do_ecn": 1}});
    let e = errors(v);
    has(
        &e,
        "global.tcp.cc_algo",
        "1: only 0 is supported (squall-tcp's congestion control is NewReno",
    );
    has(&e, "global.tcp.do_ecn", "does not negotiate ECN");

    let mut v = w1();
    v["global"] = json!({
        "tcp": {"blackhole": 2, "keepinit": 0, "keepintvl": 70000},
        "ipv6": {"enable": 2, "src_msb": "ff02::/8"}
    });
    v["templates"][0]["client_tunables"] = json!({"tcp": {"keepidle": 10}});
    let e = errors(v);
    has(&e, "global.tcp.blackhole", "only 0 is supported");
    has(&e, "global.tcp.keepinit", "out of range 1..=65533");
    has(&e, "global.tcp.keepintvl", "out of range 1..=65533");
    has(&e, "global.ipv6.enable", "out of range 0..=1");
    has(&e, "global.ipv6.src_msb", "invalid IPv6 address");
    has(
        &e,
        "templates[0].client_tunables.tcp.keepidle",
        "side-wide tunable",
    );
}

#[test]
fn tunable_precedence() {
    let mut v = w1();
    v["global"]["ip"] = json!({"ttl": 100});
    v["global"]["server"] = json!({"tcp": {"initwnd": 4}});
    v["templates"][0]["client_tunables"] =
        json!({"tcp": {"initwnd": 7, "no_delay": true, "burst_ack": 0}});
    let p = load_profile_value(v).unwrap();
    let t = &p.templates[0];
    assert_eq!((t.client.tcp.initwnd, t.server.tcp.initwnd), (7, 4));
    assert_eq!(
        (t.client.tcp.burst_ack, t.server.tcp.burst_ack),
        (false, true)
    );
    assert!(t.client.tcp.no_delay && !t.server.tcp.no_delay);
    assert_eq!((t.client.ip.ttl, t.server.ip.ttl), (100, 100));
    assert_eq!(t.client.tcp.mss, 1460);
    assert_eq!(t.client.tcp.rxbufsize, 32768, "default");
}

#[test]
fn buffers_text_base64_fill() {
    let mut v = w1();
    v["buffers"] = json!([
        {"name": "a", "base64": "AAEC"},
        {"name": "b", "text": "ab", "size": 7, "fill": {"base64": "eHk="}},
        {"name": "c", "size": 3},
        {"name": "http_req", "text": "x"},
        {"name": "http_resp", "text": "y"}
    ]);
    v["templates"][0]
        .as_object_mut()
        .unwrap()
        .insert("name".into(), json!("t"));
    // The W1 programs no longer match in size: the client waits for 32768 bytes.
    has(
        &errors(v.clone()),
        "templates[0]",
        "waits for 32768 bytes in total but server program \"http_server\" sends only 1",
    );
    v["programs"][0]["commands"][1]["bytes"] = json!(1);
    v["programs"][1]["commands"][0]["bytes"] = json!(1);
    let p = load_profile_value(v).unwrap();
    assert_eq!(&*p.buffers[0].data, &[0, 1, 2]);
    assert_eq!(&*p.buffers[1].data, b"abxyxyx");
    assert_eq!(&*p.buffers[2].data, b"***");
    // A long fill keeps its period.
    let mut v = w1();
    v["buffers"][1] =
        json!({"name": "http_resp", "text": "Z", "size": 32768, "fill": {"text": "abc"}});
    let p = load_profile_value(v).unwrap();
    let d = &p.buffers[1].data;
    assert_eq!(d.len(), 32768);
    assert_eq!(d[0], b'Z');
    assert!(d[1..].iter().enumerate().all(|(i, &b)| b == b"abc"[i % 3]));
}

#[test]
fn bad_buffers() {
    let mut v = w1();
    v["buffers"].as_array_mut().unwrap().extend([
        json!({"name": "b1", "text": "a", "base64": "YQ=="}),
        json!({"name": "b2", "base64": "!!!"}),
        json!({"name": "b3", "text": "abcdef", "size": 3}),
        json!({"name": "b4", "text": "a", "fill": {"text": "x"}}),
        json!({"name": "b5"}),
        json!({"name": "http_req", "text": "dup"}),
        json!({"name": "bad name!", "text": "x"}),
        json!({"name": "b6", "text": ""}),
    ]);
    let e = errors(v);
    has(&e, "buffers[2]", "text or base64, not both");
    has(&e, "buffers[3].base64", "invalid base64");
    has(&e, "buffers[4].size", "smaller than the 6 leading bytes");
    has(&e, "buffers[5].fill", "fill needs size");
    has(&e, "buffers[6]", "needs text, base64 or size");
    has(
        &e,
        "buffers[7].name",
        "duplicate buffer name \"http_req\" (also buffers[0])",
    );
    has(&e, "buffers[8].name", "invalid name");
    has(&e, "buffers[9]", "empty buffer");
    // A buffer the programs send that does not compile is its own error only: no hang
    // is reported for the bytes it would have held.
    let mut v = w1();
    v["buffers"][1] = json!({"name": "http_resp", "base64": "A"});
    let e = errors(v);
    has(&e, "buffers[1].base64", "invalid base64");
    assert_eq!(e.len(), 1, "{e:#?}");
}

#[test]
fn pools() {
    let mut v = w1();
    v["ip_gens"][0]["servers"]["range"] = json!(["48.0.0.1", "48.0.0.300"]);
    v["ip_gens"][0]["clients"]["distribution"] = json!("random");
    let e = errors(v);
    has(
        &e,
        "ip_gens[0].clients.distribution",
        "unknown variant `random`",
    );
    let mut v = w1();
    v["ip_gens"][0]["servers"]["range"] = json!(["48.0.0.1", "48.0.0.300"]);
    has(
        &errors(v),
        "ip_gens[0].servers.range[1]",
        "invalid IPv4 or IPv6 address \"48.0.0.300\"",
    );
    let mut v = w1();
    v["ip_gens"][0]["clients"]["range"] = json!(["1.0.0.0", "2.255.255.255"]);
    has(&errors(v), "ip_gens[0].clients.range", "larger than");
    let mut v = w1();
    let g2 = json!({"name": "g2", "clients": {"range": ["16.0.0.100", "16.0.1.0"]}, "servers": {"range": ["48.0.0.2", "48.0.0.2"]}});
    v["ip_gens"].as_array_mut().unwrap().push(g2);
    v["templates"][0].as_object_mut().unwrap().remove("ip_gen");
    let e = errors(v);
    has(
        &e,
        "ip_gens[1].clients.range",
        "overlaps the client pool of ip_gens[0]",
    );
    has(
        &e,
        "templates[0].ip_gen",
        "required when there are 2 ip_gens",
    );
}

/// One `ASTFIPGenDist` used by several generators (TRex: one shared distribution): an
/// identical client pool in two generators is one shared pool, not an overlap.
#[test]
fn identical_client_pools_are_shared() {
    let mut v = w1();
    let clients = v["ip_gens"][0]["clients"].clone();
    let g2 =
        json!({"name": "g2", "clients": clients, "servers": {"range": ["48.0.0.2", "48.0.0.2"]}});
    v["ip_gens"].as_array_mut().unwrap().push(g2);
    let mut t2 = v["templates"][0].clone();
    t2["ip_gen"] = json!("g2");
    t2["port"] = json!(81);
    t2.as_object_mut().unwrap().remove("assoc");
    v["templates"][0]["ip_gen"] = json!("default");
    v["templates"].as_array_mut().unwrap().push(t2);
    let p = load_profile_value(v.clone()).unwrap();
    assert_eq!(p.ip_gens[0].clients, p.ip_gens[1].clients);
    assert_eq!(
        p.client_pool_of(TemplateIdx(0)),
        p.client_pool_of(TemplateIdx(1))
    );
    // A shared pool has one address offset.
    let mut w = v.clone();
    w["ip_gens"][1]["ip_offset"] = json!("2.0.0.0");
    has(
        &errors(w),
        "ip_gens[1].ip_offset",
        "shares this client pool",
    );
    // The same range with another distribution is a different pool: an overlap.
    v["ip_gens"][1]["clients"]["distribution"] = json!("rand");
    has(
        &errors(v),
        "ip_gens[1].clients.range",
        "overlaps the client pool of ip_gens[0]",
    );
}

#[test]
fn ip_offsets_and_distribution() {
    let mut v = w1();
    v["ip_gens"][0]["ip_offset_server"] = json!("2.0.0.0");
    v["ip_gens"][0]["clients"]["per_core_distribution"] = json!("seq");
    v["ip_gens"][0]["servers"]["distribution"] = json!("rand");
    let p = load_profile_value(v).unwrap();
    let g = &p.ip_gens[0];
    assert_eq!(
        (g.ip_offset, g.ip_offset_server),
        (0x0100_0000, 0x0200_0000)
    );
    assert_eq!(g.clients.per_core, PerCore::Contiguous);
    assert_eq!(g.servers.distribution, Distribution::Rand);
}

fn with_programs(client: Value, server: Value) -> Value {
    let mut v = w1();
    v["programs"][0]["commands"] = client;
    v["programs"][1]["commands"] = server;
    v
}

#[test]
fn jumps_and_labels() {
    // Loop: 3 request/response rounds, label resolved to pc 1 (set_label takes no slot).
    let v = with_programs(
        json!([{"op": "set_var", "id": 0, "val": 3}, {"op": "set_label", "label": "a"},
               {"op": "send", "buf": "http_req"}, {"op": "recv", "bytes": 32768, "clear": true},
               {"op": "jmp_nz", "id": 0, "label": "a"}]),
        json!([{"op": "set_var", "id": 1, "val": 3}, {"op": "recv", "bytes": 100, "clear": true},
               {"op": "send", "buf": "http_resp"}, {"op": "jmp_nz", "id": 1, "offset": -2}]),
    );
    let p = load_profile_value(v).unwrap();
    assert_eq!(p.programs[0].insns[3], Insn::JmpNz { id: 0, target: 1 });
    assert_eq!(p.programs[1].insns[3], Insn::JmpNz { id: 1, target: 1 });
    assert!(p.programs[0].has_jumps);

    let v = with_programs(
        json!([{"op": "set_label", "label": "a"}, {"op": "set_label", "label": "a"},
               {"op": "jmp_nz", "id": 0, "label": "zz"}, {"op": "jmp_dp", "id": 9, "offset": 10, "duration_usec": 0},
               {"op": "jmp_nz", "id": 0, "label": "a", "offset": 1}, {"op": "jmp_nz", "id": 0}]),
        json!([{"op": "recv", "bytes": 100}]),
    );
    let e = errors(v);
    has(&e, "programs[0].commands[1].label", "duplicate label \"a\"");
    has(
        &e,
        "programs[0].commands[2].label",
        "undefined label \"zz\"",
    );
    has(&e, "programs[0].commands[3].id", "9 out of range 0..=3");
    has(
        &e,
        "programs[0].commands[3].offset",
        "jumps outside the program",
    );
    has(
        &e,
        "programs[0].commands[3].duration_usec",
        "0 out of range",
    );
    has(&e, "programs[0].commands[4]", "not both");
    has(&e, "programs[0].commands[5]", "needs label or offset");
}

#[test]
fn loops_must_wait_and_clear() {
    let v = with_programs(
        json!([{"op": "set_label", "label": "a"}, {"op": "set_var", "id": 0, "val": 1}, {"op": "jmp_nz", "id": 0, "label": "a"}]),
        json!([{"op": "set_label", "label": "b"}, {"op": "recv", "bytes": 100}, {"op": "jmp_nz", "id": 0, "label": "b"}]),
    );
    let e = errors(v);
    has(&e, "programs[0].commands[2]", "never waits");
    has(&e, "programs[1].commands[2]", "last recv has no clear");
}

#[test]
fn watermarks() {
    let v = with_programs(
        json!([{"op": "send", "buf": "http_req"}, {"op": "recv", "bytes": 32768}, {"op": "recv", "bytes": 100}]),
        json!([{"op": "recv", "bytes": 0}, {"op": "send", "buf": "http_resp"}]),
    );
    let e = errors(v);
    has(
        &e,
        "programs[0].commands[2].bytes",
        "watermark 100 is not above the previous recv's 32768",
    );
    has(
        &e,
        "programs[1].commands[0].bytes",
        "0 out of range 1..=4294967295",
    );
    // The server waits for more than the client sends.
    let v = with_programs(
        json!([{"op": "send", "buf": "http_req"}, {"op": "recv", "bytes": 32768}]),
        json!([{"op": "recv", "bytes": 50, "clear": true}, {"op": "recv", "bytes": 51}, {"op": "send", "buf": "http_resp"}]),
    );
    has(&errors(v), "templates[0]", "server program \"http_server\" waits for 101 bytes in total but client program \"http_client\" sends only 100");
}

#[test]
fn transport_and_side_checks() {
    let v = with_programs(
        json!([{"op": "accept"}, {"op": "send_msg", "buf": "http_req"}]),
        json!([{"op": "connect"}, {"op": "recv", "bytes": 100}, {"op": "send", "buf": "http_resp"}]),
    );
    let e = errors(v);
    has(
        &e,
        "programs[0].commands[1]",
        "mixes TCP instruction \"accept\"",
    );
    has(&e, "templates[0].server_program", "uses \"connect\"");

    let mut v = with_programs(
        json!([{"op": "send_msg", "buf": "http_req"}, {"op": "recv_msg", "count": 1}]),
        json!([{"op": "recv_msg", "count": 1}, {"op": "send", "buf": "http_resp"}]),
    );
    v["templates"][0]["transport"] = json!("udp");
    v["buffers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "huge", "size": 70000}));
    let e = errors(v.clone());
    has(
        &e,
        "templates[0].server_program",
        "uses TCP instruction \"send\"",
    );
    v["programs"][1]["commands"][1] = json!({"op": "send_msg", "buf": "huge"});
    has(
        &errors(v),
        "programs[1].commands[1].buf",
        "more than a UDP datagram carries",
    );
}

#[test]
fn template_fields() {
    let mut v = w1();
    v["templates"][0]["port"] = json!(0);
    v["templates"][0]["cps"] = json!(0);
    v["templates"][0]["limit"] = json!(0);
    v["templates"][0]["ip_gen"] = json!("nope");
    v["templates"][0]["assoc"] = json!([{"port": 70000}, {"port": 80, "ip_start": "48.0.0.9", "ip_end": "48.0.0.1"}, {"port": 80, "ip_start": "1.1.1.1"}]);
    let e = errors(v);
    has(&e, "templates[0].port", "0 out of range 1..=65535");
    has(&e, "templates[0].cps", "out of range");
    has(&e, "templates[0].limit", "0 out of range");
    has(&e, "templates[0].ip_gen", "unknown ip_gen \"nope\"");
    has(&e, "templates[0].assoc[0].port", "70000 out of range");
    has(&e, "templates[0].assoc[1]", "ip_start is above ip_end");
    has(&e, "templates[0].assoc[2]", "both ip_start and ip_end");
}

#[test]
fn ambiguous_association_and_groups() {
    let mut v = w1();
    let mut t2 = v["templates"][0].clone();
    t2["tg_name"] = json!("other");
    v["templates"].as_array_mut().unwrap().push(t2.clone());
    has(
        &errors(v.clone()),
        "templates[1].assoc[0]",
        "overlaps templates[0].assoc[0]",
    );
    // Disjoint address ranges on the same port are fine.
    v["templates"][1]["assoc"] =
        json!([{"port": 80, "ip_start": "48.0.0.2", "ip_end": "48.0.0.9"}]);
    let mut t3 = t2;
    t3["port"] = json!(8080);
    t3["tg_name"] = json!("http");
    t3.as_object_mut().unwrap().remove("assoc");
    v["templates"].as_array_mut().unwrap().push(t3);
    let p = load_profile_value(v).unwrap();
    assert_eq!(
        p.tg_names,
        vec!["".to_string(), "http".into(), "other".into()]
    );
    assert_eq!(
        p.templates.iter().map(|t| t.tg_id).collect::<Vec<_>>(),
        vec![1, 2, 1]
    );
    assert_eq!(
        p.templates[2].assoc,
        vec![AssocRule {
            port: 8080,
            ips: None,
            l7: None,
            v6: false
        }]
    );
    let ip = |s: &str| u32::from(s.parse::<std::net::Ipv4Addr>().unwrap());
    assert_eq!(
        p.server_template_for(Transport::Tcp, ip("48.0.0.5"), 80),
        Some(TemplateIdx(1))
    );
    assert_eq!(
        p.server_template_for(Transport::Tcp, ip("9.9.9.9"), 8080),
        Some(TemplateIdx(2))
    );
}

#[test]
fn delay_rand_and_ranges() {
    let v = with_programs(
        json!([{"op": "send", "buf": "http_req"}, {"op": "delay_rand", "min_usec": 10, "max_usec": 5},
               {"op": "delay", "usec": 5000000000u64}, {"op": "set_keepalive_msg", "msec": 0}, {"op": "recv", "bytes": 32768}]),
        json!([{"op": "recv", "bytes": 100}, {"op": "send", "buf": "http_resp"}]),
    );
    let e = errors(v);
    has(&e, "programs[0].commands[1]", "min_usec 10 > max_usec 5");
    has(
        &e,
        "programs[0].commands[2].usec",
        "out of range 0..=4294967295",
    );
    has(
        &e,
        "programs[0].commands[3].msec",
        "0 out of range 1..=3600000",
    );
}

#[test]
fn error_display_lists_all() {
    let mut v = w1();
    v["templates"][0]["client_program"] = json!("p9");
    v["templates"][0]["server_program"] = json!("p8");
    let e = load_profile_value(v).unwrap_err();
    let s = e.to_string();
    assert!(s.starts_with("invalid profile (2 errors)"), "{s}");
    assert!(
        s.contains("\n  templates[0].client_program: unknown program \"p9\""),
        "{s}"
    );
}

/// TRex `l7_map`: templates on one port told apart by the client's first bytes.
#[test]
fn l7_map_association() {
    let two = |a: Value, b: Value| {
        let mut v = w1();
        v["buffers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "post", "text": "POST /x HTTP/1.1\r\n\r\n", "size": 100}));
        let mut post = v["programs"][0].clone();
        post["name"] = json!("post_client");
        post["commands"][0]["buf"] = json!("post");
        v["programs"].as_array_mut().unwrap().push(post);
        let mut t2 = v["templates"][0].clone();
        t2["client_program"] = json!("post_client");
        v["templates"][0]["assoc"] = json!([a]);
        t2["assoc"] = json!([b]);
        v["templates"].as_array_mut().unwrap().push(t2);
        v
    };
    let m = json!({"port": 80, "l7_map": {"offset": [0, 1, 2, 3]}});
    let p = load_profile_value(two(m.clone(), m.clone())).unwrap();
    let ip = u32::from(std::net::Ipv4Addr::new(48, 0, 0, 1));
    assert_eq!(
        p.server_assoc(Transport::Tcp, ip, 80),
        ServerAssoc::L7 { need: 4 }
    );
    assert_eq!(p.server_template_for(Transport::Tcp, ip, 80), None);
    let l7 = |b: &[u8]| p.server_template_l7(Transport::Tcp, ip, 80, b);
    assert_eq!(l7(b"GET /w1"), Some(TemplateIdx(0)));
    assert_eq!(l7(b"POST"), Some(TemplateIdx(1)));
    assert_eq!(l7(b"PUT /"), None);
    assert_eq!(l7(b"PO"), None, "too short");
    // Masks and explicit values (TRex's server-only mode): "P" + any second byte.
    let m2 = json!({"port": 80, "l7_map": {"offset": [0, 1], "mask": [255, 0], "value": [80, 0]}});
    let p = load_profile_value(two(m.clone(), m2)).unwrap();
    assert_eq!(
        p.server_template_l7(Transport::Tcp, ip, 80, b"PUT "),
        Some(TemplateIdx(1))
    );

    // Errors: maps that one stream could match both, a plain rule beside a map, bad
    // fields, an offset past the client's first bytes, a UDP template.
    let e = errors(two(
        m.clone(),
        json!({"port": 80, "l7_map": {"offset": [0, 1], "value": [71, 69]}}),
    ));
    has(
        &e,
        "templates[1].assoc[0]",
        "overlaps templates[0].assoc[0]",
    );
    let e = errors(two(m.clone(), json!({"port": 80})));
    has(
        &e,
        "templates[1].assoc[0]",
        "overlaps templates[0].assoc[0]",
    );
    let bad = json!({"port": 80, "l7_map": {"offset": [0, 0, 300], "mask": [1]}});
    let e = errors(two(m.clone(), bad));
    has(
        &e,
        "templates[1].assoc[0].l7_map.offset[2]",
        "out of range 0..=255",
    );
    let e = errors(two(
        m.clone(),
        json!({"port": 80, "l7_map": {"offset": [0, 0]}}),
    ));
    has(&e, "templates[1].assoc[0].l7_map.offset", "distinct");
    let e = errors(two(
        m.clone(),
        json!({"port": 80, "l7_map": {"offset": [0], "mask": [1, 2]}}),
    ));
    has(&e, "templates[1].assoc[0].l7_map.mask", "one per offset");
    let e = errors(two(
        m.clone(),
        json!({"port": 80, "l7_map": {"offset": []}}),
    ));
    has(&e, "templates[1].assoc[0].l7_map.offset", "give 1..=8");
    let e = errors(two(
        m.clone(),
        json!({"port": 80, "l7_map": {"offset": [200]}}),
    ));
    has(
        &e,
        "templates[1].assoc[0].l7_map.offset[0]",
        "past the 100 bytes",
    );
    let mut v = w1();
    v["templates"][0]["transport"] = json!("udp");
    v["templates"][0]["assoc"] = json!([m]);
    has(
        &errors(v),
        "templates[0].assoc[0].l7_map",
        "TCP server templates only",
    );
}

/// Addresses no host may use (this network, loopback, multicast, broadcast; IPv6's
/// unspecified and loopback) are refused in a pool, with its path.
#[test]
fn pools_of_unusable_addresses_are_refused() {
    for (range, why) in [
        (["0.0.0.0", "0.0.0.0"], "this network"),
        (["0.255.255.250", "1.0.0.5"], "this network"),
        (["127.0.0.1", "127.0.0.9"], "loopback"),
        (["224.0.0.1", "224.0.0.1"], "multicast"),
        (["200.0.0.1", "255.255.255.255"], "broadcast"),
        (["::", "::3"], "unspecified"),
    ] {
        let mut v = w1();
        v["ip_gens"][0]["servers"]["range"] = json!(range);
        v["ip_gens"][0]["clients"]["range"] = json!(range);
        let e = errors(v);
        has(&e, "ip_gens[0].servers.range", why);
        has(&e, "ip_gens[0].clients.range", why);
    }
}

/// Numbers at the ends of their types give errors, never an arithmetic overflow: a jump
/// offset of i64::MAX, buffers whose declared sizes add up past u64::MAX.
#[test]
fn extreme_numbers_are_errors_not_overflows() {
    let mut v = w1();
    v["programs"][0]["commands"] = json!([{"op": "jmp_nz", "id": 0, "offset": i64::MAX}]);
    has(
        &errors(v),
        "programs[0].commands[0].offset",
        "outside the program",
    );
    let mut v = w1();
    v["buffers"] = json!([{"name": "b1", "size": u64::MAX}, {"name": "b2", "size": u64::MAX}]);
    has(&errors(v), "buffers", "bytes in all");
}

/// A loop whose only wait is a delay of zero spins at one instant: refused like a loop
/// without any wait.
#[test]
fn a_loop_waiting_only_zero_microseconds_is_refused() {
    let mut v = w1();
    v["programs"][0]["commands"] = json!([
        {"op": "set_var", "id": 0, "val": 5},
        {"op": "set_label", "label": "a"},
        {"op": "delay", "usec": 0},
        {"op": "jmp_nz", "id": 0, "label": "a"},
        {"op": "send", "buf": "http_req"}
    ]);
    has(&errors(v), "programs[0].commands[3]", "never waits");
}

/// TRex sends a counted loop of datagrams as a burst: a `send_msg` loop bounded by
/// `jmp_nz` is accepted; bounded by a duration (`jmp_dp`) it would spin, and is refused.
#[test]
fn a_counted_loop_of_datagrams_is_a_burst() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/udp-dns.json"
    ))
    .unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["programs"][0]["commands"] = json!([
        {"op": "set_var", "id": 0, "val": 10},
        {"op": "set_label", "label": "a"},
        {"op": "send_msg", "buf": "query"},
        {"op": "jmp_nz", "id": 0, "label": "a"},
        {"op": "recv_msg", "count": 1}
    ]);
    let e = squall_astf::load_profile_str(&v.to_string()).err();
    let never = |e: &Option<squall_astf::LoadError>| format!("{e:?}").contains("never waits");
    assert!(e.is_none() && !never(&e), "{e:?}");
    v["programs"][0]["commands"] = json!([
        {"op": "set_tick_var", "id": 0},
        {"op": "set_label", "label": "a"},
        {"op": "send_msg", "buf": "query"},
        {"op": "jmp_dp", "id": 0, "label": "a", "duration_usec": 1000},
        {"op": "recv_msg", "count": 1}
    ]);
    has(&errors(v), "programs[0].commands[3]", "never waits");
}
