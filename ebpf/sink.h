/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * wirescope packet sink, kernel side: the XDP definitions the program uses
 * and the integer-only types shared with src/traffic/sink/xdp.rs (which
 * mirrors them as #[repr(C)] structs and checks their sizes).
 *
 * Only UAPI structs (xdp_md, the wire headers) are used, so no CO-RE
 * relocation is needed: the program loads on any kernel with XDP.
 */
#ifndef WIRESCOPE_SINK_H
#define WIRESCOPE_SINK_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;

#define SEC(name) __attribute__((section(name), used))
#define __always_inline inline __attribute__((always_inline))

/* BTF-defined maps, as libbpf and aya read them from the ".maps" section. */
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

#define BPF_MAP_TYPE_ARRAY 2
#define BPF_MAP_TYPE_PERCPU_ARRAY 6
#define BPF_MAP_TYPE_XSKMAP 17

/* Helpers by their stable numbers (include/uapi/linux/bpf.h). */
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_redirect_map)(void *map, __u64 key, __u64 flags) = (void *)51;

/* include/uapi/linux/bpf.h */
enum xdp_action {
	XDP_ABORTED = 0,
	XDP_DROP,
	XDP_PASS,
	XDP_TX,
	XDP_REDIRECT,
};

struct xdp_md {
	__u32 data;
	__u32 data_end;
	__u32 data_meta;
	__u32 ingress_ifindex;
	__u32 rx_queue_index;
	__u32 egress_ifindex;
};

/* Wire headers (only the fields read). */
struct ws_eth {
	__u8 dst[6];
	__u8 src[6];
	__u16 proto; /* network order */
} __attribute__((packed));

struct ws_ip {
	__u8 vihl;   /* version << 4 | header length in 32-bit words */
	__u8 tos;
	__u16 len;
	__u16 id;
	__u16 frag;
	__u8 ttl;
	__u8 proto;
	__u16 csum;
	__u32 src;
	__u32 dst;   /* network order */
} __attribute__((packed));

struct ws_udp {
	__u16 src;
	__u16 dst;   /* network order */
	__u16 len;
	__u16 csum;
} __attribute__((packed));

/* ---- shared with userspace ---- */

/* Receive queues counted one by one; slot WS_SINK_MAX_QUEUES counts higher ones. */
#define WS_SINK_MAX_QUEUES 1024
#define WS_SINK_SLOTS (WS_SINK_MAX_QUEUES + 1)
/* Flow ids counted by ws_sink_drop (the engine's MAX_FLOWS). */
#define WS_SINK_MAX_FLOWS 16384

/* Per CPU, per receive queue. */
struct ws_sink_count {
	__u64 packets;   /* test frames seen */
	__u64 bytes;     /* their length on the wire without FCS */
	__u64 no_socket; /* af-xdp: test frames dropped, no socket bound to the queue */
	__u64 passed;    /* other frames (not from the test's generator), passed on to the stack */
};

#endif
