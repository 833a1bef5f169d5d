//! SYN cookies (RFC 4987 §3.6): stateless SYN-ACKs when the half-open table is full, and
//! the validation of the ACK that returns one.
//!
//! The cookie (our ISN) carries the MSS. When the peer offers timestamps, the other SYN
//! options travel in the low 6 bits of our TSval, which the peer echoes in the TSecr of
//! its ACK (Linux's `cookie_init_timestamp`): bits 0-3 the peer's window scale (15 =
//! none), bit 4 SACK-permitted. Without timestamps only the MSS is kept, and the
//! SYN-ACK offers nothing else (as Linux does).

use super::*;

/// MSS values encodable in a SYN cookie (3 bits).
const COOKIE_MSS: [u16; 8] = [216, 536, 1024, 1200, 1360, 1440, 1452, 1460];
/// Bits of the TSval holding the options (`cookie_tsval`).
const TS_BITS: u32 = 6;
/// Window-scale nibble meaning "no window scaling".
const TS_NO_WSCALE: u32 = 0xf;
/// SACK-permitted bit.
const TS_SACK: u32 = 1 << 4;

/// Our TSval for a cookie SYN-ACK: the clock with its low 6 bits replaced by `options`,
/// never ahead of the clock (so later TSvals stay monotonic for the peer's PAWS).
fn cookie_tsval(ts_now: u32, options: u32) -> u32 {
    let ts = ts_now & !((1 << TS_BITS) - 1) | options;
    if ts > ts_now {
        ts.wrapping_sub(1 << TS_BITS)
    } else {
        ts
    }
}

impl TcpHost {
    /// SYN cookie (RFC 4987 §3.6): 5 bits of a 64 s counter, 3 bits of MSS index and 24 bits
    /// of a keyed hash of the 4-tuple, the peer's ISN and the counter.
    pub(super) fn cookie(&self, key: &FlowKey, peer_isn: u32, t: u32, mss_idx: u32) -> u32 {
        let (la, ra) = self.hash_addrs(key);
        let m0 = (la as u64) << 32 | ra as u64;
        let m1 = ((key.local_port as u64) << 16 | key.remote_port as u64) << 32 | peer_isn as u64;
        let h = crate::isn::siphash24(
            self.isn_key.k0 ^ 0xc00c_1e00 ^ t as u64,
            self.isn_key.k1,
            m0,
            m1,
        ) as u32;
        (t & 31) << 27 | (mss_idx & 7) << 24 | (h & 0x00ff_ffff)
    }

    pub(super) fn cookie_clock(&self) -> u32 {
        (self.now / 64_000_000_000) as u32
    }

    pub(super) fn send_cookie<S: TxSink>(&mut self, seg: &Segment, key: FlowKey, tx: &mut S) {
        let o = pkt::parse_opts(seg.opts);
        let opt = self.port_opts(key.local_port);
        let fo = self.opts[opt as usize];
        let fo_mss = self.fo_mss(opt, &key);
        let peer_mss = if o.mss == 0 { 536 } else { o.mss };
        let idx = COOKIE_MSS
            .iter()
            .rposition(|&m| m <= peer_mss.min(fo_mss))
            .unwrap_or(0) as u32;
        let c = self.cookie(&key, seg.seq, self.cookie_clock(), idx);
        let m = fo_mss;
        // Same layout as `send_syn`: MSS, window scale, timestamps, SACK-permitted.
        let mut opts = [0u8; 24];
        opts[..4].copy_from_slice(&[2, 4, (m >> 8) as u8, m as u8]);
        let mut olen = 4;
        if let (Some((peer_tsval, _)), true) = (o.ts, fo.timestamps) {
            let mut bits = TS_NO_WSCALE;
            if let (Some(peer), Some(ours)) = (o.wscale, fo.wscale) {
                bits = peer.min(14) as u32;
                opts[4..8].copy_from_slice(&[1, 3, 3, ours.min(14)]);
                olen = 8;
            }
            let sack = o.sack_ok && fo.sack;
            if sack {
                bits |= TS_SACK;
            }
            let tsval = cookie_tsval(self.ts_now(), bits);
            opts[olen..olen + 4].copy_from_slice(&[1, 1, 8, 10]);
            opts[olen + 4..olen + 8].copy_from_slice(&tsval.to_be_bytes());
            opts[olen + 8..olen + 12].copy_from_slice(&peer_tsval.to_be_bytes());
            olen += 12;
            if sack {
                opts[olen..olen + 4].copy_from_slice(&[1, 1, 4, 2]);
                olen += 4;
            }
        }
        let wnd = fo.rcv_wnd.min(65_535) as u16;
        self.counters.tcps_sc_sendcookie += 1;
        self.counters.tcps_sndctrl += 1;
        self.write_seg(
            tx,
            &key,
            opt,
            c,
            seg.seq.wrapping_add(1),
            SYN | ACK,
            wnd,
            &opts[..olen],
            None,
        );
    }

    /// Validates the ACK of a SYN cookie; on success creates the flow (in SYN-RECEIVED,
    /// completed by the normal ACK processing) and returns its index.
    pub(super) fn accept_cookie(&mut self, seg: &Segment, key: FlowKey, h: u64) -> Option<u32> {
        let c = seg.ack.wrapping_sub(1);
        let peer_isn = seg.seq.wrapping_sub(1);
        let now_t = self.cookie_clock();
        let t = c >> 27;
        let age = (now_t & 31).wrapping_sub(t) & 31;
        if age > 1 {
            return None;
        }
        let idx = (c >> 24) & 7;
        if self.cookie(&key, peer_isn, now_t.wrapping_sub(age), idx) != c {
            return None;
        }
        let opt = self.port_opts(key.local_port);
        let fo = self.opts[opt as usize];
        // Options from the echoed TSval (module doc); an encoding we could not have sent
        // fails the cookie.
        let o = pkt::parse_opts(seg.opts);
        let ts = o.ts.filter(|_| fo.timestamps);
        let bits = ts.map_or(TS_NO_WSCALE, |(_, ecr)| ecr & ((1 << TS_BITS) - 1));
        let ws = bits & 0xf;
        let sack = bits & TS_SACK != 0;
        if (ws != TS_NO_WSCALE && (ws > 14 || fo.wscale.is_none())) || (sack && !fo.sack) {
            return None;
        }
        let i = self.alloc_flow(key, h, opt)?;
        self.counters.tcps_sc_recvcookie += 1;
        let now_ms = (self.now / 1_000_000) as u32;
        let mss = COOKIE_MSS[idx as usize]
            .min(self.fo_mss(opt, &key))
            .min(self.pmtu_mss(&key));
        let init = fo.init_cwnd;
        let t = &mut self.flows[i as usize];
        t.state = State::SynReceived;
        t.flags |= F_PASSIVE;
        t.rcv_nxt = seg.seq;
        t.snd_una = c;
        t.snd_nxt = c.wrapping_add(1);
        t.snd_max = c.wrapping_add(1);
        t.snd_sml = c as u16;
        t.mss = mss;
        t.cc = NewReno::new(init, mss as u32, c);
        t.snd_wl1 = peer_isn;
        t.snd_wl2 = c;
        if let (Some(ours), true) = (fo.wscale, ws != TS_NO_WSCALE) {
            t.flags |= F_WSCALE;
            t.set_wscales(ws as u8, ours);
        }
        if sack {
            t.flags |= F_SACK;
        }
        if let Some((tsval, _)) = ts {
            t.flags |= F_TS;
            t.ts_recent = tsval;
            t.ts_recent_age = now_ms;
            t.mss -= 12;
        }
        self.trace_passive(i);
        Some(i)
    }
}
