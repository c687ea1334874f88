/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wirescope packet sink, XDP side. Two programs share the counters:
 *
 *   ws_sink_drop  counts the test's frames per receive queue and CPU (and,
 *                 when ws_per_flow is set, per flow) and drops them: the
 *                 ceiling of what reaches this host.
 *   ws_sink_xsk   counts them the same way and redirects each one into the
 *                 AF_XDP socket bound to its receive queue (XSKMAP).
 *
 * A test frame is IPv4/UDP from the test's generator — the source address
 * in ws_sink_gen (its setup names it; 0 until it arrives, so nothing
 * matches before) and a source port in [ws_sport_lo, ws_sport_hi], one per
 * flow — to a destination port in [ws_port_lo, ws_port_hi] (and to
 * ws_dst_ip when it is not 0), carrying the stamp's magic "WS" at the start
 * of its payload. Everything else — ARP, the control connection, other
 * traffic to the same port from any other source — is counted as passed
 * and goes on to the stack untouched, so attaching the sink never cuts the
 * host off nor takes another service's datagrams. The loader writes the
 * configuration into the read-only data before loading, so the verifier
 * sees constants; the generator's address is written into ws_sink_gen
 * when its setup arrives. Nothing is pinned: the
 * program is attached through a BPF link that the kernel removes when the
 * owning process closes it or dies.
 */
#include "sink.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* ---- configuration, set by the loader (aya set_global) ---- */
volatile const __u16 ws_port_lo = 0;
volatile const __u16 ws_port_hi = 0;
volatile const __u32 ws_dst_ip = 0; /* network order; 0 = any */
/* Source ports of the generator's flows (SRC_PORT_BASE + flow id). */
volatile const __u16 ws_sport_lo = 0;
volatile const __u16 ws_sport_hi = 0;
/* xdp mode: also count frames per flow (stamp's flow id). */
volatile const __u32 ws_per_flow = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, WS_SINK_SLOTS);
	__type(key, __u32);
	__type(value, struct ws_sink_count);
} ws_sink_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, WS_SINK_MAX_FLOWS);
	__type(key, __u32);
	__type(value, __u64);
} ws_sink_flows SEC(".maps");

/* Key 0: the generator's IPv4 address, network order (0: not known yet). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} ws_sink_gen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, WS_SINK_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} ws_sink_xsks SEC(".maps");

/* The counters of this frame's queue on this CPU, or 0 when the lookup fails. */
static __always_inline struct ws_sink_count *slot(__u32 queue)
{
	__u32 k = queue < WS_SINK_MAX_QUEUES ? queue : WS_SINK_MAX_QUEUES;

	return bpf_map_lookup_elem(&ws_sink_counts, &k);
}

/* The UDP header of a test frame, or 0 for any other frame. */
static __always_inline struct ws_udp *test_udp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ws_eth *eth = data;
	struct ws_ip *ip;
	struct ws_udp *udp;
	__u8 *magic;
	__u32 ihl, k = 0, *gen;
	__u16 port;

	if ((void *)(eth + 1) > end)
		return 0;
	if (eth->proto != __builtin_bswap16(0x0800))
		return 0;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end)
		return 0;
	if (ip->proto != 17 || (ip->vihl >> 4) != 4)
		return 0;
	if (ws_dst_ip && ip->dst != ws_dst_ip)
		return 0;
	gen = bpf_map_lookup_elem(&ws_sink_gen, &k);
	if (!gen || !*gen || ip->src != *gen)
		return 0;
	ihl = (ip->vihl & 0x0f) * 4;
	if (ihl < sizeof(*ip))
		return 0;
	udp = (void *)ip + ihl;
	if ((void *)(udp + 1) > end)
		return 0;
	port = __builtin_bswap16(udp->dst);
	if (port < ws_port_lo || port > ws_port_hi)
		return 0;
	port = __builtin_bswap16(udp->src);
	if (port < ws_sport_lo || port > ws_sport_hi)
		return 0;
	magic = (__u8 *)(udp + 1);
	if ((void *)(magic + 2) > end)
		return 0;
	if (magic[0] != 'W' || magic[1] != 'S')
		return 0;
	return udp;
}

/* Count the frame on its flow (stamp: "WS" (checked by test_udp), flow id little-endian). */
static __always_inline void count_flow(struct xdp_md *ctx, struct ws_udp *udp)
{
	__u8 *p = (__u8 *)(udp + 1);
	__u32 flow;
	__u64 *n;

	if ((void *)(p + 4) > (void *)(long)ctx->data_end)
		return;
	flow = p[2] | (__u32)p[3] << 8;
	if (flow >= WS_SINK_MAX_FLOWS)
		return;
	n = bpf_map_lookup_elem(&ws_sink_flows, &flow);
	if (n)
		(*n)++;
}

SEC("xdp")
int ws_sink_drop(struct xdp_md *ctx)
{
	struct ws_sink_count *c = slot(ctx->rx_queue_index);
	struct ws_udp *udp;

	if (!c)
		return XDP_PASS;
	udp = test_udp(ctx);
	if (!udp) {
		c->passed++;
		return XDP_PASS;
	}
	c->packets++;
	c->bytes += ctx->data_end - ctx->data;
	if (ws_per_flow)
		count_flow(ctx, udp);
	return XDP_DROP;
}

SEC("xdp")
int ws_sink_xsk(struct xdp_md *ctx)
{
	__u32 queue = ctx->rx_queue_index;
	struct ws_sink_count *c = slot(queue);

	if (!c)
		return XDP_PASS;
	if (!test_udp(ctx)) {
		c->passed++;
		return XDP_PASS;
	}
	c->packets++;
	c->bytes += ctx->data_end - ctx->data;
	if (!bpf_map_lookup_elem(&ws_sink_xsks, &queue)) {
		c->no_socket++;
		return XDP_DROP;
	}
	/* A full socket ring drops the frame; the socket's XDP_STATISTICS count it. */
	return bpf_redirect_map(&ws_sink_xsks, queue, XDP_DROP);
}
