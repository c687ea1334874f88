//! Driver-aware classification of `ethtool -S` counter names into per-queue counters.
