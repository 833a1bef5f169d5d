//! Flow tracing (`squall run --trace DIR`): N sampled flows (`--trace-flows`), or the
//! first N matching `--trace-filter`, recorded as a pcap (both directions) and a
//! per-flow timeline of TCP events (`squall_tcp::FlowTracer`).
//!
//! Who does what: the client side's generator picks the flows ([`FlowSelect`], asked
//! once per opened flow only when tracing is on) and names them to its TCP host (the
//! traced bit) and to the server host of the same run (a [`TraceWatch`], consulted at
//! passive opens); [`TraceRig::install`] sets a worker up and gives it its pcap tap,
//! [`TraceRig::finish`] turns its hosts' tracers and the tap into [`TraceData`], which
//! shards merge and [`write`] writes.
//! Nothing is written while the run goes: events stay in the hosts' bounded buffers.

mod filter;
mod write;

pub use filter::{Prefix, TraceFilter};
pub use write::{template_names, timeline_json, write, TraceFiles};

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use squall_astf::Profile;
use squall_port::pcap::PcapRecord;
use squall_port::Port;
use squall_stack::PcapCap;
use squall_tcp::{FlowTracer, TraceEvent, TraceWatch, TracedFlow};

use crate::gen::Side;

/// Events kept per TCP host (about 32 bytes each); beyond, counted as dropped.
pub const MAX_EVENTS_PER_HOST: usize = 1 << 20;

/// What `--trace` asked for (shared by every worker of the run).
#[derive(Clone, Debug)]
pub struct TraceSpec {
    /// Output directory.
    pub dir: PathBuf,
    /// Most flows traced in the whole run.
    pub flows: usize,
    pub filter: TraceFilter,
    /// Flows taken so far, over every worker.
    taken: Arc<AtomicUsize>,
}

impl TraceSpec {
    pub fn new(dir: PathBuf, flows: usize, filter: TraceFilter) -> Self {
        TraceSpec {
            dir,
            flows,
            filter,
            taken: Arc::default(),
        }
    }
}

/// The client generator's choice of flows to trace.
pub struct FlowSelect {
    /// Per template: may it be traced.
    templates: Vec<bool>,
    filter: TraceFilter,
    max: usize,
    taken: Arc<AtomicUsize>,
    /// The server host of the same run, if it is ours (in-memory wire).
    watch: Option<TraceWatch>,
    /// Template of each traced TCP flow, by its id in the client host's tracer.
    pub traced_templates: Vec<u16>,
}

impl FlowSelect {
    /// Should the flow of template `tpl` from `client:cport` to `server:sport` be
    /// traced? Takes one of the run's N if so. The addresses are the flow's own (an
    /// IPv6 template's with their high bits), as the server host of the run sees them.
    pub fn select(
        &mut self,
        tpl: usize,
        client: IpAddr,
        cport: u16,
        server: IpAddr,
        sport: u16,
    ) -> bool {
        if !self.templates.get(tpl).copied().unwrap_or(false)
            || !self.filter.matches(client, cport, server, sport)
            || self.taken.load(Ordering::Relaxed) >= self.max
            || self.taken.fetch_add(1, Ordering::Relaxed) >= self.max
        {
            return false;
        }
        if let Some(w) = &self.watch {
            w.add(client, cport);
        }
        true
    }
}

/// Which side of the flow a timeline was recorded on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceSide {
    Client,
    Server,
}

/// One traced flow: where it was recorded, its template, its TCP events.
#[derive(Clone, Debug)]
pub struct FlowTimeline {
    pub side: TraceSide,
    /// The worker (shard or port queue) that carried it.
    pub worker: u32,
    pub template: Option<u16>,
    pub flow: TracedFlow,
    pub events: Vec<TraceEvent>,
}

/// A run's (or one worker's) traced flows and frames.
#[derive(Clone, Debug, Default)]
pub struct TraceData {
    pub flows: Vec<FlowTimeline>,
    pub frames: Vec<PcapRecord>,
    /// Events lost to full buffers.
    pub dropped_events: u64,
}

impl TraceData {
    /// Adds another worker's data (frames kept in time order; equal times keep each
    /// worker's order).
    pub fn merge(&mut self, mut b: TraceData) {
        self.flows.append(&mut b.flows);
        self.frames.append(&mut b.frames);
        self.frames.sort_by_key(|r| r.ts_ns);
        self.dropped_events += b.dropped_events;
    }
}

/// A worker's tracing, set up by [`install`] on its sides; its pcap tap is the capture
/// [`install`] returns, lent to the sides' turns, and given back to [`finish`].
pub struct TraceRig;

impl TraceRig {
    /// Sets tracing up on a worker's sides: `client` (the generator picks flows) and
    /// `server` (passive flows: those the client names on the in-memory wire, else those
    /// the filter matches, up to N). `rx`: the tap records received frames too (a real
    /// port, where the other side's frames are not ours to see at transmit).
    pub fn install<P: Port>(
        spec: &TraceSpec,
        profile: &Profile,
        client: Option<&mut Side<P>>,
        server: Option<&mut Side<P>>,
        rx: bool,
    ) -> Result<PcapCap, String> {
        Self::install_sides(spec, profile, client, server, rx)
    }

    /// [`TraceRig::install`] for sides on ports of two types (the DUT's client and
    /// server ports: AF_PACKET and AF_XDP in any mix).
    pub fn install_sides<C: Port, S: Port>(
        spec: &TraceSpec,
        profile: &Profile,
        client: Option<&mut Side<C>>,
        server: Option<&mut Side<S>>,
        rx: bool,
    ) -> Result<PcapCap, String> {
        let templates = spec.filter.templates(profile)?;
        let watch = (client.is_some() && server.is_some()).then(TraceWatch::default);
        let mut pcap = None;
        if let Some(s) = server {
            match &watch {
                Some(w) => s.node.tcp.set_tracer(Some(
                    FlowTracer::new(MAX_EVENTS_PER_HOST).with_watch(w.clone()),
                )),
                None => {
                    // Alone on a real port: a template term means the template's port.
                    let ports: Vec<u16> = profile
                        .templates
                        .iter()
                        .zip(&templates)
                        .filter(|(_, ok)| **ok)
                        .map(|(t, _)| t.port)
                        .collect();
                    let (t, p) = passive(spec, ports);
                    s.node.tcp.set_tracer(Some(t));
                    pcap = Some(p);
                }
            }
        }
        if let Some(c) = client {
            c.node
                .tcp
                .set_tracer(Some(FlowTracer::new(MAX_EVENTS_PER_HOST)));
            c.gen.trace = Some(FlowSelect {
                templates,
                filter: spec.filter.clone(),
                max: spec.flows,
                taken: spec.taken.clone(),
                watch,
                traced_templates: Vec::new(),
            });
        }
        let pcap = pcap.unwrap_or_else(|| PcapCap::new(usize::MAX));
        Ok(if rx { pcap.with_rx() } else { pcap })
    }

    /// As [`TraceRig::install`] for the two-thread run (`--split`): each side's thread
    /// lends its own capture to its turns (client, server); the server's learns the
    /// flows its host takes from the client's.
    pub fn install_split<P: Port>(
        spec: &TraceSpec,
        profile: &Profile,
        c: &mut Side<P>,
        s: &mut Side<P>,
    ) -> Result<(PcapCap, PcapCap), String> {
        let client_cap = Self::install(spec, profile, Some(&mut *c), Some(&mut *s), false)?;
        let watch = c
            .gen
            .trace
            .as_ref()
            .and_then(|f| f.watch.clone())
            .unwrap_or_default();
        let feed = TraceWatch::default();
        s.node.tcp.set_tracer(Some(
            FlowTracer::new(MAX_EVENTS_PER_HOST)
                .with_watch(watch)
                .with_announce(feed.clone()),
        ));
        Ok((client_cap, PcapCap::new(usize::MAX).with_feed(feed)))
    }

    /// The client side's part at the end: its host's tracer and the template of each
    /// traced flow.
    pub fn client_part<P: Port>(c: &mut Side<P>) -> Option<(FlowTracer, Vec<u16>)> {
        let tpls = c
            .gen
            .trace
            .take()
            .map(|s| s.traced_templates)
            .unwrap_or_default();
        c.node.tcp.take_tracer().map(|t| (t, tpls))
    }

    /// The worker's data at the end: the hosts' tracers taken out, server flows given
    /// the template of their client flow (same 4-tuple) or of their port.
    pub fn finish<P: Port>(
        pcap: PcapCap,
        profile: &Profile,
        worker: u32,
        client: Option<&mut Side<P>>,
        server: Option<&mut Side<P>>,
    ) -> TraceData {
        Self::finish_sides(pcap, profile, worker, client, server)
    }

    /// [`TraceRig::finish`] for sides on ports of two types (see [`Self::install_sides`]).
    pub fn finish_sides<C: Port, S: Port>(
        pcap: PcapCap,
        profile: &Profile,
        worker: u32,
        client: Option<&mut Side<C>>,
        server: Option<&mut Side<S>>,
    ) -> TraceData {
        Self::finish_parts(
            pcap.records_all(),
            profile,
            worker,
            client.and_then(Self::client_part),
            server.and_then(|s| s.node.tcp.take_tracer()),
        )
    }

    /// [`TraceRig::finish`] from the parts: the frames, the client's part
    /// ([`TraceRig::client_part`]) and the server host's tracer.
    pub fn finish_parts(
        frames: Vec<PcapRecord>,
        profile: &Profile,
        worker: u32,
        client: Option<(FlowTracer, Vec<u16>)>,
        server: Option<FlowTracer>,
    ) -> TraceData {
        let mut d = TraceData::default();
        if let Some((t, tpls)) = client {
            add_host(&mut d, t, TraceSide::Client, worker, |f| {
                tpls.get(f.id as usize).copied()
            });
        }
        if let Some(t) = server {
            // Matched by full addresses: each host names IPv6 addresses by ids of its own.
            let clients: Vec<(IpAddr, u16, u16, u64, Option<u16>)> = d
                .flows
                .iter()
                .map(|f| {
                    let k = f.flow.key;
                    (
                        f.flow.local_addr(),
                        k.local_port,
                        k.remote_port,
                        f.flow.start_ns,
                        f.template,
                    )
                })
                .collect();
            add_host(&mut d, t, TraceSide::Server, worker, |f| {
                let k = f.key;
                let remote = f.remote_addr();
                clients
                    .iter()
                    .filter(|c| {
                        (c.0, c.1, c.2) == (remote, k.remote_port, k.local_port)
                            && c.3 <= f.start_ns
                    })
                    .max_by_key(|c| c.3)
                    .and_then(|c| c.4)
                    .or_else(|| {
                        profile
                            .templates
                            .iter()
                            .position(|t| t.port == k.local_port)
                            .map(|i| i as u16)
                    })
            });
        }
        d.frames = frames;
        d
    }
}

/// The tracer of a server alone on a real port (`squall run --mode server`, `squall
/// serve`): it takes passive flows to `ports` that match the spec's filter, up to N over
/// the run, and names each to the returned capture (which records received frames).
pub fn passive(spec: &TraceSpec, ports: Vec<u16>) -> (FlowTracer, PcapCap) {
    let feed = TraceWatch::default();
    let (f, taken, max) = (spec.filter.clone(), spec.taken.clone(), spec.flows);
    let t = FlowTracer::new(MAX_EVENTS_PER_HOST)
        .with_select(
            max,
            Box::new(move |client, cport, server, sport| {
                ports.contains(&sport)
                    && f.matches(client, cport, server, sport)
                    && taken.load(Ordering::Relaxed) < max
                    && taken.fetch_add(1, Ordering::Relaxed) < max
            }),
        )
        .with_announce(feed.clone());
    (t, PcapCap::new(usize::MAX).with_rx().with_feed(feed))
}

/// A server host's traced flows (no template: `squall serve`) and the capture's frames.
pub fn passive_data(pcap: PcapCap, host: &mut squall_tcp::TcpHost, worker: u32) -> TraceData {
    let mut d = TraceData::default();
    if let Some(t) = host.take_tracer() {
        add_host(&mut d, t, TraceSide::Server, worker, |_| None);
    }
    d.frames = pcap.records_all();
    d
}

/// Appends a host's traced flows with their events.
fn add_host(
    d: &mut TraceData,
    t: FlowTracer,
    side: TraceSide,
    worker: u32,
    template: impl Fn(&TracedFlow) -> Option<u16>,
) {
    let base = d.flows.len();
    for f in t.flows() {
        d.flows.push(FlowTimeline {
            side,
            worker,
            template: template(f),
            flow: *f,
            events: Vec::new(),
        });
    }
    for e in t.events() {
        if let Some(f) = d.flows.get_mut(base + e.flow as usize) {
            f.events.push(*e);
        }
    }
    d.dropped_events += t.dropped();
}
