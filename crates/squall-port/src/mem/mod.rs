//! The in-memory wire: two [`MemPort`]s joined back to back ([`pair`]).
//!
//! Each side owns a pool of fixed-size frames (one allocation) and sends frames of its
//! pool (or frames it received, for echo/forwarding) as 32-byte descriptors (the frame
//! handle as the receiver gets it, plus a delivery time) over a lock-free SPSC ring to the
//! other side. A side that is done with a frame of the other side's pool pushes its index
//! onto a return ring, published once per burst. Nothing is allocated per frame. Both ends
//! are `Send`: use them from one thread (one loop polls both) or move each into its own
//! thread.
//!
//! The unimpaired path is built for bursts: one look at the shared ring indices per burst
//! (cached otherwise), ring slots read and written as slices, receive a copy of each
//! descriptor, counters summed in locals, free slots taken from and put back on the top of
//! a LIFO stack in bulk (reuse keeps few slots cache-hot). Send and release check every
//! frame for being of this wire without a branch; only bursts that hold a foreign frame
//! take a slower path to count it. Impairment costs nothing per frame when it is off: each
//! port knows at `pair` time whether its outgoing and incoming directions are impaired.
//!
//! With `MemConfig::enforce_mtu` the sending side drops (and counts) frames larger than
//! the MTU, as a real link would; off, the wire carries any frame that fits its buffers.
//!
//! Impairment ([`Impairment`]) is applied by the sending side per direction; the time it
//! needs (delay, jitter, rate limit, reorder timeout) is the port's time set with
//! `Port::set_time`, so a single-threaded simulation on a virtual clock is deterministic.
//! Delayed frames carry their delivery time; the receiver only takes frames whose time has
//! come, and `next_event_ns` gives the earliest pending time so a simulation can jump to it.
//! The sender's and the receiver's times must come from one clock (one virtual clock, or
//! monotonic clocks with the same origin) for delays to mean what they say.

mod config;
mod impair;
mod pool;

pub use config::{MemConfig, MemError};
pub use impair::{ImpairStats, Impairment};
pub use pool::MemFrame;

use crate::frame::{FrameBuf, Offload, OffloadFlags};
use crate::port::{Port, PortCaps, PortStats};
use crate::ring::{ring, Consumer, Producer};
use impair::ImpairState;
use pool::{FrameRaw, PoolMem, POOL_BIT};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Largest number of frames held back for reordering at once (more are not reordered).
const HELD_MAX: usize = 64;
/// Returns are published once this many are pending (and at every burst call).
const RETURN_BATCH: usize = 64;

/// The offload metadata a receiver sees: the rx checksum results if offload is emulated
/// ("bad" for a frame corrupted on the wire), nothing otherwise.
fn wire_offload(offload: bool, corrupted: bool) -> Offload {
    let flags = match (offload, corrupted) {
        (false, _) => OffloadFlags::NONE,
        (true, false) => OffloadFlags::RX_IP_CSUM_GOOD | OffloadFlags::RX_L4_CSUM_GOOD,
        (true, true) => OffloadFlags::RX_CSUM_BAD,
    };
    Offload {
        flags,
        ..Default::default()
    }
}

/// Appends one value per item of `src` to `out`, made by `make`, with one capacity check
/// (the bursts build frame handles this way).
#[inline(always)]
fn extend_map<S, T>(
    out: &mut Vec<T>,
    src: impl ExactSizeIterator<Item = S>,
    mut make: impl FnMut(S) -> T,
) {
    let n = src.len();
    out.reserve(n);
    let len = out.len();
    for (slot, s) in out.spare_capacity_mut()[..n].iter_mut().zip(src) {
        slot.write(make(s));
    }
    // SAFETY: `reserve` made room for `n` more and the loop initialised the `n` slots
    // after `len`: an `ExactSizeIterator` yields exactly `len()` items (a panic in
    // `make` leaves the length as it was; frame handles need no drop).
    unsafe { out.set_len(len + n) };
}

/// Starts loading the cache line at `p` (a hint; never faults).
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint that never faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Starts loading the cache line at `p` for writing (a hint; never faults).
#[inline(always)]
fn prefetch_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHW is a hint that never faults; CPUs without it execute it as a NOP
    // (Intel since Broadwell and every AMD64 CPU implement it).
    unsafe {
        core::arch::asm!("prefetchw [{0}]", in(reg) p, options(nostack, readonly, preserves_flags))
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Descriptor of a frame on a direction ring: the handle as the receiver gets it (the
/// rx offload results in place of the sender's tx requests) and when it may take it.
/// 32 bytes, two per cache line; receiving is a copy of `frame`.
#[derive(Clone, Copy, Debug)]
struct Desc {
    frame: FrameRaw,
    /// Time from which the receiver may take it (0 = at once).
    deliver_ns: u64,
}

const _: () = assert!(std::mem::size_of::<Desc>() == 32);

// SAFETY: a descriptor is a frame handle in transit from one port to the other (the
// sender gave up the slot when it pushed it); handles are `Send` for the reasons given
// at `MemFrame`.
unsafe impl Send for Desc {}

/// Where the two pools of a wire are: enough to check that a frame handle is one of their
/// slots and to turn a descriptor back into a handle (copied into locals by the bursts).
#[derive(Clone, Copy)]
struct PoolView {
    bases: [*mut u8; 2],
    /// Slots per pool (both pools have as many).
    frames: u32,
    frame_size: usize,
}

impl PoolView {
    /// Whether `f` is a slot of these pools (its pointer matches its index).
    ///
    /// The frame size need not be compared: a handle whose pointer is the start of one of
    /// our slots was made by one of these pools (live allocations do not overlap, and a
    /// pool's memory is never reused while a handle may point into it).
    #[inline(always)]
    fn owns(&self, f: &MemFrame) -> bool {
        let pool = (f.raw.idx >> 31) as usize;
        let slot = f.raw.idx & !POOL_BIT;
        // `&`, not `&&`: both are cheap and a branch-free check keeps burst loops tight.
        (slot < self.frames)
            & (self.bases[pool].wrapping_add(slot as usize * self.frame_size) == f.raw.buf)
    }

    /// Start of slot `slot` of pool `pool` (in bounds for the slots of the pool).
    #[inline(always)]
    fn slot_ptr(&self, pool: usize, slot: u32) -> *mut u8 {
        self.bases[pool].wrapping_add(slot as usize * self.frame_size)
    }
}

/// A frame held back to be overtaken.
#[derive(Clone, Copy)]
struct Held {
    desc: Desc,
    countdown: u32,
    since: u64,
}

/// One end of the in-memory wire.
pub struct MemPort {
    side: u32,
    pools: [Arc<PoolMem>; 2],
    view: PoolView,
    headroom: u16,
    /// Free slots of this side's pool: a LIFO stack (the most recently freed first).
    free: Vec<u32>,
    /// This side's slots coming back from the peer.
    returns_in: Consumer<u32>,
    /// The peer's slots going back to it.
    returns_out: Producer<u32>,
    returns_pending: usize,
    tx: Producer<Desc>,
    rx: Consumer<Desc>,
    impair: Option<Box<ImpairState>>,
    held: Vec<Held>,
    offload: bool,
    /// Offload metadata the receiver sees on an unimpaired frame.
    rx_offload: Offload,
    /// Whether frames coming in may carry a delivery time (the peer's outgoing
    /// direction is impaired); otherwise every descriptor is deliverable at once.
    rx_timed: bool,
    now: u64,
    caps: PortCaps,
    stats: PortStats,
    /// Frames of each pool handed to the user and not given back.
    user_held: [i64; 2],
    /// Frames refused because they did not belong to this wire.
    foreign: u64,
    /// Largest frame sent when the MTU is enforced (L2 header included; 0 = not enforced).
    max_frame: u32,
    /// Frames dropped for exceeding the MTU.
    oversized: u64,
}

// SAFETY: the raw pointers are bases of the two pools, kept alive by the `Arc`s in the
// same struct; every slot reachable from this port's state is owned by it (ring protocol).
unsafe impl Send for MemPort {}

/// Builds a wire: `(side A, side B)`.
pub fn pair(cfg: MemConfig) -> Result<(MemPort, MemPort), MemError> {
    if !(256..=16384).contains(&cfg.frame_size) {
        return Err(MemError::Config("frame_size"));
    }
    if cfg.headroom as u32 + 64 > cfg.frame_size {
        return Err(MemError::Config("headroom"));
    }
    if cfg.frames == 0 || cfg.frames > (1 << 24) {
        return Err(MemError::Config("frames"));
    }
    if cfg.ring_size < 2 || cfg.ring_size > (1 << 24) {
        return Err(MemError::Config("ring_size"));
    }
    if cfg.mtu as u32 + 18 > cfg.frame_size - cfg.headroom as u32 {
        return Err(MemError::Config("mtu"));
    }
    for imp in [&cfg.a_to_b, &cfg.b_to_a] {
        for p in [imp.loss, imp.duplicate, imp.reorder, imp.corrupt] {
            if !(0.0..=1.0).contains(&p) {
                return Err(MemError::Config("impairment probability"));
            }
        }
        if imp.reorder > 0.0 && imp.reorder_depth == 0 {
            return Err(MemError::Config("reorder_depth"));
        }
    }
    let fs = cfg.frame_size as usize;
    let pa = Arc::new(PoolMem::new(cfg.frames, fs).ok_or(MemError::NoMemory)?);
    let pb = Arc::new(PoolMem::new(cfg.frames, fs).ok_or(MemError::NoMemory)?);
    let (ab_tx, ab_rx) = ring::<Desc>(cfg.ring_size as usize);
    let (ba_tx, ba_rx) = ring::<Desc>(cfg.ring_size as usize);
    // Return rings hold every slot of a pool at once, so a push never fails.
    let (ret_a_tx, ret_a_rx) = ring::<u32>(2 * cfg.frames as usize);
    let (ret_b_tx, ret_b_rx) = ring::<u32>(2 * cfg.frames as usize);
    let offloads = if cfg.offload {
        OffloadFlags::RX_IP_CSUM_GOOD
            | OffloadFlags::RX_L4_CSUM_GOOD
            | OffloadFlags::RX_CSUM_BAD
            | OffloadFlags::TX_IP_CSUM
            | OffloadFlags::TX_TCP_CSUM
            | OffloadFlags::TX_UDP_CSUM
    } else {
        OffloadFlags::NONE
    };
    let caps = |mac| PortCaps {
        mac,
        mtu: cfg.mtu,
        max_frame: (cfg.frame_size - cfg.headroom as u32) as u16,
        headroom: cfg.headroom,
        offloads,
    };
    let impair = |imp: &Impairment| {
        if imp.is_active() {
            Some(Box::new(ImpairState::new(imp.clone())))
        } else {
            None
        }
    };
    let make = |side: u32,
                pools: [Arc<PoolMem>; 2],
                returns_in,
                returns_out,
                tx,
                rx,
                imp: &Impairment,
                imp_in: &Impairment,
                mac| {
        let view = PoolView {
            bases: [pools[0].base(), pools[1].base()],
            frames: pools[0].frames,
            frame_size: fs,
        };
        MemPort {
            side,
            view,
            pools,
            headroom: cfg.headroom,
            free: {
                // Twice the pool: `release_all` reserves room for a whole burst before
                // it knows which frames are its own, and must not reallocate then.
                let mut free = Vec::with_capacity(2 * cfg.frames as usize);
                free.extend((0..cfg.frames).rev());
                free
            },
            returns_in,
            returns_out,
            returns_pending: 0,
            tx,
            rx,
            impair: impair(imp),
            held: Vec::with_capacity(HELD_MAX),
            offload: cfg.offload,
            rx_offload: wire_offload(cfg.offload, false),
            rx_timed: imp_in.is_active(),
            now: 0,
            caps: caps(mac),
            stats: PortStats::default(),
            user_held: [0; 2],
            foreign: 0,
            max_frame: if cfg.enforce_mtu {
                u32::from(cfg.mtu) + 14
            } else {
                0
            },
            oversized: 0,
        }
    };
    let a = make(
        0,
        [pa.clone(), pb.clone()],
        ret_a_rx,
        ret_b_tx,
        ab_tx,
        ba_rx,
        &cfg.a_to_b,
        &cfg.b_to_a,
        cfg.mac_a,
    );
    let b = make(
        1,
        [pa, pb],
        ret_b_rx,
        ret_a_tx,
        ba_tx,
        ab_rx,
        &cfg.b_to_a,
        &cfg.a_to_b,
        cfg.mac_b,
    );
    Ok((a, b))
}

impl MemPort {
    /// 0 for side A, 1 for side B.
    pub fn side(&self) -> u32 {
        self.side
    }

    /// Counters of this side's outgoing impairment (zero if none is configured).
    pub fn impair_stats(&self) -> ImpairStats {
        self.impair.as_ref().map(|s| s.stats).unwrap_or_default()
    }

    /// Frames refused because they were not from this wire's pools.
    pub fn foreign_frames(&self) -> u64 {
        self.foreign
    }

    /// Frames this side dropped on send for exceeding the MTU (`MemConfig::enforce_mtu`).
    pub fn oversized_frames(&self) -> u64 {
        self.oversized
    }

    /// Free frames of this side's pool available to `alloc_tx` right now (without the
    /// ones still on their way back from the peer).
    pub fn free_frames(&self) -> usize {
        self.free.len()
    }

    /// A handle on the wire's two pools, to check once both ports are gone that every
    /// frame was given back ([`PoolsWatch::frames_out`]): a pool with frames still out
    /// is kept (leaked) rather than freed under them.
    pub fn pools_watch(&self) -> PoolsWatch {
        PoolsWatch(self.pools.clone())
    }

    /// The time last given to `set_time`.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Whether `f` is a slot of this wire's pools (its pointer matches its index).
    #[inline]
    fn is_ours(&self, f: &MemFrame) -> bool {
        self.view.owns(f)
    }

    /// Gives a slot back to its owner (own pool: free list; peer's: return ring).
    #[inline]
    fn release_idx(&mut self, idx: u32) {
        if (idx >> 31) == self.side {
            self.free.push(idx & !POOL_BIT);
        } else {
            if self.returns_out.push(idx & !POOL_BIT).is_err() {
                // Cannot happen (ring holds the whole pool); never panic: lose the slot.
                self.stats.dropped += 1;
                return;
            }
            self.returns_pending += 1;
            if self.returns_pending >= RETURN_BATCH {
                self.flush_returns();
            }
        }
    }

    #[inline]
    fn flush_returns(&mut self) {
        if self.returns_pending > 0 {
            self.returns_out.publish();
            self.returns_pending = 0;
        }
    }

    /// Takes back this side's slots returned by the peer (in bulk, in return order, on
    /// top of the free stack). The free list never reallocates: it was built with room
    /// for the whole pool and a slot is in one place at a time.
    #[inline]
    fn refill(&mut self) {
        let (a, b) = self.returns_in.readable(usize::MAX);
        let n = a.len() + b.len();
        if n > 0 {
            self.free.extend_from_slice(a);
            self.free.extend_from_slice(b);
            self.returns_in.consume(n);
            self.returns_in.publish();
        }
    }

    #[inline]
    fn desc_of(&self, f: &MemFrame, corrupted: bool) -> Desc {
        Desc {
            frame: FrameRaw {
                offload: wire_offload(self.offload, corrupted),
                ..f.raw
            },
            deliver_ns: 0,
        }
    }

    /// Sends held (reordered) frames whose time is up.
    #[inline]
    fn pump_held(&mut self) {
        if !self.held.is_empty() {
            self.pump_held_slow();
        }
    }

    #[inline(never)]
    fn pump_held_slow(&mut self) {
        let Some(st) = self.impair.as_ref() else {
            return;
        };
        let timeout = st.cfg.reorder_timeout_ns;
        let mut i = 0;
        let mut sent = false;
        while i < self.held.len() {
            let h = self.held[i];
            if self.now >= h.since.saturating_add(timeout) {
                if self.tx.push(h.desc).is_err() {
                    break;
                }
                self.held.remove(i);
                sent = true;
            } else {
                i += 1;
            }
        }
        if sent {
            self.tx.publish();
        }
    }

    /// Drops (releases and counts) the frames of `frames` longer than the MTU allows,
    /// keeping the others in order; returns how many were dropped. Frames not of this
    /// wire are left for `tx_burst` to refuse.
    #[inline(never)]
    fn drop_oversized(&mut self, frames: &mut Vec<MemFrame>) -> usize {
        let before = frames.len();
        let max = self.max_frame;
        let mut dropped = Vec::new();
        frames.retain(|f| {
            let d = f.data();
            let vlan = d.len() >= 14 && d[12..14] == [0x81, 0x00];
            let limit = max + if vlan { 4 } else { 0 };
            let keep = u32::from(f.raw.len) <= limit || !self.view.owns(f);
            if !keep {
                dropped.push(f.raw.idx);
            }
            keep
        });
        for idx in dropped {
            self.user_held[(idx >> 31) as usize] -= 1;
            self.release_idx(idx);
        }
        let n = before - frames.len();
        self.oversized += n as u64;
        self.stats.dropped += n as u64;
        n
    }

    /// The impaired tx path. Returns the number of frames taken from the front.
    #[inline(never)]
    fn tx_impaired(&mut self, frames: &mut [MemFrame]) -> usize {
        let mut taken = 0;
        let Some(mut st) = self.impair.take() else {
            return 0;
        };
        for f in frames.iter_mut() {
            // Room for the frame, a copy and every held frame.
            let need = 2 + self.held.len();
            if self.tx.space() < need && self.tx.space_fresh() < need {
                break;
            }
            taken += 1;
            if !self.is_ours(f) {
                self.foreign += 1;
                self.stats.dropped += 1;
                continue;
            }
            self.user_held[(f.raw.idx >> 31) as usize] -= 1;
            self.stats.tx_frames += 1;
            self.stats.tx_bytes += f.raw.len as u64;
            if st.rng.chance(st.t_loss) {
                st.stats.lost += 1;
                self.stats.dropped += 1;
                self.release_idx(f.raw.idx);
                continue;
            }
            let mut corrupted = false;
            if f.raw.len > 0 && st.rng.chance(st.t_corrupt) {
                let bits = f.raw.len as u64 * 8;
                let data = f.data_mut();
                for _ in 0..st.cfg.corrupt_bits.max(1) {
                    let pos = st.rng.below(bits);
                    data[(pos / 8) as usize] ^= 1 << (pos % 8);
                }
                st.stats.corrupted += 1;
                corrupted = true;
            }
            // Rate limit: the frame leaves when the link is free, after its
            // serialisation time; too long a queue means tail drop.
            let cost = st.frame_cost_ns(f.raw.len as usize);
            let mut depart = self.now;
            if cost > 0 {
                let start = st.link_free_at.max(self.now);
                if start - self.now > st.cfg.queue_limit_ns {
                    st.stats.rate_dropped += 1;
                    self.stats.dropped += 1;
                    self.release_idx(f.raw.idx);
                    continue;
                }
                st.link_free_at = start.saturating_add(cost);
                depart = st.link_free_at;
            }
            let jitter = if st.cfg.jitter_ns > 0 {
                st.rng.below(st.cfg.jitter_ns.saturating_add(1))
            } else {
                0
            };
            let deliver = depart
                .saturating_add(st.cfg.delay_ns)
                .saturating_add(jitter);
            if deliver > self.now {
                st.stats.delayed += 1;
            }
            let mut desc = self.desc_of(f, corrupted);
            desc.deliver_ns = deliver;
            // Duplicate: a copy into a fresh slot of this side's pool.
            let mut dup = None;
            if st.rng.chance(st.t_dup) {
                if self.free.is_empty() {
                    self.refill();
                }
                match self.free.pop() {
                    Some(slot) => {
                        let src = f.data();
                        // SAFETY: `slot` is a free slot of this side's pool (owned by
                        // this port); off + len <= frame_size as for the original.
                        unsafe {
                            let dst = self.view.bases[self.side as usize]
                                .add(slot as usize * self.view.frame_size + f.raw.off as usize);
                            std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len());
                        }
                        dup = Some(Desc {
                            frame: FrameRaw {
                                buf: self.view.slot_ptr(self.side as usize, slot),
                                idx: slot | (self.side << 31),
                                ..desc.frame
                            },
                            ..desc
                        });
                        st.stats.duplicated += 1;
                    }
                    None => st.stats.dup_no_frame += 1,
                }
            }
            if self.held.len() < HELD_MAX && st.rng.chance(st.t_reorder) {
                let depth = st.cfg.reorder_depth.max(1) as u64;
                let countdown = 1 + st.rng.below(depth) as u32;
                self.held.push(Held {
                    desc,
                    countdown,
                    since: self.now,
                });
                st.stats.reordered += 1;
            } else {
                let _ = self.tx.push(desc);
                // Held frames count this frame as one that overtook them.
                let mut i = 0;
                while i < self.held.len() {
                    self.held[i].countdown -= 1;
                    if self.held[i].countdown == 0 {
                        let mut h = self.held.remove(i).desc;
                        h.deliver_ns = h.deliver_ns.max(deliver);
                        let _ = self.tx.push(h);
                    } else {
                        i += 1;
                    }
                }
            }
            if let Some(d) = dup {
                let _ = self.tx.push(d);
            }
        }
        self.impair = Some(st);
        self.tx.publish();
        taken
    }
}

impl Port for MemPort {
    type Frame = MemFrame;

    #[inline]
    fn rx_burst(&mut self, out: &mut Vec<MemFrame>, max: usize) -> usize {
        self.flush_returns();
        self.pump_held();
        let now = self.now;
        let (mut a, mut b) = self.rx.readable(max);
        if self.rx_timed {
            // Delivery times never decrease along the ring: take the ones that are due.
            let due_a = a.iter().take_while(|d| d.deliver_ns <= now).count();
            let due_b = if due_a == a.len() {
                b.iter().take_while(|d| d.deliver_ns <= now).count()
            } else {
                0
            };
            (a, b) = (&a[..due_a], &b[..due_b]);
        }
        let n = a.len() + b.len();
        if n == 0 {
            return 0;
        }
        let (mut bytes, mut from_b) = (0u64, 0usize);
        let mut frame = |d: &Desc| {
            let raw = d.frame;
            prefetch(raw.buf.wrapping_add(raw.off as usize));
            bytes += raw.len as u64;
            from_b += (raw.idx >> 31) as usize;
            MemFrame { raw }
        };
        extend_map(out, a.iter(), &mut frame);
        extend_map(out, b.iter(), &mut frame);
        self.rx.consume(n);
        self.rx.publish();
        self.stats.rx_bytes += bytes;
        self.stats.rx_frames += n as u64;
        self.user_held[0] += (n - from_b) as i64;
        self.user_held[1] += from_b as i64;
        n
    }

    #[inline]
    fn alloc_tx(&mut self, out: &mut Vec<MemFrame>, n: usize) -> usize {
        // Take returned slots first: they go on top of the LIFO free stack, so the slots
        // in use stay few and cache-hot instead of cycling through the whole pool.
        self.refill();
        let k = n.min(self.free.len());
        let start = self.free.len() - k;
        let side = self.side as usize;
        let (base, fs, headroom) = (self.view.bases[side], self.view.frame_size, self.headroom);
        let pool_bit = (side as u32) << 31;
        // The top of the stack first (as pops would give them).
        extend_map(out, self.free[start..].iter().rev(), |&slot| {
            let buf = base.wrapping_add(slot as usize * fs);
            prefetch_write(buf.wrapping_add(headroom as usize));
            MemFrame {
                raw: FrameRaw {
                    buf,
                    idx: slot | pool_bit,
                    off: headroom,
                    len: 0,
                    size: fs as u16,
                    offload: Offload::default(),
                },
            }
        });
        self.free.truncate(start);
        self.user_held[side] += k as i64;
        if k < n {
            self.stats.alloc_fail += (n - k) as u64;
        }
        k
    }

    #[inline]
    fn tx_burst(&mut self, frames: &mut Vec<MemFrame>) -> usize {
        self.flush_returns();
        let oversized = if self.max_frame != 0 {
            self.drop_oversized(frames)
        } else {
            0
        };
        if frames.is_empty() {
            self.pump_held();
            return oversized;
        }
        let taken = if self.impair.is_some() {
            self.pump_held();
            self.tx_impaired(frames)
        } else {
            if self.tx.space() < frames.len() {
                self.tx.space_fresh();
            }
            let (view, rx_offload) = (self.view, self.rx_offload);
            let (mut bytes, mut from_b) = (0u64, 0usize);
            let (k, sent) = self.tx.push_filtered(frames, |f| {
                bytes += f.raw.len as u64;
                from_b += (f.raw.idx >> 31) as usize;
                let d = Desc {
                    frame: FrameRaw {
                        offload: rx_offload,
                        ..f.raw
                    },
                    deliver_ns: 0,
                };
                (d, view.owns(f))
            });
            if sent < k {
                // Frames not of this wire (rare): they were counted above, take them out.
                for f in frames[..k].iter().filter(|f| !view.owns(f)) {
                    bytes -= f.raw.len as u64;
                    from_b -= (f.raw.idx >> 31) as usize;
                }
                let refused = (k - sent) as u64;
                self.foreign += refused;
                self.stats.dropped += refused;
            }
            self.stats.tx_bytes += bytes;
            self.stats.tx_frames += sent as u64;
            self.user_held[0] -= (sent - from_b) as i64;
            self.user_held[1] -= from_b as i64;
            if k > 0 {
                self.tx.publish();
            }
            k
        };
        self.stats.tx_full += (frames.len() - taken) as u64;
        if taken == frames.len() {
            frames.clear();
        } else {
            frames.drain(..taken);
        }
        taken + oversized
    }

    #[inline]
    fn release(&mut self, frame: MemFrame) {
        if !self.is_ours(&frame) {
            self.foreign += 1;
            return;
        }
        self.user_held[(frame.raw.idx >> 31) as usize] -= 1;
        self.release_idx(frame.raw.idx);
    }

    fn release_all(&mut self, frames: &mut Vec<MemFrame>) {
        // Own slots go on the free stack in order, the peer's onto the return ring (which
        // holds a whole pool: look at the consumer's position only if it seems short).
        let n = frames.len();
        if self.returns_out.space() < n {
            self.returns_out.space_fresh();
        }
        let (view, side) = (self.view, self.side);
        // Room for every frame on the free stack, so the loop writes without checks.
        self.free.reserve(n);
        let free_len = self.free.len();
        let spare = self.free.spare_capacity_mut()[..n].as_mut_ptr();
        let (mut freed, mut lost) = (0usize, 0usize);
        let mut ret = self.returns_out.writer();
        let room = ret.room();
        for f in frames.iter() {
            // Whose slot it is branches (bursts are mostly of one pool); whether it is
            // of this wire at all does not.
            let ours = view.owns(f) as usize;
            let slot = f.raw.idx & !POOL_BIT;
            if f.raw.idx >> 31 == side {
                // SAFETY: freed <= frames looked at so far < n: inside the `n` spare
                // slots (a measured hot spot: no bounds check per frame).
                unsafe { (*spare.add(freed)).write(slot) };
                freed += ours;
            } else if !ret.put(slot, ours != 0) {
                // Cannot happen (the ring holds a whole pool); never panic: the slot is
                // lost and counted.
                lost += ours;
            }
        }
        let returned = room - ret.room();
        drop(ret);
        let peer = returned + lost;
        // SAFETY: `reserve` made room for `n` more and the loop initialised the first
        // `freed` (<= n) slots after `free_len`.
        unsafe { self.free.set_len(free_len + freed) };
        self.stats.dropped += lost as u64;
        self.foreign += (n - freed - peer) as u64;
        self.user_held[side as usize] -= freed as i64;
        self.user_held[1 - side as usize] -= peer as i64;
        self.returns_pending += returned;
        frames.clear();
        self.flush_returns();
    }

    fn caps(&self) -> PortCaps {
        self.caps
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn set_time(&mut self, now_ns: u64) {
        self.now = now_ns;
        self.pump_held();
    }

    fn next_event_ns(&self) -> Option<u64> {
        let rx = self.rx.peek_shared().map(|d| d.deliver_ns.max(self.now));
        let held = self.impair.as_ref().and_then(|st| {
            self.held
                .iter()
                .map(|h| h.since.saturating_add(st.cfg.reorder_timeout_ns))
                .min()
        });
        match (rx, held) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The two pools of a wire, kept alive for a look after its ports are gone.
pub struct PoolsWatch([Arc<PoolMem>; 2]);

impl PoolsWatch {
    /// Frames handed to the users of the wire's ports and never given back, counted when
    /// the ports were dropped (0 once both are gone and every frame came back: the
    /// pools are then freed with the last handle).
    pub fn frames_out(&self) -> i64 {
        self.0.iter().map(|p| p.held.load(Ordering::Acquire)).sum()
    }
}

impl Drop for MemPort {
    fn drop(&mut self) {
        for (p, held) in self.user_held.iter().enumerate() {
            self.pools[p].held.fetch_add(*held, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests;
