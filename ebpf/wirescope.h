/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wirescope eBPF: the few kernel definitions the programs use, and the
 * integer-only types shared with src/probe/ebpf.rs (which mirrors them as
 * #[repr(C)] structs and checks their sizes).
 *
 * Kernel structs are declared with only the fields we read and marked
 * preserve_access_index, so clang emits CO-RE relocations and the loader
 * (aya) fixes the offsets against the running kernel's BTF. No vmlinux.h,
 * no libbpf headers.
 */
#ifndef WIRESCOPE_H
#define WIRESCOPE_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;

#define SEC(name) __attribute__((section(name), used))
#define __always_inline inline __attribute__((always_inline))

/* BTF-defined maps, as libbpf and aya read them from the ".maps" section. */
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

#define BPF_MAP_TYPE_PERCPU_HASH 5
#define BPF_MAP_TYPE_PERCPU_ARRAY 6
#define BPF_NOEXIST 1

/* Helpers by their stable numbers (include/uapi/linux/bpf.h). */
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value,
				  __u64 flags) = (void *)2;
static __u64 (*bpf_ktime_get_ns)(void) = (void *)5;

/* ---- kernel structs (only the fields read) ---- */

struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

typedef struct {
	struct net *net;
} possible_net_t;

struct net_device {
	int ifindex;
	possible_net_t nd_net;
} __attribute__((preserve_access_index));

struct sk_buff {
	struct net_device *dev;
	unsigned int len;
	__u16 queue_mapping;
} __attribute__((preserve_access_index));

struct napi_struct {
	struct net_device *dev;
	unsigned int napi_id;
} __attribute__((preserve_access_index));

/* ---- shared with userspace ---- */

/* Interfaces watched at once (filter map size). */
#define WS_MAX_IFACES 8
/* Per (interface, direction): slot 0 = queue not recorded/out of range, 1 + q = queue q. */
#define WS_QSTRIDE 257
#define WS_DIR_RX 0
#define WS_DIR_TX 1
#define WS_QUEUE_SLOTS (WS_MAX_IFACES * 2 * WS_QSTRIDE)
/* NR_SOFTIRQS (HI .. RCU), and the two vectors the reader reports apart. */
#define WS_NR_SOFTIRQS 10
#define WS_NET_TX 2
#define WS_NET_RX 3
/* NAPI instances counted at once. */
#define WS_MAX_NAPIS 1024

/* One NAPI instance of a watched interface. */
struct ws_napi_key {
	__u32 slot;    /* filter slot of the interface */
	__u32 napi_id; /* the kernel's NAPI id (0 when busy polling is not built in) */
};

/* Per CPU, per NAPI instance. */
struct ws_napi {
	__u64 polls;     /* napi_poll calls */
	__u64 work;      /* packets processed by those polls */
	__u64 exhausted; /* polls that used their whole budget */
};

/* Per CPU, per (interface slot, direction, queue). */
struct ws_count {
	__u64 packets;
	__u64 bytes;
};

/* Per CPU, per softirq vector. */
struct ws_softirq {
	__u64 ns;     /* time spent in the handler, summed */
	__u64 count;  /* handler runs */
	__u64 start;  /* entry timestamp of the running handler, 0 when none */
};

#endif
