//! The data paths a test's traffic takes through a host ([`DataPaths`]).
//!
//! Each engine declares the paths it uses ([`super::EngineSlice::paths`]),
//! so the layers above ask what a test goes through ("the kernel's TCP
//! stack", "an RDMA device's queue pairs") instead of which engine it is:
//! the diagnosis's rule table names the paths each rule judges, and a new
//! engine that uses the same paths is judged by the same rules without
//! touching them. Plain data; it knows no engine.

/// A set of data paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataPaths(u8);

impl DataPaths {
    /// The kernel's network stack: IP, NET_RX softirqs, RSS/RPS, GRO, the
    /// NIC's kernel driver queues.
    pub const KERNEL_STACK: DataPaths = DataPaths(1);
    /// Kernel TCP connections: socket buffers, retransmits, segmentation
    /// offloads.
    pub const TCP: DataPaths = DataPaths(2);
    /// HTTP/2 channels with their flow-control windows and RPC statuses
    /// (gRPC's transport).
    pub const HTTP2: DataPaths = DataPaths(4);
    /// Raw frames from a packet generator to a sink's packet rings
    /// (AF_PACKET, AF_XDP), one thread per queue.
    pub const PACKET_RINGS: DataPaths = DataPaths(8);
    /// Queue pairs of an RDMA device through libibverbs (kernel bypass).
    pub const VERBS: DataPaths = DataPaths(16);

    /// Both sets.
    pub const fn and(self, other: DataPaths) -> DataPaths {
        DataPaths(self.0 | other.0)
    }

    /// True when the two sets share a path.
    pub const fn meets(self, other: DataPaths) -> bool {
        self.0 & other.0 != 0
    }
}

#[cfg(test)]
mod tests {
    use super::DataPaths;

    #[test]
    fn sets_meet_on_a_shared_path() {
        let tcp = DataPaths::KERNEL_STACK.and(DataPaths::TCP);
        assert!(tcp.meets(DataPaths::TCP));
        assert!(tcp.meets(DataPaths::KERNEL_STACK.and(DataPaths::VERBS)));
        assert!(!tcp.meets(DataPaths::VERBS));
        assert!(!DataPaths::HTTP2.meets(DataPaths::PACKET_RINGS));
    }
}
