//! IPv6 interop with the kernel over a veth (needs root; skipped with the reason
//! otherwise; holds the machine-wide lab lock `/tmp/squall-lab.lock`, or set
//! `SQUALL_LAB_LOCKED=1` when the caller holds it). A namespace `sq6-peer` gets the
//! kernel's end of a veth pair with 2001:db8:6::1/64; the other end stays here without
//! any address (IPv6 off for the kernel on it) and carries a Squall node over AF_PACKET
//! owning 2001:db8:6::2. The node resolves the kernel's MAC by neighbour solicitation;
//! the kernel resolves Squall's address by neighbour discovery (its cache shows Squall's
//! MAC), `ping -6` gets its echo replies, `curl -6` fetches a body from a Squall TCP
//! server over IPv6, byte for byte, and a Squall client fetches a file from nginx in the
//! namespace over IPv6, byte for byte; tshark finds no malformed packet in the capture.
//! Everything is torn down by `Drop`, even on failure.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use squall_port::afpacket::{AfPacketConfig, AfPacketPort};
use squall_port::lab;
use squall_port::pcap::PcapWriter;
use squall_port::Port;
use squall_stack::{FrameTap, Node, NodeApp, NodeConfig, NodeIo, Owned6};
use squall_tcp::{BufId, CloseReason, Ctl, FlowId, OptsId, TcpApp, TcpConfig};
use squall_wire::Ipv6Address;

const NS: &str = "sq6-peer";
const IF_HERE: &str = "sq6-sq0";
const IF_PEER: &str = "sq6-k0";
const KERNEL: &str = "2001:db8:6::1";
const SQUALL: &str = "2001:db8:6::2";

fn sh(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn in_ns(args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", NS]).args(args);
    c
}

/// The veth pair and the namespace; removed on drop.
struct Topo;

impl Topo {
    fn up() -> Topo {
        Topo::clean();
        let t = Topo;
        let ok = |a: &[&str]| assert!(sh(a), "{a:?} failed");
        ok(&["ip", "netns", "add", NS]);
        ok(&[
            "ip", "link", "add", IF_HERE, "type", "veth", "peer", "name", IF_PEER,
        ]);
        ok(&["ip", "link", "set", IF_PEER, "netns", NS]);
        // our end: no address, the kernel's IPv6 off on it (Squall answers for itself)
        ok(&[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{IF_HERE}.disable_ipv6=1"),
        ]);
        for (ns, ifc) in [(None, IF_HERE), (Some(NS), IF_PEER)] {
            let mut a = vec!["ethtool", "-K", ifc];
            a.extend([
                "tso", "off", "gso", "off", "gro", "off", "tx", "off", "rx", "off",
            ]);
            let st = match ns {
                None => Command::new(a[0]).args(&a[1..]).output(),
                Some(_) => in_ns(&a).output(),
            };
            assert!(st.is_ok_and(|o| o.status.success()), "ethtool on {ifc}");
            let up = ["ip", "link", "set", ifc, "up"];
            match ns {
                None => ok(&up),
                Some(_) => assert!(in_ns(&up).status().is_ok_and(|s| s.success())),
            }
        }
        let addr = format!("{KERNEL}/64");
        let st = in_ns(&["ip", "-6", "addr", "add", &addr, "dev", IF_PEER, "nodad"]).status();
        assert!(st.is_ok_and(|s| s.success()), "address");
        t
    }
    fn clean() {
        let _ = sh(&["ip", "link", "del", IF_HERE]);
        let _ = sh(&["ip", "netns", "del", NS]);
    }
}

impl Drop for Topo {
    fn drop(&mut self) {
        Topo::clean();
    }
}

/// A child killed (by pid) on drop.
struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every frame the node sends, into a pcap in memory.
struct All(PcapWriter<Vec<u8>>);
impl FrameTap for All {
    fn frame(&mut self, now: u64, data: &[u8]) {
        self.0.record(now, data);
    }
}

/// An HTTP/1.1 server: answers any request with one fixed response and closes when the
/// client does.
struct Http {
    resp: BufId,
    len: u32,
    served: u32,
}

impl TcpApp for Http {
    fn on_data(&mut self, ctl: &mut Ctl, _f: FlowId, data: &[u8]) {
        if data.windows(4).any(|w| w == b"\r\n\r\n") {
            ctl.send(self.resp, 0, self.len);
            self.served += 1;
        }
    }
    fn on_peer_closed(&mut self, ctl: &mut Ctl, _f: FlowId) {
        ctl.close();
    }
}

impl NodeApp for Http {
    fn owns_tcp_port(&self, port: u16) -> bool {
        port == 80
    }
}

/// An HTTP/1.1 client: one GET to `to` over IPv6 (opened from its poll), the whole
/// response kept.
struct Get {
    from: [u8; 16],
    to: [u8; 16],
    port: u16,
    req: BufId,
    req_len: u32,
    flow: Option<FlowId>,
    got: Vec<u8>,
    closed: Option<CloseReason>,
}

impl TcpApp for Get {
    fn on_connected(&mut self, ctl: &mut Ctl, _f: FlowId) {
        ctl.send(self.req, 0, self.req_len);
    }
    fn on_data(&mut self, _ctl: &mut Ctl, _f: FlowId, data: &[u8]) {
        self.got.extend_from_slice(data);
    }
    fn on_peer_closed(&mut self, ctl: &mut Ctl, _f: FlowId) {
        ctl.close();
    }
    fn on_closed(&mut self, _f: FlowId, r: CloseReason) {
        self.closed = Some(r);
    }
}

impl NodeApp for Get {
    fn poll<P: squall_port::Port>(&mut self, io: &mut NodeIo<'_, P>) -> bool {
        if self.flow.is_some() {
            return false;
        }
        let f = io.connect6(self.from, 40_000, self.to, self.port, OptsId::DEFAULT);
        self.flow = Some(f.expect("connect6"));
        true
    }
}

#[test]
fn kernel_ping6_ndp_and_curl6_reach_squall_over_a_veth() {
    let tools = ["ip", "ethtool", "ping", "curl", "tshark", "sysctl", "nginx"];
    if let Some(r) = lab::skip(&tools) {
        eprintln!("skipped: {r}");
        return;
    }
    let Some(_lock) = lab::lock(Duration::from_secs(600)) else {
        panic!("the lab lock /tmp/squall-lab.lock was not free within 600 s");
    };
    let _topo = Topo::up();
    let port = AfPacketPort::open(AfPacketConfig::new(IF_HERE)).expect("AF_PACKET port");
    let mac = port.caps().mac;
    let me: Ipv6Address = SQUALL.parse().unwrap();
    let kernel: Ipv6Address = KERNEL.parse().unwrap();
    let tcp = TcpConfig {
        mac,
        ..TcpConfig::default()
    };
    let cfg = NodeConfig {
        owned6: Owned6(vec![(me.to_u128(), me.to_u128())]),
        ..NodeConfig::default()
    };
    let mut node = Node::new(port, tcp, cfg, 0);
    node.tcp.listen(80);
    let body: Vec<u8> = (0..20_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let mut resp = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: text/plain\r\n\r\n",
        body.len()
    )
    .into_bytes();
    resp.extend_from_slice(&body);
    let len = resp.len() as u32;
    let mut app = Http {
        resp: node.tcp.buffers().register(Arc::from(resp)),
        len,
        served: 0,
    };
    // The kernel's MAC, by neighbour solicitation; then our announcement.
    let peer_mac = node
        .resolve6(me, kernel, Duration::from_secs(5))
        .expect("the kernel answers our solicitation");
    node.set_next_hop(peer_mac);
    node.announce(0);
    // The kernel learned our MAC from our solicitation and announcement: forget it, so
    // that it has to solicit it (and we answer).
    let st = in_ns(&["ip", "-6", "neigh", "flush", "dev", IF_PEER]).status();
    assert!(st.is_ok_and(|s| s.success()), "neigh flush");
    let pcap_path = std::env::temp_dir().join(format!("sq6-{}.pcap", std::process::id()));
    let mut cap = All(PcapWriter::new(Vec::new()).expect("pcap header"));
    // The node runs in this thread; the kernel's tools in children.
    let ping = Proc(
        in_ns(&["ping", "-6", "-c", "5", "-i", "0.2", "-W", "2", SQUALL])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ping"),
    );
    let url = format!("http://[{SQUALL}]/");
    let curl = Proc(
        in_ns(&["curl", "-6", "-s", "--max-time", "10", "-o", "-", &url])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("curl"),
    );
    let t0 = Instant::now();
    let mut children = [Some(ping), Some(curl)];
    let mut outputs: [Option<std::process::Output>; 2] = [None, None];
    let mut done_at: Option<Instant> = None;
    while t0.elapsed() < Duration::from_secs(20) {
        let now = t0.elapsed().as_nanos() as u64;
        if !node.turn(now, &mut app, Some(&mut cap)) {
            std::thread::sleep(Duration::from_micros(200));
        }
        for (k, c) in children.iter_mut().enumerate() {
            let finished = c
                .as_mut()
                .is_some_and(|p| p.0.try_wait().ok().flatten().is_some());
            if finished {
                let mut p = c.take().expect("checked");
                let mut out = String::new();
                let mut err = String::new();
                use std::io::Read;
                if let Some(o) = p.0.stdout.as_mut() {
                    let _ = o.read_to_string(&mut out);
                }
                if let Some(e) = p.0.stderr.as_mut() {
                    let _ = e.read_to_string(&mut err);
                }
                let status = p.0.wait().expect("exited");
                outputs[k] = Some(std::process::Output {
                    status,
                    stdout: out.into_bytes(),
                    stderr: err.into_bytes(),
                });
            }
        }
        // a few more turns for the last FIN/ACKs once both are done
        if outputs.iter().all(|o| o.is_some()) {
            let d = *done_at.get_or_insert_with(Instant::now);
            if d.elapsed() > Duration::from_millis(300) {
                break;
            }
        }
    }
    let [ping_out, curl_out] = outputs;
    let ping_out = ping_out.expect("ping finished");
    let text = String::from_utf8_lossy(&ping_out.stdout);
    assert!(ping_out.status.success(), "ping -6: {text}");
    assert!(text.contains("5 received"), "ping -6: {text}");
    assert_eq!(node.icmp6.echo_answered, 5);
    let curl_out = curl_out.expect("curl finished");
    assert!(curl_out.status.success(), "curl -6 failed: {:?}", curl_out);
    assert_eq!(curl_out.stdout, body, "the body, byte for byte");
    assert_eq!(app.served, 1);
    // A Squall client fetches a file from nginx over IPv6.
    let dir = std::env::temp_dir().join(format!("sq6-nginx-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("www")).expect("nginx dir");
    let file: Vec<u8> = (0..32_768u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(dir.join("www/w1"), &file).expect("nginx file");
    let d = dir.display();
    let conf = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
         error_log {d}/error.log warn;\nevents {{ worker_connections 64; }}\n\
         http {{\n access_log {d}/access.log;\n client_body_temp_path {d};\n\
         proxy_temp_path {d};\n fastcgi_temp_path {d};\n uwsgi_temp_path {d};\n\
         scgi_temp_path {d};\n server {{\n  listen [{KERNEL}]:8080;\n  root {d}/www;\n\
         default_type application/octet-stream;\n }}\n}}\n"
    );
    std::fs::write(dir.join("nginx.conf"), conf).expect("nginx.conf");
    let conf_path = dir.join("nginx.conf").display().to_string();
    let prefix = d.to_string();
    let _nginx = Proc(
        in_ns(&["nginx", "-c", &conf_path, "-p", &prefix])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx"),
    );
    std::thread::sleep(Duration::from_millis(500)); // nginx binds
    let req = b"GET /w1 HTTP/1.1\r\nHost: squall\r\nConnection: close\r\n\r\n";
    let mut get = Get {
        from: me.0,
        to: kernel.0,
        port: 8080,
        req: node.tcp.buffers().register(Arc::from(&req[..])),
        req_len: req.len() as u32,
        flow: None,
        got: Vec::new(),
        closed: None,
    };
    let t1 = Instant::now();
    while get.closed.is_none() && t1.elapsed() < Duration::from_secs(10) {
        let now = t0.elapsed().as_nanos() as u64;
        if !node.turn(now, &mut get, Some(&mut cap)) {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        get.closed,
        Some(CloseReason::Normal),
        "the GET to nginx ended"
    );
    let head_end = get
        .got
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("response headers")
        + 4;
    let head = String::from_utf8_lossy(&get.got[..head_end]).to_string();
    assert!(head.starts_with("HTTP/1.1 200"), "nginx answered: {head}");
    assert_eq!(
        &get.got[head_end..],
        &file[..],
        "nginx's file, byte for byte"
    );
    // The kernel's neighbour cache has Squall's address at Squall's MAC.
    let neigh = in_ns(&["ip", "-6", "neigh", "show", SQUALL, "dev", IF_PEER])
        .output()
        .expect("ip neigh");
    let neigh = String::from_utf8_lossy(&neigh.stdout).to_string();
    let mac_s = squall_wire::MacAddress(mac).to_string();
    assert!(neigh.contains(&mac_s), "kernel neighbour entry: {neigh:?}");
    assert!(
        node.neigh6.stats.ns_answered >= 1,
        "the kernel's solicitation answered: {:?}",
        node.neigh6.stats
    );
    assert_eq!(node.neigh6.lookup(&kernel), Some(peer_mac));
    assert_eq!(node.tcp.counters().tcps_accepts, 1);
    assert_eq!(node.tcp.counters().tcps_connattempt, 1);
    assert_eq!(node.tcp.counters().tcps_rcvbadsum, 0);
    std::fs::write(&pcap_path, cap.0.into_inner().expect("pcap bytes")).expect("pcap file");
    // tshark: what Squall sent, dissected without a malformed packet or bad checksum.
    let out = Command::new("tshark")
        .args(["-r", pcap_path.to_str().unwrap(), "-V"])
        .args([
            "-o",
            "tcp.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
        ])
        .output()
        .expect("tshark");
    let _ = std::fs::remove_file(&pcap_path);
    let v = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        v.contains("Internet Protocol Version 6"),
        "the capture holds IPv6"
    );
    assert!(!v.contains("Malformed"), "tshark found a malformed packet");
    assert!(
        !v.contains("Checksum Status: Bad"),
        "tshark found a bad checksum"
    );
}
