//! The table of numbers the host and stack rules use. An engine's rule
//! family keeps its own numbers beside its rules (`rules/<engine>.rs`);
//! `assets/rules.md` refers to all of them by name.

/// Every threshold of the host and stack rules. [`THRESHOLDS`] is the
/// shipped table.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// Intervals a live condition must hold within the window (cpu, softirq, queues,
    /// softnet). Capped at the number of active samples in the window.
    pub sustain_intervals: usize,
    /// Samples shorter than this (s) are ignored (the partial last interval of a point).
    pub min_interval_s: f64,
    /// A sample counts as "traffic running" when the engine moved at least this (b/s).
    pub active_bps: f64,
    /// cpu.single-core-saturated: busy % (user+sys+irq+softirq+steal) of the core.
    pub core_saturated_pct: f64,
    /// cpu.single-core-saturated: the other cores' mean busy % must stay below this
    /// (they have headroom), otherwise the host is simply out of CPU.
    pub others_headroom_pct: f64,
    /// cpu.single-core-saturated and grpc.connection-bound (not pinned): a
    /// saturated core counts only when at least this % of it is kernel work
    /// (system+irq+softirq). A network test's threads make system calls and
    /// its packets raise softirqs; a core busy with user time alone runs
    /// another process's work, which the test does not wait for.
    pub kernel_path_min_pct: f64,
    /// cpu.single-core-saturated and grpc.connection-bound: a test whose
    /// processes used less than this % of one core in all (user + system of
    /// every thread, both ends' on one kernel) can account for less than
    /// half of a saturated core's time: the rest is another process's, and
    /// only its packets' softirq and IRQ work (at least `softirq_heavy_pct`
    /// of the core) make that core its own.
    pub test_cpu_min_pct: f64,
    /// softirq.concentrated: share of all NET_RX softirqs raised on one CPU.
    pub net_rx_share: f64,
    /// softirq.concentrated on a big host: share of all NET_RX softirqs on
    /// a few cores (at most one in sixteen, at least 2) that are all
    /// saturated with softirq work.
    pub net_rx_group_share: f64,
    /// softirq.concentrated: minimum NET_RX softirqs per second on the host.
    pub net_rx_min_per_s: f64,
    /// softirq.concentrated (warn): softirq % of the saturated core, so that
    /// spreading receive processing would relieve it.
    pub softirq_heavy_pct: f64,
    /// nic.queue-imbalance: share of the interface's packets on one queue.
    pub queue_share: f64,
    /// nic.queue-imbalance: minimum packets per second over all queues.
    pub queue_min_pps: f64,
    /// nic.few-queues / nic.mtu-small: links at or above this speed (Mb/s) are "fast".
    pub fast_link_mbps: u32,
    /// nic.few-queues: channels wanted = min(NIC-local cores, this).
    pub max_useful_channels: u32,
    /// nic.mtu-small: MTU below this on a fast link is reported (info).
    pub jumbo_mtu: u32,
    /// nic.gro-off on veth: average received packet (B) at or below MTU × this means
    /// packets arrive unaggregated, which makes GRO-off a warning there too.
    pub unaggregated_factor: f64,
    /// softnet.squeeze: time_squeeze events per second on the host.
    pub squeeze_per_s: f64,
    /// tcp.retransmits: RetransSegs / OutSegs above this fraction.
    pub retrans_ratio: f64,
    /// tcp.retransmits: and at least this many retransmitted segments in the window.
    pub retrans_min_segs: u64,
    /// tcp.retransmits (warn): a connection ran at ≥ this share of the rate
    /// its loss rate allows at its RTT (Mathis); below, the loss is info.
    pub loss_bound_share: f64,
    /// tcp.buffer-limited: share of busy time a connection was rwnd/sndbuf limited.
    pub limited_share: f64,
    /// tcp.buffer-limited (check only): the round trip assumed without a measurement (µs).
    pub assumed_rtt_us: f64,
    /// rdma.retransmits: and at least this many retransmission events in the window.
    pub rdma_retrans_min: u64,
    /// rdma.congestion: CNPs + ECN-marked packets per second that make an interval congested.
    pub rdma_cnp_per_s: f64,
}

/// The shipped thresholds.
pub const THRESHOLDS: Thresholds = Thresholds {
    sustain_intervals: 3,
    min_interval_s: 0.2,
    active_bps: 1_000_000.0,
    core_saturated_pct: 95.0,
    others_headroom_pct: 75.0,
    kernel_path_min_pct: 5.0,
    test_cpu_min_pct: 50.0,
    net_rx_share: 0.90,
    net_rx_group_share: 0.5,
    net_rx_min_per_s: 1000.0,
    softirq_heavy_pct: 25.0,
    queue_share: 0.80,
    queue_min_pps: 1000.0,
    fast_link_mbps: 25_000,
    max_useful_channels: 32,
    jumbo_mtu: 9000,
    unaggregated_factor: 1.5,
    squeeze_per_s: 100.0,
    retrans_ratio: 0.001,
    retrans_min_segs: 10,
    loss_bound_share: 0.5,
    limited_share: 0.20,
    assumed_rtt_us: 1000.0,
    rdma_retrans_min: 10,
    rdma_cnp_per_s: 100.0,
};

impl Default for Thresholds {
    fn default() -> Self {
        THRESHOLDS
    }
}
