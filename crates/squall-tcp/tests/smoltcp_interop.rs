//! Interop (issue 3 "Done when"): W1 between Squall and smoltcp 0.12 on an in-memory wire,
//! both directions of roles, clean and with loss. smoltcp runs with `Medium::Ip`; the glue
//! strips/adds the Ethernet header (no ARP needed on either side).

mod common;

use std::collections::VecDeque;

use common::*;
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{Device, DeviceCapabilities, Medium, RxToken, TxToken};
use smoltcp::socket::tcp;
use smoltcp::time::Instant as SInstant;
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr};
use squall_tcp::TcpHost;

#[derive(Default)]
struct QDev {
    rx: VecDeque<Vec<u8>>,
    tx: VecDeque<Vec<u8>>,
}
struct RxT(Vec<u8>);
impl RxToken for RxT {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}
struct TxT<'a>(&'a mut VecDeque<Vec<u8>>);
impl TxToken for TxT<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut b = vec![0u8; len];
        let r = f(&mut b);
        self.0.push_back(b);
        r
    }
}
impl Device for QDev {
    type RxToken<'a> = RxT;
    type TxToken<'a> = TxT<'a>;
    fn receive(&mut self, _t: SInstant) -> Option<(RxT, TxT<'_>)> {
        let p = self.rx.pop_front()?;
        Some((RxT(p), TxT(&mut self.tx)))
    }
    fn transmit(&mut self, _t: SInstant) -> Option<TxT<'_>> {
        Some(TxT(&mut self.tx))
    }
    fn capabilities(&self) -> DeviceCapabilities {
        let mut c = DeviceCapabilities::default();
        c.medium = Medium::Ip;
        c.max_transmission_unit = 1500;
        c
    }
}

const SQ_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

fn eth_wrap(ip: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(ip.len() + 14);
    f.extend_from_slice(&SQ_MAC);
    f.extend_from_slice(&[2, 0, 0, 0, 0, 2]);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(ip);
    f
}

fn smol_iface(dev: &mut QDev, ip: [u8; 4]) -> Interface {
    let mut iface = Interface::new(Config::new(HardwareAddress::Ip), dev, SInstant::ZERO);
    iface.update_ip_addrs(|a| {
        // /2 covers both 16.0.0.0/8 and 48.0.0.0/8: the peer is on-link.
        a.push(IpCidr::new(IpAddress::v4(ip[0], ip[1], ip[2], ip[3]), 2))
            .unwrap();
    });
    iface
}

fn new_sock() -> tcp::Socket<'static> {
    tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0u8; 65_536]),
        tcp::SocketBuffer::new(vec![0u8; 65_536]),
    )
}

/// Per-socket progress on the smoltcp side.
#[derive(Clone, Copy, Default)]
struct SmolFlow {
    rx: usize,
    tx: usize,
    bad: bool,
    closed: bool,
    done: bool,
}

/// Runs `n` W1 flows with smoltcp as the server and Squall as the client.
fn squall_client_smol_server(n: u32, imp: Impair, seed: u64) {
    let req = pattern(REQ_LEN, 0x11);
    let resp = pattern(RESP_LEN, 0x5a);
    let mut now = 0u64;
    let mut ch = TcpHost::new(
        squall_tcp::TcpConfig {
            mac: SQ_MAC,
            seed,
            ..w1_config()
        },
        now,
    );
    let req_id = ch.buffers().register(req.clone());
    let mut capp = W1Client::new(req_id, resp.clone());
    let mut csink = VecSink::default();
    let mut dev = QDev::default();
    let mut iface = smol_iface(&mut dev, [48, 0, 0, 1]);
    let mut sockets = SocketSet::new(vec![]);
    let mut handles: Vec<SocketHandle> = Vec::new();
    for _ in 0..n {
        let mut s = new_sock();
        s.listen(80).unwrap();
        handles.push(sockets.add(s));
    }
    let mut st = vec![SmolFlow::default(); n as usize];
    for k in 0..n {
        let f = ch
            .connect(now, &mut csink, client_ip(k), client_port(k), SERVER_IP, 80)
            .unwrap();
        capp.started(f, k);
    }
    let mut wire = Wire::new(imp, seed);
    let deadline = 600_000_000_000u64;
    while capp.done < n as u64 || st.iter().any(|s| !s.done) {
        assert!(
            now < deadline,
            "interop run hung: client done {} of {n}",
            capp.done
        );
        for f in csink.frames.drain(..) {
            wire.send(now, 1, f);
        }
        while let Some(p) = dev.tx.pop_front() {
            wire.send(now, 0, eth_wrap(&p));
        }
        while let Some((to, f)) = wire.pop_due(now) {
            if to == 1 {
                if f.len() > 14 {
                    dev.rx.push_back(f[14..].to_vec());
                }
            } else {
                ch.rx(now, &f, &mut capp, &mut csink);
            }
        }
        let t = SInstant::from_micros((now / 1000) as i64);
        iface.poll(t, &mut dev, &mut sockets);
        // smoltcp server application.
        for (k, h) in handles.iter().enumerate() {
            let s = sockets.get_mut::<tcp::Socket>(*h);
            let f = &mut st[k];
            if f.done {
                continue;
            }
            while s.can_recv() && f.rx < REQ_LEN {
                let mut b = [0u8; 256];
                let got = s.recv_slice(&mut b).unwrap();
                if req[f.rx..f.rx + got] != b[..got] {
                    f.bad = true;
                }
                f.rx += got;
            }
            if f.rx == REQ_LEN && f.tx < RESP_LEN && s.can_send() {
                f.tx += s.send_slice(&resp[f.tx..]).unwrap();
            }
            if f.tx == RESP_LEN && !s.may_recv() && !f.closed {
                s.close();
                f.closed = true;
            }
            if f.closed && matches!(s.state(), tcp::State::Closed | tcp::State::TimeWait) {
                f.done = true;
            }
        }
        iface.poll(t, &mut dev, &mut sockets);
        ch.poll(now, &mut capp, &mut csink);
        if !csink.frames.is_empty() || !dev.tx.is_empty() {
            continue;
        }
        let smol_next = iface
            .poll_delay(t, &sockets)
            .map(|d| now + d.total_micros() * 1000);
        let next = [wire.next_time(), ch.next_timer(), smol_next]
            .into_iter()
            .flatten()
            .min();
        now = match next {
            Some(x) => x.max(now + 1000),
            None => now + 1_000_000,
        };
    }
    assert_eq!(capp.ok, n as u64, "client failures: {:?}", capp.failed);
    assert!(st
        .iter()
        .all(|f| !f.bad && f.rx == REQ_LEN && f.tx == RESP_LEN));
}

/// Runs `n` W1 flows with smoltcp as the client and Squall as the server.
fn smol_client_squall_server(n: u32, imp: Impair, seed: u64) {
    let req = pattern(REQ_LEN, 0x11);
    let resp = pattern(RESP_LEN, 0x5a);
    let mut now = 0u64;
    let mut sh = TcpHost::new(
        squall_tcp::TcpConfig {
            mac: SQ_MAC,
            seed,
            ..w1_config()
        },
        now,
    );
    sh.listen(80);
    let resp_id = sh.buffers().register(resp.clone());
    let mut sapp = W1Server::new(req.clone(), resp_id);
    let mut ssink = VecSink::default();
    let mut dev = QDev::default();
    let mut iface = smol_iface(&mut dev, [16, 0, 0, 1]);
    let mut sockets = SocketSet::new(vec![]);
    let mut handles = Vec::new();
    for k in 0..n {
        let mut s = new_sock();
        s.connect(
            iface.context(),
            (IpAddress::v4(48, 0, 0, 1), 80),
            10_000 + k as u16,
        )
        .unwrap();
        handles.push(sockets.add(s));
    }
    // The squall server answers on 48.0.0.1.
    let mut st = vec![SmolFlow::default(); n as usize];
    let mut wire = Wire::new(imp, seed);
    let deadline = 600_000_000_000u64;
    while st.iter().any(|s| !s.done) || sapp.done < n as u64 {
        assert!(
            now < deadline,
            "interop run hung: server done {} of {n}",
            sapp.done
        );
        for f in ssink.frames.drain(..) {
            wire.send(now, 0, f);
        }
        while let Some(p) = dev.tx.pop_front() {
            wire.send(now, 1, eth_wrap(&p));
        }
        while let Some((to, f)) = wire.pop_due(now) {
            if to == 0 {
                if f.len() > 14 {
                    dev.rx.push_back(f[14..].to_vec());
                }
            } else {
                sh.rx(now, &f, &mut sapp, &mut ssink);
            }
        }
        let t = SInstant::from_micros((now / 1000) as i64);
        iface.poll(t, &mut dev, &mut sockets);
        for (k, h) in handles.iter().enumerate() {
            let s = sockets.get_mut::<tcp::Socket>(*h);
            let f = &mut st[k];
            if f.done {
                continue;
            }
            if f.tx < REQ_LEN && s.can_send() {
                f.tx += s.send_slice(&req[f.tx..]).unwrap();
            }
            while s.can_recv() {
                let mut b = [0u8; 4096];
                let got = s.recv_slice(&mut b).unwrap();
                if f.rx + got > RESP_LEN || resp[f.rx..f.rx + got] != b[..got] {
                    f.bad = true;
                }
                f.rx += got;
            }
            if f.rx == RESP_LEN && !f.closed {
                s.close();
                f.closed = true;
            }
            if f.closed && matches!(s.state(), tcp::State::Closed | tcp::State::TimeWait) {
                f.done = true;
            }
        }
        iface.poll(t, &mut dev, &mut sockets);
        sh.poll(now, &mut sapp, &mut ssink);
        if !ssink.frames.is_empty() || !dev.tx.is_empty() {
            continue;
        }
        let smol_next = iface
            .poll_delay(t, &sockets)
            .map(|d| now + d.total_micros() * 1000);
        let next = [wire.next_time(), sh.next_timer(), smol_next]
            .into_iter()
            .flatten()
            .min();
        now = match next {
            Some(x) => x.max(now + 1000),
            None => now + 1_000_000,
        };
    }
    assert!(
        st.iter().all(|f| !f.bad && f.rx == RESP_LEN),
        "smoltcp client saw bad or short data"
    );
    assert_eq!(sapp.ok, n as u64, "server failures: {:?}", sapp.failed);
}

fn clean() -> Impair {
    Impair {
        delay_ns: 50_000,
        ..Impair::default()
    }
}

#[test]
fn interop_squall_client_smoltcp_server() {
    squall_client_smol_server(50, clean(), 1);
}

#[test]
fn interop_smoltcp_client_squall_server() {
    smol_client_squall_server(50, clean(), 2);
}

#[test]
fn interop_squall_client_smoltcp_server_loss_2pct() {
    squall_client_smol_server(
        50,
        Impair {
            loss: 0.02,
            ..clean()
        },
        3,
    );
}

#[test]
fn interop_smoltcp_client_squall_server_loss_2pct() {
    smol_client_squall_server(
        50,
        Impair {
            loss: 0.02,
            ..clean()
        },
        4,
    );
}
