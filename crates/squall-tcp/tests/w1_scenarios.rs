//! W1 scenario tests (issue 3): client and server hosts over an impaired in-memory wire on a
//! virtual clock, every byte verified, every flow accounted for. Flow counts are a
//! parameter: `SQUALL_W1_FLOWS` (default 2,000 per scenario under `cargo test`); the
//! `#[ignore]`d `*_100k` variants run the 100,000 flows (use `--release`). Every
//! scenario runs over IPv4 and over IPv6 (`_ipv6`).

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
    eprintln!(
        "DEBUG server_failed {:?} client_failed {:?}",
        &r.server_failed[..r.server_failed.len().min(5)],
        &r.client_failed[..r.client_failed.len().min(5)]
    );
    eprintln!("DEBUG client {:?}", r.client);
    eprintln!("DEBUG server {:?}", r.server);
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

fn run(fam: Family, name: &str, n: u32, imp: Impair, seed: u64) -> W1Result {
    let r = run_w1_over(fam, n, 200, imp, seed, w1_config());
    check(&format!("{name} ({fam:?})"), &r, false);
    r
}

/// Each scenario as two tests: over IPv4 (`name`) and over IPv6 (`name_ipv6`).
macro_rules! both_families {
    ($($v4:ident, $v6:ident => $body:ident;)*) => {
        $(
            #[test]
            fn $v4() {
                $body(Family::V4)
            }
            #[test]
            fn $v6() {
                $body(Family::V6)
            }
        )*
    };
}

both_families! {
    w1_no_impairment, w1_no_impairment_ipv6 => no_impairment;
    w1_loss_1pct, w1_loss_1pct_ipv6 => loss_1pct;
    w1_loss_5pct, w1_loss_5pct_ipv6 => loss_5pct;
    w1_loss_20pct, w1_loss_20pct_ipv6 => loss_20pct;
    w1_reordering, w1_reordering_ipv6 => reordering;
    w1_duplication, w1_duplication_ipv6 => duplication;
    w1_corruption, w1_corruption_ipv6 => corruption;
    w1_delay_10ms_jitter, w1_delay_10ms_jitter_ipv6 => delay_10ms_jitter;
    w1_initwnd_10_and_nagle, w1_initwnd_10_and_nagle_ipv6 => initwnd_10_and_nagle;
    w1_reproducible_from_seed, w1_reproducible_from_seed_ipv6 => reproducible_from_seed;
    w1_loss_5pct_with_timestamps_and_wscale, w1_loss_5pct_with_timestamps_and_wscale_ipv6 => loss_5pct_with_timestamps_and_wscale;
    w1_loss_5pct_with_sack_and_timestamps, w1_loss_5pct_with_sack_and_timestamps_ipv6 => loss_5pct_with_sack_and_timestamps;
    w1_loss_20pct_with_sack, w1_loss_20pct_with_sack_ipv6 => loss_20pct_with_sack;
    w1_chaos_all_impairments_all_option_sets, w1_chaos_all_impairments_all_option_sets_ipv6 => chaos_all_impairments_all_option_sets;
}

fn clean() -> Impair {
    Impair {
        delay_ns: BASE_DELAY,
        ..Impair::default()
    }
}

fn no_impairment(fam: Family) {
    let r = run(fam, "clean", flows(), clean(), 1);
    assert_eq!(r.client.tcps_sndrexmitpack + r.server.tcps_sndrexmitpack, 0);
    assert_eq!(r.client.tcps_connects, flows() as u64);
    assert_eq!(r.server.tcps_accepts, flows() as u64);
    assert_eq!(r.server.tcps_sndbyte, flows() as u64 * RESP_LEN as u64);
}

fn loss_1pct(fam: Family) {
    let r = run(
        fam,
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

fn loss_5pct(fam: Family) {
    let r = run(
        fam,
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

fn loss_20pct(fam: Family) {
    let r = run(
        fam,
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

fn reordering(fam: Family) {
    let r = run(
        fam,
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

fn duplication(fam: Family) {
    let r = run(
        fam,
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

fn corruption(fam: Family) {
    let r = run(
        fam,
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

fn delay_10ms_jitter(fam: Family) {
    run(
        fam,
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

fn initwnd_10_and_nagle(fam: Family) {
    let cfg = squall_tcp::TcpConfig {
        opts: squall_tcp::FlowOpts {
            init_cwnd: 10,
            nagle: true,
            ..squall_tcp::FlowOpts::default()
        },
        ..w1_config()
    };
    let r = run_w1_over(
        fam,
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

fn reproducible_from_seed(fam: Family) {
    let a = run_w1_over(
        fam,
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
    let b = run_w1_over(
        fam,
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

/// A full-size scenario as two ignored tests: over IPv4 (`$v4`) and over IPv6 (`$v6`).
macro_rules! full {
    ($v4:ident, $v6:ident, $imp:expr, $seed:expr) => {
        #[test]
        #[ignore = "100,000 flows: run with --release -- --ignored"]
        fn $v4() {
            run(Family::V4, stringify!($v4), 100_000, $imp, $seed);
        }
        #[test]
        #[ignore = "100,000 flows: run with --release -- --ignored"]
        fn $v6() {
            run(Family::V6, stringify!($v6), 100_000, $imp, $seed);
        }
    };
}
full!(
    w1_no_impairment_100k,
    w1_no_impairment_100k_ipv6,
    clean(),
    11
);
full!(
    w1_loss_1pct_100k,
    w1_loss_1pct_100k_ipv6,
    Impair {
        loss: 0.01,
        ..clean()
    },
    12
);
full!(
    w1_loss_5pct_100k,
    w1_loss_5pct_100k_ipv6,
    Impair {
        loss: 0.05,
        ..clean()
    },
    13
);
full!(
    w1_loss_20pct_100k,
    w1_loss_20pct_100k_ipv6,
    Impair {
        loss: 0.20,
        ..clean()
    },
    14
);
full!(
    w1_reordering_100k,
    w1_reordering_100k_ipv6,
    Impair {
        reorder: 0.05,
        reorder_extra_ns: 100_000,
        ..clean()
    },
    15
);
full!(
    w1_duplication_100k,
    w1_duplication_100k_ipv6,
    Impair {
        dup: 0.05,
        ..clean()
    },
    16
);
full!(
    w1_corruption_100k,
    w1_corruption_100k_ipv6,
    Impair {
        corrupt: 0.02,
        ..clean()
    },
    17
);
full!(
    w1_delay_10ms_jitter_100k,
    w1_delay_10ms_jitter_100k_ipv6,
    Impair {
        delay_ns: 10_000_000,
        jitter_ns: 2_000_000,
        ..Impair::default()
    },
    18
);

fn loss_5pct_with_timestamps_and_wscale(fam: Family) {
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
    let r = run_w1_over(
        fam,
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

fn loss_5pct_with_sack_and_timestamps(fam: Family) {
    let cfg = squall_tcp::TcpConfig {
        opts: squall_tcp::FlowOpts {
            sack: true,
            timestamps: true,
            ..squall_tcp::FlowOpts::default()
        },
        ..w1_config()
    };
    let r = run_w1_over(
        fam,
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

fn loss_20pct_with_sack(fam: Family) {
    let cfg = squall_tcp::TcpConfig {
        opts: squall_tcp::FlowOpts {
            sack: true,
            ..squall_tcp::FlowOpts::default()
        },
        ..w1_config()
    };
    let r = run_w1_over(
        fam,
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
fn chaos_all_impairments_all_option_sets(fam: Family) {
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
        let r = run_w1_over(fam, flows().min(400), 100, imp, 100 + k as u64, cfg);
        check(&format!("chaos-{k}"), &r, false);
    }
}

#[test]
#[ignore = "100,000 flows: run with --release -- --ignored"]
fn w1_loss_20pct_sack_ts_100k() {
    loss_20pct_sack_ts_100k(Family::V4)
}

#[test]
#[ignore = "100,000 flows: run with --release -- --ignored"]
fn w1_loss_20pct_sack_ts_100k_ipv6() {
    loss_20pct_sack_ts_100k(Family::V6)
}

fn loss_20pct_sack_ts_100k(fam: Family) {
    let cfg = squall_tcp::TcpConfig {
        opts: squall_tcp::FlowOpts {
            sack: true,
            timestamps: true,
            wscale: Some(2),
            ..squall_tcp::FlowOpts::default()
        },
        ..w1_config()
    };
    let r = run_w1_over(
        fam,
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
    check(&format!("loss20-sack-ts-100k ({fam:?})"), &r, false);
}
