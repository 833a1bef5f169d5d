//! The HTTP server as a node application ([`ServeApp`]): per-connection state, request
//! parsing with pipelining (every complete request of a segment is answered in order;
//! a partial one waits in the connection's buffer), answers sent from the registered
//! buffers of files and routes (only the small header tail is built per answer), the
//! connection limit, idle and header timeouts, graceful stop, counters and the access
//! log.

use std::sync::Arc;

use squall_http::{
    parse_request_in, BodyDecoder, BodyKind, Header, Limits, Method, Request, Version,
};
use squall_port::Port;
use squall_stack::{NodeApp, NodeIo};
use squall_tcp::{BufId, BufRegistry, CloseReason, Ctl, FlowId, TcpApp, TcpHost};

use crate::files::{unix_now, Files};
use crate::lathist::ReqLat;
use crate::log::AccessLog;
use crate::respond::{self, FileAnswer, Route};

/// Most header fields of a request (more: 431).
pub const MAX_HEADERS: usize = 64;
/// Header slots tried first (the array is initialised per request: a small one is
/// cheaper; a request with more fields is parsed again with [`MAX_HEADERS`]).
const FEW_HEADERS: usize = 16;
/// How often connections are checked for timeouts, ns.
const SWEEP_NS: u64 = 100_000_000;
/// Answer bytes a connection may have unacknowledged before its next pipelined request
/// waits: a connection's send queue holds at most 2 GiB (TCP's sequence space), so an
/// answer of the largest file ([`crate::files::MAX_FILE`]) always fits behind this many.
pub const PIPELINE_BACKLOG: u64 = 64 << 20;
/// Bytes of pipelined requests kept while they wait; a client sending more is answered
/// 503 and closed.
const WAITING_MAX: usize = 1 << 20;

/// What the server was told.
#[derive(Clone, Debug)]
pub struct AppConfig {
    /// Most open connections; more are answered 503 and closed.
    pub max_conns: u32,
    /// A connection with no request in progress is closed after this long, ns.
    pub idle_timeout_ns: u64,
    /// A request head must be complete this long after its first byte, ns (else 408).
    pub header_timeout_ns: u64,
    /// Parser limits.
    pub limits: Limits,
}

/// Counters of the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServeStats {
    /// Connections accepted.
    pub accepted: u64,
    /// Connections refused with 503 (over the limit or stopping).
    pub refused: u64,
    /// Requests answered (parse errors included).
    pub requests: u64,
    /// Answers by status class: 1xx (interim 100 Continue) .. 5xx.
    pub by_class: [u64; 6],
    /// Requests the parser rejected (answered with their 4xx/5xx, then closed).
    pub parse_errors: u64,
    /// Connections closed by the header timeout (408).
    pub header_timeouts: u64,
    /// Connections closed by the idle timeout.
    pub idle_closed: u64,
    /// Body bytes queued (file and route bodies).
    pub body_bytes: u64,
    /// Sends the TCP host refused (queue limits).
    pub send_errors: u64,
}

impl std::ops::AddAssign for ServeStats {
    /// Sums the counters of another worker's server.
    fn add_assign(&mut self, o: ServeStats) {
        self.accepted += o.accepted;
        self.refused += o.refused;
        self.requests += o.requests;
        for (a, b) in self.by_class.iter_mut().zip(o.by_class) {
            *a += b;
        }
        self.parse_errors += o.parse_errors;
        self.header_timeouts += o.header_timeouts;
        self.idle_closed += o.idle_closed;
        self.body_bytes += o.body_bytes;
        self.send_errors += o.send_errors;
    }
}

#[derive(Default)]
struct Conn {
    /// Bytes of a request whose head is not complete yet.
    buf: Vec<u8>,
    /// The body of the last request, being skipped.
    skip: Option<Box<BodyDecoder>>,
    /// Last byte received, ns.
    last_ns: u64,
    /// When the pending head's first byte came (0: none pending).
    head_since: u64,
    /// Peer address (log): IPv4, or the IPv6 flow's address id (the address in
    /// `ServeApp::peers6`).
    ip: u32,
    open: bool,
    /// Our FIN is queued: nothing more is read.
    closing: bool,
    /// `buf` holds whole pipelined requests waiting for the answers before them to be
    /// acknowledged (`PIPELINE_BACKLOG`).
    waiting: bool,
    /// The client's FIN came while requests were waiting: the connection closes once
    /// they are answered.
    fin_waiting: bool,
    /// Bytes queued on the connection and not acknowledged yet.
    unacked: u64,
    /// The second of the oldest per-second buffer the unacknowledged bytes may refer to
    /// (0: none): those buffers stay registered until it is acknowledged.
    pinned: u64,
}

/// A route's registered buffers.
struct RouteBufs {
    head: BufId,
    head_len: u32,
    body: BufId,
    body_len: u32,
    code: u16,
}

/// The registered 200 header block and body of one file.
#[derive(Clone, Copy)]
struct FileBufs {
    head: BufId,
    head_len: u32,
    body: BufId,
}

/// The server app.
pub struct ServeApp {
    cfg: AppConfig,
    files: Arc<Files>,
    file_bufs: Vec<FileBufs>,
    /// Routes by path (a handful: scanned in order).
    routes: Vec<(Vec<u8>, RouteBufs)>,
    /// `HTTP/1.1 100 Continue` and the 503 answer (no Date, which a 5xx may leave out:
    /// it closes at once, under load).
    cont: (BufId, u32),
    busy: (BufId, u32),
    /// Body bytes of that answer (for the access log).
    busy_body: usize,
    conns: Vec<Conn>,
    /// Peer addresses of IPv6 connections by slot (grown by the first IPv6 connection of
    /// a slot: an IPv4-only server keeps it empty), for the access log.
    peers6: Vec<[u8; 16]>,
    /// Open connections.
    pub live: u64,
    /// Open connections with nothing in progress (no request being read, every answer
    /// acknowledged), as of the last timeout sweep (every 100 ms).
    pub idle: u64,
    /// Request latency: from the turn that read a request's last byte (and queued its
    /// answer) to the acknowledgement of the answer's last byte; one value per burst of
    /// answers (pipelined requests answered together count once).
    pub req_lat: ReqLat,
    now: u64,
    /// The current second (epoch), its Date value and its access-log time.
    sec: u64,
    date: String,
    log_time: String,
    /// Registered buffers of this second (they carry its Date): the header tails
    /// (keep-alive 1.1, close, keep-alive 1.0) and each route's whole keep-alive answer.
    tails: [(BufId, u32); 3],
    route_full: Vec<(BufId, u32)>,
    /// Earlier seconds' buffers, unregistered once no connection may refer to them.
    retired: Vec<(u64, Vec<BufId>)>,
    last_sweep: u64,
    last_log_flush: u64,
    /// Stopping: no keep-alive, idle connections closed, new ones refused.
    pub stopping: bool,
    pub stats: ServeStats,
    log: Option<AccessLog>,
    /// [`PIPELINE_BACKLOG`], or what a test set.
    backlog: u64,
}

impl ServeApp {
    /// Sets the answer bytes a connection may have unacknowledged before its next
    /// pipelined request waits (default [`PIPELINE_BACKLOG`]; tests lower it).
    pub fn set_backlog(&mut self, bytes: u64) {
        self.backlog = bytes;
    }

    /// The app for `files` and `routes`, their buffers registered with `tcp`.
    pub fn new(
        cfg: AppConfig,
        files: Arc<Files>,
        routes: &[Route],
        tcp: &mut TcpHost,
        log: Option<AccessLog>,
    ) -> ServeApp {
        let reg = tcp.buffers();
        fn reg_bytes(reg: &mut squall_tcp::BufRegistry, b: Vec<u8>) -> (BufId, u32) {
            let n = b.len() as u32;
            (reg.register(b.into()), n)
        }
        let file_bufs = files
            .list
            .iter()
            .map(|f| {
                let (head, head_len) = reg_bytes(reg, respond::file_head(f).into_bytes());
                FileBufs {
                    head,
                    head_len,
                    body: reg.register(f.data.clone()),
                }
            })
            .collect();
        let mut rmap = Vec::new();
        for r in routes {
            let (head, head_len) = reg_bytes(reg, respond::route_head(r).into_bytes());
            let (body, body_len) = reg_bytes(reg, r.text.clone().into_bytes());
            rmap.push((
                r.path.clone().into_bytes(),
                RouteBufs {
                    head,
                    head_len,
                    body,
                    body_len,
                    code: r.code,
                },
            ));
        }
        let cont = reg_bytes(reg, b"HTTP/1.1 100 Continue\r\n\r\n".to_vec());
        let fixed = |code: u16| {
            let body = format!("{code} {}\n", squall_http::reason(code));
            format!(
                "{}Server: squall\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                respond::status_line(squall_http::Version::Http11, code),
                body.len()
            )
            .into_bytes()
        };
        let busy503 = fixed(503);
        let busy_body = body_len(&busy503);
        let busy = reg_bytes(reg, busy503);
        let mut app = ServeApp {
            cfg,
            files,
            file_bufs,
            routes: rmap,
            cont,
            busy,
            busy_body,
            conns: Vec::new(),
            peers6: Vec::new(),
            live: 0,
            idle: 0,
            req_lat: ReqLat::default(),
            now: 0,
            sec: 0,
            date: String::new(),
            log_time: String::new(),
            tails: [(BufId(0), 0); 3],
            route_full: Vec::new(),
            retired: Vec::new(),
            last_sweep: 0,
            last_log_flush: 0,
            stopping: false,
            stats: ServeStats::default(),
            log,
            backlog: PIPELINE_BACKLOG,
        };
        app.roll(unix_now(), tcp.buffers());
        app
    }

    /// Moves to second `sec`: its Date, and this second's registered buffers (the last
    /// second's are kept until no connection may still send from them).
    fn roll(&mut self, sec: u64, reg: &mut BufRegistry) {
        let old: Vec<BufId> = self
            .tails
            .iter()
            .chain(&self.route_full)
            .filter(|&&(_, n)| n > 0)
            .map(|&(b, _)| b)
            .collect();
        if !old.is_empty() {
            self.retired.push((self.sec, old));
        }
        self.sec = sec;
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(sec);
        self.date = httpdate::fmt_http_date(t);
        self.log_time = log_time(sec);
        use squall_http::Version::{Http10, Http11};
        let mut put = |v: Vec<u8>| {
            let n = v.len() as u32;
            (reg.register(v.into()), n)
        };
        let keep11 = respond::tail(&self.date, true, Http11);
        self.tails = [
            put(keep11.clone()),
            put(respond::tail(&self.date, false, Http11)),
            put(respond::tail(&self.date, true, Http10)),
        ];
        self.route_full = self
            .routes
            .iter()
            .map(|(_, r)| {
                let mut v = reg.get(r.head).to_vec();
                v.extend_from_slice(&keep11);
                v.extend_from_slice(reg.get(r.body));
                let n = v.len() as u32;
                (reg.register(v.into()), n)
            })
            .collect();
    }

    /// Unregisters the earlier seconds' buffers no connection may refer to any more.
    fn retire(&mut self, reg: &mut BufRegistry) {
        let oldest = self
            .conns
            .iter()
            .filter(|c| c.open && c.pinned != 0)
            .map(|c| c.pinned)
            .min()
            .unwrap_or(u64::MAX);
        self.retired.retain(|(sec, ids)| {
            if *sec < oldest {
                for &b in ids {
                    reg.unregister(b);
                }
                false
            } else {
                true
            }
        });
    }

    /// Starts the graceful stop: idle connections are closed on the next poll, the
    /// others after their current answer.
    pub fn stop(&mut self) {
        self.stopping = true;
        self.last_sweep = 0;
    }

    /// Flushes and closes the access log.
    pub fn finish(&mut self) -> Result<(), String> {
        match self.log.as_mut() {
            Some(l) => l.close(),
            None => Ok(()),
        }
    }

    /// Connection slots (flow ids below this may be open).
    pub fn slots(&self) -> usize {
        self.conns.len()
    }

    /// Whether flow slot `i` holds an open connection.
    pub fn is_open(&self, i: usize) -> bool {
        self.conns.get(i).is_some_and(|c| c.open)
    }

    /// Lines the access log lost (its writer fell behind).
    pub fn log_dropped(&self) -> u64 {
        self.log.as_ref().map_or(0, |l| l.dropped)
    }

    fn count(&mut self, code: u16) {
        self.stats.by_class[(code / 100).min(5) as usize] += 1;
    }

    /// Queues `len` bytes of `b` from `off` on connection `i`.
    fn send(&mut self, ctl: &mut Ctl, i: usize, b: BufId, off: u32, len: u32) {
        if len > 0 {
            ctl.send(b, off, len);
            self.conns[i].unacked += u64::from(len);
        }
    }

    /// Queues a buffer of this second (pins it until acknowledged).
    fn send_sec(&mut self, ctl: &mut Ctl, i: usize, (b, n): (BufId, u32)) {
        let c = &mut self.conns[i];
        if c.pinned == 0 {
            c.pinned = self.sec;
        }
        self.send(ctl, i, b, 0, n);
    }

    /// Queues owned bytes on connection `i`.
    fn send_owned(&mut self, ctl: &mut Ctl, i: usize, v: Vec<u8>) {
        self.conns[i].unacked += v.len() as u64;
        ctl.send_owned(v.into_boxed_slice());
    }

    /// Answers `code` with a small body and closes (parse errors, refused requests); one
    /// access-log line with no request line.
    fn fail(&mut self, ctl: &mut Ctl, i: usize, code: u16) {
        let v = respond::error(code, false, &self.date, false, Version::Http11);
        let body = body_len(&v);
        self.send_owned(ctl, i, v);
        ctl.close();
        self.conns[i].closing = true;
        self.count(code);
        self.stats.requests += 1;
        self.log_line(i, b"-", b"-", "-", code, body, b"");
    }

    /// Every complete request at the start of `input`: answered in order. Returns the
    /// bytes used (the rest is an incomplete head).
    fn process(&mut self, ctl: &mut Ctl, i: usize, input: &[u8]) -> usize {
        let mut pos = 0;
        while pos < input.len() {
            if self.conns[i].closing {
                return input.len();
            }
            if let Some(d) = self.conns[i].skip.as_mut() {
                match d.decode(&input[pos..]) {
                    Ok(r) => {
                        pos += r.consumed;
                        if r.done {
                            self.conns[i].skip = None;
                        }
                    }
                    Err(_) => {
                        // The request was answered before its body was read: a body
                        // that breaks its framing (or the body limit) leaves no
                        // request to answer, and a second answer would reach the
                        // client as the response to a request it never sent. The
                        // connection ends after the answer already queued.
                        self.stats.parse_errors += 1;
                        ctl.close();
                        self.conns[i].closing = true;
                        return input.len();
                    }
                }
                continue;
            }
            if self.conns[i].unacked > self.backlog {
                // The answers queued wait for the client to take them: the requests
                // after them wait too (until `on_acked`).
                self.conns[i].waiting = true;
                break;
            }
            // Slots the parser fills: nothing to initialise per request.
            let mut few = [Header::SLOT; FEW_HEADERS];
            let mut many;
            let mut r = parse_request_in(&input[pos..], &mut few, &self.cfg.limits);
            if matches!(r, Err(squall_http::Error::HeadersTooLarge))
                && self.cfg.limits.max_headers > FEW_HEADERS
            {
                many = [Header::SLOT; MAX_HEADERS];
                r = parse_request_in(&input[pos..], &mut many, &self.cfg.limits);
            }
            match r {
                Ok(None) => break,
                Err(e) => {
                    self.stats.parse_errors += 1;
                    self.fail(ctl, i, e.status());
                    return input.len();
                }
                Ok(Some(req)) => {
                    pos += req.head_len;
                    self.conns[i].head_since = 0;
                    let keep = self.answer(ctl, i, &req);
                    if !keep {
                        ctl.close();
                        self.conns[i].closing = true;
                        return input.len();
                    }
                    if req.body != BodyKind::None {
                        let d = BodyDecoder::new(req.body, &self.cfg.limits);
                        self.conns[i].skip = Some(Box::new(d));
                    }
                }
            }
        }
        pos
    }

    /// Answers the requests in `buf`, bytes the connection kept (a head split over
    /// segments, or requests that waited), and keeps what is left.
    fn process_kept(&mut self, ctl: &mut Ctl, i: usize, mut buf: Vec<u8>, now: u64) {
        let used = self.process(ctl, i, &buf);
        buf.drain(..used);
        self.keep_rest(ctl, i, buf, now);
    }

    /// Keeps the incomplete head `buf` left after a segment (or fails the connection
    /// when no head can fit any more).
    fn keep_rest(&mut self, ctl: &mut Ctl, i: usize, mut buf: Vec<u8>, now: u64) {
        // Empty lines between requests are ignored (RFC 9112 §2.2): they start no head
        // (and no header timeout); a lone CR waits for its LF as an idle connection.
        if !buf.is_empty() && buf.chunks(2).all(|l| l == b"\r\n" || l == b"\r") {
            let lone_cr = buf.len() % 2 == 1;
            buf.clear();
            if lone_cr {
                buf.push(b'\r');
            }
            let c = &mut self.conns[i];
            c.head_since = 0;
            c.buf = buf;
            return;
        }
        let c = &mut self.conns[i];
        if c.waiting && !c.closing {
            // Whole requests waiting for their turn: no header timeout runs.
            c.head_since = 0;
            if buf.len() > WAITING_MAX {
                self.fail(ctl, i, 503);
                buf = Vec::new();
            }
            self.conns[i].buf = buf;
            return;
        }
        if c.closing {
            buf = Vec::new();
        } else if buf.len() > self.cfg.limits.max_head + 2 {
            // The parser has judged every complete line; more bytes cannot fit a head.
            buf = Vec::new();
            self.stats.parse_errors += 1;
            self.fail(ctl, i, 431);
        } else if buf.is_empty() {
            c.head_since = 0;
            if buf.capacity() > 4096 {
                buf = Vec::new();
            }
        } else if c.head_since == 0 {
            c.head_since = now;
        }
        self.conns[i].buf = buf;
    }

    /// Answers one request; returns whether the connection stays open.
    fn answer(&mut self, ctl: &mut Ctl, i: usize, req: &Request<'_, '_>) -> bool {
        self.stats.requests += 1;
        let head_only = req.method == Method::Head;
        let mut keep = req.keep_alive && !self.stopping;
        let (code, bytes) = if req.expect_other {
            keep = false;
            self.owned(
                ctl,
                i,
                respond::error(417, head_only, &self.date, false, req.version),
                417,
            )
        } else if let Some(code) = respond::method_status(req.method) {
            // A body we will not read: close after the answer.
            keep &= req.body == BodyKind::None;
            self.owned(
                ctl,
                i,
                respond::error(code, head_only, &self.date, keep, req.version),
                code,
            )
        } else {
            if req.expect_continue && req.body != BodyKind::None {
                let (b, n) = self.cont;
                self.send(ctl, i, b, 0, n);
                self.count(100);
            }
            self.resource(ctl, i, req, head_only, keep)
        };
        if self.log.is_some() {
            let ua = req.header("user-agent").unwrap_or(b"-");
            self.log_line(
                i,
                req.method_raw,
                req.target,
                req.version.as_str(),
                code,
                bytes,
                ua,
            );
        }
        keep
    }

    /// Sends a whole owned answer; (code, body bytes) for the log.
    fn owned(&mut self, ctl: &mut Ctl, i: usize, v: Vec<u8>, code: u16) -> (u16, usize) {
        self.count(code);
        let body = body_len(&v);
        self.send_owned(ctl, i, v);
        (code, body)
    }

    /// The route or file a GET/HEAD names.
    fn resource(
        &mut self,
        ctl: &mut Ctl,
        i: usize,
        req: &Request<'_, '_>,
        head_only: bool,
        keep: bool,
    ) -> (u16, usize) {
        let path = origin_path(req.path());
        let plain = keep && req.version == Version::Http11;
        let tail = self.tails[match (keep, req.version) {
            (true, Version::Http11) => 0,
            (false, _) => 1,
            (true, Version::Http10) => 2,
        }];
        if let Some(k) = self.route_index(path) {
            let r = &self.routes[k].1;
            let (h, hl, b, bl, code) = (r.head, r.head_len, r.body, r.body_len, r.code);
            if req.conditional && (200..300).contains(&code) {
                match respond::route_preconditions(req) {
                    FileAnswer::PreconditionFailed => {
                        let v = respond::error(412, head_only, &self.date, keep, req.version);
                        return self.owned(ctl, i, v, 412);
                    }
                    FileAnswer::NotModified => {
                        let v = respond::route_not_modified(&self.date, keep, req.version);
                        return self.owned(ctl, i, v, 304);
                    }
                    _ => {}
                }
            }
            let n = if head_only { 0 } else { bl };
            if plain && !head_only {
                // The whole answer in one buffer of this second.
                self.send_sec(ctl, i, self.route_full[k]);
            } else {
                self.send(ctl, i, h, 0, hl);
                self.send_sec(ctl, i, tail);
                self.send(ctl, i, b, 0, n);
            }
            self.stats.body_bytes += u64::from(n);
            self.count(code);
            return (code, n as usize);
        }
        let files = self.files.clone();
        let Some((k, f)) = files.lookup(path) else {
            return self.owned(
                ctl,
                i,
                respond::error(404, head_only, &self.date, keep, req.version),
                404,
            );
        };
        let fb = self.file_bufs[k];
        match respond::decide(req, f) {
            FileAnswer::Full => {
                self.send(ctl, i, fb.head, 0, fb.head_len);
                self.send_sec(ctl, i, tail);
                let n = if head_only { 0 } else { f.data.len() };
                self.send(ctl, i, fb.body, 0, n as u32);
                self.stats.body_bytes += n as u64;
                self.count(200);
                (200, n)
            }
            FileAnswer::NotModified => {
                let v = respond::not_modified(f, &self.date, keep, req.version);
                self.owned(ctl, i, v, 304)
            }
            FileAnswer::Partial(r) => {
                let mut h = respond::partial_head(f, &r).into_bytes();
                h.extend_from_slice(&respond::tail(&self.date, keep, req.version));
                self.send_owned(ctl, i, h);
                let n = if head_only { 0 } else { r.len() };
                self.send(ctl, i, fb.body, r.start as u32, n as u32);
                self.stats.body_bytes += n as u64;
                self.count(206);
                (206, n)
            }
            FileAnswer::Unsatisfiable => {
                let extra = format!("Content-Range: bytes */{}\r\n", f.data.len());
                let v = respond::small(416, &extra, "", head_only, &self.date, keep, req.version);
                self.owned(ctl, i, v, 416)
            }
            FileAnswer::PreconditionFailed => {
                let v = respond::error(412, head_only, &self.date, keep, req.version);
                self.owned(ctl, i, v, 412)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn log_line(
        &mut self,
        i: usize,
        m: &[u8],
        t: &[u8],
        v: &str,
        code: u16,
        bytes: usize,
        ua: &[u8],
    ) {
        if let Some(l) = self.log.as_mut() {
            let ip = self.conns[i].ip;
            let ip = match self.peers6.get(i) {
                Some(a) if ip < 1 << 24 => std::net::IpAddr::from(*a),
                _ => std::net::IpAddr::from(ip.to_be_bytes()),
            };
            l.line(ip, &self.log_time, m, t, v, code, bytes, ua);
        }
    }

    /// The route at `path` (as received, else percent-decoded as files are).
    fn route_index(&self, path: &[u8]) -> Option<usize> {
        if let Some(k) = self.routes.iter().position(|(p, _)| p == path) {
            return Some(k);
        }
        if !path.contains(&b'%') {
            return None;
        }
        let key = crate::files::decode_path(path)?;
        self.routes.iter().position(|(p, _)| *p == key)
    }

    fn conn(&mut self, f: FlowId) -> &mut Conn {
        let i = f.0 as usize;
        if self.conns.len() <= i {
            self.conns.resize_with(i + 1, Conn::default);
        }
        &mut self.conns[i]
    }
}

impl TcpApp for ServeApp {
    fn on_connected(&mut self, ctl: &mut Ctl, f: FlowId) {
        let full = self.live >= u64::from(self.cfg.max_conns) || self.stopping;
        let now = self.now;
        let ip = ctl.key().remote_ip;
        if let Some(a) = ctl.remote_ipv6() {
            let i = f.0 as usize;
            if self.peers6.len() <= i {
                self.peers6.resize(i + 1, [0; 16]);
            }
            self.peers6[i] = a;
        }
        self.live += 1;
        let c = self.conn(f);
        *c = Conn {
            open: true,
            closing: full,
            last_ns: now,
            ip,
            ..Conn::default()
        };
        if full {
            let (b, n) = self.busy;
            self.send(ctl, f.0 as usize, b, 0, n);
            ctl.close();
            self.stats.refused += 1;
            self.count(503);
            self.log_line(f.0 as usize, b"-", b"-", "-", 503, self.busy_body, b"");
        } else {
            self.stats.accepted += 1;
        }
    }

    fn on_data(&mut self, ctl: &mut Ctl, f: FlowId, data: &[u8]) {
        let i = f.0 as usize;
        let now = self.now;
        let Some(c) = self.conns.get_mut(i) else {
            return;
        };
        if !c.open || c.closing {
            return;
        }
        c.last_ns = now;
        if c.buf.is_empty() {
            // The common case: the segment holds whole requests, nothing is kept.
            let used = self.process(ctl, i, data);
            let c = &mut self.conns[i];
            if used == data.len() && !c.closing {
                c.head_since = 0;
                return;
            }
            let mut buf = std::mem::take(&mut c.buf);
            buf.extend_from_slice(&data[used..]);
            return self.keep_rest(ctl, i, buf, now);
        }
        let mut buf = std::mem::take(&mut c.buf);
        buf.extend_from_slice(data);
        self.process_kept(ctl, i, buf, now);
    }

    fn on_acked(&mut self, ctl: &mut Ctl, f: FlowId, bytes: u32) {
        let i = f.0 as usize;
        if let Some(c) = self.conns.get_mut(i) {
            let had = c.unacked;
            c.unacked = had.saturating_sub(u64::from(bytes));
            if c.unacked == 0 {
                c.pinned = 0;
                if had > 0 {
                    // Every answer queued is acknowledged: the burst's latency since
                    // the last request byte read. The connection waits for its next
                    // request from now (the idle timeout runs from here).
                    self.req_lat.record_ns(self.now.saturating_sub(c.last_ns));
                    c.last_ns = self.now;
                }
            }
            if c.waiting && c.unacked <= self.backlog && c.open && !c.closing {
                // The client took enough: the pipelined requests waiting go on.
                c.waiting = false;
                let buf = std::mem::take(&mut c.buf);
                let now = self.now;
                self.process_kept(ctl, i, buf, now);
                let c = &mut self.conns[i];
                if c.fin_waiting && !c.waiting && !c.closing {
                    // Every request the client sent before its FIN is answered.
                    c.closing = true;
                    ctl.close();
                }
            }
        }
    }

    fn on_peer_closed(&mut self, ctl: &mut Ctl, f: FlowId) {
        if let Some(c) = self.conns.get_mut(f.0 as usize) {
            if c.open && !c.closing && c.waiting {
                // Requests still wait their turn: answered first (`on_acked`).
                c.fin_waiting = true;
            } else if c.open && !c.closing {
                c.closing = true;
                ctl.close();
            }
        }
    }

    fn on_closed(&mut self, f: FlowId, _reason: CloseReason) {
        if let Some(c) = self.conns.get_mut(f.0 as usize) {
            if c.open {
                *c = Conn::default();
                self.live -= 1;
            }
        }
    }
}

impl NodeApp for ServeApp {
    fn begin_turn(&mut self, now: u64) {
        self.now = now;
    }

    fn poll<P: Port>(&mut self, io: &mut NodeIo<'_, P>) -> bool {
        let now = self.now;
        if now.saturating_sub(self.last_sweep) < SWEEP_NS {
            return false;
        }
        self.last_sweep = now;
        let sec = unix_now();
        if sec != self.sec {
            self.roll(sec, io.buffers());
        }
        if !self.retired.is_empty() {
            self.retire(io.buffers());
        }
        if now.saturating_sub(self.last_log_flush) >= 1_000_000_000 {
            self.last_log_flush = now;
            if let Some(l) = self.log.as_mut() {
                l.flush();
            }
        }
        let mut work = false;
        let mut idle = 0;
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            if !c.open || c.closing {
                continue;
            }
            let pending = c.head_since != 0;
            // A body being read keeps a connection out of the stop's idle closing, but
            // not out of the idle timeout: no byte for that long closes it. An answer
            // still unacknowledged keeps it out of the idle timeout (a long download).
            let reading = c.skip.is_some();
            let f = FlowId(i as u32);
            if pending && now.saturating_sub(c.head_since) >= self.cfg.header_timeout_ns {
                // With a Date, as every 4xx answer of a server with a clock (RFC 9110
                // §6.6.1).
                let v = respond::error(408, false, &self.date, false, Version::Http11);
                let (n, body) = (v.len() as u64, body_len(&v));
                if io.send_owned(f, v.into_boxed_slice()).is_err() {
                    self.stats.send_errors += 1;
                } else {
                    self.conns[i].unacked += n;
                }
                self.stats.header_timeouts += 1;
                self.stats.requests += 1;
                self.count(408);
                self.log_line(i, b"-", b"-", "-", 408, body, b"");
            } else if !pending
                && ((self.stopping && !reading)
                    || (c.unacked == 0
                        && now.saturating_sub(c.last_ns) >= self.cfg.idle_timeout_ns))
            {
                if !self.stopping {
                    self.stats.idle_closed += 1;
                }
            } else {
                idle += u64::from(!pending && !reading && c.unacked == 0);
                continue;
            }
            let c = &mut self.conns[i];
            c.closing = true;
            c.buf = Vec::new();
            io.close(self, f);
            work = true;
        }
        self.idle = idle;
        work
    }

    fn next_event(&self, now: u64) -> Option<u64> {
        (self.live > 0).then(|| (self.last_sweep + SWEEP_NS).max(now))
    }
}

/// The body bytes of a whole answer `v` (after its head's empty line).
fn body_len(v: &[u8]) -> usize {
    v.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(0, |p| v.len() - p - 4)
}

/// The origin-form path of a request target's path: as is when it starts with `/`; for
/// the absolute form (`http://host/p`, which a server MUST accept, RFC 9112 §3.2.2) the
/// part after the authority (`/` when there is none). Other forms are left as they are
/// (no file or route matches them).
fn origin_path(path: &[u8]) -> &[u8] {
    if path.first() == Some(&b'/') {
        return path;
    }
    let rest = match path.iter().position(|&c| c == b':') {
        Some(k)
            if (path[..k].eq_ignore_ascii_case(b"http")
                || path[..k].eq_ignore_ascii_case(b"https"))
                && path[k..].starts_with(b"://") =>
        {
            &path[k + 3..]
        }
        _ => return path,
    };
    match rest.iter().position(|&c| c == b'/') {
        Some(k) => &rest[k..],
        None => b"/",
    }
}

/// `24/Nov/2026:16:00:00 +0000` (the access log's time) of `sec` since the epoch.
fn log_time(sec: u64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = (sec / 86_400) as i64;
    let rem = sec % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{d:02}/{}/{y}:{:02}:{:02}:{:02} +0000",
        MONTHS[(m - 1) as usize],
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_counters_add_up() {
        let mut a = ServeStats {
            accepted: 2,
            requests: 5,
            by_class: [0, 1, 3, 0, 1, 0],
            body_bytes: 100,
            ..ServeStats::default()
        };
        let b = ServeStats {
            accepted: 1,
            refused: 4,
            requests: 7,
            by_class: [0, 0, 6, 1, 0, 0],
            parse_errors: 1,
            header_timeouts: 2,
            idle_closed: 3,
            body_bytes: 50,
            send_errors: 9,
        };
        a += b;
        assert_eq!(
            a,
            ServeStats {
                accepted: 3,
                refused: 4,
                requests: 12,
                by_class: [0, 1, 9, 1, 1, 0],
                parse_errors: 1,
                header_timeouts: 2,
                idle_closed: 3,
                body_bytes: 150,
                send_errors: 9,
            }
        );
    }

    /// The buffers of a past second stay registered while a connection may still send
    /// from them (data not acknowledged), and go once it may not.
    #[test]
    fn past_seconds_buffers_are_retired_when_unreferenced() {
        let mut tcp = TcpHost::new(squall_tcp::TcpConfig::default(), 0);
        let files = Arc::new(Files {
            list: Vec::new(),
            by_path: Default::default(),
            bytes: 0,
        });
        let cfg = AppConfig {
            max_conns: 8,
            idle_timeout_ns: 1,
            header_timeout_ns: 1,
            limits: Limits::default(),
        };
        let routes = [Route::parse("/p return 200 \"pong\"").unwrap()];
        let mut app = ServeApp::new(cfg, files, &routes, &mut tcp, None);
        let t0 = app.sec;
        let first = app.route_full[0].0;
        assert!(tcp.buffers().get(first).ends_with(b"\r\n\r\npong"));
        // A connection sent from this second's buffers and is not acknowledged yet.
        app.conns.push(Conn {
            open: true,
            unacked: 10,
            pinned: t0,
            ..Conn::default()
        });
        app.roll(t0 + 1, tcp.buffers());
        app.retire(tcp.buffers());
        assert_eq!(app.retired.len(), 1, "kept: still referenced");
        assert!(!tcp.buffers().get(first).is_empty());
        assert_ne!(app.route_full[0].0, first);
        // Acknowledged: the next check lets them go.
        app.on_acked(&mut Ctl::default(), FlowId(0), 10);
        assert_eq!(app.conns[0].pinned, 0);
        app.retire(tcp.buffers());
        assert!(app.retired.is_empty());
        assert!(tcp.buffers().get(first).is_empty(), "unregistered");
    }

    /// The server's own state of a connection (beside the TCP flow): an idle keep-alive
    /// connection costs this and its flow (the 512-byte budget of the issue).
    #[test]
    fn connection_state_is_small() {
        assert!(
            std::mem::size_of::<Conn>() <= 72,
            "{}",
            std::mem::size_of::<Conn>()
        );
    }

    #[test]
    fn log_times() {
        assert_eq!(log_time(0), "01/Jan/1970:00:00:00 +0000");
        assert_eq!(log_time(1_795_910_400 + 3661), "29/Nov/2026:01:01:01 +0000");
        assert_eq!(log_time(951_782_400), "29/Feb/2000:00:00:00 +0000");
    }
}
