//! The examples shown by `--help` of each command, and `squall man` (clap_mangen).

use std::path::Path;

pub const MAIN: &str = "\
Examples:
  squall run examples/w1-astf-http.json --duration 10 --mult 20000
  squall run my.py -t size=4096 --json out.json --assert 'errors == 0'
  squall report out.json -o report.html
  squall validate my-profile.json
  squall serve --root www --listen 198.18.48.1:80 --iface afpacket:eth1 --peer-ip 198.18.0.2
  squall daemon --listen 127.0.0.1:4501 --metrics 127.0.0.1:9464
  squall completions bash > /etc/bash_completion.d/squall

Manual: docs/USAGE.md (options), docs/OPERATING.md (screens, metrics, CI), docs/PROFILE.md.";

pub const RUN: &str = "\
Examples:
  # Both sides in this process over the memory wire, 10 s at 20,000 CPS (W1 x 20000):
  squall run examples/w1-astf-http.json --duration 10 --mult 20000
  # 4 cores, results with the per-second series, a Prometheus endpoint while it runs:
  squall run examples/w1-astf-http.json --cores 4 --json out.json --metrics 127.0.0.1:9464
  # A CI gate: leave 5 s of ramp-up and 5 s of tail out, fail on thresholds (exit 1):
  squall run examples/w1-astf-http.json -d 60 -m 20000 --warmup 5 --cooldown 5 -q \\
      --assert 'errors == 0' --assert 'ttfb.p99 < 2ms' --assert 'cps >= 0.95 * target'
  # Reproducible: virtual clock, capture the first 10 flows:
  squall run examples/w1-astf-http.json --sim --pcap first.pcap
  # Trace 5 flows of template group `http` from 16.0.0.0/24 on a lossy wire: their pcap
  # and TCP timeline (states, RTT, cwnd, retransmissions and why) in trace/:
  squall run examples/w1-astf-http.json --impair loss=0.02 --trace trace --trace-flows 5 \\
      --trace-filter 'template=http,client=16.0.0.0/24'
  # Client side on a real interface (root), the server elsewhere:
  squall run examples/w1-astf-http.json --iface afpacket:eth1 --mode client

On a terminal a live view replaces the progress line (keys 1/2/3 switch screens, q stops).
Exit status: 0 clean, 1 errors/violated invariants/failed assertions, 2 bad profile or options.";

pub const SERVE: &str = "\
Examples:
  # Files under ./www and a fixed route on 198.18.48.1:80 over AF_PACKET (root):
  squall serve --root www --listen 198.18.48.1:80 --iface afpacket:eth1 --peer-ip 198.18.0.2 \\
      --route '/ping return 200 \"pong\"'
  # IPv6, and dual stack (the next hop resolved by neighbour discovery):
  squall serve --root www --listen '[2001:db8::1]:80' --iface afpacket:eth1 --peer-ip 2001:db8::2
  squall serve --root www --listen 198.18.48.1:80 --listen '[2001:db8::1]:80' \\
      --iface afxdp:eth1 --peer-ip 198.18.0.2 --cores 2
  # Two workers, a Prometheus endpoint, results with the per-second series:
  squall serve --root www --listen 198.18.48.1:80 --iface afpacket:eth1 --peer-ip 198.18.0.2 \\
      --cores 2 --metrics 127.0.0.1:9465 --json serve.json
  # A CI gate: serve 30 s, fail (exit 1) on thresholds; then draw the results:
  squall serve --root www --listen 198.18.48.1:80 --iface afpacket:eth1 --peer-ip 198.18.0.2 \\
      --duration 30 -q --assert 'errors == 0' --assert 'rps >= 1000' --json serve.json
  squall report serve.json -o serve.html

On a terminal a live view replaces the progress line (keys 1/2/3 switch screens, q stops
serving gracefully). The results line goes to stdout.
Exit status: 0 served, 1 failed (port, site) or failed assertions, 2 bad options.";

pub const BRIDGE: &str = "\
Examples:
  # 1 % loss, 5 ms +- 2 ms and a quarter of the frames reordered from eth1 to eth2; 1 % loss
  # and 2 ms back (root; both interfaces without addresses, promiscuous while it runs):
  squall bridge afpacket:eth1 afpacket:eth2 \\
      --impair loss=0.01,delay_us=5000,jitter_us=2000,reorder=0.25 \\
      --impair-back loss=0.01,delay_us=2000 --duration 60

Frames are copied through the in-memory wire's impairment (docs/USAGE.md, --impair), each
direction with its own settings and seed; addresses are left as they are. The counts of
each direction go to stdout when it stops (SIGINT/SIGTERM or --duration).
Exit status: 0 stopped, 1 a port failed, 2 bad options.";

pub const VALIDATE: &str = "\
Examples:
  squall validate examples/w1-astf-http.json
  squall validate my-profile.py -t size=1000

Exit status 2 with every error and its JSON path when the profile is invalid.";

pub const REPORT: &str = "\
Examples:
  squall run examples/w1-astf-http.json --json before.json
  squall report before.json -o report.html
  # Before/after a change of the device under test, side by side (B vs A in percent):
  squall report before.json after.json -o compare.html
  # PNG charts for docs (needs chromium):
  squall report before.json --png charts/";

pub const COMPLETIONS: &str = "\
Examples:
  squall completions bash > ~/.local/share/bash-completion/completions/squall
  squall completions zsh > ~/.zfunc/_squall      # with fpath+=(~/.zfunc) in ~/.zshrc
  squall completions fish > ~/.config/fish/completions/squall.fish";

pub const MAN: &str = "\
Examples:
  squall man | man -l -
  squall man --dir /usr/local/share/man/man1";

pub const DAEMON: &str = "\
Examples:
  squall daemon                                     # JSON-RPC on 127.0.0.1:4501
  squall daemon --unix /run/squall.sock --metrics 127.0.0.1:9464
  squall daemon --client-iface afpacket:eth1 --server-iface afpacket:eth2 \
                --client-gw 198.18.0.1 --server-gw 198.19.0.1   # runs through a DUT
  # From Python: squall.Client(\"127.0.0.1:4501\") (docs/API.md, docs/PYTHON.md)";

/// Writes the manual: the main page on stdout, or one page per command into `dir`.
pub fn man(cmd: clap::Command, dir: Option<&Path>) -> std::io::Result<()> {
    match dir {
        None => clap_mangen::Man::new(cmd).render(&mut std::io::stdout()),
        Some(d) => {
            std::fs::create_dir_all(d)?;
            clap_mangen::generate_to(cmd, d)
        }
    }
}
