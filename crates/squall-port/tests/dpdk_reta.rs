//! The DPDK port's RSS redirection table on a driver that takes one: DPDK's `net_null`
//! vdev (no NIC, no hugepages, no traffic: `no-rx=1`) has a 128-entry table it stores
//! and reads back through `rte_eth_dev_rss_reta_update` / `_query`, as a NIC's driver
//! does. With several queues the port programs the table round robin and says so
//! ([`Reta::Programmed`]); the table read back from the driver (at the start, into
//! `DeviceInfo::reta_table`, and again through `DpdkPort::reta`) is round robin, and
//! Squall's RSS-aware port choice (`rss::RssSteer`), which follows it, puts every hash on
//! the queue it names, for 2, 3 and 4 queues.
//! One queue: no RSS, no table programmed. One EAL per process, so this is one test.
//! Needs root and the `dpdk` feature.
#![cfg(feature = "dpdk")]

use squall_port::dpdk::{self, DpdkConfig, DpdkPort, Reta};
use squall_port::rss::{RssConfig, RssSteer};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn open(name: &str, queues: u16) -> Vec<DpdkPort> {
    dpdk::open(&DpdkConfig {
        device: Some(name.into()),
        queues,
        pool_frames: 1023,
        rx_pool_frames: 1023,
        rx_desc: 256,
        tx_desc: 256,
        ..DpdkConfig::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_redirection_table_is_programmed_round_robin_and_matches_the_steering() {
    if !is_root() {
        squall_port::lab::skipped("needs root (DPDK EAL)");
        return;
    }
    let args = "--no-huge --in-memory --no-pci --no-telemetry -m 256 -l 0 \
                --log-level=*:warning --vdev=net_null0,no-rx=1 --vdev=net_null1,no-rx=1 \
                --vdev=net_null2,no-rx=1 --vdev=net_null3,no-rx=1";
    dpdk::init(&dpdk::split_args(args).unwrap()).unwrap_or_else(|e| panic!("{e}"));

    for (dev, queues) in [("net_null0", 2u16), ("net_null1", 3), ("net_null2", 4)] {
        let ports = open(dev, queues);
        assert_eq!(ports.len(), usize::from(queues));
        let info = ports[0].info().clone();
        assert_eq!(info.driver, "net_null", "{info:?}");
        assert_ne!(info.rss_hf, 0, "{dev}: RSS hash types configured: {info:?}");
        assert_eq!(info.reta, Reta::Programmed, "{dev}: {info:?}");
        assert_eq!(info.reta_size, 128, "{dev}: the driver's table size");
        // Every queue's port reads the same device table, the one read at the start.
        let table = ports[0].reta().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(info.reta_table.as_ref(), Some(&table));
        assert_eq!(ports[1].reta().unwrap(), table);
        assert_eq!(table.len(), 128);
        for (i, &q) in table.iter().enumerate() {
            assert_eq!(usize::from(q), i % usize::from(queues), "{dev}: entry {i}");
        }
        // The steering the client's source-port choice uses, with the device's table
        // size, puts each hash on the queue the table names.
        let mut rss = RssConfig::symmetric(u32::from(queues));
        rss.reta_size = u32::from(info.reta_size);
        let assumed = RssSteer::new(&rss);
        rss.table = info.reta_table.clone();
        let steer = RssSteer::new(&rss);
        assert!(steer.follows_table() && !assumed.follows_table());
        let mut h = 0x9e37_79b9u32;
        for _ in 0..4096 {
            h ^= h << 13;
            h ^= h >> 17;
            h ^= h << 5;
            let q = table[h as usize % table.len()];
            assert_eq!(steer.queue_of_hash(h), u32::from(q), "hash {h:#x}");
            assert_eq!(assumed.queue_of_hash(h), u32::from(q), "hash {h:#x}");
        }
        // Queues spread evenly: the round robin over 128 entries.
        for q in 0..queues {
            let n = table.iter().filter(|&&e| e == q).count();
            assert!(n == 128 / usize::from(queues) || n == 128 / usize::from(queues) + 1);
        }
    }

    // One queue: no RSS configured and no table programmed.
    let one = open("net_null3", 1);
    let info = one[0].info();
    assert_eq!(info.rss_hf, 0, "{info:?}");
    assert_eq!(info.reta, Reta::DriverDefault, "{info:?}");
    assert_eq!(info.reta_table, None);
}
