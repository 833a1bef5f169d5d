//! smoltcp on squall-port's in-memory wire (`squall_port::mem::pair`): a `phy::Device`
//! over any [`Port`], so smoltcp and Squall run over the very same wire. Frames come from
//! the port's pools (no allocation per frame); received frames are released and sent
//! frames handed to `tx_burst` after each interface poll ([`PortDevice::flush`]).

use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::time::Instant;
use squall_port::mem::{pair, MemConfig, MemPort};
use squall_port::{FrameBuf, Port};

/// Frames fetched or allocated per port call.
const BURST: usize = 32;

/// A smoltcp Ethernet device over a squall-port [`Port`] (software checksums).
pub struct PortDevice<P: Port> {
    port: P,
    /// The current rx burst, reversed (next frame last).
    rx: Vec<P::Frame>,
    rx_done: Vec<P::Frame>,
    tx_free: Vec<P::Frame>,
    tx_out: Vec<P::Frame>,
    mtu: usize,
    /// Emulated checksum offload: smoltcp neither computes nor verifies checksums.
    pub offload: bool,
    /// Frames smoltcp wrote that did not fit a port frame (dropped, counted).
    pub oversize: u64,
}

impl<P: Port> PortDevice<P> {
    pub fn new(port: P) -> Self {
        let mtu = port.caps().mtu as usize + 14;
        PortDevice {
            port,
            rx: Vec::with_capacity(BURST),
            rx_done: Vec::with_capacity(BURST),
            tx_free: Vec::with_capacity(BURST),
            tx_out: Vec::with_capacity(4 * BURST),
            mtu,
            offload: false,
            oversize: 0,
        }
    }

    pub fn port(&self) -> &P {
        &self.port
    }

    /// Releases consumed rx frames and sends what smoltcp queued (what the ring does not
    /// take now stays queued, in order, for the next flush).
    pub fn flush(&mut self) {
        if !self.rx_done.is_empty() {
            self.port.release_all(&mut self.rx_done);
        }
        if !self.tx_out.is_empty() {
            self.port.tx_burst(&mut self.tx_out);
        }
    }

    /// Whether frames are waiting to be received (fetches a burst if needed).
    pub fn rx_pending(&mut self) -> bool {
        self.refill_rx();
        !self.rx.is_empty()
    }

    /// Frames queued by smoltcp and not yet accepted by the port.
    pub fn tx_backlog(&self) -> usize {
        self.tx_out.len()
    }

    fn refill_rx(&mut self) {
        if self.rx.is_empty() && self.port.rx_burst(&mut self.rx, BURST) > 1 {
            self.rx.reverse();
        }
    }
}

pub struct PortRx<'a, F> {
    frame: F,
    done: &'a mut Vec<F>,
}

pub struct PortTx<'a, P: Port> {
    port: &'a mut P,
    free: &'a mut Vec<P::Frame>,
    out: &'a mut Vec<P::Frame>,
    oversize: &'a mut u64,
}

impl<P: Port> phy::Device for PortDevice<P> {
    type RxToken<'a>
        = PortRx<'a, P::Frame>
    where
        Self: 'a;
    type TxToken<'a>
        = PortTx<'a, P>
    where
        Self: 'a;

    fn receive(&mut self, _t: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        self.refill_rx();
        // The burst is stored reversed, so `pop` takes frames in arrival order.
        let frame = self.rx.pop()?;
        Some((
            PortRx {
                frame,
                done: &mut self.rx_done,
            },
            PortTx {
                port: &mut self.port,
                free: &mut self.tx_free,
                out: &mut self.tx_out,
                oversize: &mut self.oversize,
            },
        ))
    }

    fn transmit(&mut self, _t: Instant) -> Option<Self::TxToken<'_>> {
        if self.tx_free.is_empty() && self.port.alloc_tx(&mut self.tx_free, BURST) == 0 {
            // Pool empty: push out what is queued so frames come back, then retry once.
            self.flush();
            if self.port.alloc_tx(&mut self.tx_free, BURST) == 0 {
                return None;
            }
        }
        Some(PortTx {
            port: &mut self.port,
            free: &mut self.tx_free,
            out: &mut self.tx_out,
            oversize: &mut self.oversize,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = self.mtu;
        if self.offload {
            caps.checksum = phy::ChecksumCapabilities::ignored();
        }
        caps
    }
}

impl<F: FrameBuf> phy::RxToken for PortRx<'_, F> {
    fn consume<R, G>(self, f: G) -> R
    where
        G: FnOnce(&[u8]) -> R,
    {
        let r = f(self.frame.data());
        self.done.push(self.frame);
        r
    }
}

impl<P: Port> phy::TxToken for PortTx<'_, P> {
    fn consume<R, G>(self, len: usize, f: G) -> R
    where
        G: FnOnce(&mut [u8]) -> R,
    {
        // `transmit` made sure a frame is free; should the pool be empty anyway, or the
        // frame too small, the packet is built in scratch memory and dropped (counted).
        let frame = self.free.pop().or_else(|| {
            let mut v = Vec::new();
            self.port.alloc_tx(&mut v, 1);
            v.pop()
        });
        if let Some(mut fr) = frame {
            if fr.set_len(len).is_ok() {
                let r = f(fr.data_mut());
                self.out.push(fr);
                if self.out.len() >= BURST {
                    self.port.tx_burst(self.out);
                }
                return r;
            }
            self.port.release(fr);
        }
        *self.oversize += 1;
        let mut scratch = vec![0u8; len];
        f(&mut scratch)
    }
}

/// Both ends of a squall-port mem wire as smoltcp devices (A = client, B = server).
pub struct PortWire {
    pub a: PortDevice<MemPort>,
    pub b: PortDevice<MemPort>,
}

impl PortWire {
    /// A wire for `conns` connections: no offload, no impairment, and a pool just large
    /// enough for the frames in flight (a burst of one segment per socket and direction,
    /// plus slack). The mem port recycles its whole pool before reusing a frame, so
    /// the pool is the cache working set: oversizing it makes every frame a cache miss.
    pub fn new(conns: usize) -> Result<Self, String> {
        let frames = (conns * 4 + 64).next_power_of_two().clamp(128, 16_384) as u32;
        let cfg = MemConfig {
            frames,
            ring_size: frames,
            ..MemConfig::default()
        };
        let (a, b) = pair(cfg).map_err(|e| e.to_string())?;
        Ok(PortWire {
            a: PortDevice::new(a),
            b: PortDevice::new(b),
        })
    }
}
