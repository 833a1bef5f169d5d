//! Application-level statistics of a side: per template group flow counters (started,
//! completed, every error class), the side's TRex-named UDP counters and latency
//! histograms (HDR, microseconds), with merge and the list of error counters.

use hdrhistogram::Histogram;

macro_rules! counters {
    ($(#[doc = $sd:literal])* $ty:ident { $($(#[doc = $d:literal])* $name:ident: $err:literal),* $(,)? }) => {
        $(#[doc = $sd])*
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct $ty {
            $($(#[doc = $d])* pub $name: u64,)*
        }
        impl $ty {
            /// (name, value, is an error counter) in declaration order.
            pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64, bool)> + '_ {
                [$((stringify!($name), self.$name, $err)),*].into_iter()
            }
            /// Adds another block.
            pub fn add(&mut self, o: &$ty) {
                $(self.$name += o.$name;)*
            }
            /// Sum of the error counters.
            pub fn errors(&self) -> u64 {
                self.iter().filter(|(_, _, e)| *e).map(|(_, v, _)| v).sum()
            }
        }
    };
}

counters! {
    /// Flow counters of one template group on one side.
    TgCounters {
    /// client flows opened (connect issued)
    started: false,
    /// of `started`: opened more than 10 ms after their scheduled start (the generator
    /// fell behind its schedule; not an error, the latencies show by how much)
    started_late: false,
    /// server flows accepted and matched to a template
    accepted: false,
    /// flows whose program ended normally and whose connection closed cleanly
    completed: false,
    /// flows not opened: every source port of the chosen client address in use
    ports_exhausted: true,
    /// flows not opened: the TCP host refused the connect (flow table full, tuple in use)
    connect_failed: true,
    /// flows scheduled before the stop but not opened when the run ended (generator behind)
    not_opened: true,
    /// flows whose connection died before their program ended
    aborted: true,
    /// of `aborted`: retransmissions exhausted
    timeouts: false,
    /// of `aborted`: connection refused (RST to SYN)
    refused: false,
    /// of `aborted`: reset by the peer
    reset_by_peer: false,
    /// of `aborted`: the connection attempt was answered by an ICMP destination
    /// unreachable or time exceeded (a firewall's REJECT, no route to the host)
    unreachable: false,
    /// flows whose program closed but whose connection did not end cleanly
    bad_close: true,
    /// flows whose `recv` could not be satisfied because the peer closed first
    peer_closed_early: true,
    /// flows still running at the end of the drain period, cut with a RST (not an error:
    /// a flow may legitimately outlast the run; see `stalled`)
    cut: false,
    /// of `cut`: flows that were stalled when cut (waiting on the network, not on their
    /// own program timer, with no payload byte moved for the run's stall time): hung flows
    stalled: true,
    /// client flows whose program reset the connection in the callback that completed the
    /// handshake (the RST leaves before the handshake's ACK: the server never accepts them)
    reset_at_connect: false,
    /// program operations the engine cannot perform (UDP commands on TCP, bad buffer)
    io_misuse: true,
    /// payload bytes sent and acknowledged by the peer (UDP: sent)
    l7_tx_acked: false,
    /// payload bytes received in order
    l7_rx_bytes: false,
}
}

counters! {
    /// UDP counters of one side (TRex names).
    UdpCounters {
    /// client UDP flows opened
    udps_connects: false,
    /// server UDP flows created by a first datagram to an associated address and port
    udps_accepts: false,
    /// UDP flows released (program end, aging or cut)
    udps_closed: false,
    /// datagrams sent
    udps_sndpkt: false,
    /// UDP payload bytes sent
    udps_sndbyte: false,
    /// datagrams received by a flow
    udps_rcvpkt: false,
    /// UDP payload bytes received by a flow
    udps_rcvbyte: false,
    /// flows released by keepalive aging (idle for the `set_keepalive_msg` time)
    udps_keepdrops: false,
    /// datagrams not sent: no frame available, or larger than a frame
    udps_nombuf: true,
    /// datagrams dropped: no flow and no server template for their address and port
    udps_notconn: true,
    /// flows not created: the UDP flow table is full
    udps_nomem: true,
    /// datagrams dropped: bad IPv4 or UDP checksum
    udps_badsum: true,
    /// datagrams dropped: malformed or fragmented IPv4/UDP
    udps_hdrops: true,
}
}

/// A latency histogram in microseconds.
#[derive(Debug)]
pub struct LatHist(pub Histogram<u64>);

/// `clone_from` keeps the destination's counts array (a copy, no allocation): the live
/// snapshots of a run refresh their reports in place.
impl Clone for LatHist {
    fn clone(&self) -> Self {
        LatHist(self.0.clone())
    }
    fn clone_from(&mut self, src: &Self) {
        self.0.reset();
        // Same bounds: a plain copy of the counts into the emptied histogram.
        if self.0.add(&src.0).is_err() {
            *self = src.clone();
        }
    }
}

impl Default for LatHist {
    fn default() -> Self {
        // 1 us .. 1 hour, 3 significant digits; values above saturate.
        LatHist(Histogram::new_with_max(3_600_000_000, 3).expect("static histogram bounds"))
    }
}

impl LatHist {
    /// Records a duration given in ns (rounded to the nearest microsecond).
    pub fn record_ns(&mut self, ns: u64) {
        self.0.saturating_record((ns + 500) / 1000);
    }
    pub fn count(&self) -> u64 {
        self.0.len()
    }
    /// (p50, p90, p99, p99.9, max) in us; zeros when empty.
    pub fn summary(&self) -> [u64; 5] {
        if self.0.is_empty() {
            return [0; 5];
        }
        [
            self.0.value_at_quantile(0.5),
            self.0.value_at_quantile(0.9),
            self.0.value_at_quantile(0.99),
            self.0.value_at_quantile(0.999),
            self.0.max(),
        ]
    }
    /// Counts per bucket: `bounds_us[i]` is bucket i's upper bound (inclusive), the last
    /// element counts the values above every bound. Also returns the sum of the values.
    pub fn buckets(&self, bounds_us: &[u64]) -> (Vec<u64>, f64) {
        let mut counts = vec![0u64; bounds_us.len() + 1];
        let mut sum = 0f64;
        for v in self.0.iter_recorded() {
            let us = self.0.median_equivalent(v.value_iterated_to());
            let n = v.count_at_value();
            sum += us as f64 * n as f64;
            let i = bounds_us.partition_point(|&b| b < us);
            counts[i] += n;
        }
        (counts, sum)
    }
    pub fn merge(&mut self, o: &LatHist) {
        // Same bounds everywhere; an add error can only come from saturation.
        let _ = self.0.add(&o.0);
    }
}

/// Latencies of one template group, measured on the client from the scheduled start.
#[derive(Debug, Default)]
pub struct Latency {
    /// SYN scheduled -> handshake done.
    pub connect: LatHist,
    /// -> first response byte.
    pub first_byte: LatHist,
    /// -> last response byte before the program finished.
    pub last_byte: LatHist,
    /// HTTP, per request: request queued -> first byte of its response (a pipelined
    /// request: from the end of the previous response).
    pub req_first_byte: LatHist,
    /// HTTP, per request: request queued -> last byte of its response.
    pub req_last_byte: LatHist,
}

impl Clone for Latency {
    fn clone(&self) -> Self {
        let mut l = Latency::default();
        l.clone_from(self);
        l
    }
    fn clone_from(&mut self, src: &Self) {
        let Latency {
            connect,
            first_byte,
            last_byte,
            req_first_byte,
            req_last_byte,
        } = src;
        self.connect.clone_from(connect);
        self.first_byte.clone_from(first_byte);
        self.last_byte.clone_from(last_byte);
        self.req_first_byte.clone_from(req_first_byte);
        self.req_last_byte.clone_from(req_last_byte);
    }
}

impl Latency {
    pub fn merge(&mut self, o: &Latency) {
        self.connect.merge(&o.connect);
        self.first_byte.merge(&o.first_byte);
        self.last_byte.merge(&o.last_byte);
        self.req_first_byte.merge(&o.req_first_byte);
        self.req_last_byte.merge(&o.req_last_byte);
    }
    /// (name, histogram) pairs.
    pub fn iter(&self) -> [(&'static str, &LatHist); 3] {
        [
            ("connect", &self.connect),
            ("first_byte", &self.first_byte),
            ("last_byte", &self.last_byte),
        ]
    }
    /// The per-request HTTP histograms (name, histogram).
    pub fn iter_http(&self) -> [(&'static str, &LatHist); 2] {
        [
            ("req_first_byte", &self.req_first_byte),
            ("req_last_byte", &self.req_last_byte),
        ]
    }
}

/// Most distinct status codes counted one by one per template group; others are
/// counted in [`HttpStats::codes_other`] (and by class).
pub const MAX_HTTP_CODES: usize = 32;

/// HTTP counters of one template group (the flows of `http_request` programs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpStats {
    /// Requests queued.
    pub requests: u64,
    /// Responses received to their end (interim 1xx answers not counted).
    pub responses: u64,
    /// Responses by status class (counted when the response ends): 1xx (final 101
    /// only), 2xx, 3xx, 4xx, 5xx.
    pub class: [u64; 5],
    /// Responses by status code, first [`MAX_HTTP_CODES`] codes seen, in order seen.
    pub codes: Vec<(u16, u64)>,
    /// Responses whose code came after the table was full.
    pub codes_other: u64,
    /// Response body bytes (decoded: without chunk framing).
    pub body_bytes: u64,
    /// Responses that broke HTTP's rules (the connection was reset).
    pub parse_errors: u64,
    /// Requests whose response had not ended when the flow ended.
    pub incomplete: u64,
    /// Requests whose response had not ended when the run cut their flow at its end (not
    /// an error: a flow may outlast the run; a stalled flow's are `incomplete`).
    pub cut: u64,
    /// Requests not sent: more than [`crate::gen::http::MAX_PENDING`] pending on a flow.
    pub not_sent: u64,
    /// Connections whose program stopped sending requests because the server ended the
    /// connection (`Connection: close`, an HTTP/1.0 answer without keep-alive, its FIN:
    /// RFC 9112 §9.6), one per flow; not an error (a server's keep-alive limit).
    pub server_closed: u64,
}

impl HttpStats {
    /// Counts one response head with status `code` (three digits; one outside 100..=599
    /// is invalid and counted as a 5xx, as RFC 9110 §15 tells a client to treat it).
    pub fn count_code(&mut self, code: u16) {
        let class = match code / 100 {
            c @ 1..=5 => c,
            _ => 5,
        };
        self.class[usize::from(class) - 1] += 1;
        self.add_code(code, 1);
    }
    fn add_code(&mut self, code: u16, n: u64) {
        if let Some(k) = self.codes.iter().position(|&(c, _)| c == code) {
            self.codes[k].1 += n;
        } else if self.codes.len() < MAX_HTTP_CODES {
            self.codes.push((code, n));
        } else {
            self.codes_other += n;
        }
    }
    /// Responses with status `code`.
    pub fn code(&self, code: u16) -> u64 {
        self.codes
            .iter()
            .find(|(c, _)| *c == code)
            .map_or(0, |&(_, n)| n)
    }
    /// Errors: parse errors, incomplete responses, requests not sent.
    pub fn errors(&self) -> u64 {
        self.parse_errors + self.incomplete + self.not_sent
    }
    pub fn merge(&mut self, o: &HttpStats) {
        self.requests += o.requests;
        self.responses += o.responses;
        for (a, b) in self.class.iter_mut().zip(o.class) {
            *a += b;
        }
        for &(c, n) in &o.codes {
            self.add_code(c, n);
        }
        self.codes_other += o.codes_other;
        self.body_bytes += o.body_bytes;
        self.parse_errors += o.parse_errors;
        self.incomplete += o.incomplete;
        self.cut += o.cut;
        self.not_sent += o.not_sent;
        self.server_closed += o.server_closed;
    }
}

/// Statistics of one template group.
#[derive(Debug, Default)]
pub struct TgStats {
    pub c: TgCounters,
    pub lat: Latency,
    /// HTTP counters (zero unless the group's programs use `http_request`).
    pub http: HttpStats,
}

impl Clone for TgStats {
    fn clone(&self) -> Self {
        TgStats {
            c: self.c.clone(),
            lat: self.lat.clone(),
            http: self.http.clone(),
        }
    }
    fn clone_from(&mut self, src: &Self) {
        let TgStats { c, lat, http } = src;
        self.c.clone_from(c);
        self.lat.clone_from(lat);
        self.http.clone_from(http);
    }
}

/// Statistics of one side (all template groups plus side-wide errors).
#[derive(Debug, Default)]
pub struct SideStats {
    pub tg: Vec<TgStats>,
    /// Accepted connections that matched no template (reset).
    pub no_template: u64,
    /// Accepted connections whose first bytes matched no template's `l7_map` (reset).
    pub l7_no_match: u64,
    /// Send operations the TCP host refused (queue full, bad range).
    pub send_errors: u64,
    /// UDP counters of the side.
    pub udp: UdpCounters,
    /// Accepted flows whose source address is in no client pool of the profile: address
    /// translation (a NAT between the ports) rewrote it. Not an error.
    pub translated: u64,
    /// The first such source address seen.
    pub translated_from: Option<u32>,
    /// Retransmission events (timeouts and fast retransmits) of each template's flows,
    /// by template index (shorter when the last templates had none).
    pub retransmits: Vec<u64>,
}

/// `clone_from` reuses the groups' histograms (see [`LatHist`]).
impl Clone for SideStats {
    fn clone(&self) -> Self {
        let mut s = SideStats::default();
        s.clone_from(self);
        s
    }
    fn clone_from(&mut self, src: &Self) {
        // Every field named: a new field fails to compile until it is copied here.
        let SideStats {
            tg,
            no_template,
            l7_no_match,
            send_errors,
            udp,
            translated,
            translated_from,
            retransmits,
        } = src;
        self.tg.clone_from(tg);
        self.no_template = *no_template;
        self.l7_no_match = *l7_no_match;
        self.send_errors = *send_errors;
        self.udp.clone_from(udp);
        self.translated = *translated;
        self.translated_from = *translated_from;
        self.retransmits.clone_from(retransmits);
    }
}

impl SideStats {
    pub fn new(groups: usize) -> Self {
        SideStats {
            tg: vec![TgStats::default(); groups.max(1)],
            ..Default::default()
        }
    }
    /// Counters summed over every template group.
    pub fn total(&self) -> TgCounters {
        let mut t = TgCounters::default();
        for g in &self.tg {
            t.add(&g.c);
        }
        t
    }
    /// Every error of the side.
    pub fn errors(&self) -> u64 {
        self.total().errors()
            + self.tg.iter().map(|g| g.http.errors()).sum::<u64>()
            + self.no_template
            + self.l7_no_match
            + self.send_errors
            + self.udp.errors()
    }
    pub fn merge(&mut self, o: &SideStats) {
        if self.tg.len() < o.tg.len() {
            self.tg.resize(o.tg.len(), TgStats::default());
        }
        for (a, b) in self.tg.iter_mut().zip(&o.tg) {
            a.c.add(&b.c);
            a.lat.merge(&b.lat);
            a.http.merge(&b.http);
        }
        self.no_template += o.no_template;
        self.l7_no_match += o.l7_no_match;
        self.send_errors += o.send_errors;
        self.translated += o.translated;
        self.translated_from = self.translated_from.or(o.translated_from);
        self.udp.add(&o.udp);
        for (t, &n) in o.retransmits.iter().enumerate() {
            self.count_retransmits(t, n);
        }
    }
    /// One retransmission event of a flow of template `tpl`.
    pub fn count_retransmit(&mut self, tpl: usize) {
        self.count_retransmits(tpl, 1);
    }
    fn count_retransmits(&mut self, tpl: usize, n: u64) {
        if self.retransmits.len() <= tpl {
            self.retransmits.resize(tpl + 1, 0);
        }
        self.retransmits[tpl] += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_sum_only_error_counters() {
        let c = TgCounters {
            started: 10,
            completed: 7,
            aborted: 2,
            timeouts: 2,
            cut: 1,
            stalled: 1,
            ..Default::default()
        };
        assert_eq!(c.errors(), 3);
    }

    #[test]
    fn histogram_summary_and_merge() {
        let mut a = LatHist::default();
        for us in 1..=1000u64 {
            a.record_ns(us * 1000);
        }
        let s = a.summary();
        assert!((495..=505).contains(&s[0]), "{s:?}");
        assert_eq!(s[4], 1000);
        let mut b = LatHist::default();
        b.record_ns(5_000_000_000);
        a.merge(&b);
        assert_eq!(a.count(), 1001);
        assert!(a.summary()[4] >= 4_990_000);
        assert_eq!(LatHist::default().summary(), [0; 5]);
    }

    #[test]
    fn http_codes_are_bounded_and_merge() {
        let mut a = HttpStats::default();
        for code in [200, 404, 200, 503, 101] {
            a.count_code(code);
        }
        assert_eq!(a.class, [1, 2, 0, 1, 1]);
        assert_eq!((a.code(200), a.code(404), a.code(302)), (2, 1, 0));
        let mut b = HttpStats::default();
        for code in 200..(200 + MAX_HTTP_CODES as u16 + 3) {
            b.count_code(code);
        }
        assert_eq!(b.codes.len(), MAX_HTTP_CODES);
        assert_eq!(b.codes_other, 3);
        a.merge(&b);
        assert_eq!(a.code(200), 3);
        assert_eq!(a.codes.len(), MAX_HTTP_CODES);
        // 404, 503 and 101 took places: 3 of b's codes no longer fit, plus b's own 3.
        assert_eq!(a.codes_other, 6);
        assert_eq!(a.class.iter().sum::<u64>(), 5 + MAX_HTTP_CODES as u64 + 3);
    }

    #[test]
    fn clone_from_copies_in_place() {
        let mut src = SideStats::new(2);
        src.tg[1].c.started = 5;
        src.tg[1].lat.first_byte.record_ns(7_000);
        src.no_template = 2;
        src.count_retransmit(3);
        let mut dst = SideStats::new(3);
        dst.tg[0].lat.connect.record_ns(9_000_000);
        dst.udp.udps_nomem = 4;
        dst.clone_from(&src);
        assert_eq!(dst.tg.len(), 2);
        assert_eq!(dst.tg[0].lat.connect.count(), 0, "old counts gone");
        assert_eq!(
            dst.tg[1].lat.first_byte.summary(),
            src.tg[1].lat.first_byte.summary()
        );
        assert_eq!(dst.tg[1].c, src.tg[1].c);
        assert_eq!((dst.no_template, dst.udp.udps_nomem), (2, 0));
        assert_eq!(dst.retransmits, [0, 0, 0, 1]);
        assert_eq!(dst.clone().tg[1].lat.first_byte.count(), 1);
    }

    #[test]
    fn side_merge_adds_groups() {
        let mut a = SideStats::new(1);
        let mut b = SideStats::new(2);
        b.tg[1].c.started = 3;
        b.no_template = 1;
        b.count_retransmit(2);
        a.count_retransmit(0);
        a.merge(&b);
        assert_eq!(a.tg.len(), 2);
        assert_eq!(a.total().started, 3);
        assert_eq!(a.errors(), 1);
        assert_eq!(a.retransmits, [1, 0, 1]);
    }
}
