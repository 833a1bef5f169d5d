//! The HTTP-aware generator against `squall serve`'s app over the in-memory wire
//! (virtual clock, no root): request loops on keep-alive connections, URL lists, a
//! request per connection with `Connection: close`, a 100 KB body over many segments.
//! The status counts of the generator must equal what the server answered.

use std::sync::Arc;

use serde_json::json;
use squall::gen::{tcp_config, ClientGen, Side};
use squall::stats::SideStats;
use squall_astf::sched::SchedConfig;
use squall_astf::Profile;
use squall_http::Limits;
use squall_port::mem::{pair, MemConfig, MemPort};
use squall_serve::app::{AppConfig, ServeApp};
use squall_serve::files::Files;
use squall_serve::respond::Route;
use squall_stack::{Node, NodeConfig, Owned};
use squall_tcp::TcpConfig;

const MS: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const MC: [u8; 6] = [2, 0, 0, 0, 0, 0xb];
const IP_S: u32 = 0x3000_0001; // 48.0.0.1
const MS_NS: u64 = 1_000_000;

fn files() -> Arc<Files> {
    Arc::new(Files::from_memory(
        [
            ("/index.html", &b"<p>hi</p>\n"[..]),
            ("/big.bin", &[7u8; 100_000][..]),
        ],
        1_700_000_000,
    ))
}

/// (The server side of the templates is `squall serve`: their association is unused.)
/// Template 0 ("ka"): 4 requests per keep-alive connection over three URLs in turn (a
/// route, a file, a 404) with a User-Agent per flow. Template 1 ("close"): one GET of the 100 KB file
/// and one HEAD, each on its own connection with `Connection: close`.
fn profile(flows: u32) -> Profile {
    let host = json!({"name": "Host", "value": "squall.test"});
    squall_astf::load_profile_value(json!({
        "version": 1,
        "buffers": [],
        "ip_gens": [{"name": "g", "clients": {"range": ["16.0.0.1", "16.0.0.20"]},
            "servers": {"range": ["48.0.0.1", "48.0.0.1"]}}],
        "programs": [
            {"name": "ka", "commands": [
                {"op": "connect"},
                {"op": "set_var", "id": 0, "val": 4},
                {"op": "set_label", "label": "next"},
                {"op": "http_request", "urls": ["/ping", "/index.html", "/nope"],
                 "headers": [host, {"name": "User-Agent", "values": ["a/1", "b/2"], "pick": "flow"}]},
                {"op": "http_wait_response"},
                {"op": "jmp_nz", "id": 0, "label": "next"}]},
            {"name": "close", "commands": [
                {"op": "http_request", "urls": ["/big.bin"], "method": "GET",
                 "headers": [host, {"name": "Connection", "value": "close"}]},
                {"op": "http_wait_response"},
                {"op": "wait_for_peer_close"}]},
            {"name": "head", "commands": [
                {"op": "http_request", "url": "/big.bin", "method": "HEAD",
                 "headers": [host, {"name": "Connection", "value": "close"}]},
                {"op": "http_wait_response"},
                {"op": "wait_for_peer_close"}]},
            {"name": "unused", "commands": [{"op": "accept"}]}],
        "templates": [
            {"client_program": "ka", "server_program": "unused", "port": 80, "cps": 200,
             "limit": flows, "tg_name": "ka",
             "assoc": [{"port": 80, "ip_start": "1.0.0.3", "ip_end": "1.0.0.3"}]},
            {"client_program": "close", "server_program": "unused", "port": 80, "cps": 100,
             "limit": flows / 2, "tg_name": "close",
             "assoc": [{"port": 80, "ip_start": "1.0.0.1", "ip_end": "1.0.0.1"}]},
            {"client_program": "head", "server_program": "unused", "port": 80, "cps": 100,
             "limit": flows / 2, "tg_name": "close",
             "assoc": [{"port": 80, "ip_start": "1.0.0.2", "ip_end": "1.0.0.2"}]}]
    }))
    .unwrap()
}

struct Run {
    client: SideStats,
    server: squall_serve::app::ServeStats,
    idle: bool,
}

fn run(p: Profile, ms: u64) -> Run {
    let p = Arc::new(p);
    let (ps, pc) = pair(MemConfig::default()).unwrap();
    let tcp = TcpConfig {
        mac: MS,
        gateway_mac: MC,
        ..TcpConfig::default()
    };
    let ncfg = NodeConfig {
        owned: Owned(vec![(IP_S, IP_S)]),
        ..NodeConfig::default()
    };
    let mut s: Node<MemPort> = Node::new(ps, tcp, ncfg, 0);
    s.tcp.listen(80);
    let cfg = AppConfig {
        max_conns: 1000,
        idle_timeout_ns: 5_000 * MS_NS,
        header_timeout_ns: 1_000 * MS_NS,
        limits: Limits::default(),
    };
    let routes = [Route::parse("/ping return 200 \"pong\"").unwrap()];
    let mut app = ServeApp::new(cfg, files(), &routes, &mut s.tcp, None);
    let sc = SchedConfig::from_profile(&p, 1.0, Some(2_000 * MS_NS), 0, 1);
    let cg = ClientGen::new(&p, &sc).unwrap();
    let ct = tcp_config(&p.templates[0].client, MC, MS, 4096, 7);
    let mut c = Side::new(p.clone(), pc, ct, Some(cg), 0, 7);
    let mut now = 0;
    while now < ms * MS_NS {
        now += 20_000;
        s.turn(now, &mut app, None);
        c.iterate(now, None);
        if now > 2_100 * MS_NS && c.is_idle() {
            break;
        }
    }
    Run {
        client: c.stats(),
        server: app.stats,
        idle: c.is_idle(),
    }
}

#[test]
fn generator_counts_what_squall_serve_answered() {
    let p = profile(40);
    let ka = p.tg_names.iter().position(|n| n == "ka").unwrap();
    let cl = p.tg_names.iter().position(|n| n == "close").unwrap();
    let r = run(p, 10_000);
    assert!(r.idle, "every flow ended");
    assert_eq!(r.client.errors(), 0, "{:#?}", r.client);
    let (k, c) = (&r.client.tg[ka], &r.client.tg[cl]);
    // 40 flows x 4 requests, URLs in turn over the side: /ping, /index.html, /nope.
    assert_eq!(k.c.started, 40);
    assert_eq!(k.c.completed, 40);
    assert_eq!((k.http.requests, k.http.responses), (160, 160));
    assert_eq!(k.http.code(200) + k.http.code(404), 160);
    assert_eq!(k.http.code(404), 160 / 3, "{:?}", k.http.codes);
    assert_eq!(k.http.class[1], k.http.code(200));
    // Bodies: "pong" (4) and "<p>hi</p>\n" (10) for the 200s, and the 404 pages.
    assert!(
        k.http.body_bytes >= 53 * 4 + 54 * 10,
        "{}",
        k.http.body_bytes
    );
    assert_eq!(k.lat.req_first_byte.count(), 160);
    assert_eq!(k.lat.req_last_byte.count(), 160);
    // Close: 20 GETs of 100,000 bytes and 20 HEADs, one per connection.
    assert_eq!((c.c.started, c.c.completed), (40, 40));
    assert_eq!((c.http.requests, c.http.responses), (40, 40));
    assert_eq!(c.http.code(200), 40);
    assert_eq!(c.http.body_bytes, 20 * 100_000);
    // The server saw the same requests and answered them by class.
    assert_eq!(r.server.requests, 200);
    assert_eq!(r.server.by_class[2], k.http.class[1] + c.http.class[1]);
    assert_eq!(r.server.by_class[4], k.http.class[3]);
    assert_eq!(r.server.parse_errors, 0);
}

/// The server ends keep-alive connections: every answer says `Connection: close`
/// (template "said"), or its idle timeout closes the connection while the program waits
/// between two requests (template "idle"). No request follows on such a connection (RFC
/// 9112 §9.6): each loop ends after its first answer, a normal close counted in
/// `server_closed`, with no error.
#[test]
fn a_server_ending_the_connection_ends_the_request_loop() {
    let host = json!({"name": "Host", "value": "squall.test"});
    let looped = |name: &str, close: bool, delay_us: u64| {
        let mut headers = vec![host.clone()];
        if close {
            headers.push(json!({"name": "Connection", "value": "close"}));
        }
        json!({"name": name, "commands": [
            {"op": "connect"},
            {"op": "set_var", "id": 0, "val": 4},
            {"op": "set_label", "label": "next"},
            {"op": "http_request", "url": "/ping", "headers": headers},
            {"op": "http_wait_response"},
            {"op": "delay", "usec": delay_us},
            {"op": "jmp_nz", "id": 0, "label": "next"}]})
    };
    let p = squall_astf::load_profile_value(json!({
        "version": 1,
        "buffers": [],
        "ip_gens": [{"name": "g", "clients": {"range": ["16.0.0.1", "16.0.0.20"]},
            "servers": {"range": ["48.0.0.1", "48.0.0.1"]}}],
        "programs": [
            looped("said", true, 1_000),
            looped("idle", false, 6_000_000),
            {"name": "unused", "commands": [{"op": "accept"}]}],
        "templates": [
            {"client_program": "said", "server_program": "unused", "port": 80, "cps": 100,
             "limit": 10, "tg_name": "said",
             "assoc": [{"port": 80, "ip_start": "1.0.0.1", "ip_end": "1.0.0.1"}]},
            {"client_program": "idle", "server_program": "unused", "port": 80, "cps": 100,
             "limit": 10, "tg_name": "idle",
             "assoc": [{"port": 80, "ip_start": "1.0.0.2", "ip_end": "1.0.0.2"}]}]
    }))
    .unwrap();
    let said = p.tg_names.iter().position(|n| n == "said").unwrap();
    let idle = p.tg_names.iter().position(|n| n == "idle").unwrap();
    let r = run(p, 20_000);
    assert!(r.idle, "every flow ended");
    assert_eq!(r.client.errors(), 0, "{:#?}", r.client);
    for g in [said, idle] {
        let t = &r.client.tg[g];
        assert_eq!((t.c.started, t.c.completed), (10, 10), "group {g}");
        assert_eq!((t.http.requests, t.http.responses), (10, 10), "group {g}");
        assert_eq!(t.http.code(200), 10);
        assert_eq!(t.http.server_closed, 10, "group {g}");
        assert_eq!(t.http.incomplete, 0);
    }
    assert_eq!(r.server.requests, 20, "no request after the server's close");
    assert_eq!(r.server.idle_closed, 10);
}
