//! Numeric constants of the ethtool and netdev generic netlink families.
//!
//! neli has none of these, so they are written out here from the kernel's
//! uapi headers (`include/uapi/linux/ethtool_netlink.h`, which moved to
//! `ethtool_netlink_generated.h` in 6.15 with the same values, and
//! `include/uapi/linux/netdev.h`). The values are ABI: the kernel only ever
//! appends, so a newer kernel may send attributes that are not listed here;
//! the parsers skip (ethtool) or keep by number (netdev qstats) such unknowns.

/// ethtool family: `ETHTOOL_GENL_NAME` / `ETHTOOL_GENL_VERSION`.
pub const ETHTOOL_FAMILY: &str = "ethtool";
/// ethtool family version.
pub const ETHTOOL_VERSION: u8 = 1;

/// Requests, userspace to kernel (`ETHTOOL_MSG_*`).
pub mod msg {
    /// `ETHTOOL_MSG_STRSET_GET`.
    pub const STRSET_GET: u8 = 1;
    /// `ETHTOOL_MSG_LINKMODES_GET`.
    pub const LINKMODES_GET: u8 = 4;
    /// `ETHTOOL_MSG_LINKSTATE_GET`.
    pub const LINKSTATE_GET: u8 = 6;
    /// `ETHTOOL_MSG_FEATURES_GET`.
    pub const FEATURES_GET: u8 = 11;
    /// `ETHTOOL_MSG_RINGS_GET`.
    pub const RINGS_GET: u8 = 15;
    /// `ETHTOOL_MSG_CHANNELS_GET`.
    pub const CHANNELS_GET: u8 = 17;
    /// `ETHTOOL_MSG_COALESCE_GET`.
    pub const COALESCE_GET: u8 = 19;
    /// `ETHTOOL_MSG_PAUSE_GET`.
    pub const PAUSE_GET: u8 = 21;
}

/// Replies, kernel to userspace (`ETHTOOL_MSG_*_REPLY`): a separate
/// enumeration whose values differ from the requests from RINGS on.
pub mod reply {
    /// `ETHTOOL_MSG_STRSET_GET_REPLY`.
    pub const STRSET_GET_REPLY: u8 = 1;
    /// `ETHTOOL_MSG_LINKMODES_GET_REPLY`.
    pub const LINKMODES_GET_REPLY: u8 = 4;
    /// `ETHTOOL_MSG_LINKSTATE_GET_REPLY`.
    pub const LINKSTATE_GET_REPLY: u8 = 6;
    /// `ETHTOOL_MSG_FEATURES_GET_REPLY`.
    pub const FEATURES_GET_REPLY: u8 = 11;
    /// `ETHTOOL_MSG_RINGS_GET_REPLY`.
    pub const RINGS_GET_REPLY: u8 = 16;
    /// `ETHTOOL_MSG_CHANNELS_GET_REPLY`.
    pub const CHANNELS_GET_REPLY: u8 = 18;
    /// `ETHTOOL_MSG_COALESCE_GET_REPLY`.
    pub const COALESCE_GET_REPLY: u8 = 20;
    /// `ETHTOOL_MSG_PAUSE_GET_REPLY`.
    pub const PAUSE_GET_REPLY: u8 = 22;
}

/// Every ethtool request and reply carries its header nest as attribute 1
/// (`ETHTOOL_A_*_HEADER`).
pub const A_HEADER: u16 = 1;

/// `ETHTOOL_A_HEADER_*`.
pub mod header {
    /// `ETHTOOL_A_HEADER_DEV_NAME`.
    pub const DEV_NAME: u16 = 2;
    /// `ETHTOOL_A_HEADER_FLAGS`.
    pub const FLAGS: u16 = 3;
    /// `ETHTOOL_FLAG_COMPACT_BITSETS`.
    pub const FLAG_COMPACT_BITSETS: u32 = 1;
}

/// `ETHTOOL_A_BITSET_*` and the nests inside it.
pub mod bitset {
    /// `ETHTOOL_A_BITSET_NOMASK`.
    pub const NOMASK: u16 = 1;
    /// `ETHTOOL_A_BITSET_SIZE`.
    pub const SIZE: u16 = 2;
    /// `ETHTOOL_A_BITSET_BITS`.
    pub const BITS: u16 = 3;
    /// `ETHTOOL_A_BITSET_BITS_BIT`.
    pub const BITS_BIT: u16 = 1;
    /// `ETHTOOL_A_BITSET_BIT_INDEX`.
    pub const BIT_INDEX: u16 = 1;
    /// `ETHTOOL_A_BITSET_BIT_NAME`.
    pub const BIT_NAME: u16 = 2;
    /// `ETHTOOL_A_BITSET_BIT_VALUE`.
    pub const BIT_VALUE: u16 = 3;
}

/// `ETHTOOL_A_STRSET_*` and the string set nests.
pub mod strset {
    /// `ETHTOOL_A_STRSET_STRINGSETS`.
    pub const STRINGSETS: u16 = 2;
    /// `ETHTOOL_A_STRINGSETS_STRINGSET`.
    pub const STRINGSETS_STRINGSET: u16 = 1;
    /// `ETHTOOL_A_STRINGSET_ID`.
    pub const STRINGSET_ID: u16 = 1;
    /// `ETHTOOL_A_STRINGSET_STRINGS`.
    pub const STRINGSET_STRINGS: u16 = 3;
    /// `ETHTOOL_A_STRINGS_STRING`.
    pub const STRINGS_STRING: u16 = 1;
    /// `ETHTOOL_A_STRING_INDEX`.
    pub const STRING_INDEX: u16 = 1;
    /// `ETHTOOL_A_STRING_VALUE`.
    pub const STRING_VALUE: u16 = 2;
    /// `ETH_SS_FEATURES` (`include/uapi/linux/ethtool.h`).
    pub const ETH_SS_FEATURES: u32 = 4;
    /// `ETH_SS_STATS`: the names of a driver's private statistics (`ethtool -S`).
    pub const ETH_SS_STATS: u32 = 1;
}

/// `ETHTOOL_A_FEATURES_*`.
pub mod features {
    /// `ETHTOOL_A_FEATURES_HW`.
    pub const HW: u16 = 2;
    /// `ETHTOOL_A_FEATURES_WANTED`.
    pub const WANTED: u16 = 3;
    /// `ETHTOOL_A_FEATURES_ACTIVE`.
    pub const ACTIVE: u16 = 4;
    /// `ETHTOOL_A_FEATURES_NOCHANGE`.
    pub const NOCHANGE: u16 = 5;
}

/// `ETHTOOL_A_CHANNELS_*`.
pub mod channels {
    /// `ETHTOOL_A_CHANNELS_RX_MAX`.
    pub const RX_MAX: u16 = 2;
    /// `ETHTOOL_A_CHANNELS_TX_MAX`.
    pub const TX_MAX: u16 = 3;
    /// `ETHTOOL_A_CHANNELS_OTHER_MAX`.
    pub const OTHER_MAX: u16 = 4;
    /// `ETHTOOL_A_CHANNELS_COMBINED_MAX`.
    pub const COMBINED_MAX: u16 = 5;
    /// `ETHTOOL_A_CHANNELS_RX_COUNT`.
    pub const RX_COUNT: u16 = 6;
    /// `ETHTOOL_A_CHANNELS_TX_COUNT`.
    pub const TX_COUNT: u16 = 7;
    /// `ETHTOOL_A_CHANNELS_OTHER_COUNT`.
    pub const OTHER_COUNT: u16 = 8;
    /// `ETHTOOL_A_CHANNELS_COMBINED_COUNT`.
    pub const COMBINED_COUNT: u16 = 9;
}

/// `ETHTOOL_A_RINGS_*`.
pub mod rings {
    /// `ETHTOOL_A_RINGS_RX_MAX`.
    pub const RX_MAX: u16 = 2;
    /// `ETHTOOL_A_RINGS_RX_MINI_MAX`.
    pub const RX_MINI_MAX: u16 = 3;
    /// `ETHTOOL_A_RINGS_RX_JUMBO_MAX`.
    pub const RX_JUMBO_MAX: u16 = 4;
    /// `ETHTOOL_A_RINGS_TX_MAX`.
    pub const TX_MAX: u16 = 5;
    /// `ETHTOOL_A_RINGS_RX`.
    pub const RX: u16 = 6;
    /// `ETHTOOL_A_RINGS_RX_MINI`.
    pub const RX_MINI: u16 = 7;
    /// `ETHTOOL_A_RINGS_RX_JUMBO`.
    pub const RX_JUMBO: u16 = 8;
    /// `ETHTOOL_A_RINGS_TX`.
    pub const TX: u16 = 9;
}

/// `ETHTOOL_A_COALESCE_*`.
pub mod coalesce {
    /// `ETHTOOL_A_COALESCE_RX_USECS`.
    pub const RX_USECS: u16 = 2;
    /// `ETHTOOL_A_COALESCE_RX_MAX_FRAMES`.
    pub const RX_MAX_FRAMES: u16 = 3;
    /// `ETHTOOL_A_COALESCE_TX_USECS`.
    pub const TX_USECS: u16 = 6;
    /// `ETHTOOL_A_COALESCE_TX_MAX_FRAMES`.
    pub const TX_MAX_FRAMES: u16 = 7;
    /// `ETHTOOL_A_COALESCE_USE_ADAPTIVE_RX`.
    pub const USE_ADAPTIVE_RX: u16 = 11;
    /// `ETHTOOL_A_COALESCE_USE_ADAPTIVE_TX`.
    pub const USE_ADAPTIVE_TX: u16 = 12;

    /// The other u32 attributes, named as `ethtool -c` prints them
    /// (ethtool's netlink/coalesce.c; note its singular `rx-frame-low`).
    pub const OTHER_U32: &[(u16, &str)] = &[
        (4, "rx-usecs-irq"),
        (5, "rx-frames-irq"),
        (8, "tx-usecs-irq"),
        (9, "tx-frames-irq"),
        (10, "stats-block-usecs"),
        (13, "pkt-rate-low"),
        (14, "rx-usecs-low"),
        (15, "rx-frame-low"),
        (16, "tx-usecs-low"),
        (17, "tx-frame-low"),
        (18, "pkt-rate-high"),
        (19, "rx-usecs-high"),
        (20, "rx-frame-high"),
        (21, "tx-usecs-high"),
        (22, "tx-frame-high"),
        (23, "sample-interval"),
        (26, "tx-aggr-max-bytes"),
        (27, "tx-aggr-max-frames"),
        (28, "tx-aggr-time-usecs"),
    ];
}

/// `ETHTOOL_A_PAUSE_*`.
pub mod pause {
    /// `ETHTOOL_A_PAUSE_AUTONEG`.
    pub const AUTONEG: u16 = 2;
    /// `ETHTOOL_A_PAUSE_RX`.
    pub const RX: u16 = 3;
    /// `ETHTOOL_A_PAUSE_TX`.
    pub const TX: u16 = 4;
}

/// `ETHTOOL_A_LINKMODES_*` and `ETHTOOL_A_LINKSTATE_*`.
pub mod link {
    /// `ETHTOOL_A_LINKMODES_AUTONEG`.
    pub const MODES_AUTONEG: u16 = 2;
    /// `ETHTOOL_A_LINKMODES_SPEED`.
    pub const MODES_SPEED: u16 = 5;
    /// `ETHTOOL_A_LINKMODES_DUPLEX`.
    pub const MODES_DUPLEX: u16 = 6;
    /// `ETHTOOL_A_LINKSTATE_LINK`.
    pub const STATE_LINK: u16 = 2;
    /// `SPEED_UNKNOWN` (`include/uapi/linux/ethtool.h`).
    pub const SPEED_UNKNOWN: u32 = u32::MAX;
    /// `DUPLEX_HALF`.
    pub const DUPLEX_HALF: u8 = 0;
    /// `DUPLEX_FULL`.
    pub const DUPLEX_FULL: u8 = 1;
}

/// netdev family: `NETDEV_FAMILY_NAME` / `NETDEV_FAMILY_VERSION`.
pub const NETDEV_FAMILY: &str = "netdev";
/// netdev family version.
pub const NETDEV_VERSION: u8 = 1;

/// `NETDEV_CMD_QSTATS_GET`; dump replies carry the same command.
pub const NETDEV_CMD_QSTATS_GET: u8 = 12;

/// `NETDEV_A_QSTATS_*` and the enums they carry.
pub mod qstats {
    /// `NETDEV_A_QSTATS_IFINDEX`.
    pub const IFINDEX: u16 = 1;
    /// `NETDEV_A_QSTATS_QUEUE_TYPE`.
    pub const QUEUE_TYPE: u16 = 2;
    /// `NETDEV_A_QSTATS_QUEUE_ID`.
    pub const QUEUE_ID: u16 = 3;
    /// `NETDEV_A_QSTATS_SCOPE`.
    pub const SCOPE: u16 = 4;
    /// `NETDEV_QSTATS_SCOPE_QUEUE`.
    pub const SCOPE_QUEUE: u32 = 1;
    /// `NETDEV_QUEUE_TYPE_RX`.
    pub const QUEUE_TYPE_RX: u32 = 0;
    /// `NETDEV_QUEUE_TYPE_TX`.
    pub const QUEUE_TYPE_TX: u32 = 1;

    /// Statistic attributes by their names in
    /// `Documentation/netlink/specs/netdev.yaml` (attribute set `qstats`).
    pub const NAMES: &[(u16, &str)] = &[
        (8, "rx-packets"),
        (9, "rx-bytes"),
        (10, "tx-packets"),
        (11, "tx-bytes"),
        (12, "rx-alloc-fail"),
        (13, "rx-hw-drops"),
        (14, "rx-hw-drop-overruns"),
        (15, "rx-csum-complete"),
        (16, "rx-csum-unnecessary"),
        (17, "rx-csum-none"),
        (18, "rx-csum-bad"),
        (19, "rx-hw-gro-packets"),
        (20, "rx-hw-gro-bytes"),
        (21, "rx-hw-gro-wire-packets"),
        (22, "rx-hw-gro-wire-bytes"),
        (23, "rx-hw-drop-ratelimits"),
        (24, "tx-hw-drops"),
        (25, "tx-hw-drop-errors"),
        (26, "tx-csum-none"),
        (27, "tx-needs-csum"),
        (28, "tx-hw-gso-packets"),
        (29, "tx-hw-gso-bytes"),
        (30, "tx-hw-gso-wire-packets"),
        (31, "tx-hw-gso-wire-bytes"),
        (32, "tx-hw-drop-ratelimits"),
        (33, "tx-stop"),
        (34, "tx-wake"),
    ];
}
