//! `squall daemon`: runs the engine under control of a JSON-RPC 2.0 API (see `docs/API.md`)
//! on a loopback TCP port or a unix socket. One thread per connection (bounded); requests
//! are newline-delimited JSON; bad input gets an error response, never a crash.

pub mod rpc;
pub mod service;

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use service::Service;

/// Longest request line accepted (bytes, not counting its `\n`); a profile IR object
/// travels in one line.
pub const MAX_LINE: u64 = 16 << 20;
/// After a too-long line, how much more of it is read and dropped (bytes), for how long
/// at most, and how long the client may pause, before the error is sent: the client gets
/// the error instead of a broken pipe while it is still sending.
const DISCARD_MAX: u64 = 1 << 30;
const DISCARD_TIME: Duration = Duration::from_secs(30);
const DISCARD_IDLE: Duration = Duration::from_secs(1);
/// Most connections served at once.
const MAX_CONNS: usize = 32;
/// With every slot taken, a new connection takes the place of the one that has waited
/// longest for its next request, if that is more than this: idle clients cannot lock an
/// operator out.
const EVICT_IDLE: Duration = Duration::from_secs(5);

/// Where the daemon listens.
#[derive(Clone, Debug)]
pub enum Listen {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

trait Conn: Read + Write + Send + 'static {
    fn split(&self) -> io::Result<Box<dyn Write + Send>>;
    fn read_timeout(&self, t: Option<Duration>) -> io::Result<()>;
    /// Ends the connection's read side from another thread (its reads then return what
    /// had arrived, then 0; its answers can still be written).
    fn closer(&self) -> io::Result<Box<dyn Fn() + Send>>;
}

/// The connections served: each one's closer, and since when it has waited for its next
/// request (`None` while it runs one).
#[derive(Default)]
struct Conns {
    next: AtomicU64,
    list: Mutex<Vec<ConnSlot>>,
}

struct ConnSlot {
    id: u64,
    idle_since: Option<Instant>,
    close: Box<dyn Fn() + Send>,
}

impl Conns {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<ConnSlot>> {
        self.list.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// A slot for a new connection (its id), taking that of the connection idle longest
    /// beyond [`EVICT_IDLE`] when all are taken; `None`: every connection is busy or
    /// recently active.
    fn admit(&self, close: Box<dyn Fn() + Send>) -> Option<u64> {
        let mut l = self.lock();
        if l.len() >= MAX_CONNS {
            let now = Instant::now();
            let idlest = l
                .iter()
                .enumerate()
                .filter_map(|(i, c)| Some((i, c.idle_since?)))
                .filter(|(_, t)| now.duration_since(*t) > EVICT_IDLE)
                .min_by_key(|(_, t)| *t)
                .map(|(i, _)| i)?;
            (l.swap_remove(idlest).close)();
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        l.push(ConnSlot {
            id,
            idle_since: Some(Instant::now()),
            close,
        });
        Some(id)
    }
    /// Marks connection `id` waiting for a request (or running one); false if it was
    /// evicted (its slot given to another connection).
    fn set_idle(&self, id: u64, idle: bool) -> bool {
        match self.lock().iter_mut().find(|c| c.id == id) {
            Some(c) => {
                c.idle_since = idle.then(Instant::now);
                true
            }
            None => false,
        }
    }
    fn leave(&self, id: u64) {
        self.lock().retain(|c| c.id != id);
    }
}

impl Conn for std::net::TcpStream {
    fn split(&self) -> io::Result<Box<dyn Write + Send>> {
        Ok(Box::new(self.try_clone()?))
    }
    fn read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(t)
    }
    fn closer(&self) -> io::Result<Box<dyn Fn() + Send>> {
        let c = self.try_clone()?;
        Ok(Box::new(move || {
            let _ = c.shutdown(std::net::Shutdown::Read);
        }))
    }
}

impl Conn for UnixStream {
    fn split(&self) -> io::Result<Box<dyn Write + Send>> {
        Ok(Box::new(self.try_clone()?))
    }
    fn read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(t)
    }
    fn closer(&self) -> io::Result<Box<dyn Fn() + Send>> {
        let c = self.try_clone()?;
        Ok(Box::new(move || {
            let _ = c.shutdown(std::net::Shutdown::Read);
        }))
    }
}

/// Reads one line of at most [`MAX_LINE`] bytes. `Ok(None)`: end of stream;
/// `Err(())`: the line is too long (the connection is then closed).
fn read_line<R: BufRead>(r: &mut R, buf: &mut Vec<u8>) -> io::Result<Option<Result<(), ()>>> {
    buf.clear();
    let n = r.by_ref().take(MAX_LINE + 1).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() != Some(&b'\n') && n as u64 > MAX_LINE {
        return Ok(Some(Err(())));
    }
    Ok(Some(Ok(())))
}

/// Reads and drops the rest of a too-long line, up to its `\n`, the end of the stream,
/// a read error, or a pause of the client longer than `idle` (it then waits for the
/// answer); at most `max` bytes and `limit` time.
fn discard_line<R: BufRead>(r: &mut R, max: u64, limit: Duration) {
    let t0 = Instant::now();
    let mut left = max;
    while left > 0 && t0.elapsed() < limit {
        let (n, done) = match r.fill_buf() {
            Ok([]) | Err(_) => return,
            Ok(b) => match b.iter().position(|&c| c == b'\n') {
                Some(i) => (i + 1, true),
                None => (b.len(), false),
            },
        };
        r.consume(n);
        if done {
            return;
        }
        left = left.saturating_sub(n as u64);
    }
}

fn serve_conn<C: Conn>(
    svc: Arc<Service>,
    conn: C,
    on_shutdown: &(dyn Fn() + Sync),
    conns: &Conns,
    id: u64,
) {
    let Ok(mut out) = conn.split() else { return };
    let mut rd = BufReader::new(conn);
    let mut buf = Vec::new();
    loop {
        if !conns.set_idle(id, true) {
            return; // evicted after its last answer
        }
        let line = read_line(&mut rd, &mut buf);
        // An eviction shuts the read side only: a request that arrived before it (or
        // that the kernel still hands over) is run and answered here, and the
        // connection ends after that answer (the check at the loop's top). The daemon
        // answers every request it reads.
        conns.set_idle(id, false);
        let resp = match line {
            Ok(None) | Err(_) => return,
            Ok(Some(Err(()))) => {
                if rd.get_ref().read_timeout(Some(DISCARD_IDLE)).is_ok() {
                    discard_line(&mut rd, DISCARD_MAX, DISCARD_TIME);
                }
                let e = format!(
                    r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":-32700,"message":"request line too long (over {MAX_LINE} bytes)"}}}}"#
                );
                let _ = out.write_all(format!("{e}\n").as_bytes());
                let _ = out.flush();
                return;
            }
            Ok(Some(Ok(()))) => {
                let text = String::from_utf8_lossy(&buf);
                let line = text.trim();
                if line.is_empty() {
                    continue;
                }
                rpc::handle_line(line, &mut |req| svc.call(&req.method, &req.params))
            }
        };
        let rpc::Reply { text: resp, close } = resp;
        let sent = resp.is_none_or(|r| {
            out.write_all(format!("{r}\n").as_bytes())
                .and_then(|_| out.flush())
                .is_ok()
        });
        // Even when the client has gone (it may close right after sending `shutdown`).
        if svc.shutdown.load(Ordering::SeqCst) {
            on_shutdown();
        }
        if !sent || close {
            return;
        }
    }
}

fn spawn_conn<C: Conn>(
    svc: &Arc<Service>,
    conn: C,
    conns: &Arc<Conns>,
    on_shutdown: Arc<dyn Fn() + Send + Sync>,
) {
    let Ok(close) = conn.closer() else { return };
    let Some(id) = conns.admit(close) else {
        let mut c = conn;
        let e = serde_json::json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": rpc::INTERNAL_ERROR, "message": "too many connections"}});
        let _ = c.write_all(format!("{e}\n").as_bytes());
        return;
    };
    let (svc, mine) = (svc.clone(), conns.clone());
    let r = std::thread::Builder::new()
        .name("squall-conn".into())
        .spawn(move || {
            serve_conn(svc, conn, &*on_shutdown, &mine, id);
            mine.leave(id);
        });
    if r.is_err() {
        conns.leave(id);
        eprintln!("squall daemon: cannot start a connection thread");
    }
}

/// Ends the process after `shutdown`: lets the run end (bounded), removes the socket file.
fn exit_after_shutdown(svc: &Service, sock: Option<&Path>) -> ! {
    svc.wait_idle(Duration::from_secs(10));
    if let Some(p) = sock {
        let _ = std::fs::remove_file(p);
    }
    eprintln!("squall daemon: shut down");
    std::process::exit(0)
}

/// Binds and serves until a `shutdown` request. Prints `listening tcp ADDR` or
/// `listening unix PATH` on stdout once ready (with the actual port for port 0).
pub fn serve(
    listen: Listen,
    metrics: Option<squall::metrics::Exporter>,
    ports: squall::ports::Ports,
) -> io::Result<()> {
    let svc = Arc::new(Service::new(metrics, ports));
    let conns = Arc::new(Conns::default());
    match listen {
        Listen::Tcp(addr) => {
            if !addr.ip().is_loopback() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the control API has no authentication: listen on a loopback address only",
                ));
            }
            let l = TcpListener::bind(addr)?;
            squall::outln!("listening tcp {}", l.local_addr()?);
            io::stdout().flush()?;
            let s2 = svc.clone();
            let stop: Arc<dyn Fn() + Send + Sync> =
                Arc::new(move || exit_after_shutdown(&s2, None));
            for c in l.incoming() {
                match c {
                    Ok(c) => spawn_conn(&svc, c, &conns, stop.clone()),
                    Err(e) => {
                        eprintln!("squall daemon: accept: {e}");
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        }
        Listen::Unix(path) => {
            if let Ok(md) = std::fs::symlink_metadata(&path) {
                use std::os::unix::fs::FileTypeExt;
                if !md.file_type().is_socket() || UnixStream::connect(&path).is_ok() {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        format!(
                            "{}: exists (not a stale socket of a stopped daemon)",
                            path.display()
                        ),
                    ));
                }
                std::fs::remove_file(&path)?;
            }
            let l = UnixListener::bind(&path)?;
            squall::outln!("listening unix {}", path.display());
            io::stdout().flush()?;
            let s2 = svc.clone();
            let p2 = path.clone();
            let stop: Arc<dyn Fn() + Send + Sync> =
                Arc::new(move || exit_after_shutdown(&s2, Some(&p2)));
            for c in l.incoming() {
                match c {
                    Ok(c) => spawn_conn(&svc, c, &conns, stop.clone()),
                    Err(e) => {
                        eprintln!("squall daemon: accept: {e}");
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        }
    }
    Ok(())
}
