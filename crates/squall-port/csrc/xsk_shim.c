// SPDX-License-Identifier: Apache-2.0
/*
 * xsk_shim: the C side of Squall's AF_XDP port (crates/squall-port/src/afxdp/sys.rs).
 *
 * libxdp's ring helpers (xsk_ring_prod__reserve, xsk_ring_cons__peek, ...) are static
 * inline in <xdp/xsk.h>, so Rust cannot call them. This shim exports one non-inline
 * function per *burst* (not per packet) that runs those helpers, with their barriers, over
 * caller arrays: the FFI call is paid once per burst and the ring protocol stays libxdp's.
 * It also wraps socket/UMEM creation and the libbpf calls that load and attach the XDP
 * program (squall_xdp.bpf.c) through a BPF link, which the kernel detaches when the last
 * descriptor of it closes: at exit, and also after a crash or a kill.
 *
 * Every function returns a count (>= 0) or a negative errno.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <xdp/xsk.h>

struct sq_xsk {
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	struct xsk_ring_prod fill;
	struct xsk_ring_cons comp;
	struct xsk_ring_cons rx;
	struct xsk_ring_prod tx;
};

static int quiet_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	(void)fmt;
	(void)ap;
	return 0;
}

/* libbpf/libxdp print nothing: Squall reports errors itself (from the errno). */
void sq_quiet(void)
{
	libbpf_set_print(quiet_print);
}

int sq_xsk_open(struct sq_xsk **out, const char *ifname, unsigned queue, void *area,
		unsigned long long size, unsigned chunk, unsigned headroom, unsigned ring,
		unsigned bind_flags)
{
	struct sq_xsk *s = calloc(1, sizeof(*s));
	struct xsk_umem_config uc = {
		.fill_size = ring,
		.comp_size = ring,
		.frame_size = chunk,
		.frame_headroom = headroom,
		.flags = 0,
	};
	struct xsk_socket_config sc = {
		.rx_size = ring,
		.tx_size = ring,
		.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
		.xdp_flags = 0,
		.bind_flags = (__u16)bind_flags,
	};
	int err;

	if (!s)
		return -ENOMEM;
	err = xsk_umem__create(&s->umem, area, size, &s->fill, &s->comp, &uc);
	if (err) {
		free(s);
		return err < 0 ? err : -err;
	}
	err = xsk_socket__create(&s->xsk, ifname, queue, s->umem, &s->rx, &s->tx, &sc);
	if (err) {
		xsk_umem__delete(s->umem);
		free(s);
		return err < 0 ? err : -err;
	}
	*out = s;
	return 0;
}

void sq_xsk_close(struct sq_xsk *s)
{
	if (!s)
		return;
	xsk_socket__delete(s->xsk);
	xsk_umem__delete(s->umem);
	free(s);
}

int sq_xsk_fd(struct sq_xsk *s)
{
	return xsk_socket__fd(s->xsk);
}

/* Receives up to max descriptors (address, length) and releases them from the rx ring. */
int sq_rx(struct sq_xsk *s, unsigned long long *addr, unsigned *len, unsigned max)
{
	__u32 idx = 0;
	unsigned n = xsk_ring_cons__peek(&s->rx, max, &idx);
	for (unsigned i = 0; i < n; i++) {
		const struct xdp_desc *d = xsk_ring_cons__rx_desc(&s->rx, idx + i);
		addr[i] = d->addr;
		len[i] = d->len;
	}
	if (n)
		xsk_ring_cons__release(&s->rx, n);
	return (int)n;
}

/* Puts as many of the n chunk addresses as fit on the fill ring; returns how many. */
int sq_fill(struct sq_xsk *s, const unsigned long long *addr, unsigned n)
{
	__u32 idx = 0;
	unsigned k = xsk_prod_nb_free(&s->fill, n);
	if (k > n)
		k = n;
	if (!k || xsk_ring_prod__reserve(&s->fill, k, &idx) != k)
		return 0;
	for (unsigned i = 0; i < k; i++)
		*xsk_ring_prod__fill_addr(&s->fill, idx + i) = addr[i];
	xsk_ring_prod__submit(&s->fill, k);
	return (int)k;
}

/* Queues as many of the n descriptors as fit on the tx ring; returns how many. */
int sq_tx(struct sq_xsk *s, const unsigned long long *addr, const unsigned *len, unsigned n)
{
	__u32 idx = 0;
	unsigned k = xsk_prod_nb_free(&s->tx, n);
	if (k > n)
		k = n;
	if (!k || xsk_ring_prod__reserve(&s->tx, k, &idx) != k)
		return 0;
	for (unsigned i = 0; i < k; i++) {
		struct xdp_desc *d = xsk_ring_prod__tx_desc(&s->tx, idx + i);
		d->addr = addr[i];
		d->len = len[i];
		d->options = 0;
	}
	xsk_ring_prod__submit(&s->tx, k);
	return (int)k;
}

/* Takes up to max completed tx addresses off the completion ring. */
int sq_comp(struct sq_xsk *s, unsigned long long *addr, unsigned max)
{
	__u32 idx = 0;
	unsigned n = xsk_ring_cons__peek(&s->comp, max, &idx);
	for (unsigned i = 0; i < n; i++)
		addr[i] = *xsk_ring_cons__comp_addr(&s->comp, idx + i);
	if (n)
		xsk_ring_cons__release(&s->comp, n);
	return (int)n;
}

/* need_wakeup flags: the kernel asks for a sendto() (tx) or a poll/recvfrom() (fill). */
int sq_tx_needs_wakeup(struct sq_xsk *s)
{
	return xsk_ring_prod__needs_wakeup(&s->tx);
}

int sq_fill_needs_wakeup(struct sq_xsk *s)
{
	return xsk_ring_prod__needs_wakeup(&s->fill);
}

/* Descriptors on the tx ring the kernel has not consumed yet. */
int sq_tx_pending(struct sq_xsk *s)
{
	return (int)(s->tx.size - xsk_prod_nb_free(&s->tx, s->tx.size));
}

/* ---- the XDP program ---- */

struct sq_prog {
	struct bpf_object *obj;
	int link_fd;
	int owned_fd;
	int owned6_fd;
	int xsks_fd;
	int stats_fd;
};

/*
 * Reads the id (0 when none is attached) and name (16 bytes) of the XDP program attached
 * to ifindex (any mode) into *id_out and name. Returns 0, or -errno.
 */
int sq_xdp_attached(int ifindex, char *name, __u32 *id_out)
{
	__u32 id = 0;
	struct bpf_prog_info info;
	__u32 len = sizeof(info);
	int fd, err;

	err = bpf_xdp_query_id(ifindex, 0, &id);
	if (err)
		return err;
	name[0] = 0;
	*id_out = id; /* (the whole u32: an id above INT_MAX is not an errno) */
	if (!id)
		return 0;
	fd = bpf_prog_get_fd_by_id(id);
	if (fd < 0)
		return 0; /* attached but unreadable: name stays empty */
	memset(&info, 0, sizeof(info));
	if (!bpf_obj_get_info_by_fd(fd, &info, &len))
		memcpy(name, info.name, sizeof(info.name));
	close(fd);
	return 0;
}

/* Detaches a netlink-attached XDP program (a stale copy) in the given mode flags. */
int sq_xdp_detach(int ifindex, unsigned flags)
{
	return bpf_xdp_detach(ifindex, flags, NULL);
}

/*
 * Opens the program from memory, loads it and attaches it to ifindex through a BPF link
 * (flags: XDP_FLAGS_DRV_MODE or XDP_FLAGS_SKB_MODE).
 */
int sq_prog_load(struct sq_prog **out, const void *obj, unsigned long size, int ifindex,
		 unsigned flags)
{
	struct sq_prog *p = calloc(1, sizeof(*p));
	struct bpf_program *prog;
	LIBBPF_OPTS(bpf_link_create_opts, lo, .flags = flags);
	int err, link_fd;

	if (!p)
		return -ENOMEM;
	p->obj = bpf_object__open_mem(obj, size, NULL);
	if (!p->obj) {
		err = -errno;
		goto fail;
	}
	err = bpf_object__load(p->obj);
	if (err)
		goto fail;
	prog = bpf_object__find_program_by_name(p->obj, "squall_xdp");
	p->owned_fd = bpf_object__find_map_fd_by_name(p->obj, "owned");
	p->owned6_fd = bpf_object__find_map_fd_by_name(p->obj, "owned6");
	p->xsks_fd = bpf_object__find_map_fd_by_name(p->obj, "xsks");
	p->stats_fd = bpf_object__find_map_fd_by_name(p->obj, "stats");
	if (!prog || p->owned_fd < 0 || p->owned6_fd < 0 || p->xsks_fd < 0 || p->stats_fd < 0) {
		err = -ENOENT;
		goto fail;
	}
	/* bpf_link_create directly: the mode flags reach the kernel (libbpf 1.1's
	 * bpf_program__attach_xdp passes none). */
	link_fd = bpf_link_create(bpf_program__fd(prog), ifindex, BPF_XDP, &lo);
	if (link_fd < 0) {
		err = link_fd;
		goto fail;
	}
	p->link_fd = link_fd;
	*out = p;
	return 0;
fail:
	if (p->obj)
		bpf_object__close(p->obj);
	free(p);
	return err < 0 ? err : -EINVAL;
}

/* Detaches the program (closes the link) and frees the object and its maps. */
void sq_prog_close(struct sq_prog *p)
{
	if (!p)
		return;
	close(p->link_fd);
	bpf_object__close(p->obj);
	free(p);
}

/* Adds addr/prefixlen (addr in network byte order) to the owned prefixes. */
int sq_prog_own(struct sq_prog *p, unsigned addr_be, unsigned prefixlen)
{
	struct {
		__u32 prefixlen;
		__u32 addr;
	} k = { prefixlen, addr_be };
	__u8 v = 1;
	return bpf_map_update_elem(p->owned_fd, &k, &v, BPF_ANY) ? -errno : 0;
}

/* Adds the IPv6 prefix addr/prefixlen (addr: 16 bytes, network order) to the owned
 * IPv6 prefixes. */
int sq_prog_own6(struct sq_prog *p, const unsigned char *addr, unsigned prefixlen)
{
	struct {
		__u32 prefixlen;
		__u8 addr[16];
	} k;
	__u8 v = 1;
	k.prefixlen = prefixlen;
	memcpy(k.addr, addr, 16);
	return bpf_map_update_elem(p->owned6_fd, &k, &v, BPF_ANY) ? -errno : 0;
}

/* Binds queue's slot of the XSK map to socket xsk_fd. */
int sq_prog_set_xsk(struct sq_prog *p, unsigned queue, int xsk_fd)
{
	return bpf_map_update_elem(p->xsks_fd, &queue, &xsk_fd, BPF_ANY) ? -errno : 0;
}

/* Sums counter i (0 redirected, 1 passed, 2 short) over the CPUs into *out. */
int sq_prog_stat(struct sq_prog *p, unsigned i, unsigned long long *out)
{
	int n = libbpf_num_possible_cpus();
	__u64 *v;
	if (n <= 0)
		return -EINVAL;
	v = calloc((size_t)n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	if (bpf_map_lookup_elem(p->stats_fd, &i, v)) {
		free(v);
		return -errno;
	}
	*out = 0;
	for (int c = 0; c < n; c++)
		*out += v[c];
	free(v);
	return 0;
}
