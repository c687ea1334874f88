//! ethtool and netdev generic netlink (neli): NIC facts and per-queue qstats.
