// SPDX-License-Identifier: Apache-2.0
/*
 * squall_xdp: the XDP program of Squall's AF_XDP port (crates/squall-port/src/afxdp).
 *
 * Steers to the AF_XDP socket of the receiving queue only the traffic Squall owns and
 * passes everything else to the kernel, so the machine stays reachable on the same NIC:
 *   - IPv4 (optionally behind one 802.1Q tag) whose destination address is in `owned`;
 *   - ARP whose target protocol address is in `owned` (requests for Squall's addresses and
 *     replies to Squall's own requests); ARP for the kernel's addresses stays the kernel's;
 *   - IPv6 whose destination address is in `owned6`, and neighbour solicitations (ICMPv6
 *     right after the fixed header, to a multicast group) whose target address is in
 *     `owned6`; solicitations for the kernel's addresses stay the kernel's.
 * `owned` / `owned6` are LPM tries of IPv4 / IPv6 prefixes filled by Squall before it
 * binds its sockets.
 * The redirect falls back to XDP_PASS when no socket is bound to the queue (a socket that
 * closed, or a stale program), so owned traffic then reaches the kernel instead of being
 * dropped. `stats` counts per CPU: [0] redirected, [1] passed, [2] too short to parse.
 *
 * Built with clang -target bpf by crates/squall-port/build.rs; the object is embedded in
 * the Rust library and loaded from memory (libbpf). The program name (squall_xdp) is how a
 * stale copy is recognised on the next start.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct owned_key {
	__u32 prefixlen;
	__u32 addr; /* network byte order */
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct owned_key);
	__type(value, __u8);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} owned SEC(".maps");

struct owned6_key {
	__u32 prefixlen;
	__u8 addr[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct owned6_key);
	__type(value, __u8);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} owned6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 64);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 3);
} stats SEC(".maps");

static __always_inline int count(__u32 i, int verdict)
{
	__u64 *c = bpf_map_lookup_elem(&stats, &i);
	if (c)
		*c += 1;
	return verdict;
}

static __always_inline int is_owned(__u32 addr)
{
	struct owned_key k = { .prefixlen = 32, .addr = addr };
	return bpf_map_lookup_elem(&owned, &k) != 0;
}

static __always_inline int is_owned6(const __u8 *a)
{
	struct owned6_key k = { .prefixlen = 128 };
	__builtin_memcpy(k.addr, a, 16);
	return bpf_map_lookup_elem(&owned6, &k) != 0;
}

SEC("xdp")
int squall_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 off = sizeof(*eth);
	__u16 proto;
	__u32 dst;

	if ((void *)(eth + 1) > end)
		return count(2, XDP_PASS);
	proto = eth->h_proto;
	if (proto == bpf_htons(ETH_P_8021Q)) {
		__u16 *inner = data + off + 2;
		if ((void *)(inner + 1) > end)
			return count(2, XDP_PASS);
		proto = *inner;
		off += 4;
	}
	if (proto == bpf_htons(ETH_P_IP)) {
		/* destination address: offset 16 of the IPv4 header */
		__u32 *p = data + off + 16;
		if ((void *)(p + 1) > end)
			return count(2, XDP_PASS);
		dst = *p;
	} else if (proto == bpf_htons(ETH_P_ARP)) {
		/* Ethernet/IPv4 ARP: target protocol address at offset 24 (not 4-aligned) */
		__u8 *p = data + off + 24;
		if ((void *)(p + 4) > end)
			return count(2, XDP_PASS);
		__builtin_memcpy(&dst, p, 4);
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		/* fixed header: next header at 6, destination address at 24 */
		__u8 *ip6 = data + off;
		__u8 *d6 = ip6 + 24;
		if ((void *)(ip6 + 40) > end)
			return count(2, XDP_PASS);
		if (d6[0] == 0xff) {
			/* multicast: only a neighbour solicitation (type 135) for an owned target */
			__u8 *icmp = ip6 + 40;
			if (ip6[6] != 58 || (void *)(icmp + 24) > end || icmp[0] != 135)
				return count(1, XDP_PASS);
			d6 = icmp + 8;
		}
		if (!is_owned6(d6))
			return count(1, XDP_PASS);
		count(0, 0);
		return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
	} else {
		return count(1, XDP_PASS);
	}
	if (!is_owned(dst))
		return count(1, XDP_PASS);
	count(0, 0);
	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "Dual BSD/GPL";
