//! T-loop: the Linux kernel's TCP over loopback. An epoll client thread pinned to core 0
//! and an epoll server thread pinned to core 1 run W1 or W2; the figure is the busy time
//! of both cores (`/proc/stat`) per operation, with each thread's own run time
//! (`/proc/self/task/TID/schedstat`) as a cross-check on a shared machine.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::http::{self, matches_at};
use crate::measure::{self, Histogram};
use crate::report::Record;

/// Which kernel workload to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopWorkload {
    W1,
    W2,
}

/// Settings of one T-loop run.
#[derive(Clone, Copy, Debug)]
pub struct LoopCfg {
    pub workload: LoopWorkload,
    pub conns: usize,
    pub seconds: f64,
    pub warmup: f64,
    pub client_core: usize,
    pub server_core: usize,
}

impl LoopCfg {
    pub fn new(workload: LoopWorkload, conns: usize, seconds: f64) -> Self {
        LoopCfg {
            workload,
            conns,
            seconds,
            warmup: (seconds / 4.0).clamp(0.1, 0.5),
            client_core: 0,
            server_core: 1,
        }
    }
}

/// Source addresses of the client: 127.0.16.1 - 127.0.16.200 (the W1 pool's shape).
const CLIENT_ADDRS: u32 = 200;
const SERVER_ADDR: [u8; 4] = [127, 0, 0, 1];

struct Shared {
    stop: AtomicBool,
    measuring: AtomicBool,
    ops: AtomicU64,
    errors: AtomicU64,
    l7_bytes: AtomicU64,
    /// Errors by kind (see [`ERR_KINDS`]).
    kinds: [AtomicU64; ERR_KINDS.len()],
}

/// Names of the error kinds counted separately (reported in the note).
const ERR_KINDS: [&str; 8] = [
    "connect",
    "epollerr",
    "client_io",
    "bad_bytes",
    "early_eof",
    "server_io",
    "server_incomplete",
    "accept",
];

impl Shared {
    fn error(&self, kind: usize) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if let Some(k) = self.kinds.get(kind) {
            k.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn kinds_note(&self) -> Option<String> {
        let parts: Vec<String> = ERR_KINDS
            .iter()
            .zip(&self.kinds)
            .filter_map(|(n, k)| {
                let v = k.load(Ordering::Relaxed);
                (v > 0).then(|| format!("{n}={v}"))
            })
            .collect();
        (!parts.is_empty()).then(|| format!("errors: {}", parts.join(" ")))
    }
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// On-CPU nanoseconds of thread `tid` of this process (first field of schedstat).
fn task_runtime_ns(tid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(0)
}

fn sockaddr(ip: [u8; 4], port: u16) -> libc::sockaddr_in {
    // SAFETY: sockaddr_in is plain data; all-zero is a valid value.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_port = port.to_be();
    sa.sin_addr.s_addr = u32::from_ne_bytes(ip);
    sa
}

fn set_int_opt(fd: i32, level: i32, name: i32, v: i32) {
    // SAFETY: passes a pointer to a live i32 of the stated size.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &v as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        );
    }
}

/// A non-blocking TCP socket with cubic congestion control (../shared/BENCHMARKS.md: bbr,
/// this kind of machine's default, paces every socket with timers and cut nginx's W2 by
/// 2.3x; connections accepted on a listener inherit its choice). The run fails when cubic
/// cannot be set (`run_kernel` allows it first).
fn tcp_socket() -> io::Result<i32> {
    // SAFETY: plain syscall.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let cc = b"cubic";
    // SAFETY: `cc` is valid for its length; `fd` is the socket just opened.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr() as *const libc::c_void,
            cc.len() as libc::socklen_t,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        close_fd(fd);
        return Err(io::Error::other(format!(
            "TCP_CONGESTION cubic: {e} (cubic must be in net.ipv4.tcp_allowed_congestion_control: run as root)"
        )));
    }
    Ok(fd)
}

fn close_fd(fd: i32) {
    // SAFETY: closing a descriptor this module opened.
    unsafe {
        libc::close(fd);
    }
}

/// An epoll instance and its event buffer.
struct Epoll {
    fd: i32,
    events: Vec<libc::epoll_event>,
}

impl Epoll {
    fn new() -> io::Result<Self> {
        // SAFETY: plain syscall.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Epoll {
            fd,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 1024],
        })
    }

    fn add(&self, fd: i32, events: u32) -> bool {
        let mut ev = libc::epoll_event {
            events,
            u64: fd as u64,
        };
        // SAFETY: `ev` is a live epoll_event.
        unsafe { libc::epoll_ctl(self.fd, libc::EPOLL_CTL_ADD, fd, &mut ev) == 0 }
    }

    /// Waits up to `ms` and returns the ready descriptors and their event bits.
    fn wait(&mut self, ms: i32) -> impl Iterator<Item = (i32, u32)> + '_ {
        // SAFETY: the buffer holds `len` epoll_events.
        let n = unsafe {
            libc::epoll_wait(
                self.fd,
                self.events.as_mut_ptr(),
                self.events.len() as i32,
                ms,
            )
        };
        let n = n.max(0) as usize;
        self.events[..n].iter().map(|e| (e.u64 as i32, e.events))
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        close_fd(self.fd);
    }
}

/// Reads until EAGAIN; `f` sees each chunk. Returns (bytes, eof, error).
fn read_all(fd: i32, buf: &mut [u8], mut f: impl FnMut(&[u8])) -> (usize, bool, bool) {
    let mut total = 0;
    loop {
        // SAFETY: `buf` is a live writable buffer of the given length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
        if n > 0 {
            f(&buf[..n as usize]);
            total += n as usize;
        } else if n == 0 {
            return (total, true, false);
        } else {
            let e = errno();
            if e == libc::EINTR {
                continue;
            }
            return (total, false, e != libc::EAGAIN);
        }
    }
}

/// Writes as much of `data` as the socket takes. Returns (bytes, error).
fn write_some(fd: i32, data: &[u8]) -> (usize, bool) {
    let mut off = 0;
    while off < data.len() {
        // SAFETY: the slice is live for the call; MSG_NOSIGNAL avoids SIGPIPE.
        let n = unsafe {
            libc::send(
                fd,
                data[off..].as_ptr() as *const libc::c_void,
                data.len() - off,
                libc::MSG_NOSIGNAL,
            )
        };
        if n >= 0 {
            off += n as usize;
        } else {
            let e = errno();
            if e == libc::EINTR {
                continue;
            }
            return (off, e != libc::EAGAIN);
        }
    }
    (off, false)
}

#[derive(Clone, Copy, Default)]
struct Conn {
    live: bool,
    connected: bool,
    sent: usize,
    got: usize,
    responding: bool,
    eof: bool,
    bad: bool,
    t_sent: Option<Instant>,
}

fn slot(conns: &mut Vec<Conn>, fd: i32) -> &mut Conn {
    let i = fd as usize;
    if i >= conns.len() {
        conns.resize(i + 1, Conn::default());
    }
    &mut conns[i]
}

const EV: u32 = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLET | libc::EPOLLRDHUP) as u32;

fn server_thread(cfg: LoopCfg, sh: Arc<Shared>, ready: mpsc::Sender<io::Result<(u16, i32)>>) {
    measure::pin_to_core(cfg.server_core);
    let setup = || -> io::Result<(i32, u16, Epoll)> {
        let lfd = tcp_socket()?;
        set_int_opt(lfd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1);
        let sa = sockaddr(SERVER_ADDR, 0);
        // SAFETY: `sa` is a live sockaddr_in of the stated size.
        let rc = unsafe {
            libc::bind(
                lfd,
                &sa as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        // SAFETY: plain syscall.
        if rc != 0 || unsafe { libc::listen(lfd, 4096) } != 0 {
            let e = io::Error::last_os_error();
            close_fd(lfd);
            return Err(e);
        }
        let mut got = sockaddr([0; 4], 0);
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: `got`/`len` are live and sized for a sockaddr_in.
        unsafe { libc::getsockname(lfd, &mut got as *mut _ as *mut libc::sockaddr, &mut len) };
        let ep = Epoll::new()?;
        ep.add(lfd, libc::EPOLLIN as u32);
        Ok((lfd, u16::from_be(got.sin_port), ep))
    };
    let (lfd, port, mut ep) = match setup() {
        Ok(x) => x,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok((port, gettid())));
    let (req, resp) = match cfg.workload {
        LoopWorkload::W1 => (http::w1_request(), http::w1_response()),
        LoopWorkload::W2 => (http::w2_request(), http::w2_response()),
    };
    let mut conns: Vec<Conn> = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut fired = Vec::with_capacity(1024);
    while !sh.stop.load(Ordering::Relaxed) {
        fired.clear();
        fired.extend(ep.wait(10));
        for &(fd, _ev) in &fired {
            if fd == lfd {
                loop {
                    // SAFETY: accept4 with null address pointers is allowed.
                    let c = unsafe {
                        libc::accept4(
                            lfd,
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                        )
                    };
                    if c < 0 {
                        break;
                    }
                    set_int_opt(c, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
                    *slot(&mut conns, c) = Conn {
                        live: true,
                        ..Conn::default()
                    };
                    if !ep.add(c, EV) {
                        close_fd(c);
                        conns[c as usize].live = false;
                    }
                }
                continue;
            }
            let s = slot(&mut conns, fd);
            if !s.live {
                continue;
            }
            let (_, eof, err) = read_all(fd, &mut buf, |b| {
                if s.responding && cfg.workload == LoopWorkload::W2 {
                    s.bad = true; // pipelined beyond one request: not part of W2
                }
                if !matches_at(&req, s.got, b) {
                    s.bad = true;
                }
                s.got += b.len();
            });
            s.eof |= eof;
            let mut fail = err || s.bad;
            if !fail && s.got == req.len() && !s.responding && s.sent == 0 {
                s.responding = true;
            }
            if s.responding && !fail {
                let (n, e) = write_some(fd, &resp[s.sent..]);
                s.sent += n;
                fail |= e;
                if s.sent == resp.len() && cfg.workload == LoopWorkload::W2 {
                    s.responding = false;
                    s.sent = 0;
                    s.got = 0;
                }
            }
            let w1_done = cfg.workload == LoopWorkload::W1 && s.sent == resp.len();
            if fail || (s.eof && (w1_done || cfg.workload == LoopWorkload::W2)) {
                let complete = cfg.workload == LoopWorkload::W2 || (w1_done && s.got == req.len());
                if fail {
                    sh.error(if s.bad { 3 } else { 5 });
                } else if !complete {
                    sh.error(6);
                }
                s.live = false;
                close_fd(fd);
            }
        }
    }
    for (fd, c) in conns.iter().enumerate() {
        if c.live {
            close_fd(fd as i32);
        }
    }
    close_fd(lfd);
}

fn client_open(ep: &Epoll, conns: &mut Vec<Conn>, port: u16, n: u64) -> io::Result<i32> {
    let fd = tcp_socket()?;
    set_int_opt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1);
    set_int_opt(fd, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1);
    set_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
    let host = 1 + (n % CLIENT_ADDRS as u64) as u8;
    let src = sockaddr([127, 0, 16, host], 0);
    let dst = sockaddr(SERVER_ADDR, port);
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: `src`/`dst` are live sockaddr_in values of size `len`.
    let ok = unsafe {
        libc::bind(fd, &src as *const _ as *const libc::sockaddr, len) == 0
            && (libc::connect(fd, &dst as *const _ as *const libc::sockaddr, len) == 0
                || errno() == libc::EINPROGRESS)
    };
    if !ok || !ep.add(fd, EV) {
        let e = io::Error::last_os_error();
        close_fd(fd);
        return Err(e);
    }
    *slot(conns, fd) = Conn {
        live: true,
        ..Conn::default()
    };
    Ok(fd)
}

fn client_thread(cfg: LoopCfg, sh: Arc<Shared>, port: u16, tid: mpsc::Sender<i32>) -> Histogram {
    measure::pin_to_core(cfg.client_core);
    let _ = tid.send(gettid());
    let mut hist = Histogram::new();
    let (req, resp) = match cfg.workload {
        LoopWorkload::W1 => (http::w1_request(), http::w1_response()),
        LoopWorkload::W2 => (http::w2_request(), http::w2_response()),
    };
    let Ok(mut ep) = Epoll::new() else {
        sh.errors.fetch_add(1, Ordering::Relaxed);
        return hist;
    };
    let mut conns: Vec<Conn> = Vec::new();
    let mut opened = 0u64;
    let mut live = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    let mut fired = Vec::with_capacity(1024);
    let mut measuring = false;
    while !sh.stop.load(Ordering::Relaxed) {
        while live < cfg.conns {
            opened += 1;
            match client_open(&ep, &mut conns, port, opened) {
                Ok(_) => live += 1,
                Err(e) => {
                    if std::env::var_os("SQUALL_BENCH_DEBUG").is_some() {
                        eprintln!("connect: {e}");
                    }
                    sh.error(0);
                    break;
                }
            }
        }
        let m = sh.measuring.load(Ordering::Relaxed);
        if m && !measuring {
            hist.clear();
        }
        measuring = m;
        fired.clear();
        fired.extend(ep.wait(10));
        for &(fd, ev) in &fired {
            let s = slot(&mut conns, fd);
            if !s.live {
                continue;
            }
            let mut fail = ev & libc::EPOLLERR as u32 != 0;
            let mut kind = 1;
            if !s.connected && !fail && ev & libc::EPOLLOUT as u32 != 0 {
                s.connected = true;
            }
            if s.connected && !fail && s.sent < req.len() {
                if s.t_sent.is_none() {
                    s.t_sent = Some(Instant::now());
                }
                let (n, e) = write_some(fd, &req[s.sent..]);
                s.sent += n;
                if e && !fail {
                    fail = true;
                    kind = 2;
                }
            }
            let (_, eof, err) = read_all(fd, &mut buf, |b| {
                if !matches_at(&resp, s.got, b) {
                    s.bad = true;
                }
                s.got += b.len();
            });
            if (err || s.bad) && !fail {
                fail = true;
                kind = if s.bad { 3 } else { 2 };
            }
            let mut done = false;
            if !fail && s.got == resp.len() {
                sh.ops.fetch_add(1, Ordering::Relaxed);
                sh.l7_bytes
                    .fetch_add((req.len() + resp.len()) as u64, Ordering::Relaxed);
                if let (true, Some(t)) = (measuring, s.t_sent) {
                    hist.record_ns(t.elapsed().as_nanos() as u64);
                }
                match cfg.workload {
                    LoopWorkload::W1 => done = true,
                    LoopWorkload::W2 => {
                        s.got = 0;
                        s.t_sent = Some(Instant::now());
                        let (n, e) = write_some(fd, &req);
                        s.sent = n;
                        if e {
                            fail = true;
                            kind = 2;
                        }
                    }
                }
            } else if eof && !fail {
                fail = true;
                kind = 4;
            }
            if fail || done {
                if fail {
                    if std::env::var_os("SQUALL_BENCH_DEBUG").is_some() {
                        eprintln!(
                            "client fd {fd} kind {kind} ev {ev:#x} sent {} got {} connected {} errno {}",
                            s.sent,
                            s.got,
                            s.connected,
                            io::Error::last_os_error()
                        );
                    }
                    sh.error(kind);
                }
                s.live = false;
                close_fd(fd);
                live -= 1;
            }
        }
    }
    for (fd, c) in conns.iter().enumerate() {
        if c.live {
            close_fd(fd as i32);
        }
    }
    hist
}

/// Runs one T-loop cell and returns its line (errors counted on both sides).
pub fn run_loop(cfg: &LoopCfg) -> io::Result<Record> {
    measure::raise_nofile();
    let cfg = *cfg;
    let sh = Arc::new(Shared {
        stop: AtomicBool::new(false),
        measuring: AtomicBool::new(false),
        ops: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        l7_bytes: AtomicU64::new(0),
        kinds: Default::default(),
    });
    let (stx, srx) = mpsc::channel();
    let sh2 = sh.clone();
    let server = std::thread::spawn(move || server_thread(cfg, sh2, stx));
    let (port, server_tid) = match srx.recv() {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => {
            let _ = server.join();
            return Err(e);
        }
        Err(_) => {
            let _ = server.join();
            return Err(io::Error::other("server thread died"));
        }
    };
    let (ctx, crx) = mpsc::channel();
    let sh3 = sh.clone();
    let client = std::thread::spawn(move || client_thread(cfg, sh3, port, ctx));
    let client_tid = crx.recv().unwrap_or(0);

    std::thread::sleep(Duration::from_secs_f64(cfg.warmup));
    let snap = |sh: &Shared| {
        (
            Instant::now(),
            measure::core_busy_us(),
            task_runtime_ns(client_tid),
            task_runtime_ns(server_tid),
            sh.ops.load(Ordering::Relaxed),
            sh.l7_bytes.load(Ordering::Relaxed),
        )
    };
    sh.measuring.store(true, Ordering::Relaxed);
    let a = snap(&sh);
    std::thread::sleep(Duration::from_secs_f64(cfg.seconds));
    let b = snap(&sh);
    // Errors up to the end of the window; tearing down (each side closing its live
    // connections under the other) is not part of the run.
    let errors = sh.errors.load(Ordering::Relaxed);
    let kinds = sh.kinds_note();
    sh.measuring.store(false, Ordering::Relaxed);
    sh.stop.store(true, Ordering::Relaxed);
    let hist = client.join().unwrap_or_else(|_| Histogram::new());
    let _ = server.join();

    let secs = (b.0 - a.0).as_secs_f64();
    let ops = b.4 - a.4;
    let busy = |core: usize| {
        let x = a.1.get(core).copied().unwrap_or(0);
        let y = b.1.get(core).copied().unwrap_or(0);
        y.saturating_sub(x) as f64
    };
    let per_op = |x: f64| if ops > 0 { Some(x / ops as f64) } else { None };
    let (cb, sb) = (busy(cfg.client_core), busy(cfg.server_core));
    let threads_us = ((b.2 - a.2) + (b.3 - a.3)) as f64 / 1000.0;
    let rate = Some(ops as f64 / secs);
    let w2 = cfg.workload == LoopWorkload::W2;
    // Both cores fully busy while our threads ran a fraction of that: other load shares
    // the cores and the /proc/stat figure over-counts.
    let load_note = if cb + sb > 1.5 * threads_us + 0.05 * secs * 2e6 {
        Some(format!(
            "cores busy {:.0}% while the two threads ran {:.0}%: other load on cores {} and {}; \
             prefer thread_us_per_op (softirq time outside the threads not included)",
            (cb + sb) / (secs * 2e4),
            threads_us / (secs * 2e4),
            cfg.client_core,
            cfg.server_core
        ))
    } else {
        None
    };
    let note = match (kinds, load_note) {
        (Some(a), Some(b)) => Some(format!("cubic; {a}; {b}")),
        (Some(a), None) | (None, Some(a)) => Some(format!("cubic; {a}")),
        (None, None) => Some("cubic".into()),
    };
    Ok(Record {
        workload: if w2 { "W2" } else { "W1" }.into(),
        topology: "T-loop".into(),
        client: "kernel".into(),
        server: "kernel".into(),
        conns: Some(cfg.conns as u64),
        cps: if w2 { None } else { rate },
        rps: if w2 { rate } else { None },
        gbps: Some((b.5 - a.5) as f64 * 8.0 / secs / 1e9),
        p50_us: if w2 { hist.quantile(0.5) } else { None },
        p99_us: if w2 { hist.quantile(0.99) } else { None },
        cpu_us_per_op: per_op(cb + sb),
        client_us_per_op: per_op(cb),
        server_us_per_op: per_op(sb),
        thread_us_per_op: per_op(threads_us),
        errors,
        seconds: secs,
        note,
        ..Default::default()
    })
}
