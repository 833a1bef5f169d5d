//! Wire captures of the lab tests: `dumpcap` in a namespace, checked with tshark (no
//! malformed packet, no bad IPv4 or TCP checksum, no RST; IPv4 and IPv6 alike).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{ns, Proc};

/// A wire capture in a lab namespace (two `dumpcap`s, stopped by pid): every frame's
/// first 128 bytes (RSTs, malformed headers, IPv4 checksums), and the whole frames of the
/// flows matched by a capture filter (TCP checksums over the payload).
pub struct Capture {
    heads: PathBuf,
    full: PathBuf,
    procs: Vec<Proc>,
}

impl Capture {
    pub fn start(n: &str, ifname: &str, dir: &Path, full_filter: &str) -> Capture {
        let heads = dir.join("heads.pcap");
        let full = dir.join("full.pcap");
        let mut procs = Vec::new();
        for (file, snap, filter) in [(&heads, "128", ""), (&full, "0", full_filter)] {
            // pcap on stdout into a file the test opens (dumpcap may not be allowed to
            // create files itself).
            let mut a = vec!["dumpcap", "-q", "-P", "-i", ifname, "-s", snap, "-w", "-"];
            if !filter.is_empty() {
                a.extend_from_slice(&["-f", filter]);
            }
            let out = std::fs::File::create(file).expect("create capture file");
            procs.push(Proc(
                ns(n, &a)
                    .stdout(out)
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("start dumpcap"),
            ));
        }
        // dumpcap needs a moment before it captures.
        std::thread::sleep(Duration::from_millis(1000));
        Capture { heads, full, procs }
    }

    /// Stops the captures (SIGINT: dumpcap flushes) and checks them: frames seen, none
    /// malformed, no bad IPv4 or TCP checksum, no RST. Returns a summary line.
    pub fn stop_and_check(self) -> String {
        self.stop_and_check_allowing("")
    }

    /// [`Capture::stop_and_check`], except that RSTs matching the display filter
    /// `allowed` (e.g. those a client's kernel sends when the client stops with answers in
    /// flight: `tcp.dstport == 80`) are expected: counted in the summary, not failed on.
    pub fn stop_and_check_allowing(mut self, allowed: &str) -> String {
        // tshark's io,stat takes its filters comma-separated.
        assert!(!allowed.contains(','), "{allowed}");
        // No RST is expected without a filter (frame numbers start at 1).
        let expected = if allowed.is_empty() {
            "frame.number == 0"
        } else {
            allowed
        };
        for p in &mut self.procs {
            let _ = Command::new("kill")
                .args(["-INT", &p.0.id().to_string()])
                .status();
            let t0 = Instant::now();
            while p.0.try_wait().ok().flatten().is_none() && t0.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let heads = io_counts(
            &self.heads,
            &[
                "frame",
                "tcp",
                "_ws.malformed",
                "ip.checksum.status == 0",
                &format!("tcp.flags.reset == 1 && !({expected})"),
                &format!("tcp.flags.reset == 1 && ({expected})"),
            ],
        );
        let [frames, tcp, malformed, ip_bad, rst, rst_allowed] = heads[..] else {
            panic!("tshark io,stat: {heads:?}")
        };
        let full = io_counts(
            &self.full,
            &[
                "tcp",
                // A zero checksum sent as 0xffff (Linux does; RFC 1624 prefers 0x0000) is
                // the same value in ones' complement: tshark flags it `tcp.checksum.ffff`.
                "tcp.checksum.status == 1 || tcp.checksum.ffff",
                "(tcp.checksum.status == 0 && !tcp.checksum.ffff) || _ws.malformed",
            ],
        );
        let [full_tcp, tcp_good, tcp_bad] = full[..] else {
            panic!("tshark io,stat: {full:?}")
        };
        let line = format!(
            "tshark: {frames} frames ({tcp} TCP), {malformed} malformed, {ip_bad} bad IPv4 \
             checksums, {rst} RSTs{}; full-size subset: {full_tcp} TCP frames, {tcp_good} \
             good and {tcp_bad} bad TCP checksums",
            if allowed.is_empty() {
                String::new()
            } else {
                format!(" (and {rst_allowed} expected: {allowed})")
            }
        );
        assert!(tcp > 0 && full_tcp > 0, "nothing captured: {line}");
        assert_eq!(malformed, 0, "{line}");
        assert_eq!(ip_bad, 0, "{line}");
        assert_eq!(rst, 0, "unexpected RSTs: {line}");
        assert_eq!(tcp_bad, 0, "{line}");
        assert_eq!(
            tcp_good, full_tcp,
            "every TCP checksum verified good: {line}"
        );
        line
    }
}

/// Frames of pcap `file` matching each display filter, in one tshark pass (`io,stat`;
/// checksums verified; TCP sequence analysis and reassembly off: a retransmission is not
/// a malformed packet, and only per-frame facts are counted).
fn io_counts(file: &Path, filters: &[&str]) -> Vec<u64> {
    let out = Command::new("tshark")
        .args(["-n", "-q", "-r", file.to_str().unwrap()])
        .args([
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "tcp.check_checksum:TRUE",
        ])
        .args(["-o", "tcp.analyze_sequence_numbers:FALSE"])
        .args(["-o", "tcp.desegment_tcp_streams:FALSE"])
        .args(["-z", &format!("io,stat,0,{}", filters.join(","))])
        .stderr(Stdio::null())
        .output()
        .expect("run tshark");
    let text = String::from_utf8_lossy(&out.stdout);
    // The one interval row: `| 0.0 <> 12.3 | frames1 | bytes1 | frames2 | bytes2 | ...`.
    let row = text
        .lines()
        .find(|l| l.contains("<>"))
        .unwrap_or_else(|| panic!("tshark io,stat output: {text}"));
    row.split('|')
        .skip(2)
        .step_by(2)
        .filter_map(|c| c.trim().parse().ok())
        .collect()
}
