// SPDX-License-Identifier: Apache-2.0
/*
 * tap_rss: receive-side scaling on a multi-queue tap, as a NIC does it. Attached to a tap
 * with TUNSETSTEERINGEBPF (the hook QEMU uses to give a virtio-net guest RSS), it picks
 * for each frame the kernel sends into the tap the queue a NIC with RSS would deliver it
 * on: the Toeplitz hash of the IPv4 or IPv6 4-tuple (TCP, UDP; the address pair for
 * other IPv4, IPv4 fragments and IPv6 whose first next header is not TCP or UDP) under a
 * 40-byte key, looked up in a round-robin indirection table (entry i -> queue i % queues,
 * the drivers' default). Other frames (ARP, ...) go to queue 0. So a DPDK net_tap port with several queues can be tested end to end against
 * Squall's RSS-aware source-port choice (crates/squall-port/src/rss.rs), which must land
 * every reply on its owning core.
 *
 * The hash is written bit by bit from the definition (each set input bit XORs in the
 * 32-bit window of the key starting at that bit), independently of rss.rs's byte tables.
 * `cfg` (one entry) holds the key, the queue count and the table size (a power of two),
 * filled by the loader (crates/squall-port/src/tap_rss.rs) before the program is
 * attached; `stats` counts [0] 4-tuple hashes, [1] address-pair hashes, [2] queue 0 by
 * default, [3] of the hashes those over IPv6.
 *
 * Built with clang -target bpf by crates/squall-port/build.rs, embedded in the library.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct tap_rss_cfg {
	__u8 key[40];
	__u32 queues;
	__u32 reta_size;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct tap_rss_cfg);
	__uint(max_entries, 1);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 4);
} stats SEC(".maps");

static __always_inline void count(__u32 i)
{
	__u64 *c = bpf_map_lookup_elem(&stats, &i);

	if (c)
		__sync_fetch_and_add(c, 1);
}

/* Bit `b` of the key, most significant bit of key[0] first. */
#define KEY_BIT(k, b) (((k)[(b) >> 3] >> (7 - ((b) & 7))) & 1)

/* The Toeplitz hash of `n` input bytes (8, 12, 32 or 36): each set input bit, counted
 * from the most significant bit of in[0], XORs in the 32 key bits that start at it. */
static __always_inline __u32 toeplitz(const __u8 *key, const __u8 *in, int n)
{
	__u32 window = ((__u32)key[0] << 24) | ((__u32)key[1] << 16) |
		       ((__u32)key[2] << 8) | key[3];
	__u32 h = 0;

#pragma unroll
	for (int i = 0; i < 36; i++) {
		if (i >= n)
			break;
#pragma unroll
		for (int j = 0; j < 8; j++) {
			if (in[i] & (0x80 >> j))
				h ^= window;
			window = (window << 1) | KEY_BIT(key, 32 + 8 * i + j);
		}
	}
	return h;
}

/* The queue of hash h. */
static __always_inline int queue_of(const struct tap_rss_cfg *c, __u32 h)
{
	return (h & (c->reta_size - 1)) % c->queues;
}

SEC("socket")
int tap_rss(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct tap_rss_cfg *c = bpf_map_lookup_elem(&cfg, &zero);
	__u8 in[36] = {};
	__u16 proto;
	__u8 vihl, ipproto;
	__u16 frag;
	int n = 8;

	if (!c || c->queues == 0 || c->reta_size == 0)
		return 0;
	if (bpf_skb_load_bytes(skb, 12, &proto, 2) < 0)
		goto other;
	if (proto == bpf_htons(ETH_P_IPV6)) {
		/* Next header at 6, the address pair at 8, the ports right after the fixed
		 * header when the next header is TCP or UDP. */
		if (bpf_skb_load_bytes(skb, ETH_HLEN + 6, &ipproto, 1) < 0 ||
		    bpf_skb_load_bytes(skb, ETH_HLEN + 8, in, 32) < 0)
			goto other;
		n = 32;
		if ((ipproto == IPPROTO_TCP || ipproto == IPPROTO_UDP) &&
		    bpf_skb_load_bytes(skb, ETH_HLEN + 40, in + 32, 4) == 0)
			n = 36;
		count(n == 36 ? 0 : 1);
		count(3);
		return queue_of(c, toeplitz(c->key, in, n));
	}
	if (proto != bpf_htons(ETH_P_IP))
		goto other;
	if (bpf_skb_load_bytes(skb, ETH_HLEN, &vihl, 1) < 0 ||
	    bpf_skb_load_bytes(skb, ETH_HLEN + 6, &frag, 2) < 0 ||
	    bpf_skb_load_bytes(skb, ETH_HLEN + 9, &ipproto, 1) < 0 ||
	    bpf_skb_load_bytes(skb, ETH_HLEN + 12, in, 8) < 0)
		goto other;
	/* Ports only for TCP/UDP and not a fragment (MF clear, offset 0). */
	if ((ipproto == IPPROTO_TCP || ipproto == IPPROTO_UDP) &&
	    (frag & bpf_htons(0x3fff)) == 0) {
		__u32 off = ETH_HLEN + (__u32)(vihl & 0x0f) * 4;

		if (off <= ETH_HLEN + 60 && bpf_skb_load_bytes(skb, off, in + 8, 4) == 0)
			n = 12;
	}
	count(n == 12 ? 0 : 1);
	return queue_of(c, toeplitz(c->key, in, n));
other:
	count(2);
	return 0;
}

char _license[] SEC("license") = "GPL";
