//! W1 scenario tests (issue 3): client and server hosts over an impaired in-memory wire on a
//! virtual clock, every byte verified, every flow accounted for. Flow counts are a
//! parameter: `SQUALL_W1_FLOWS` (default 2,000 per scenario under `cargo test`); the
//! `#[ignore]`d `*_100k` variants run the 100,000 flows (use `--release`).

mod common;
use common::*;

fn flows() -> u32 {
    std::env::var("SQUALL_W1_FLOWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

const BASE_DELAY: u64 = 20_000; // 20 us one way

fn check(name: &str, r: &W1Result, allow_fail: bool) {
    eprintln!(
        "{name}: flows={} client_ok={} server_ok={} client_failed={} server_failed={} hung={} virtual={:.3}s wire={:?}",
        r.flows,
        r.client_ok,
        r.server_ok,
        r.client_failed.len(),
        r.server_failed.len(),
        r.hung.len(),
        r.virtual_ns as f64 / 1e9,
        r.wire
    );
    eprintln!(
        "  client: connattempt={} connects={} sndpack={} rexmit={} rexmttimeo={} fastrexmt={} delack={} badsum={} oopack={} duppack={}",
        r.client.tcps_connattempt,
        r.client.tcps_connects,
        r.client.tcps_sndpack,
        r.client.tcps_sndrexmitpack,
        r.client.tcps_rexmttimeo,
        r.client.tcps_fastrexmt,
        r.client.tcps_delack,
        r.client.tcps_rcvbadsum,
        r.client.tcps_rcvoopack,
        r.client.tcps_rcvduppack
    );
    eprintln!(
        "  server: accepts={} sndpack={} sndbyte={} rexmit={} rexmttimeo={} fastrexmt={} badsum={} oopack={}",
        r.server.tcps_accepts,
        r.server.tcps_sndpack,
        r.server.tcps_sndbyte,
        r.server.tcps_sndrexmitpack,
        r.server.tcps_rexmttimeo,
        r.server.tcps_fastrexmt,
        r.server.tcps_rcvbadsum,
        r.server.tcps_rcvoopack
    );
    assert!(
        r.hung.is_empty(),
        "{name}: hung flows: {:?}",
        &r.hung[..r.hung.len().min(10)]
    );
    // Every flow ends: success or a counted, explained failure.
    assert_eq!(
        r.client_ok + r.client_failed.len() as u64,
        r.flows as u64,
        "{name}: client flows unaccounted"
    );
    if !allow_fail {
        assert!(
            r.client_failed.is_empty(),
            "{name}: client failures {:?}",
            &r.client_failed[..r.client_failed.len().min(10)]
        );
        assert_eq!(r.client_ok, r.flows as u64);
        assert!(
            r.server_failed.is_empty(),
            "{name}: server failures {:?}",
            &r.server_failed[..r.server_failed.len().min(10)]
        );
        assert_eq!(r.server_ok, r.flows as u64);
    }
    // Every response byte was received in sequence exactly once by the clients.
    assert_eq!(
        r.client.tcps_rcvbyte,
        r.client_ok * RESP_LEN as u64 + r.client_failed.iter().map(|f| f.2 as u64).sum::<u64>()
    );
}

fn run(name: &str, n: u32, imp: Impair, seed: u64) -> W1Result {
    let r = run_w1(n, 200, imp, seed, w1_config());
    check(name, &r, false);
    r
}

fn clean() -> Impair {
    Impair {
        delay_ns: BASE_DELAY,
        ..Impair::default()
    }
}

#[test]
fn w1_no_impairment() {
    let r = run("clean", flows(), clean(), 1);
    assert_eq!(r.client.tcps_sndrexmitpack + r.server.tcps_sndrexmitpack, 0);
    assert_eq!(r.client.tcps_connects, flows() as u64);
    assert_eq!(r.server.tcps_accepts, flows() as u64);
    assert_eq!(r.server.tcps_sndbyte, flows() as u64 * RESP_LEN as u64);
}

#[test]
fn w1_loss_1pct() {
    let r = run(
        "loss1",
        flows(),
        Impair {
            loss: 0.01,
            ..clean()
        },
        2,
    );
    assert!(r.wire.lost > 0);
}

#[test]
fn w1_loss_5pct() {
    let r = run(
        "loss5",
        flows(),
        Impair {
            loss: 0.05,
            ..clean()
        },
        3,
    );
    assert!(r.server.tcps_sndrexmitpack > 0);
}

#[test]
fn w1_loss_20pct() {
    let r = run(
        "loss20",
        flows(),
        Impair {
            loss: 0.20,
            ..clean()
        },
        4,
    );
    assert!(r.client.tcps_rexmttimeo + r.server.tcps_rexmttimeo > 0);
}

#[test]
fn w1_reordering() {
    let r = run(
        "reorder",
        flows(),
        Impair {
            reorder: 0.05,
            reorder_extra_ns: 100_000,
            ..clean()
        },
        5,
    );
    assert!(r.client.tcps_rcvoopack > 0);
}

#[test]
fn w1_duplication() {
    let r = run(
        "dup",
        flows(),
        Impair {
            dup: 0.05,
            ..clean()
        },
        6,
    );
    assert!(r.client.tcps_rcvduppack + r.server.tcps_rcvduppack > 0);
}

#[test]
fn w1_corruption() {
    let r = run(
        "corrupt",
        flows(),
        Impair {
            corrupt: 0.02,
            ..clean()
        },
        7,
    );
    // Corrupted frames are dropped by the checksums and counted (TCP or IPv4 header).
    let dropped = r.client.tcps_rcvbadsum
        + r.server.tcps_rcvbadsum
        + r.client.tcps_rcvnottcp
        + r.server.tcps_rcvnottcp
        + r.client.tcps_rcvbadoff
        + r.server.tcps_rcvbadoff
        + r.client.tcps_rcvshort
        + r.server.tcps_rcvshort;
    assert_eq!(
        dropped, r.wire.corrupted,
        "every corrupted frame is detected"
    );
    assert!(r.client.tcps_rcvbadsum + r.server.tcps_rcvbadsum > 0);
}

#[test]
fn w1_delay_10ms_jitter() {
    run(
        "delay",
        flows(),
        Impair {
            delay_ns: 10_000_000,
            jitter_ns: 2_000_000,
            ..Impair::default()
        },
        8,
    );
}

#[test]
fn w1_initwnd_10_and_nagle() {
    let cfg = squall_tcp::TcpConfig {
        opts: squall_tcp::FlowOpts {
            init_cwnd: 10,
            nagle: true,
            ..squall_tcp::FlowOpts::default()
        },
        ..w1_config()
    };
    let r = run_w1(
        flows().min(500),
        100,
        Impair {
            loss: 0.02,
            ..clean()
        },
        9,
        cfg,
    );
    check("iw10-nagle", &r, false);
}

#[test]
fn w1_reproducible_from_seed() {
    let a = run_w1(
        300,
        50,
        Impair {
            loss: 0.05,
            reorder: 0.02,
            reorder_extra_ns: 50_000,
            ..clean()
        },
        42,
        w1_config(),
    );
    let b = run_w1(
        300,
        50,
        Impair {
            loss: 0.05,
            reorder: 0.02,
            reorder_extra_ns: 50_000,
            ..clean()
        },
        42,
        w1_config(),
    );
    assert_eq!(a.client, b.client);
    assert_eq!(a.server, b.server);
    assert_eq!(a.virtual_ns, b.virtual_ns);
}

macro_rules! full {
    ($name:ident, $imp:expr, $seed:expr) => {
        #[test]
        #[ignore = "100,000 flows: run with --release -- --ignored"]
        fn $name() {
            run(stringify!($name), 100_000, $imp, $seed);
        }
    };
}
full!(w1_no_impairment_100k, clean(), 11);
full!(
    w1_loss_1pct_100k,
    Impair {
        loss: 0.01,
        ..clean()
    },
    12
);
full!(
    w1_loss_5pct_100k,
    Impair {
        loss: 0.05,
        ..clean()
    },
    13
);
full!(
    w1_loss_20pct_100k,
    Impair {
        loss: 0.20,
        ..clean()
    },
    14
);
full!(
    w1_reordering_100k,
    Impair {
        reorder: 0.05,
        reorder_extra_ns: 100_000,
        ..clean()
    },
    15
);
full!(
    w1_duplication_100k,
    Impair {
        dup: 0.05,
        ..clean()
    },
    16
);
full!(
    w1_corruption_100k,
    Impair {
        corrupt: 0.02,
        ..clean()
    },
    17
);
full!(
    w1_delay_10ms_jitter_100k,
    Impair {
        delay_ns: 10_000_000,
        jitter_ns: 2_000_000,
        ..Impair::default()
    },
    18
);

#[test]
fn w1_loss_5pct_with_timestamps_and_wscale() {
    let cfg = squall_tcp::TcpConfig {
        ooo_bytes: 131_072,
        opts: squall_tcp::FlowOpts {
            timestamps: true,
            wscale: Some(2),
            rcv_wnd: 131_072,
            ..squall_tcp::FlowOpts::default()
        },
        ..w1_config()
    };
    let r = run_w1(
        flows().min(1000),
        100,
        Impair {
            loss: 0.05,
            reorder: 0.02,
            reorder_extra_ns: 50_000,
            ..clean()
        },
        10,
        cfg,
    );
    check("ts-ws-loss5", &r, false);
    assert!(r.client.tcps_rttupdated > 0);
}

#[test]
fn w1_loss_5pct_with_sack_and_timestamps() {
    let cfg = squall_tcp::TcpConfig {
        opts: squall_tcp::FlowOpts {
            sack: true,
            timestamps: true,
            ..squall_tcp::FlowOpts::default()
        },
        ..w1_config()
    };
    let r = run_w1(
        flows().min(1000),
        100,
        Impair {
            loss: 0.05,
            reorder: 0.02,
            reorder_extra_ns: 50_000,
            ..clean()
        },
        19,
        cfg,
    );
    check("sack-ts-loss5", &r, false);
}

#[test]
fn w1_loss_20pct_with_sack() {
    let cfg = squall_tcp::TcpConfig {
        opts: squall_tcp::FlowOpts {
            sack: true,
            ..squall_tcp::FlowOpts::default()
        },
        ..w1_config()
    };
    let r = run_w1(
        flows().min(1000),
        100,
        Impair {
            loss: 0.20,
            ..clean()
        },
        20,
        cfg,
    );
    check("sack-loss20", &r, false);
}

/// Everything at once (loss, duplication, reordering, corruption, jitter) with each option
/// set: every flow still completes with verified bytes.
#[test]
fn w1_chaos_all_impairments_all_option_sets() {
    let imp = Impair {
        loss: 0.05,
        dup: 0.03,
        corrupt: 0.02,
        reorder: 0.05,
        reorder_extra_ns: 200_000,
        delay_ns: 100_000,
        jitter_ns: 50_000,
    };
    let sets = [
        squall_tcp::TcpConfig { ..w1_config() },
        squall_tcp::TcpConfig {
            ooo_bytes: 1 << 20,
            opts: squall_tcp::FlowOpts {
                sack: true,
                timestamps: true,
                wscale: Some(4),
                rcv_wnd: 1 << 20,
                ..squall_tcp::FlowOpts::default()
            },
            ..w1_config()
        },
        squall_tcp::TcpConfig {
            opts: squall_tcp::FlowOpts {
                sack: true,
                init_cwnd: 20,
                nagle: true,
                ..squall_tcp::FlowOpts::default()
            },
            ..w1_config()
        },
        squall_tcp::TcpConfig {
            opts: squall_tcp::FlowOpts {
                timestamps: true,
                init_cwnd: 1,
                delack_ns: 0,
                ..squall_tcp::FlowOpts::default()
            },
            ..w1_config()
        },
    ];
    for (k, cfg) in sets.into_iter().enumerate() {
        let r = run_w1(flows().min(400), 100, imp, 100 + k as u64, cfg);
        check(&format!("chaos-{k}"), &r, false);
    }
}

#[test]
#[ignore = "100,000 flows: run with --release -- --ignored"]
fn w1_loss_20pct_sack_ts_100k() {
    let cfg = squall_tcp::TcpConfig {
        opts: squall_tcp::FlowOpts {
            sack: true,
            timestamps: true,
            wscale: Some(2),
            ..squall_tcp::FlowOpts::default()
        },
        ..w1_config()
    };
    let r = run_w1(
        100_000,
        200,
        Impair {
            loss: 0.20,
            reorder: 0.02,
            reorder_extra_ns: 100_000,
            ..clean()
        },
        21,
        cfg,
    );
    check("loss20-sack-ts-100k", &r, false);
}
