/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wirescope kernel-side probes (BTF-typed tracepoints, CO-RE):
 *
 *   tp_btf/softirq_entry, softirq_exit  per CPU x vector: exact handler time and runs
 *   tp_btf/netif_receive_skb            per CPU x rx queue: packets and bytes
 *   tp_btf/net_dev_start_xmit           per CPU x tx queue: packets and bytes
 *
 * The packet hooks count only interfaces present in ws_filter (set from
 * userspace, keyed by ifindex and netns inode); any other packet costs one
 * hash lookup. Counters are per-CPU arrays: no atomics, no contention.
 * Nothing here allocates, loops or pins.
 */
#include "wirescope.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, WS_MAX_IFACES);
	__type(key, struct ws_iface_key);
	__type(value, __u32);
} ws_filter SEC(".maps");

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

SEC("tp_btf/softirq_entry")
int ws_softirq_entry(unsigned long long *ctx)
{
	__u32 vec = (__u32)ctx[0];
	struct ws_softirq *s = bpf_map_lookup_elem(&ws_softirq, &vec);

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
	struct ws_softirq *s = bpf_map_lookup_elem(&ws_softirq, &vec);

	/* start == 0: the handler began before we attached. */
	if (!s || !s->start)
		return 0;
	s->ns += bpf_ktime_get_ns() - s->start;
	s->start = 0;
	return 0;
}

/* Count one skb on (dev, dir, queue slot) when dev is watched. */
static __always_inline void count(const struct net_device *dev, __u32 dir, __u32 qslot,
				  __u32 len)
{
	struct ws_iface_key k = {
		.ifindex = (__u32)dev->ifindex,
		.netns = dev->nd_net.net->ns.inum,
	};
	__u32 *slot = bpf_map_lookup_elem(&ws_filter, &k);
	struct ws_count *c;
	__u32 idx;

	if (!slot || *slot >= WS_MAX_IFACES)
		return;
	if (qslot >= WS_QSTRIDE)
		qslot = 0;
	idx = (*slot * 2 + dir) * WS_QSTRIDE + qslot;
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
