//! Why an RDMA test cannot start on a host ([`PreflightError`]): the verbs
//! library or a device is missing, or the device, port or GID asked for is
//! not there. Each is one line that says what is missing and the command or
//! flag that fixes it (`run --engine rdma` prints it and exits 2). The host
//! is read in `probe::rdma::preflight`; this is what it finds, in the data
//! plane's words, so an engine and the host it prepares on share one type.

use super::verbs::VerbsError;

/// The fix for a missing library.
pub const INSTALL_LIBIBVERBS: &str = "apt-get install libibverbs1 ibverbs-providers";

/// The fix for a missing device (`IF`: the interface towards the peer).
pub fn load_device_fix(iface: &str) -> String {
    format!("modprobe mlx5_ib (ConnectX), or soft-RoCE: modprobe rdma_rxe && rdma link add rxe0 type rxe netdev {iface}")
}

/// Why an RDMA test cannot start on a host: one line naming what is
/// missing or wrong and the command or flag that fixes it.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    /// This build has no verbs library at all (see [`super::BUILT_WITHOUT_RDMA`]).
    #[error("{}", super::BUILT_WITHOUT_RDMA)]
    NotBuilt,
    /// Neither the library nor a device.
    #[error("RDMA unavailable on {host}: libibverbs is not installed ({why}) and there is no RDMA device ({sysfs}); fix: {INSTALL_LIBIBVERBS}, then {}", load_device_fix(iface))]
    NothingThere {
        /// The host ("this host", "the peer").
        host: String,
        /// Why the library does not load.
        why: String,
        /// The sysfs directory and whether it is `empty` or `absent`
        /// (`/sys/class/infiniband absent`).
        sysfs: String,
        /// The interface towards the peer, for the soft-RoCE command.
        iface: String,
    },
    /// Devices, but no library.
    #[error("RDMA unavailable on {host}: libibverbs is not installed ({why}; the kernel has {}); fix: {INSTALL_LIBIBVERBS}", kernel.join(", "))]
    NoLibrary {
        /// The host.
        host: String,
        /// Why the library does not load.
        why: String,
        /// The devices the kernel lists.
        kernel: Vec<String>,
    },
    /// The library, but no device.
    #[error(
        "RDMA unavailable on {host}: no RDMA device ({sysfs}); fix: {}",
        load_device_fix(iface)
    )]
    NoDevice {
        /// The host.
        host: String,
        /// The sysfs directory and whether it is `empty` or `absent`
        /// (`/sys/class/infiniband absent`).
        sysfs: String,
        /// The interface towards the peer, for the soft-RoCE command.
        iface: String,
    },
    /// The library could not list its devices.
    #[error("RDMA unavailable on {host}: {source}")]
    Devices {
        /// The host.
        host: String,
        /// The verbs call that failed.
        #[source]
        source: VerbsError,
    },
    /// The kernel has devices the library does not see (no user-space driver).
    #[error("RDMA unavailable on {host}: libibverbs sees no device although the kernel has {}; fix: apt-get install ibverbs-providers (the user-space driver) and modprobe ib_uverbs (/dev/infiniband/uverbs*)", kernel.join(", "))]
    NoProvider {
        /// The host.
        host: String,
        /// The devices the kernel lists.
        kernel: Vec<String>,
    },
    /// `--ib-dev` names no device.
    #[error("RDMA device {name} does not exist (devices: {devices}); choose one with --ib-dev")]
    NoSuchDevice {
        /// The name asked for.
        name: String,
        /// The devices there are, comma-separated.
        devices: String,
    },
    /// Several devices and none behind the interface towards the peer.
    #[error(
        "{count} RDMA devices ({devices}) and none is behind {iface}; choose one with --ib-dev"
    )]
    Ambiguous {
        /// How many devices.
        count: usize,
        /// Their names, comma-separated.
        devices: String,
        /// The interface towards the peer (or a phrase for it).
        iface: String,
    },
    /// `--ib-port` names no port of the device.
    #[error("{device} has no port {port}")]
    NoSuchPort {
        /// The device.
        device: String,
        /// The port asked for.
        port: u8,
    },
    /// A device without ports.
    #[error("{device} has no ports")]
    NoPorts {
        /// The device.
        device: String,
    },
    /// The port is not ACTIVE.
    #[error("{device} port {port} is {state}: bring it up first (rdma link show {device}/{port})")]
    PortDown {
        /// The device.
        device: String,
        /// The port.
        port: u32,
        /// Its state as sysfs names it.
        state: String,
    },
    /// `--gid-index` names a GID the port does not have.
    #[error("{device} port {port} has no GID index {gid} (populated: {populated})")]
    NoSuchGid {
        /// The device.
        device: String,
        /// The port.
        port: u32,
        /// The index asked for.
        gid: u32,
        /// The populated indices, comma-separated.
        populated: String,
    },
    /// A RoCE port without a GID.
    #[error("{device} port {port} (RoCE) has no GID: give its netdev an IP address")]
    NoGid {
        /// The device.
        device: String,
        /// The port.
        port: u32,
    },
    /// A port number beyond what verbs take (a u8).
    #[error("port {port} out of range")]
    PortRange {
        /// The port number sysfs lists.
        port: u32,
    },
}
