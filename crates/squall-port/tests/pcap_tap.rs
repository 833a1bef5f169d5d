//! Integration: capture one side of a mem wire to a pcap file, read it back, and (when
//! tshark is installed) check that tshark decodes it as Ethernet/IPv4/UDP without warnings.

use squall_port::mem::{pair, MemConfig};
use squall_port::pcap::{read_pcap, PcapWriter, Tap};
use squall_port::{FrameBuf, Port};
use std::process::Command;

fn csum(data: &[u8], init: u32) -> u16 {
    let mut s = init;
    for c in data.chunks(2) {
        s += u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Ethernet + IPv4 + UDP from 198.18.0.2:4000 to 198.18.0.1:<port> with a payload.
fn udp_frame(port: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x0b, 0x02, 0, 0, 0, 0, 0x0a, 0x08, 0x00];
    let total = 20 + 8 + payload.len();
    let mut ip = vec![
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        1,
        0x40,
        0,
        64,
        17,
        0,
        0,
    ];
    ip.extend_from_slice(&[198, 18, 0, 2, 198, 18, 0, 1]);
    let c = csum(&ip, 0);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let ulen = (8 + payload.len()) as u16;
    let mut udp = Vec::new();
    udp.extend_from_slice(&4000u16.to_be_bytes());
    udp.extend_from_slice(&port.to_be_bytes());
    udp.extend_from_slice(&ulen.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    let mut pseudo = 0u32;
    for w in [198u32 << 8 | 18, 2, 198 << 8 | 18, 1, 17, ulen as u32] {
        pseudo += w;
    }
    let c = csum(&udp, pseudo);
    udp[6..8].copy_from_slice(&(if c == 0 { 0xffff } else { c }).to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&udp);
    f
}

#[test]
fn capture_receiver_side_to_file() {
    let (mut a, b) = pair(MemConfig::default()).unwrap();
    let dir = std::env::temp_dir().join(format!("squall-port-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("b.pcap");
    let file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut b = Tap::new(b, Some(PcapWriter::new(file).unwrap()), None);
    let mut sent = Vec::new();
    for i in 0..10u16 {
        let bytes = udp_frame(7000 + i, format!("hello {i}").as_bytes());
        let mut v = Vec::new();
        a.alloc_tx(&mut v, 1);
        v[0].fill(&bytes).unwrap();
        assert_eq!(a.tx_burst(&mut v), 1);
        sent.push(bytes);
        b.set_time(1_000_000_000 + u64::from(i) * 1000);
        let mut r = Vec::new();
        assert_eq!(b.rx_burst(&mut r, 8), 1);
        b.release_all(&mut r);
    }
    let (_, w, _) = b.into_parts();
    w.unwrap().into_inner().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let (lt, recs) = read_pcap(&bytes).unwrap();
    assert_eq!(lt, 1);
    assert_eq!(recs.len(), 10);
    for (i, r) in recs.iter().enumerate() {
        assert_eq!(r.data, sent[i]);
        assert_eq!(r.ts_ns, 1_000_000_000 + i as u64 * 1000);
    }
    // Optional independent check.
    let out = Command::new("tshark")
        .args(["-r"])
        .arg(&path)
        .args([
            "-o",
            "udp.check_checksum:TRUE",
            "-o",
            "ip.check_checksum:TRUE",
            "-T",
            "fields",
            "-e",
            "udp.dstport",
            "-e",
            "frame.time_epoch",
            "-e",
            "_ws.expert",
        ])
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 10, "tshark output: {text}");
            for (i, l) in lines.iter().enumerate() {
                let cols: Vec<&str> = l.split('\t').collect();
                assert_eq!(cols[0], (7000 + i).to_string(), "line {l}");
                assert!(cols[1].starts_with("1.000"), "time {l}");
                let expert = cols.get(2).copied().unwrap_or("");
                assert!(expert.is_empty(), "expert info: {l}");
            }
        }
        Ok(o) => panic!(
            "tshark failed on our pcap: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(_) => eprintln!("tshark not installed: skipping the tshark check"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}
