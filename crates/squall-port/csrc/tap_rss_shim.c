// SPDX-License-Identifier: Apache-2.0
/*
 * tap_rss_shim: loads the tap steering program (tap_rss.bpf.c) with libbpf, fills its
 * configuration and attaches it to a multi-queue tap with TUNSETSTEERINGEBPF
 * (crates/squall-port/src/tap_rss.rs). The tap is created (persistent) when it does not
 * exist, so a DPDK net_tap port started later joins it with the program in place; the
 * kernel keeps the program until the tap goes or another program replaces it.
 *
 * Every function returns 0 (or a count) or a negative errno.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_tun.h>

struct sq_tap_rss {
	struct bpf_object *obj;
	int stats_fd;
};

struct tap_rss_cfg {
	__u8 key[40];
	__u32 queues;
	__u32 reta_size;
};

int sq_tap_rss_attach(struct sq_tap_rss **out, const void *obj, unsigned long size,
		      const char *ifname, const unsigned char *key, unsigned queues,
		      unsigned reta_size)
{
	struct sq_tap_rss *p = calloc(1, sizeof(*p));
	struct bpf_program *prog;
	struct tap_rss_cfg c;
	struct ifreq ifr;
	__u32 zero = 0;
	int err, cfg_fd, prog_fd, fd = -1, existed;

	if (!p)
		return -ENOMEM;
	if (strlen(ifname) >= IFNAMSIZ) {
		err = -ENAMETOOLONG;
		goto fail;
	}
	p->obj = bpf_object__open_mem(obj, size, NULL);
	if (!p->obj) {
		err = -errno;
		goto fail;
	}
	err = bpf_object__load(p->obj);
	if (err)
		goto fail;
	prog = bpf_object__find_program_by_name(p->obj, "tap_rss");
	cfg_fd = bpf_object__find_map_fd_by_name(p->obj, "cfg");
	p->stats_fd = bpf_object__find_map_fd_by_name(p->obj, "stats");
	if (!prog || cfg_fd < 0 || p->stats_fd < 0) {
		err = -ENOENT;
		goto fail;
	}
	memset(&c, 0, sizeof(c));
	memcpy(c.key, key, sizeof(c.key));
	c.queues = queues;
	c.reta_size = reta_size;
	if (bpf_map_update_elem(cfg_fd, &zero, &c, BPF_ANY)) {
		err = -errno;
		goto fail;
	}

	existed = if_nametoindex(ifname) != 0;
	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		goto fail;
	}
	memset(&ifr, 0, sizeof(ifr));
	strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_MULTI_QUEUE;
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		err = -errno;
		goto fail;
	}
	prog_fd = bpf_program__fd(prog);
	if (ioctl(fd, TUNSETSTEERINGEBPF, &prog_fd) < 0) {
		err = -errno;
		goto fail;
	}
	/* A tap made here outlives this descriptor, for the port that joins it later. */
	if (!existed && ioctl(fd, TUNSETPERSIST, 1) < 0) {
		err = -errno;
		goto fail;
	}
	close(fd);
	*out = p;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	if (p->obj)
		bpf_object__close(p->obj);
	free(p);
	return err < 0 ? err : -EINVAL;
}

/* Frees the object (the tap keeps its own reference to the program). */
void sq_tap_rss_close(struct sq_tap_rss *p)
{
	if (!p)
		return;
	bpf_object__close(p->obj);
	free(p);
}

/* Counter i (0: 4-tuple hashes, 1: address-pair hashes, 2: queue 0 by default, 3: IPv6
 * hashes). */
int sq_tap_rss_stat(struct sq_tap_rss *p, unsigned i, unsigned long long *out)
{
	__u64 v = 0;

	if (bpf_map_lookup_elem(p->stats_fd, &i, &v))
		return -errno;
	*out = v;
	return 0;
}
