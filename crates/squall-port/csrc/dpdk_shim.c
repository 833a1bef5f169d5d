/*
 * squall-port's DPDK shim (built only with the `dpdk` cargo feature): non-inline wrappers
 * around the parts of DPDK 22.11 that Rust calls. Most of DPDK's fast path
 * (rte_eth_rx_burst, rte_eth_tx_burst, rte_pktmbuf_alloc_bulk, rte_pktmbuf_free) is
 * static inline in the headers, so it cannot be linked to directly; these wrappers are
 * the one place where Rust meets DPDK (src/dpdk/ffi.rs declares them).
 *
 * The Rust side reads and writes a few rte_mbuf fields directly (no call per access);
 * the static assertions below pin the layout and flag values it assumes, so a DPDK whose
 * mbuf differs fails to build instead of corrupting memory.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <rte_config.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

/* The rte_mbuf fields src/dpdk/mod.rs touches (offsets in bytes). */
_Static_assert(offsetof(struct rte_mbuf, buf_addr) == 0, "rte_mbuf.buf_addr");
_Static_assert(offsetof(struct rte_mbuf, data_off) == 16, "rte_mbuf.data_off");
_Static_assert(offsetof(struct rte_mbuf, nb_segs) == 20, "rte_mbuf.nb_segs");
_Static_assert(offsetof(struct rte_mbuf, ol_flags) == 24, "rte_mbuf.ol_flags");
_Static_assert(offsetof(struct rte_mbuf, pkt_len) == 36, "rte_mbuf.pkt_len");
_Static_assert(offsetof(struct rte_mbuf, data_len) == 40, "rte_mbuf.data_len");
_Static_assert(offsetof(struct rte_mbuf, buf_len) == 54, "rte_mbuf.buf_len");
_Static_assert(offsetof(struct rte_mbuf, pool) == 56, "rte_mbuf.pool");
_Static_assert(offsetof(struct rte_mbuf, next) == 64, "rte_mbuf.next");
_Static_assert(offsetof(struct rte_mbuf, tx_offload) == 72, "rte_mbuf.tx_offload");
_Static_assert(sizeof(((struct rte_mbuf *)0)->data_off) == 2, "data_off is u16");
_Static_assert(sizeof(((struct rte_mbuf *)0)->data_len) == 2, "data_len is u16");
_Static_assert(sizeof(((struct rte_mbuf *)0)->buf_len) == 2, "buf_len is u16");
_Static_assert(sizeof(((struct rte_mbuf *)0)->pkt_len) == 4, "pkt_len is u32");
/* The offload flag values src/dpdk/mod.rs maps to OffloadFlags. */
_Static_assert(RTE_MBUF_F_RX_IP_CKSUM_BAD == (1ULL << 4), "RX_IP_CKSUM_BAD");
_Static_assert(RTE_MBUF_F_RX_IP_CKSUM_GOOD == (1ULL << 7), "RX_IP_CKSUM_GOOD");
_Static_assert(RTE_MBUF_F_RX_L4_CKSUM_BAD == (1ULL << 3), "RX_L4_CKSUM_BAD");
_Static_assert(RTE_MBUF_F_RX_L4_CKSUM_GOOD == (1ULL << 8), "RX_L4_CKSUM_GOOD");
_Static_assert(RTE_MBUF_F_TX_TCP_CKSUM == (1ULL << 52), "TX_TCP_CKSUM");
_Static_assert(RTE_MBUF_F_TX_UDP_CKSUM == (3ULL << 52), "TX_UDP_CKSUM");
_Static_assert(RTE_MBUF_F_TX_IP_CKSUM == (1ULL << 54), "TX_IP_CKSUM");
_Static_assert(RTE_MBUF_F_TX_IPV4 == (1ULL << 55), "TX_IPV4");
_Static_assert(RTE_MBUF_F_TX_IPV6 == (1ULL << 56), "TX_IPV6");
_Static_assert(RTE_MBUF_F_EXTERNAL == (1ULL << 61), "EXTERNAL");
_Static_assert(RTE_MBUF_F_INDIRECT == (1ULL << 62), "INDIRECT");
_Static_assert(RTE_ETH_TX_OFFLOAD_IPV4_CKSUM == (1ULL << 1), "TX_OFFLOAD_IPV4_CKSUM");
_Static_assert(RTE_ETH_TX_OFFLOAD_UDP_CKSUM == (1ULL << 2), "TX_OFFLOAD_UDP_CKSUM");
_Static_assert(RTE_ETH_TX_OFFLOAD_TCP_CKSUM == (1ULL << 3), "TX_OFFLOAD_TCP_CKSUM");
_Static_assert(RTE_ETH_RX_OFFLOAD_IPV4_CKSUM == (1ULL << 1), "RX_OFFLOAD_IPV4_CKSUM");
_Static_assert(RTE_ETH_RX_OFFLOAD_UDP_CKSUM == (1ULL << 2), "RX_OFFLOAD_UDP_CKSUM");
_Static_assert(RTE_ETH_RX_OFFLOAD_TCP_CKSUM == (1ULL << 3), "RX_OFFLOAD_TCP_CKSUM");
_Static_assert(RTE_ETH_RSS_IPV4 == (1ULL << 2), "RSS_IPV4");
_Static_assert(RTE_ETH_RSS_NONFRAG_IPV4_TCP == (1ULL << 4), "RSS_NONFRAG_IPV4_TCP");
_Static_assert(RTE_ETH_RSS_NONFRAG_IPV4_UDP == (1ULL << 5), "RSS_NONFRAG_IPV4_UDP");

int sq_eal_init(int argc, char **argv)
{
	int r = rte_eal_init(argc, argv);
	return r < 0 ? -rte_errno : r;
}

/* The EAL's runtime directory (/var/run/dpdk/PREFIX for root). */
const char *sq_runtime_dir(void)
{
	return rte_eal_get_runtime_dir();
}

const char *sq_strerror(int e)
{
	return rte_strerror(e);
}

uint16_t sq_port_count(void)
{
	return rte_eth_dev_count_avail();
}

/* The first probed port with an id >= `from`, or -1. */
int sq_port_next(uint16_t from)
{
	uint64_t p = rte_eth_find_next_owned_by(from, RTE_ETH_DEV_NO_OWNER);
	return p >= RTE_MAX_ETHPORTS ? -1 : (int)p;
}

/* The port named `name` (e.g. "net_memif0"), or -1. */
int sq_port_by_name(const char *name)
{
	uint16_t p;
	if (rte_eth_dev_get_port_by_name(name, &p) != 0)
		return -1;
	return p;
}

/* The name of port `port` into `buf` (NUL-terminated); 0 or a negative errno. */
int sq_port_name(uint16_t port, char *buf, size_t len)
{
	char name[RTE_ETH_NAME_MAX_LEN];
	int r = rte_eth_dev_get_name_by_port(port, name);
	if (r != 0)
		return r;
	snprintf(buf, len, "%s", name);
	return 0;
}

struct sq_dev_info {
	uint8_t mac[6];
	uint16_t mtu;
	uint16_t max_rx_queues;
	uint16_t max_tx_queues;
	uint16_t rx_desc_max;
	uint16_t tx_desc_max;
	uint64_t rx_offload_capa;
	uint64_t tx_offload_capa;
	uint64_t flow_type_rss_offloads;
	uint32_t max_rx_pktlen;
	uint8_t hash_key_size;
	int32_t socket;
	char driver[32];
	uint16_t reta_size;
};

int sq_dev_info(uint16_t port, struct sq_dev_info *out)
{
	struct rte_eth_dev_info di;
	struct rte_ether_addr mac;
	uint16_t mtu = 1500;
	int r;

	memset(out, 0, sizeof(*out));
	r = rte_eth_dev_info_get(port, &di);
	if (r != 0)
		return r;
	r = rte_eth_macaddr_get(port, &mac);
	if (r != 0)
		return r;
	memcpy(out->mac, mac.addr_bytes, 6);
	if (rte_eth_dev_get_mtu(port, &mtu) != 0)
		mtu = 1500;
	out->mtu = mtu;
	out->max_rx_queues = di.max_rx_queues;
	out->max_tx_queues = di.max_tx_queues;
	out->rx_desc_max = di.rx_desc_lim.nb_max;
	out->tx_desc_max = di.tx_desc_lim.nb_max;
	out->rx_offload_capa = di.rx_offload_capa;
	out->tx_offload_capa = di.tx_offload_capa;
	out->flow_type_rss_offloads = di.flow_type_rss_offloads;
	out->max_rx_pktlen = di.max_rx_pktlen;
	out->hash_key_size = di.hash_key_size;
	out->reta_size = di.reta_size;
	out->socket = rte_eth_dev_socket_id(port);
	snprintf(out->driver, sizeof(out->driver), "%s", di.driver_name ? di.driver_name : "?");
	return 0;
}

struct sq_dev_conf {
	uint16_t queues;
	uint16_t rx_desc;
	uint16_t tx_desc;
	uint8_t promisc;
	uint8_t rss_key_len;
	uint64_t rx_offloads;
	uint64_t tx_offloads;
	uint64_t rss_hf;
	const uint8_t *rss_key;
};

/*
 * Fills the RSS redirection table of `port` round robin (entry i -> queue i % queues),
 * the table Squall's RSS-aware port choice computes with, rather than trusting the driver
 * to have done so. The table size is read after configure (some drivers size it by the
 * queue count; *reta_size is set to it). Returns 1 when programmed, 0 when the driver has
 * no table to program (-ENOTSUP, or no reta_size), or a negative errno.
 */
static int program_reta(uint16_t port, uint16_t queues, uint16_t *reta_size)
{
	struct rte_eth_rss_reta_entry64 *reta;
	struct rte_eth_dev_info di;
	size_t groups;
	uint16_t i;
	int r;

	r = rte_eth_dev_info_get(port, &di);
	if (r != 0)
		return r;
	*reta_size = di.reta_size;
	if (di.reta_size == 0 || queues == 0)
		return 0;
	groups = (di.reta_size + RTE_ETH_RETA_GROUP_SIZE - 1) / RTE_ETH_RETA_GROUP_SIZE;
	reta = calloc(groups, sizeof(*reta));
	if (!reta)
		return -ENOMEM;
	for (i = 0; i < di.reta_size; i++) {
		reta[i / RTE_ETH_RETA_GROUP_SIZE].mask |= 1ULL << (i % RTE_ETH_RETA_GROUP_SIZE);
		reta[i / RTE_ETH_RETA_GROUP_SIZE].reta[i % RTE_ETH_RETA_GROUP_SIZE] = i % queues;
	}
	r = rte_eth_dev_rss_reta_update(port, reta, di.reta_size);
	free(reta);
	if (r == -ENOTSUP)
		return 0;
	return r == 0 ? 1 : r;
}

/*
 * Configures port `port` with `c->queues` rx/tx queue pairs (rx queue q takes its mbufs
 * from pools[q]) and starts it; with RSS, programs the redirection table round robin
 * (*reta: 1 programmed, 0 the driver has none to program, a negative errno when the
 * update failed: the port runs on with the driver's table, as without one; *reta_size:
 * the table's entries as the configured device reports them). Returns 0, or a negative
 * errno with *stage naming the call that failed.
 */
int sq_dev_start(uint16_t port, const struct sq_dev_conf *c, struct rte_mempool **pools,
		 const char **stage, int *reta, uint16_t *reta_size)
{
	struct rte_eth_conf conf;
	struct rte_eth_dev_info di;
	uint16_t nrx = c->rx_desc, ntx = c->tx_desc, q;
	int r;

	memset(&conf, 0, sizeof(conf));
	*stage = "rte_eth_dev_info_get";
	r = rte_eth_dev_info_get(port, &di);
	if (r != 0)
		return r;
	conf.rxmode.offloads = c->rx_offloads;
	conf.txmode.offloads = c->tx_offloads;
	if (c->rss_hf != 0) {
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_hf = c->rss_hf;
		conf.rx_adv_conf.rss_conf.rss_key = (uint8_t *)c->rss_key;
		conf.rx_adv_conf.rss_conf.rss_key_len = c->rss_key_len;
	}
	*stage = "rte_eth_dev_configure";
	r = rte_eth_dev_configure(port, c->queues, c->queues, &conf);
	if (r != 0)
		return r;
	/* From here a failure leaves a configured device: it is closed (not started, so
	 * nothing to stop) before the error goes back. */
	*stage = "rte_eth_dev_adjust_nb_rx_tx_desc";
	r = rte_eth_dev_adjust_nb_rx_tx_desc(port, &nrx, &ntx);
	if (r != 0)
		goto fail;
	for (q = 0; q < c->queues; q++) {
		struct rte_eth_rxconf rxc = di.default_rxconf;
		struct rte_eth_txconf txc = di.default_txconf;
		rxc.offloads = c->rx_offloads;
		txc.offloads = c->tx_offloads;
		*stage = "rte_eth_rx_queue_setup";
		r = rte_eth_rx_queue_setup(port, q, nrx, rte_eth_dev_socket_id(port), &rxc, pools[q]);
		if (r != 0)
			goto fail;
		*stage = "rte_eth_tx_queue_setup";
		r = rte_eth_tx_queue_setup(port, q, ntx, rte_eth_dev_socket_id(port), &txc);
		if (r != 0)
			goto fail;
	}
	*stage = "rte_eth_dev_start";
	r = rte_eth_dev_start(port);
	if (r != 0)
		goto fail;
	*reta_size = di.reta_size;
	*reta = c->rss_hf != 0 ? program_reta(port, c->queues, reta_size) : 0;
	if (c->promisc)
		(void)rte_eth_promiscuous_enable(port);
	return 0;
fail:
	(void)rte_eth_dev_close(port);
	return r;
}

void sq_dev_stop_close(uint16_t port)
{
	(void)rte_eth_dev_stop(port);
	(void)rte_eth_dev_close(port);
}

/*
 * Reads the RSS redirection table of `port` (`size` entries, the size the configured device
 * reports): out[i] = the queue of entry i. Returns 0, or a negative errno (-ENOTSUP for a
 * driver without a table to read).
 */
int sq_reta_query(uint16_t port, uint16_t *out, uint16_t size)
{
	struct rte_eth_rss_reta_entry64 *reta;
	size_t groups = ((size_t)size + RTE_ETH_RETA_GROUP_SIZE - 1) / RTE_ETH_RETA_GROUP_SIZE;
	uint16_t i;
	int r;

	if (size == 0)
		return -ENOTSUP;
	reta = calloc(groups, sizeof(*reta));
	if (!reta)
		return -ENOMEM;
	for (i = 0; i < size; i++)
		reta[i / RTE_ETH_RETA_GROUP_SIZE].mask |= 1ULL << (i % RTE_ETH_RETA_GROUP_SIZE);
	r = rte_eth_dev_rss_reta_query(port, reta, size);
	if (r == 0)
		for (i = 0; i < size; i++)
			out[i] = reta[i / RTE_ETH_RETA_GROUP_SIZE].reta[i % RTE_ETH_RETA_GROUP_SIZE];
	free(reta);
	return r;
}

/* Whether the link is up (1), down (0), or unknown (negative errno). */
int sq_link_up(uint16_t port)
{
	struct rte_eth_link l;
	int r = rte_eth_link_get_nowait(port, &l);
	if (r != 0)
		return r;
	return l.link_status == RTE_ETH_LINK_UP;
}

struct sq_dev_stats {
	uint64_t ipackets, opackets, ibytes, obytes, imissed, ierrors, oerrors, rx_nombuf;
};

int sq_dev_stats(uint16_t port, struct sq_dev_stats *out)
{
	struct rte_eth_stats s;
	int r = rte_eth_stats_get(port, &s);
	memset(out, 0, sizeof(*out));
	if (r != 0)
		return r;
	out->ipackets = s.ipackets;
	out->opackets = s.opackets;
	out->ibytes = s.ibytes;
	out->obytes = s.obytes;
	out->imissed = s.imissed;
	out->ierrors = s.ierrors;
	out->oerrors = s.oerrors;
	out->rx_nombuf = s.rx_nombuf;
	return 0;
}

struct rte_mempool *sq_pool_create(const char *name, unsigned n, unsigned cache,
				   uint16_t data_room, int socket)
{
	return rte_pktmbuf_pool_create(name, n, cache, 0, data_room, socket);
}

void sq_pool_free(struct rte_mempool *mp)
{
	rte_mempool_free(mp);
}

unsigned sq_pool_avail(const struct rte_mempool *mp)
{
	return rte_mempool_avail_count(mp);
}

/* Worker threads. A thread the EAL did not start has no lcore id, and a mempool keeps
 * its per-lcore caches by lcore id: such a thread bypasses them (every allocation and
 * free, the PMD's included, goes to the pool's shared ring, in FIFO order through the
 * whole pool, so every mbuf it gets is cold). Registering the thread gives it an id. */
unsigned sq_lcore_id(void)
{
	return rte_lcore_id();
}

/* 0, or -errno. */
int sq_thread_register(void)
{
	return rte_thread_register() == 0 ? 0 : -rte_errno;
}

void sq_thread_unregister(void)
{
	rte_thread_unregister();
}

/* Objects in lcore's cache of mp (0 for a pool without caches or no such lcore). */
unsigned sq_pool_cached(const struct rte_mempool *mp, unsigned lcore)
{
	if (mp->cache_size == 0 || lcore >= RTE_MAX_LCORE)
		return 0;
	return mp->local_cache[lcore].len;
}

/* The fast path. */
uint16_t sq_rx_burst(uint16_t port, uint16_t q, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_rx_burst(port, q, pkts, n);
}

uint16_t sq_tx_burst(uint16_t port, uint16_t q, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_tx_burst(port, q, pkts, n);
}

int sq_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **pkts, unsigned n)
{
	return rte_pktmbuf_alloc_bulk(mp, pkts, n);
}

struct rte_mbuf *sq_alloc(struct rte_mempool *mp)
{
	return rte_pktmbuf_alloc(mp);
}

void sq_free(struct rte_mbuf *m)
{
	rte_pktmbuf_free(m);
}

void sq_free_bulk(struct rte_mbuf **m, unsigned n)
{
	rte_pktmbuf_free_bulk(m, n);
}

/* DPDK's own packing of tx_offload (tests compare the Rust packing with it). */
uint64_t sq_tx_offload_pack(uint64_t l2, uint64_t l3)
{
	return rte_mbuf_tx_offload(l2, l3, 0, 0, 0, 0, 0);
}
