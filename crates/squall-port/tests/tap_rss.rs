//! RSS on a multi-queue tap (`squall_port::tap_rss`), checked against `squall_port::rss`:
//! in a private network namespace of the test thread, the steering program is attached
//! to a 2-queue tap, the kernel sends UDP datagrams over IPv4 and IPv6 (many port pairs,
//! several destinations), fragments of large datagrams and TCP SYNs into the tap, and each
//! frame must come out of the queue `rss::RssSteer` names for its 4-tuple (the address
//! pair for fragments, and for IPv6 without TCP/UDP right after the fixed header: ICMPv6,
//! the fragment header); ARP goes to queue 0. Run with the symmetric key and with
//! Microsoft's (asymmetric) one. Needs root and /dev/net/tun.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::time::{Duration, Instant};

use squall_port::rss::{RssConfig, RssSteer, Toeplitz, MICROSOFT_KEY};
use squall_port::tap_rss::TapRss;

const TAP: &str = "rss-tap0";

fn ip(args: &str) {
    let a: Vec<&str> = args.split_whitespace().collect();
    let ok = Command::new("ip")
        .args(&a)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "ip {args}");
}

/// One queue of the tap (TUNSETIFF with IFF_MULTI_QUEUE), non-blocking.
fn open_queue(name: &str) -> OwnedFd {
    #[repr(C)]
    struct IfReq {
        name: [u8; 16],
        flags: u16,
        _pad: [u8; 22],
    }
    const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
    const IFF_TAP: u16 = 0x0002;
    const IFF_NO_PI: u16 = 0x1000;
    const IFF_MULTI_QUEUE: u16 = 0x0100;
    // SAFETY: open of a fixed path; the fd is owned below.
    let fd = unsafe {
        libc::open(
            c"/dev/net/tun".as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    assert!(fd >= 0, "open /dev/net/tun");
    // SAFETY: fd was just opened and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = IfReq {
        name: [0; 16],
        flags: IFF_TAP | IFF_NO_PI | IFF_MULTI_QUEUE,
        _pad: [0; 22],
    };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: TUNSETIFF reads and writes an ifreq, which IfReq lays out (40 bytes).
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req) };
    assert_eq!(
        rc,
        0,
        "TUNSETIFF {name}: {}",
        std::io::Error::last_os_error()
    );
    fd
}

/// Frames waiting on one queue.
fn drain(q: &OwnedFd) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 9000];
    loop {
        // SAFETY: buf is writable for its length.
        let n = unsafe { libc::read(q.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            return out;
        }
        out.push(buf[..n as usize].to_vec());
    }
}

/// The queue a NIC with `cfg` puts `f` on, by `rss`'s reckoning (None: not IP).
fn expected(steer: &RssSteer, hash: &Toeplitz, f: &[u8]) -> Option<u32> {
    if f.len() >= 54 && f[12..14] == [0x86, 0xdd] {
        let mut input = f[22..54].to_vec();
        if f[20] == 6 || f[20] == 17 {
            input.extend_from_slice(&f[54..58]);
        }
        return Some(steer.queue_of_hash(hash.hash(&input)));
    }
    if f.len() < 34 || f[12..14] != [0x08, 0x00] {
        return None;
    }
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let frag = u16::from_be_bytes([f[20], f[21]]) & 0x3fff;
    let proto = f[23];
    let mut input = f[26..34].to_vec();
    if (proto == 6 || proto == 17) && frag == 0 {
        input.extend_from_slice(&f[14 + ihl..14 + ihl + 4]);
    }
    Some(steer.queue_of_hash(hash.hash(&input)))
}

#[test]
fn the_tap_puts_each_frame_on_the_queue_rss_names() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !std::path::Path::new("/dev/net/tun").exists() {
        squall_port::lab::skipped("needs root and /dev/net/tun");
        return;
    }
    for key in [RssConfig::symmetric(2).key, MICROSOFT_KEY] {
        std::thread::spawn(move || run(key))
            .join()
            .expect("test thread");
    }
}

fn run(key: [u8; 40]) {
    // SAFETY: unshare only affects this thread (and the children it starts).
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        squall_port::lab::skipped("unshare(CLONE_NEWNET) failed");
        return;
    }
    let cfg = RssConfig {
        key,
        reta_size: 128,
        queues: 2,
        ipv6: true,
        table: None,
    };
    let rss = TapRss::attach(TAP, &cfg).unwrap_or_else(|e| panic!("{e}"));
    let queues = [open_queue(TAP), open_queue(TAP)];
    ip(&format!("link set {TAP} up"));
    ip(&format!("addr add 198.18.0.1/24 dev {TAP}"));
    ip(&format!("-6 addr add 2001:db8::1/64 dev {TAP} nodad"));
    for h in 2..6 {
        ip(&format!(
            "neigh replace 198.18.0.{h} lladdr 02:00:00:00:00:0{h} dev {TAP}"
        ));
        ip(&format!(
            "-6 neigh replace 2001:db8::{h} lladdr 02:00:00:00:00:0{h} dev {TAP}"
        ));
    }

    // Datagrams over many port pairs and four destinations, one large one in fragments.
    let mut sent = 0usize;
    for sport in [20000u16, 20001, 33333, 40000, 50505, 61000] {
        let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 1), sport)).unwrap();
        for h in 2..6u8 {
            for dport in [80u16, 443, 1024, 5001, 9999, 12345, 40001, 65000] {
                s.send_to(
                    b"rss",
                    SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, h), dport),
                )
                .unwrap();
                sent += 1;
            }
        }
    }
    let big = UdpSocket::bind("198.18.0.1:7000").unwrap();
    // SAFETY: setsockopt with an int option on a live socket.
    unsafe {
        let v: libc::c_int = libc::IP_PMTUDISC_DONT;
        libc::setsockopt(
            big.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    big.send_to(&[7u8; 4000], "198.18.0.3:7001").unwrap();
    // The same over IPv6 (the kernel fragments a datagram over the MTU by itself).
    let mut sent6 = 0usize;
    for sport in [20000u16, 33333, 50505, 61000] {
        let s = UdpSocket::bind(SocketAddrV6::new(
            "2001:db8::1".parse().unwrap(),
            sport,
            0,
            0,
        ))
        .unwrap();
        for h in 2..6u16 {
            let dst: Ipv6Addr = format!("2001:db8::{h}").parse().unwrap();
            for dport in [80u16, 443, 5001, 12345, 40001, 65000] {
                s.send_to(b"rss6", SocketAddrV6::new(dst, dport, 0, 0))
                    .unwrap();
                sent6 += 1;
            }
        }
    }
    UdpSocket::bind("[2001:db8::1]:7000")
        .unwrap()
        .send_to(&[6u8; 4000], "[2001:db8::3]:7001")
        .unwrap();
    drop(std::net::TcpStream::connect_timeout(
        &"[2001:db8::5]:443".parse().unwrap(),
        Duration::from_millis(50),
    ));
    // An ICMPv6 echo request: hashed on its address pair.
    let mut ping = Command::new("ping")
        .args(["-6", "-c", "1", "-W", "1", "2001:db8::4"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("ping");
    // A TCP SYN (the connect never completes: nobody answers).
    let tcp = std::net::TcpStream::connect_timeout(
        &"198.18.0.4:80".parse().unwrap(),
        Duration::from_millis(50),
    );
    drop(tcp);
    // ARP for an address without a neighbour entry.
    let _ = UdpSocket::bind("198.18.0.1:0")
        .unwrap()
        .send_to(b"arp", "198.18.0.77:9");

    let steer = RssSteer::new(&cfg);
    let hash = Toeplitz::new(&cfg.key);
    let mut per_queue = [0usize; 2];
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(1500) {
        for (q, fd) in queues.iter().enumerate() {
            for f in drain(fd) {
                per_queue[q] += 1;
                match expected(&steer, &hash, &f) {
                    Some(want) if f[12..14] == [0x86, 0xdd] => {
                        let kind = match f[20] {
                            44 => "fragment6",
                            6 => "tcp6",
                            17 => "udp6",
                            58 => "icmp6",
                            _ => "other ipv6",
                        };
                        *kinds.entry(kind).or_default() += 1;
                        assert_eq!(q as u32, want, "{kind} frame on queue {q}: {f:02x?}");
                    }
                    Some(want) => {
                        let frag = u16::from_be_bytes([f[20], f[21]]) & 0x3fff != 0;
                        let kind = match (f[23], frag) {
                            (_, true) => "fragment",
                            (6, _) => "tcp",
                            (17, _) => "udp",
                            _ => "other ipv4",
                        };
                        *kinds.entry(kind).or_default() += 1;
                        assert_eq!(q as u32, want, "{kind} frame on queue {q}: {f:02x?}");
                    }
                    None => {
                        if f[12..14] == [0x08, 0x06] {
                            *kinds.entry("arp").or_default() += 1;
                        }
                        assert_eq!(q, 0, "a frame RSS does not hash on queue {q}: {f:02x?}");
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = ping.wait();
    eprintln!(
        "key {:02x?}..: per queue {per_queue:?}, {kinds:?}, program {:?}",
        &key[..4],
        rss.stats()
    );
    assert_eq!(kinds.get("udp").copied().unwrap_or(0), sent, "{kinds:?}");
    assert!(
        kinds.get("fragment").copied().unwrap_or(0) >= 3,
        "{kinds:?}"
    );
    assert!(kinds.get("tcp").copied().unwrap_or(0) >= 1, "{kinds:?}");
    assert!(kinds.get("arp").copied().unwrap_or(0) >= 1, "{kinds:?}");
    assert_eq!(kinds.get("udp6").copied().unwrap_or(0), sent6, "{kinds:?}");
    assert!(
        kinds.get("fragment6").copied().unwrap_or(0) >= 3,
        "{kinds:?}"
    );
    assert!(kinds.get("tcp6").copied().unwrap_or(0) >= 1, "{kinds:?}");
    assert!(kinds.get("icmp6").copied().unwrap_or(0) >= 1, "{kinds:?}");
    assert!(
        per_queue.iter().all(|&n| n > sent / 4),
        "both queues take a share: {per_queue:?}"
    );
    let st = rss.stats();
    assert!(st.four_tuple >= (sent + sent6) as u64, "{st:?}");
    assert!(st.addr_pair >= 6 && st.default_queue >= 1, "{st:?}");
    assert!(st.ipv6 >= sent6 as u64 + 3, "{st:?}");
}
