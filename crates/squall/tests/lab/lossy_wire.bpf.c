/*
 * The lab's lossy wire (tests/veth.rs, kernels without netem): an XDP program on the
 * receiving veth end that drops 1 frame in 100 of TCP from port 80, at random, before
 * anything on that side (the stack, AF_PACKET) sees it; the sender's stack sees nothing,
 * as with loss on a real link.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/tcp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

SEC("xdp")
int lossy_wire(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct tcphdr *tcp;

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->protocol != IPPROTO_TCP || ip->ihl != 5)
		return XDP_PASS;
	tcp = (void *)(ip + 1);
	if ((void *)(tcp + 1) > end || tcp->source != bpf_htons(80))
		return XDP_PASS;
	return bpf_get_prandom_u32() % 100 < 1 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
