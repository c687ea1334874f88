/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wirescope kernel-side probes (BTF-typed tracepoints, CO-RE):
 *
 *   tp_btf/netif_receive_skb            per CPU x rx queue: packets and bytes
 *   tp_btf/net_dev_start_xmit           per CPU x tx queue: packets and bytes
 *   tp_btf/softirq_entry, softirq_exit  per CPU x vector: exact handler time and runs
 *   tp_btf/napi_poll                    per CPU x NAPI: polls, work, budget exhausted
 *
 * The loader picks the set and fills the read-only configuration below
 * before loading, so the verifier sees constants: the interface filter is a
 * short compare against (ifindex, netns) pairs, not a map lookup, and an
 * unrelated packet costs two loads and a compare. Counters are per-CPU
 * arrays: no atomics, no contention, one cache line per event. Nothing here
 * allocates or pins.
 *
 * What a program does per event is small next to what its invocation costs
 * (measured: an empty program on these tracepoints takes 70-90 ns a run
 * with BPF_ENABLE_STATS, the packet counters 75-120 ns), so the default
 * set saves by running less often, not by doing less: the loader attaches
 * the two packet programs for a part of each interval only and scales
 * their counts (src/probe/ebpf/gate.rs); the softirq and NAPI programs run
 * in the deep set, always attached, and count exactly.
 */
#include "wirescope.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* ---- configuration, set by the loader (aya set_global) ---- */

/* Watched interfaces: the first ws_nifaces entries of ws_ifindex/ws_netns. */
volatile const __u32 ws_nifaces = 0;
volatile const __u32 ws_ifindex[WS_MAX_IFACES] = {};
volatile const __u32 ws_netns[WS_MAX_IFACES] = {};

/* ---- counters ---- */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, WS_QUEUE_SLOTS);
	__type(key, __u32);
	__type(value, struct ws_count);
} ws_queues SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, WS_NR_SOFTIRQS);
	__type(key, __u32);
	__type(value, struct ws_softirq);
} ws_softirq SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, WS_MAX_NAPIS);
	__type(key, struct ws_napi_key);
	__type(value, struct ws_napi);
} ws_napi SEC(".maps");

SEC("tp_btf/softirq_entry")
int ws_softirq_entry(unsigned long long *ctx)
{
	__u32 vec = (__u32)ctx[0];
	struct ws_softirq *s;

	s = bpf_map_lookup_elem(&ws_softirq, &vec);
	if (!s)
		return 0;
	s->start = bpf_ktime_get_ns();
	s->count++;
	return 0;
}

SEC("tp_btf/softirq_exit")
int ws_softirq_exit(unsigned long long *ctx)
{
	__u32 vec = (__u32)ctx[0];
	struct ws_softirq *s;

	s = bpf_map_lookup_elem(&ws_softirq, &vec);
	/* start == 0: the handler began before we attached. */
	if (!s || !s->start)
		return 0;
	s->ns += bpf_ktime_get_ns() - s->start;
	s->start = 0;
	return 0;
}

/* Filter slot of dev, or WS_MAX_IFACES when dev is not watched. */
static __always_inline __u32 slot_of(const struct net_device *dev)
{
	__u32 ifindex = (__u32)dev->ifindex;
	__u32 i;

#pragma clang loop unroll(full)
	for (i = 0; i < WS_MAX_IFACES; i++) {
		if (i >= ws_nifaces)
			break;
		if (ws_ifindex[i] == ifindex && ws_netns[i] == dev->nd_net.net->ns.inum)
			return i;
	}
	return WS_MAX_IFACES;
}

/* Count one skb on (dev, dir, queue slot) when dev is watched. */
static __always_inline void count(const struct net_device *dev, __u32 dir, __u32 qslot,
				  __u32 len)
{
	__u32 slot = slot_of(dev);
	struct ws_count *c;
	__u32 idx;

	if (slot >= WS_MAX_IFACES)
		return;
	if (qslot >= WS_QSTRIDE)
		qslot = 0;
	idx = (slot * 2 + dir) * WS_QSTRIDE + qslot;
	c = bpf_map_lookup_elem(&ws_queues, &idx);
	if (!c)
		return;
	c->packets++;
	c->bytes += len;
}

SEC("tp_btf/netif_receive_skb")
int ws_netif_receive_skb(unsigned long long *ctx)
{
	struct sk_buff *skb = (struct sk_buff *)ctx[0];
	struct net_device *dev = skb->dev;

	if (!dev)
		return 0;
	/*
	 * skb_get_rx_queue() semantics: drivers record rx queue + 1, 0 means
	 * not recorded; that is exactly our slot numbering.
	 */
	count(dev, WS_DIR_RX, skb->queue_mapping, skb->len);
	return 0;
}

SEC("tp_btf/net_dev_start_xmit")
int ws_net_dev_start_xmit(unsigned long long *ctx)
{
	struct sk_buff *skb = (struct sk_buff *)ctx[0];
	struct net_device *dev = (struct net_device *)ctx[1];

	if (!dev)
		return 0;
	/* The tx queue was picked before this point: queue_mapping is it. */
	count(dev, WS_DIR_TX, (__u32)skb->queue_mapping + 1, skb->len);
	return 0;
}

SEC("tp_btf/napi_poll")
int ws_napi_poll(unsigned long long *ctx)
{
	struct napi_struct *napi = (struct napi_struct *)ctx[0];
	int work = (int)ctx[1];
	int budget = (int)ctx[2];
	struct net_device *dev = napi->dev;
	struct ws_napi_key k = {};
	struct ws_napi *n;
	__u32 slot;

	/* The per-CPU backlog NAPI (netif_rx, RPS) has no device. */
	if (!dev)
		return 0;
	slot = slot_of(dev);
	if (slot >= WS_MAX_IFACES)
		return 0;
	k.slot = slot;
	k.napi_id = napi->napi_id;
	n = bpf_map_lookup_elem(&ws_napi, &k);
	if (!n) {
		struct ws_napi zero = {};

		bpf_map_update_elem(&ws_napi, &k, &zero, BPF_NOEXIST);
		n = bpf_map_lookup_elem(&ws_napi, &k);
		if (!n)
			return 0;
	}
	n->polls++;
	if (work > 0)
		n->work += (__u32)work;
	if (work >= budget)
		n->exhausted++;
	return 0;
}
