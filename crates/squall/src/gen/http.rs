//! HTTP on the generator's flows: for the flows of programs that use `http_request`,
//! finds where each response ends (Content-Length, chunked, or the server's close) by
//! running `squall-http`'s response parser over the received slices as they arrive (the
//! body is never copied; a head split across segments is gathered in a small side buffer
//! only while it is incomplete), and counts status codes, body bytes, parse errors and
//! the per-request latencies. The state lives in [`HttpSide`], created only for profiles
//! with HTTP programs: other profiles' flows carry none of it.

use std::collections::HashMap;

use squall_astf::Profile;
use squall_http::{parse_response_in, BodyDecoder, BodyKind, Header, Limits};

use crate::stats::{HttpStats, Latency};

/// Most requests pending on one flow (pipelined without waiting).
pub const MAX_PENDING: u16 = 32;
/// Header fields tried first (a smaller array to fill per response; a head with more is
/// parsed again with room for as many as the head limit can hold).
const FEW_HEADERS: usize = 24;
/// The second try's array (on the stack: no allocation below this many fields).
const MANY_HEADERS: usize = 256;
/// Largest response head (its start line, fields and empty line).
const MAX_HEAD: usize = 16 * 1024;

/// What the generator needs of a response head: status, framing, head length, whether
/// the connection may carry another request.
type Head = (u16, BodyKind, usize, bool);

/// Parses a response head at the start of `buf` (see [`squall_http::parse_response`]).
fn parse_head(
    buf: &[u8],
    lim: &Limits,
    head_req: bool,
) -> Result<Option<Head>, squall_http::Error> {
    // A small array first; many fields (a long run of Set-Cookie, say) are parsed again
    // into a larger one on the stack, and only beyond it into as many as the head holds.
    let retry = |r: &Result<Option<Head>, squall_http::Error>, room: usize| {
        matches!(r, Err(squall_http::Error::HeadersTooLarge)) && lim.max_headers > room
    };
    let r = parse_into(buf, &mut [Header::SLOT; FEW_HEADERS], lim, head_req);
    if !retry(&r, FEW_HEADERS) {
        return r;
    }
    let r = parse_into(buf, &mut [Header::SLOT; MANY_HEADERS], lim, head_req);
    if !retry(&r, MANY_HEADERS) {
        return r;
    }
    parse_into(buf, &mut vec![Header::SLOT; lim.max_headers], lim, head_req)
}

/// [`parse_head`] into `slots`.
fn parse_into<'b>(
    buf: &'b [u8],
    slots: &mut [std::mem::MaybeUninit<Header<'b>>],
    lim: &Limits,
    head_req: bool,
) -> Result<Option<Head>, squall_http::Error> {
    parse_response_in(buf, slots, lim, head_req)
        .map(|r| r.map(|r| (r.code, r.body, r.head_len, r.keep_alive)))
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Phase {
    /// No byte of the next response yet.
    #[default]
    Idle,
    /// In the head.
    Head,
    /// In a body framed by Content-Length or chunked.
    Body,
    /// In a body that ends with the connection.
    BodyClose,
}

/// One flow's HTTP state.
#[derive(Clone, Debug)]
pub struct HttpFlow {
    dec: BodyDecoder,
    /// When the oldest pending request was queued (or the previous response ended, or
    /// the connection was established when it was queued before).
    req_ns: u64,
    /// Bit k: the k-th pending request is HEAD (its response has no body).
    head_bits: u32,
    pending: u16,
    /// The status of the response being read (counted when it ends).
    code: u16,
    phase: Phase,
    /// A final response said the connection ends after it (no keep-alive).
    closing: bool,
}

impl HttpFlow {
    fn new(lim: &Limits) -> HttpFlow {
        HttpFlow {
            dec: BodyDecoder::new(BodyKind::None, lim),
            req_ns: 0,
            head_bits: 0,
            pending: 0,
            code: 0,
            phase: Phase::Idle,
            closing: false,
        }
    }
}

/// The HTTP state of one side's flows.
pub struct HttpSide {
    flows: Vec<HttpFlow>,
    /// Heads split across segments, by flow, while incomplete.
    heads: HashMap<u32, Vec<u8>>,
    /// Round-robin cursors of the profile's request parts.
    pub cursors: Vec<u32>,
    /// Per program: does it use HTTP instructions?
    progs: Vec<bool>,
    lim: Limits,
}

/// Bytes of HTTP state per flow of an HTTP program (W3 accounting).
pub const HTTP_FLOW_BYTES: usize = std::mem::size_of::<HttpFlow>();

/// Why a flow's responses cannot be followed any more (the caller resets the flow).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxError {
    /// Bytes arrived with no request pending.
    Unsolicited,
    /// The response broke HTTP's rules.
    Parse(squall_http::Error),
}

impl HttpSide {
    /// The HTTP state for `profile`, or `None` when no program uses HTTP.
    pub fn for_profile(profile: &Profile) -> Option<Box<HttpSide>> {
        let progs: Vec<bool> = profile.programs.iter().map(|p| p.has_http).collect();
        if !progs.contains(&true) {
            return None;
        }
        Some(Box::new(HttpSide {
            flows: Vec::new(),
            heads: HashMap::new(),
            cursors: vec![0; profile.http_cursors as usize],
            progs,
            lim: Limits {
                max_body: u64::MAX,
                require_host: false,
                max_head: MAX_HEAD,
                // One field line may take the whole head (a long Content-Security-Policy).
                max_header_line: MAX_HEAD,
                // Every field a head of MAX_HEAD can hold (the shortest is `a:` CRLF).
                max_headers: MAX_HEAD / 4,
                ..Limits::default()
            },
        }))
    }

    /// Does program `prog` use HTTP?
    #[inline]
    pub fn is_http(&self, prog: u16) -> bool {
        self.progs.get(prog as usize).copied().unwrap_or(false)
    }

    /// Resets flow `i`'s state for a new flow.
    pub fn start(&mut self, i: usize) {
        if self.flows.len() <= i {
            self.flows.resize(i + 1, HttpFlow::new(&self.lim));
        }
        self.flows[i] = HttpFlow::new(&self.lim);
        self.heads.remove(&(i as u32));
    }

    /// Flow `i` is established at `now`: requests queued before (with the SYN) left
    /// now, so their time to first and last byte runs from here, not from the connect.
    pub fn established(&mut self, i: usize, now: u64) {
        if let Some(f) = self.flows.get_mut(i) {
            if f.pending > 0 && f.phase == Phase::Idle {
                f.req_ns = now;
            }
        }
    }

    /// The response being read on flow `i` broke HTTP's rules (a parse error, counted by
    /// the caller, which resets the flow): its request is not also counted incomplete.
    pub fn failed(&mut self, i: usize) {
        if let Some(f) = self.flows.get_mut(i) {
            f.pending = f.pending.saturating_sub(1);
            f.head_bits >>= 1;
        }
        self.heads.remove(&(i as u32));
    }

    /// A final response on flow `i` said the server ends the connection after it.
    #[inline]
    pub fn closing(&self, i: usize) -> bool {
        self.flows.get(i).is_some_and(|f| f.closing)
    }

    /// Requests of flow `i` whose response has not ended.
    #[inline]
    pub fn pending(&self, i: usize) -> u32 {
        self.flows.get(i).map_or(0, |f| u32::from(f.pending))
    }

    /// A request was queued on flow `i` at `now`. `false` (not sent) when too many are
    /// pending.
    pub fn sent(&mut self, i: usize, head: bool, now: u64) -> bool {
        let Some(f) = self.flows.get_mut(i) else {
            return false;
        };
        if f.pending >= MAX_PENDING {
            return false;
        }
        if f.pending == 0 {
            f.req_ns = now;
            f.phase = Phase::Idle;
        }
        f.head_bits |= u32::from(head) << f.pending;
        f.pending += 1;
        true
    }

    /// Payload `data` arrived in order on flow `i` at `now`: follows the responses.
    /// Returns how many responses ended.
    pub fn rx(
        &mut self,
        i: usize,
        mut data: &[u8],
        now: u64,
        st: &mut HttpStats,
        lat: &mut Latency,
    ) -> Result<u32, RxError> {
        let mut ended = 0;
        let Some(f) = self.flows.get_mut(i) else {
            return Ok(0);
        };
        while !data.is_empty() {
            if f.pending == 0 {
                return Err(RxError::Unsolicited);
            }
            match f.phase {
                Phase::Idle => {
                    lat.req_first_byte.record_ns(now.saturating_sub(f.req_ns));
                    f.phase = Phase::Head;
                }
                Phase::Head => {
                    let head_req = f.head_bits & 1 != 0;
                    let key = i as u32;
                    // A head split over segments is gathered (at most the head limit);
                    // otherwise it is parsed in place.
                    let (parsed, used) = match self.heads.get_mut(&key) {
                        Some(buf) => {
                            let old = buf.len();
                            let take = data.len().min((self.lim.max_head + 1).saturating_sub(old));
                            buf.extend_from_slice(&data[..take]);
                            match parse_head(buf, &self.lim, head_req) {
                                Ok(Some((code, body, len, keep))) => {
                                    (Some((code, body, keep)), len.saturating_sub(old))
                                }
                                Ok(None) if take == data.len() => (None, take),
                                Ok(None) => {
                                    return Err(RxError::Parse(squall_http::Error::HeadersTooLarge))
                                }
                                Err(e) => return Err(RxError::Parse(e)),
                            }
                        }
                        None => match parse_head(data, &self.lim, head_req) {
                            Ok(Some((code, body, len, keep))) => (Some((code, body, keep)), len),
                            Ok(None) => {
                                self.heads.insert(key, data.to_vec());
                                (None, data.len())
                            }
                            Err(e) => return Err(RxError::Parse(e)),
                        },
                    };
                    data = &data[used..];
                    let Some((code, body, keep)) = parsed else {
                        continue;
                    };
                    self.heads.remove(&key);
                    if (100..200).contains(&code) && code != 101 {
                        continue; // interim answer: the final head follows
                    }
                    f.closing |= !keep;
                    f.code = code;
                    f.dec = BodyDecoder::new(body, &self.lim);
                    f.phase = match body {
                        BodyKind::Close => Phase::BodyClose,
                        _ => Phase::Body,
                    };
                    if f.dec.is_done() {
                        ended += 1;
                        end(f, now, st, lat);
                    }
                }
                Phase::Body | Phase::BodyClose => {
                    let d = f.dec.decode(data).map_err(RxError::Parse)?;
                    st.body_bytes += d.data.len() as u64;
                    data = &data[d.consumed..];
                    if d.done {
                        ended += 1;
                        end(f, now, st, lat);
                    }
                }
            }
        }
        Ok(ended)
    }

    /// The peer closed flow `i`: a response framed by the close ends here. Returns
    /// whether one did.
    pub fn peer_closed(
        &mut self,
        i: usize,
        now: u64,
        st: &mut HttpStats,
        lat: &mut Latency,
    ) -> bool {
        match self.flows.get_mut(i) {
            Some(f) if f.pending > 0 && f.phase == Phase::BodyClose => {
                end(f, now, st, lat);
                true
            }
            _ => false,
        }
    }

    /// Flow `i` ended: counts the requests left without their full response, as
    /// `incomplete` (an error), or as `cut` when the run cut the flow at its end and it
    /// was not stalled (a flow may outlast the run).
    pub fn closed(&mut self, i: usize, st: &mut HttpStats, cut: bool) {
        if let Some(f) = self.flows.get_mut(i) {
            if cut {
                st.cut += u64::from(f.pending);
            } else {
                st.incomplete += u64::from(f.pending);
            }
            f.pending = 0;
        }
        self.heads.remove(&(i as u32));
    }
}

/// The response to the oldest pending request ended at `now`: counted, with its status.
fn end(f: &mut HttpFlow, now: u64, st: &mut HttpStats, lat: &mut Latency) {
    st.responses += 1;
    st.count_code(f.code);
    lat.req_last_byte.record_ns(now.saturating_sub(f.req_ns));
    f.pending -= 1;
    f.head_bits >>= 1;
    f.req_ns = now;
    f.phase = Phase::Idle;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side() -> Box<HttpSide> {
        let p = squall_astf::load_profile_value(serde_json::json!({
            "version": 1,
            "buffers": [],
            "ip_gens": [{"name": "g", "clients": {"range": ["16.0.0.1", "16.0.0.1"]},
                "servers": {"range": ["48.0.0.1", "48.0.0.1"]}}],
            "programs": [
                {"name": "c", "commands": [{"op": "http_request", "url": "/",
                    "headers": [{"name": "Host", "value": "h"}]}, {"op": "http_wait_response"}]},
                {"name": "s", "commands": [{"op": "recv", "bytes": 1}]}],
            "templates": [{"client_program": "c", "server_program": "s"}]
        }))
        .unwrap();
        let mut s = HttpSide::for_profile(&p).unwrap();
        assert!(s.is_http(0) && !s.is_http(1));
        s.start(3);
        s
    }

    /// Feeds `wire` in pieces of `step` bytes: (responses ended, stats, latency counts).
    fn feed(wire: &[u8], reqs: &[bool], step: usize) -> Result<(u32, HttpStats, u64), RxError> {
        let mut s = side();
        for &h in reqs {
            assert!(s.sent(3, h, 1000));
        }
        let (mut st, mut lat) = (HttpStats::default(), Latency::default());
        let mut n = 0;
        for (k, c) in wire.chunks(step).enumerate() {
            n += s.rx(3, c, 2000 + k as u64 * 1000, &mut st, &mut lat)?;
        }
        if s.peer_closed(3, 9_000_000, &mut st, &mut lat) {
            n += 1;
        }
        assert_eq!(lat.req_last_byte.count(), u64::from(n));
        Ok((n, st, lat.req_first_byte.count()))
    }

    const THREE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello\
HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: v\r\n\r\n\
HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n";

    #[test]
    fn pipelined_responses_end_at_their_framing_in_any_split() {
        // The third request is HEAD: its answer's Content-Length announces no body.
        for step in 1..THREE.len() {
            let (n, st, first) = feed(THREE, &[false, false, true], step).unwrap();
            assert_eq!(n, 3, "step {step}");
            assert_eq!(first, 3);
            assert_eq!((st.code(200), st.code(404), st.code(100)), (2, 1, 0));
            assert_eq!(st.class, [0, 2, 0, 1, 0]);
            assert_eq!(st.body_bytes, 8, "step {step}");
            assert_eq!(st.responses, 3);
        }
    }

    #[test]
    fn close_delimited_body_ends_at_the_fin() {
        let (n, st, _) = feed(b"HTTP/1.0 200 OK\r\n\r\nuntil the end", &[false], 4).unwrap();
        assert_eq!((n, st.body_bytes), (1, 13));
    }

    #[test]
    fn bad_responses_and_unsolicited_bytes_are_errors() {
        assert!(matches!(
            feed(b"HTTP/1.1 2000 OK\r\n\r\n", &[false], 3),
            Err(RxError::Parse(_))
        ));
        assert!(matches!(
            feed(
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                &[false],
                7
            ),
            Err(RxError::Parse(_))
        ));
        assert_eq!(
            feed(b"HTTP/1.1 204 No Content\r\n\r\nX", &[false], 100).unwrap_err(),
            RxError::Unsolicited
        );
        // A head that never ends is refused once it passes the head limit.
        let mut big = b"HTTP/1.1 200 OK\r\n".to_vec();
        big.extend(std::iter::repeat_n(b"X-A: b\r\n".as_slice(), 4000).flatten());
        assert!(matches!(feed(&big, &[false], 1000), Err(RxError::Parse(_))));
    }

    #[test]
    fn pending_is_bounded_and_closed_counts_incomplete() {
        let mut s = side();
        for _ in 0..MAX_PENDING {
            assert!(s.sent(3, false, 0));
        }
        assert!(!s.sent(3, false, 0));
        assert_eq!(s.pending(3), u32::from(MAX_PENDING));
        let mut st = HttpStats::default();
        s.closed(3, &mut st, false);
        assert_eq!((st.incomplete, s.pending(3)), (u64::from(MAX_PENDING), 0));
        // A flow the run cut at its end: its pending requests are `cut`, not errors.
        s.start(3);
        assert!(s.sent(3, false, 0) && s.sent(3, false, 0));
        s.closed(3, &mut st, true);
        assert_eq!((st.cut, st.incomplete), (2, u64::from(MAX_PENDING)));
        assert_eq!(st.errors(), u64::from(MAX_PENDING));
    }

    /// Status classes and codes count responses that ended (a truncated 200 is only
    /// `incomplete`); a broken response is one parse error, not also incomplete.
    #[test]
    fn codes_count_ended_responses_and_a_broken_one_counts_once() {
        let mut s = side();
        let (mut st, mut lat) = (HttpStats::default(), Latency::default());
        assert!(s.sent(3, false, 0));
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n123456789";
        assert_eq!(s.rx(3, head, 10, &mut st, &mut lat), Ok(0));
        s.closed(3, &mut st, false);
        assert_eq!((st.class, st.code(200), st.responses), ([0; 5], 0, 0));
        assert_eq!(st.incomplete, 1);
        // Two pipelined requests; the first answer's chunk size is bad.
        s.start(3);
        let mut st = HttpStats::default();
        assert!(s.sent(3, false, 0) && s.sent(3, false, 0));
        let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert!(matches!(
            s.rx(3, bad, 10, &mut st, &mut lat),
            Err(RxError::Parse(_))
        ));
        st.parse_errors += 1; // as the app counts it
        s.failed(3);
        s.closed(3, &mut st, false);
        assert_eq!((st.parse_errors, st.incomplete, st.errors()), (1, 1, 2));
    }

    /// A request queued with the SYN is timed from the connection's establishment.
    #[test]
    fn latency_of_a_request_queued_before_the_handshake_starts_at_it() {
        let mut s = side();
        let (mut st, mut lat) = (HttpStats::default(), Latency::default());
        assert!(s.sent(3, false, 1_000));
        s.established(3, 21_000);
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(s.rx(3, r, 41_000, &mut st, &mut lat), Ok(1));
        assert_eq!(lat.req_first_byte.summary()[4], 20, "us");
        assert_eq!(lat.req_last_byte.summary()[4], 20, "us");
        // Established before the request: nothing pending, nothing moved.
        s.start(3);
        s.established(3, 50_000);
        assert!(s.sent(3, false, 60_000));
        assert_eq!(s.rx(3, r, 70_000, &mut st, &mut lat), Ok(1));
        assert_eq!(lat.req_first_byte.count(), 2);
    }

    #[test]
    fn heads_with_many_fields_are_parsed_again_with_room() {
        let mut r = b"HTTP/1.1 200 OK\r\n".to_vec();
        for k in 0..40 {
            r.extend(format!("X-{k}: v\r\n").into_bytes());
        }
        r.extend(b"Content-Length: 2\r\n\r\nok");
        let (n, st, _) = feed(&r, &[false], 1000).unwrap();
        assert_eq!((n, st.code(200), st.body_bytes), (1, 1, 2));
        let lim = Limits::default();
        assert_eq!(
            parse_head(&r, &lim, false).unwrap(),
            Some((200, BodyKind::Length(2), r.len() - 2, true))
        );
    }

    /// More fields than the first array holds, up to what the head limit allows (70
    /// Set-Cookie lines, as a login page may send).
    #[test]
    fn heads_with_very_many_fields_are_taken() {
        let mut r = b"HTTP/1.1 200 OK\r\n".to_vec();
        for k in 0..70 {
            r.extend(format!("Set-Cookie: c{k}=v; Path=/\r\n").into_bytes());
        }
        r.extend(b"Content-Length: 2\r\n\r\nok");
        let (n, st, _) = feed(&r, &[false], 500).unwrap();
        assert_eq!((n, st.code(200), st.parse_errors), (1, 1, 0));
    }

    #[test]
    fn flow_state_is_small() {
        const { assert!(HTTP_FLOW_BYTES <= 96) };
    }
}
