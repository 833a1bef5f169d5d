//! squall-tcp: a compact, fast TCP (RFC 9293) for a traffic generator and servers holding
//! millions of flows per core.
//!
//! # Model
//! One [`TcpHost`] per core owns every flow of that core: a preallocated slab of compact
//! TCBs (`tcb::Tcb`, 152 bytes), an open-addressing 4-tuple table
//! (`flowtable::FlowTable`) and one `squall_engine::TimerWheel` (token = slab index). The
//! host never reads a clock: every call takes `now` in nanoseconds (monotonic or virtual).
//!
//! * **Input**: [`TcpHost::rx`] takes a received Ethernet/IPv4/TCP or Ethernet/IPv6/TCP
//!   frame, verifies it (IP + TCP checksums, counted drops), demultiplexes it with one hash and runs the
//!   state machine; in-order payload is handed to [`TcpApp::on_data`] as a slice *into the
//!   frame* (no copy).
//! * **Output**: frames are written straight into buffers handed out by a [`TxSink`]
//!   (e.g. a port's TX pool): headers, then the payload copied once from the application's
//!   immutable buffer, with the TCP checksum computed during the copy.
//! * **TX backpressure**: when [`TxSink::alloc`] fails (a full TX ring) the flow is put
//!   on a resume list (`tcps_txfull` counts it) and its output, SYN or SYN-ACK is sent
//!   at the next [`TcpHost::poll`], [`TcpHost::tx_resume`] or receive, without waiting
//!   for a retransmission timeout. The list is served first, in order: every receive
//!   resumes it before processing, and a flow with output to do while others wait joins
//!   the list rather than taking a freed slot (busy flows cannot starve a waiting SYN).
//!   A bounded ring keeps the frames in flight, and so the memory they touch, small and
//!   cache-hot whatever the number of flows.
//! * **Memory**: the flow table, the TCB slab and the timer nodes are hinted into
//!   transparent huge pages (`squall_engine::hugemem`), which removes most TLB misses
//!   when flows are counted in hundreds of thousands.
//! * **Timers**: call [`TcpHost::poll`] with the current time; [`TcpHost::next_timer`] tells
//!   a virtual-clock driver when the next one is due.
//! * **Send side (pull)**: register immutable buffers once ([`TcpHost::buffers`] ->
//!   [`BufRegistry::register`] / `register_static`), then queue references (buffer id,
//!   offset, length) with [`Ctl::send`] inside callbacks or [`TcpHost::send`] outside.
//!   Segments are cut when the windows open; retransmissions re-read the same bytes.
//!   Owned dynamic data: [`Ctl::send_owned`] / [`TcpHost::send_owned`] (freed when acked).
//! * **Application**: implement [`TcpApp`] (`on_connected`, `on_data`, `on_acked`,
//!   `on_peer_closed`, `on_closed`, and `on_retransmit` for diagnostics); act on the
//!   current flow through [`Ctl`] (`send`, `send_owned`, `close`, `abort`). Outside
//!   callbacks: [`TcpHost::connect`], [`TcpHost::listen`], [`TcpHost::send`],
//!   [`TcpHost::close`], [`TcpHost::abort`].
//! * **Per-flow options**: [`TcpHost::add_flow_opts`] registers a [`FlowOpts`] set (MSS,
//!   initial window, receive window, RFC 7323 / SACK offers, Nagle, delayed ACK,
//!   duplicate-ACK threshold, IPv4 TTL and TOS) and returns its [`OptsId`];
//!   [`TcpHost::connect_with`] opens a flow with it, [`TcpHost::listen_with`] gives it to
//!   every flow accepted on a port. A flow stores only the one-byte index; `connect` /
//!   `listen` use the host's default set, [`TcpConfig::opts`].
//! * **IPv6**: [`TcpHost::connect6`] opens flows over IPv6 and listeners accept both
//!   families. An IPv6 flow keeps the 12-byte IPv4-sized key: its addresses are small ids
//!   (in 0.0.0.0/8, never accepted as IPv4 addresses) of the host's address table
//!   (`addr6`), so IPv4 flows are no bigger and no slower; its MSS is 20 bytes smaller
//!   (the IPv6 header: 1440 at a 1500-byte MTU).
//! * **Bursts**: [`TcpHost::rx_burst`] takes a port's RX burst; it prefetches the flow-table
//!   slots and TCBs of the whole burst first and hashes each frame once.
//! * **Checksums**: TX payload sums come from per-32-byte prefix sums of the registered
//!   immutable buffers (O(1) per segment); `TcpConfig::tx_checksum` / `rx_checksum` = false
//!   hand them to a port with checksum offload.
//! * **Counters**: [`TcpHost::counters`] returns TRex-named `tcps_*` counters;
//!   [`TcpHost::memory_bytes`] the flow structures' footprint (W3).
//!
//! # Protocol coverage
//! RFC 9293 state machine (active/passive/simultaneous open, simultaneous close,
//! half-close, RST handling, TIME_WAIT with a configurable period and 4-tuple recycling,
//! FIN_WAIT_2 timeout on idleness), RFC 6528 ISNs (SipHash-2-4), MSS option (data only:
//! the option bytes of a segment come out of it, RFC 6691), window scaling and
//! timestamps with PAWS (RFC 7323, negotiable), Nagle on/off (Minshall's variant as Linux
//! applies it: a short segment waits only while an earlier short one is unacknowledged,
//! never when it carries the FIN), delayed ACK (40 ms by default, below the 200 ms
//! minimum RTO; immediate on every second full segment, on PSH and on gaps), zero-window
//! probes (backed off, for as long as the peer answers them), optional keepalive
//! (restarted by anything the peer sends), RFC 6298 RTO (Karn: the backoff stays until a
//! valid RTT sample; 3 s after a retransmitted SYN, §5.7; min/max), NewReno (RFC
//! 5681/3465/6582), SACK (RFC 2018 blocks, RFC 6675 scoreboard recovery, negotiable),
//! RFC 5961 challenge ACKs (rate limited per host with a randomised per-second budget, as
//! Linux since CVE-2016-5696, and per flow: ACKs answering out-of-window segments, PAWS
//! drops, ACKs of unsent data and challenges go out at most once per
//! `TcpConfig::invalid_ratelimit_ns`), bounded half-open table with SYN cookies (RFC 4987;
//! window scale, SACK-permitted and timestamps kept in the low bits of the TSval when the
//! peer offers timestamps), header prediction, out-of-order queue with merging/trimming
//! (and out-of-order FIN, ACKed at once and kept until the gap fills) within a per-host
//! memory budget (`TcpConfig::ooo_budget`, refusals counted in `tcps_rcvoomemdrop`),
//! TS.Recent recorded after the sequence check (RFC 7323 §5.3; a retransmission starting
//! within a window below RCV.NXT still records it, no segment further off does), RSTs
//! ignored in TIME_WAIT (RFC 1337).
//! Values from the peer (SACK blocks, TSecr) never overflow arithmetic.
//! The receive window is constant (`FlowOpts::rcv_wnd`): applications consume data
//! as it is delivered, so no window updates are ever needed.
//!
//! # Example: a W1 exchange between a client and a server host
//! ```
//! use std::sync::Arc;
//! use squall_tcp::{BufId, CloseReason, Ctl, FlowId, TcpApp, TcpConfig, TcpHost, TxSink};
//!
//! /// Frames written by one host, to be delivered to the other.
//! #[derive(Default)]
//! struct Frames { cur: Vec<u8>, out: Vec<Vec<u8>> }
//! impl TxSink for Frames {
//!     fn alloc(&mut self, len: usize) -> Option<&mut [u8]> { self.cur.resize(len, 0); Some(&mut self.cur[..]) }
//!     fn commit(&mut self, len: usize) { self.out.push(self.cur[..len].to_vec()) }
//! }
//!
//! struct Client { req: BufId, got: usize, closed: Option<CloseReason> }
//! impl TcpApp for Client {
//!     fn on_connected(&mut self, ctl: &mut Ctl, _f: FlowId) { ctl.send(self.req, 0, 100) }
//!     fn on_data(&mut self, ctl: &mut Ctl, _f: FlowId, data: &[u8]) {
//!         self.got += data.len();
//!         if self.got == 32_768 { ctl.close() }
//!     }
//!     fn on_closed(&mut self, _f: FlowId, r: CloseReason) { self.closed = Some(r) }
//! }
//! struct Server { resp: BufId }
//! impl TcpApp for Server {
//!     fn on_data(&mut self, ctl: &mut Ctl, _f: FlowId, _data: &[u8]) { ctl.send(self.resp, 0, 32_768) }
//!     fn on_peer_closed(&mut self, ctl: &mut Ctl, _f: FlowId) { ctl.close() }
//! }
//!
//! let mut now = 0u64;
//! let mut client = TcpHost::new(TcpConfig { mac: [2, 0, 0, 0, 0, 1], gateway_mac: [2, 0, 0, 0, 0, 2], ..TcpConfig::default() }, now);
//! let mut server = TcpHost::new(TcpConfig { mac: [2, 0, 0, 0, 0, 2], gateway_mac: [2, 0, 0, 0, 0, 1], ..TcpConfig::default() }, now);
//! server.listen(80);
//! let req = client.buffers().register(Arc::from(vec![b'G'; 100]));
//! let resp = server.buffers().register(Arc::from(vec![b'x'; 32_768]));
//! let (mut capp, mut sapp) = (Client { req, got: 0, closed: None }, Server { resp });
//! let (mut cq, mut sq) = (Frames::default(), Frames::default());
//! client.connect(now, &mut cq, 0x1000_0001, 1025, 0x3000_0001, 80).unwrap();
//! while capp.closed.is_none() {
//!     for f in std::mem::take(&mut cq.out) { server.rx(now, &f, &mut sapp, &mut sq) }
//!     for f in std::mem::take(&mut sq.out) { client.rx(now, &f, &mut capp, &mut cq) }
//!     if cq.out.is_empty() && sq.out.is_empty() {
//!         // Nothing in flight: jump to the next timer (e.g. a delayed ACK).
//!         now = [client.next_timer(), server.next_timer()].into_iter().flatten().min().unwrap_or(now + 1).max(now + 1);
//!     }
//!     client.poll(now, &mut capp, &mut cq);
//!     server.poll(now, &mut sapp, &mut sq);
//! }
//! assert_eq!(capp.got, 32_768);
//! assert_eq!(capp.closed, Some(CloseReason::Normal));
//! assert_eq!(server.counters().tcps_sndbyte, 32_768);
//! ```
//! `examples/w1_loop.rs` runs many such flows and prints CPU time per connection;
//! `examples/w2_loop.rs` does the same for persistent request/response (W2).

// Internal modules: the crate's interface is the re-exports below.
mod addr6;
mod api;
mod cc;
mod counters;
mod flowtable;
mod host;
mod isn;
mod ooo;
mod opts;
mod pkt;
mod rtt;
mod sack;
mod sendq;
mod seq;
mod tcb;
mod trace;

pub use addr6::{is_id as is_ipv6_id, Addr6Table};
pub use api::{CloseReason, ConnectError, Ctl, FlowId, FlowInfo, SendError, TcpApp, TxSink};
pub use counters::TcpCounters;
pub use flowtable::FlowKey;
pub use host::{IcmpError, TcpConfig, TcpHost};
pub use opts::{FlowOpts, OptsId, MAX_OPTS};
pub use rtt::RtoConfig;
pub use sendq::{BufId, BufRegistry};
pub use tcb::State;
pub use trace::{
    FlowTracer, PassiveSelect, RexmitCause, TraceEvent, TraceKind, TraceWatch, TracedFlow,
};
