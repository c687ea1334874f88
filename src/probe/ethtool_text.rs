//! Parsers and formatters for the text `ethtool` prints: `-i`, `-S`, `-l`,
//! `-g`, `-k`, `-c`, `-a` and plain `ethtool IF`.
//!
//! A captured directory or a sosreport holds NIC facts as these texts
//! (`sos_commands/networking/ethtool_-l_eth0`, ...), and `wirescope capture`
//! writes the same files from live data. Each `format_*` prints what ethtool
//! 6.x prints (tabs, `n/a`, blank lines included) and each `parse_*` reads both
//! that and older or hand-trimmed variants, so one parser serves every source;
//! `parse(format(x)) == x` holds for every type.
//!
//! This module only converts text: it never runs ethtool, reads files or talks
//! to the kernel. Errors name the command, the 1-based line and what was wrong.

use super::facts::{Channels, Coalesce, DrvInfo, Feature, Features, LinkInfo, Pause, Rings};
use super::nic::NicStats;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;

/// Text that is not the output this parser expects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// One line does not have the expected shape.
    #[error("`{command}` output, line {line}: {problem}: {text:?}")]
    BadLine {
        /// The ethtool command whose output was being read (e.g. `ethtool -l`).
        command: &'static str,
        /// 1-based line number.
        line: usize,
        /// What is wrong with the line.
        problem: String,
        /// The line as read.
        text: String,
    },
    /// A line or section the output must contain is absent (for example an
    /// error message such as `netlink error: Operation not supported` was
    /// captured instead of the output).
    #[error("`{command}` output has no `{missing}` line")]
    Missing {
        /// The ethtool command whose output was being read.
        command: &'static str,
        /// The line that was expected.
        missing: &'static str,
    },
}

impl ParseError {
    /// The 1-based line the error is about, when it is about one line.
    pub fn line(&self) -> Option<usize> {
        match self {
            ParseError::BadLine { line, .. } => Some(*line),
            ParseError::Missing { .. } => None,
        }
    }
}

fn bad(command: &'static str, line: usize, problem: impl Into<String>, text: &str) -> ParseError {
    ParseError::BadLine {
        command,
        line,
        problem: problem.into(),
        text: text.to_owned(),
    }
}

/// Lines with their 1-based numbers (`\r\n` endings accepted).
fn numbered(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(i, l)| (i + 1, l))
}

/// `key: value` split at the first colon, both sides trimmed.
fn key_value(line: &str) -> Option<(&str, &str)> {
    line.split_once(':').map(|(k, v)| (k.trim(), v.trim()))
}

/// `n/a` → None, a number → Some.
fn opt_u32(value: &str) -> Result<Option<u32>, &'static str> {
    if value == "n/a" {
        return Ok(None);
    }
    value
        .parse()
        .map(Some)
        .map_err(|_| "expected a number or `n/a`")
}

/// A flag's words for true and false, and what a bad word is told.
struct Flag(&'static str, &'static str, &'static str);

const ON_OFF: Flag = Flag("on", "off", "expected `on` or `off`");
const YES_NO: Flag = Flag("yes", "no", "expected `yes` or `no`");

impl Flag {
    fn parse(&self, value: &str) -> Result<bool, &'static str> {
        match value {
            v if v == self.0 => Ok(true),
            v if v == self.1 => Ok(false),
            _ => Err(self.2),
        }
    }

    fn text(&self, b: bool) -> &'static str {
        if b {
            self.0
        } else {
            self.1
        }
    }
}

fn na(value: Option<u32>) -> String {
    value.map_or_else(|| "n/a".to_owned(), |v| v.to_string())
}

// ---------------------------------------------------------------- ethtool -i

const DRVINFO: &str = "ethtool -i";

/// Parse `ethtool -i` (driver, version, firmware, bus, `supports-*` flags).
///
/// Unknown keys are ignored; older ethtool versions that do not print
/// `expansion-rom-version` leave it empty. The `driver:` line is required.
pub fn parse_drvinfo(text: &str) -> Result<DrvInfo, ParseError> {
    let mut info = DrvInfo::default();
    let mut seen_driver = false;
    for (n, line) in numbered(text) {
        if line.trim().is_empty() {
            continue;
        }
        let Some((key, value)) = key_value(line) else {
            return Err(bad(DRVINFO, n, "expected `key: value`", line));
        };
        let flag = |v: &str| YES_NO.parse(v).map_err(|p| bad(DRVINFO, n, p, line));
        match key {
            "driver" => {
                info.driver = value.to_owned();
                seen_driver = true;
            }
            "version" => info.version = value.to_owned(),
            "firmware-version" => info.firmware = value.to_owned(),
            "expansion-rom-version" => info.expansion_rom = value.to_owned(),
            "bus-info" => info.bus_info = value.to_owned(),
            "supports-statistics" => info.supports_statistics = flag(value)?,
            "supports-test" => info.supports_test = flag(value)?,
            "supports-eeprom-access" => info.supports_eeprom_access = flag(value)?,
            "supports-register-dump" => info.supports_register_dump = flag(value)?,
            "supports-priv-flags" => info.supports_priv_flags = flag(value)?,
            _ => {}
        }
    }
    if !seen_driver {
        return Err(ParseError::Missing {
            command: DRVINFO,
            missing: "driver:",
        });
    }
    Ok(info)
}

/// Format as `ethtool -i` prints it (ethtool 6.x: an empty value keeps the
/// space after the colon).
pub fn format_drvinfo(info: &DrvInfo) -> String {
    format!(
        "driver: {}\nversion: {}\nfirmware-version: {}\nexpansion-rom-version: {}\n\
         bus-info: {}\nsupports-statistics: {}\nsupports-test: {}\n\
         supports-eeprom-access: {}\nsupports-register-dump: {}\nsupports-priv-flags: {}\n",
        info.driver,
        info.version,
        info.firmware,
        info.expansion_rom,
        info.bus_info,
        YES_NO.text(info.supports_statistics),
        YES_NO.text(info.supports_test),
        YES_NO.text(info.supports_eeprom_access),
        YES_NO.text(info.supports_register_dump),
        YES_NO.text(info.supports_priv_flags),
    )
}

// ---------------------------------------------------------------- ethtool -S

const STATS: &str = "ethtool -S";

/// A `NIC statistics:` (or `PHY statistics:`) header line.
fn is_stats_header(body: &str) -> bool {
    body.ends_with("statistics:") && !body.contains(": ")
}

/// Parse `ethtool -S`: `name: value` pairs in the order printed, duplicates
/// kept.
///
/// Accepts the real shape (`NIC statistics:` header, lines indented by five
/// spaces) and the bare shape (no header, no indent). Names may contain
/// spaces, brackets and colons (bnxt: `[0]: rx_ucast_packets`), so each line is
/// split at its last `": "`.
pub fn parse_stats(text: &str) -> Result<Vec<(String, u64)>, ParseError> {
    let mut stats = Vec::new();
    for c in stat_lines(text) {
        let (_, name, value) = c?;
        stats.push((name.to_owned(), value));
    }
    Ok(stats)
}

/// [`parse_stats`] into a [`NicStats`] that shares `prev`'s names when the
/// text lists the same ones (the sampler's every interval): no name is
/// copied then, only compared.
pub fn parse_stats_reusing(
    text: &str,
    prev: Option<&Arc<[String]>>,
) -> Result<NicStats, ParseError> {
    let known = prev.map_or(&[][..], |p| &p[..]);
    let mut values = Vec::with_capacity(known.len());
    // The names once one differs from `prev` (those before it copied).
    let mut fresh: Option<Vec<String>> = None;
    for c in stat_lines(text) {
        let (_, name, value) = c?;
        let i = values.len();
        match &mut fresh {
            Some(f) => f.push(name.to_owned()),
            None if known.get(i).is_some_and(|k| k == name) => {}
            None => {
                let mut f = known[..i].to_vec();
                f.push(name.to_owned());
                fresh = Some(f);
            }
        }
        values.push(value);
    }
    let names = match (fresh, prev) {
        (Some(f), _) => f.into(),
        (None, Some(p)) if p.len() == values.len() => Arc::clone(p),
        (None, _) => known[..values.len()].into(),
    };
    Ok(NicStats { names, values })
}

/// Where the last `": "` of `b` starts.
fn last_colon_space(b: &[u8]) -> Option<usize> {
    (1..b.len())
        .rev()
        .find(|&i| b[i] == b' ' && b[i - 1] == b':')
        .map(|i| i - 1)
}

/// The counter lines of `ethtool -S` text: (line number, name, value).
/// Headers and blank lines are skipped; bytes are searched, not characters
/// (a big host parses some 20,000 of these lines each interval).
fn stat_lines(text: &str) -> impl Iterator<Item = Result<(usize, &str, u64), ParseError>> {
    numbered(text).filter_map(|(n, line)| {
        let body = line.trim_ascii_start();
        let end = body.trim_ascii_end();
        if end.is_empty() || is_stats_header(end) {
            return None;
        }
        let Some(at) = last_colon_space(body.as_bytes()) else {
            return Some(Err(bad(STATS, n, "expected `name: value`", line)));
        };
        let (name, value) = (&body[..at], &body[at + 2..]);
        Some(
            value
                .trim_ascii()
                .parse::<u64>()
                .map(|v| (n, name, v))
                .map_err(|_| bad(STATS, n, "value is not an unsigned integer", line)),
        )
    })
}

/// Format as `ethtool -S` prints it: `NIC statistics:` then
/// `     name: value` lines.
pub fn format_stats(stats: &[(String, u64)]) -> String {
    let mut out = String::from("NIC statistics:\n");
    for (name, value) in stats {
        let _ = writeln!(out, "     {name}: {value}");
    }
    out
}

// ---------------------------------------------------------- ethtool -l / -g

const PRESET: &str = "Pre-set maximums:";
const CURRENT: &str = "Current hardware settings:";

/// The keys `ethtool -l` prints in each section.
const CHANNEL_KEYS: [&str; 4] = ["RX", "TX", "Other", "Combined"];

/// The keys of the classic `ethtool -g` block in each section.
const RING_KEYS: [&str; 4] = ["RX", "RX Mini", "RX Jumbo", "TX"];

/// Walk the two-section layout shared by `-l` and `-g`: the values of `keys`
/// under `Pre-set maximums:`, then under `Current hardware settings:`
/// (`n/a` → None); other keys are ignored.
fn parse_sections(
    command: &'static str,
    header: &str,
    keys: [&str; 4],
    text: &str,
) -> Result<[[Option<u32>; 4]; 2], ParseError> {
    let mut values = [[None; 4]; 2];
    let mut section = None;
    let (mut seen_max, mut seen_current) = (false, false);
    for (n, line) in numbered(text) {
        let t = line.trim();
        if t.is_empty() || (t.starts_with(header) && t.ends_with(':')) {
            continue;
        }
        if t == PRESET {
            (section, seen_max) = (Some(0), true);
            continue;
        }
        if t == CURRENT {
            (section, seen_current) = (Some(1), true);
            continue;
        }
        let Some((key, value)) = key_value(t) else {
            return Err(bad(command, n, "expected `name: value`", line));
        };
        let Some(section) = section else {
            return Err(bad(command, n, "value before `Pre-set maximums:`", line));
        };
        if let Some(i) = keys.iter().position(|k| *k == key) {
            values[section][i] = opt_u32(value).map_err(|p| bad(command, n, p, line))?;
        }
    }
    let missing = if !seen_max {
        PRESET
    } else if !seen_current {
        CURRENT
    } else {
        return Ok(values);
    };
    Err(ParseError::Missing { command, missing })
}

/// Format the two-section layout shared by `-l` and `-g`: the title line,
/// then `keys` and their values under both sections, tab-aligned as ethtool
/// prints them.
fn format_sections(title: &str, keys: [&str; 4], sections: [[Option<u32>; 4]; 2]) -> String {
    let mut out = format!("{title}:\n");
    for (header, values) in [PRESET, CURRENT].into_iter().zip(sections) {
        out.push_str(header);
        out.push('\n');
        for (key, value) in keys.into_iter().zip(values) {
            let tabs = if key.len() < 7 { "\t\t" } else { "\t" };
            let _ = writeln!(out, "{key}:{tabs}{}", na(value));
        }
    }
    out
}

/// Parse `ethtool -l` (channel counts); `n/a` → None, unknown lines ignored.
pub fn parse_channels(text: &str) -> Result<Channels, ParseError> {
    let [[max_rx, max_tx, max_other, max_combined], [rx, tx, other, combined]] =
        parse_sections("ethtool -l", "Channel parameters for ", CHANNEL_KEYS, text)?;
    Ok(Channels {
        max_rx,
        max_tx,
        max_other,
        max_combined,
        rx,
        tx,
        other,
        combined,
    })
}

/// Format as `ethtool -l IFNAME` prints it.
pub fn format_channels(ifname: &str, c: &Channels) -> String {
    format_sections(
        &format!("Channel parameters for {ifname}"),
        CHANNEL_KEYS,
        [
            [c.max_rx, c.max_tx, c.max_other, c.max_combined],
            [c.rx, c.tx, c.other, c.combined],
        ],
    )
}

/// Parse `ethtool -g` (ring sizes); `n/a` → None.
///
/// The lines newer ethtool adds (`RX Buf Len`, `CQE Size`, `TX Push`,
/// `RX Push`, `TX push buff len`, `TCP data split`, ...) are ignored.
pub fn parse_rings(text: &str) -> Result<Rings, ParseError> {
    let [[max_rx, max_rx_mini, max_rx_jumbo, max_tx], [rx, rx_mini, rx_jumbo, tx]] =
        parse_sections("ethtool -g", "Ring parameters for ", RING_KEYS, text)?;
    Ok(Rings {
        max_rx,
        max_rx_mini,
        max_rx_jumbo,
        max_tx,
        rx,
        rx_mini,
        rx_jumbo,
        tx,
    })
}

/// Format the classic `ethtool -g IFNAME` block (RX, RX Mini, RX Jumbo, TX in
/// both sections), as ethtool's ioctl path prints it; ethtool 6.x over netlink
/// prints the same block followed by lines [`Rings`] does not hold.
pub fn format_rings(ifname: &str, r: &Rings) -> String {
    format_sections(
        &format!("Ring parameters for {ifname}"),
        RING_KEYS,
        [
            [r.max_rx, r.max_rx_mini, r.max_rx_jumbo, r.max_tx],
            [r.rx, r.rx_mini, r.rx_jumbo, r.tx],
        ],
    )
}

// ---------------------------------------------------------------- ethtool -k

const FEATURES: &str = "ethtool -k";

/// ethtool's legacy flags (`off_flag_def`): the name it prints and the
/// pattern (at most one `*`) of the kernel features it groups under it.
const LEGACY: &[(&str, &str)] = &[
    ("rx-checksumming", "rx-checksum"),
    ("tx-checksumming", "tx-checksum-*"),
    ("scatter-gather", "tx-scatter-gather*"),
    ("tcp-segmentation-offload", "tx-tcp*-segmentation"),
    ("udp-fragmentation-offload", "tx-udp-fragmentation"),
    ("generic-segmentation-offload", "tx-generic-segmentation"),
    ("generic-receive-offload", "rx-gro"),
    ("large-receive-offload", "rx-lro"),
    ("rx-vlan-offload", "rx-vlan-hw-parse"),
    ("tx-vlan-offload", "tx-vlan-hw-insert"),
    ("ntuple-filters", "rx-ntuple-filter"),
    ("receive-hashing", "rx-hashing"),
];

/// ethtool over netlink never prints this legacy flag (no such kernel feature).
const UFO: &str = "udp-fragmentation-offload";

/// Kernel feature names in netdev feature-bit order (`netdev_features_strings`),
/// including names removed from recent kernels, so that old and new outputs
/// come back in ethtool's order. A name not listed is printed after these,
/// alphabetically.
const KERNEL_ORDER: &[&str] = &[
    "tx-scatter-gather",
    "tx-checksum-ipv4",
    "tx-checksum-ip-generic",
    "tx-checksum-ipv6",
    "highdma",
    "tx-scatter-gather-fraglist",
    "tx-vlan-hw-insert",
    "rx-vlan-hw-parse",
    "rx-vlan-filter",
    "vlan-challenged",
    "tx-generic-segmentation",
    "tx-lockless",
    "netns-local",
    "rx-gro",
    "rx-lro",
    "tx-tcp-segmentation",
    "tx-gso-robust",
    "tx-tcp-ecn-segmentation",
    "tx-tcp-mangleid-segmentation",
    "tx-tcp6-segmentation",
    "tx-fcoe-segmentation",
    "tx-gre-segmentation",
    "tx-gre-csum-segmentation",
    "tx-ipip-segmentation",
    "tx-sit-segmentation",
    "tx-ipxip4-segmentation",
    "tx-ipxip6-segmentation",
    "tx-udp_tnl-segmentation",
    "tx-udp_tnl-csum-segmentation",
    "tx-gso-partial",
    "tx-tunnel-remcsum-segmentation",
    "tx-sctp-segmentation",
    "tx-esp-segmentation",
    "tx-udp-fragmentation",
    "tx-udp-segmentation",
    "tx-gso-list",
    "tx-tcp-accecn-segmentation",
    "tx-checksum-fcoe-crc",
    "tx-checksum-sctp",
    "fcoe-mtu",
    "rx-ntuple-filter",
    "rx-hashing",
    "rx-checksum",
    "tx-nocache-copy",
    "loopback",
    "rx-fcs",
    "rx-all",
    "tx-vlan-stag-hw-insert",
    "rx-vlan-stag-hw-parse",
    "rx-vlan-stag-filter",
    "l2-fwd-offload",
    "busy-poll",
    "hw-tc-offload",
    "esp-hw-offload",
    "esp-tx-csum-hw-offload",
    "rx-udp_tunnel-port-offload",
    "tls-hw-tx-offload",
    "tls-hw-rx-offload",
    "rx-gro-hw",
    "tls-hw-record",
    "rx-gro-list",
    "macsec-hw-offload",
    "rx-udp-gro-forwarding",
    "hsr-tag-ins-offload",
    "hsr-tag-rm-offload",
    "hsr-fwd-offload",
    "hsr-dup-offload",
];

/// ethtool's `flag_pattern_match`: `pattern` with at most one `*`.
fn pattern_match(name: &str, pattern: &str) -> bool {
    match pattern.split_once('*') {
        None => name == pattern,
        Some((head, tail)) => {
            name.len() >= head.len() + tail.len() && name.starts_with(head) && name.ends_with(tail)
        }
    }
}

/// Sort key: kernel bit order first, unknown names after, by name.
fn kernel_rank(name: &str) -> (usize, &str) {
    let pos = KERNEL_ORDER.iter().position(|k| *k == name);
    (pos.unwrap_or(usize::MAX), name)
}

/// A feature state of `ethtool -k` that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum FeatureStateError {
    /// Neither `on` nor `off`.
    #[error("{0}")]
    OnOff(&'static str),
    /// Text after the state that is not a `[tag]`.
    #[error("unexpected text after the state: {0:?}")]
    Trailing(String),
    /// A tag ethtool does not print.
    #[error("unknown tag [{0}]")]
    Tag(String),
}

/// `on [fixed]`, `off [requested on]`, ... → Feature.
fn parse_feature_state(state: &str) -> Result<Feature, FeatureStateError> {
    let (word, mut rest) = state.split_once(' ').unwrap_or((state, ""));
    let mut feature = Feature {
        on: ON_OFF.parse(word).map_err(FeatureStateError::OnOff)?,
        fixed: false,
        requested: None,
    };
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            return Ok(feature);
        }
        let Some((tag, after)) = rest.strip_prefix('[').and_then(|r| r.split_once(']')) else {
            return Err(FeatureStateError::Trailing(rest.to_string()));
        };
        match tag {
            "fixed" => feature.fixed = true,
            "requested on" => feature.requested = Some(true),
            "requested off" => feature.requested = Some(false),
            _ => return Err(FeatureStateError::Tag(tag.to_string())),
        }
        rest = after;
    }
}

/// Parse `ethtool -k`: every printed feature by the name ethtool prints, both
/// the legacy group names (`tcp-segmentation-offload`) and the tab-indented
/// kernel features under them (`tx-tcp-segmentation`).
pub fn parse_features(text: &str) -> Result<Features, ParseError> {
    let mut features = BTreeMap::new();
    let mut seen_header = false;
    for (n, line) in numbered(text) {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if (t.starts_with("Features for ") || t.starts_with("Offload parameters for "))
            && t.ends_with(':')
        {
            seen_header = true;
            continue;
        }
        let Some((name, state)) = t.split_once(": ") else {
            return Err(bad(FEATURES, n, "expected `name: on|off`", line));
        };
        let feature =
            parse_feature_state(state).map_err(|p| bad(FEATURES, n, p.to_string(), line))?;
        features.insert(name.to_owned(), feature);
    }
    if !seen_header && features.is_empty() {
        return Err(ParseError::Missing {
            command: FEATURES,
            missing: "Features for IF:",
        });
    }
    Ok(Features(features))
}

fn push_feature(out: &mut String, indent: &str, name: &str, f: &Feature) {
    let fixed = if f.fixed { " [fixed]" } else { "" };
    let requested = match f.requested {
        Some(true) => " [requested on]",
        Some(false) => " [requested off]",
        None => "",
    };
    let _ = writeln!(
        out,
        "{indent}{name}: {}{fixed}{requested}",
        ON_OFF.text(f.on)
    );
}

/// Format as `ethtool -k IFNAME` prints it: each legacy group name with its
/// kernel features tab-indented under it, then the other features in kernel
/// order.
///
/// Prints exactly the features in `features`, never more: to get ethtool's
/// grouping from a kernel feature list, build the map with
/// [`features_from_kernel`].
pub fn format_features(ifname: &str, features: &Features) -> String {
    let map = &features.0;
    let mut out = format!("Features for {ifname}:\n");
    let mut printed = BTreeSet::new();
    for (long, pattern) in LEGACY {
        let Some(parent) = map.get(*long) else {
            continue;
        };
        push_feature(&mut out, "", long, parent);
        printed.insert(*long);
        let mut children: Vec<&str> = map
            .keys()
            .map(String::as_str)
            .filter(|k| k != long && pattern_match(k, pattern))
            .collect();
        children.sort_by_key(|k| kernel_rank(k));
        for child in children {
            if let Some(f) = map.get(child) {
                push_feature(&mut out, "\t", child, f);
            }
            printed.insert(child);
        }
    }
    let mut rest: Vec<(&str, &Feature)> = map
        .iter()
        .map(|(k, f)| (k.as_str(), f))
        .filter(|(k, _)| !printed.contains(k))
        .collect();
    rest.sort_by_key(|(k, _)| kernel_rank(k));
    for (name, f) in rest {
        push_feature(&mut out, "", name, f);
    }
    out
}

/// Build the map `ethtool -k` shows from features stored under kernel names
/// (`rx-gro`, `tx-tcp-segmentation`, ... as ethtool netlink reports them),
/// following ethtool's `dump_features`: a legacy group with exactly one member
/// appears under the legacy name only (`generic-receive-offload`), with that
/// member's flags; a group with several members (or none) gets its legacy name
/// (on when any member is on) plus each member under its kernel name; other
/// features keep their names.
pub fn features_from_kernel(kernel: &Features) -> Features {
    let mut out = BTreeMap::new();
    let mut grouped = BTreeSet::new();
    for (long, pattern) in LEGACY {
        let members: Vec<(&String, &Feature)> = kernel
            .0
            .iter()
            .filter(|(name, _)| !grouped.contains(name.as_str()) && pattern_match(name, pattern))
            .collect();
        grouped.extend(members.iter().map(|(name, _)| name.as_str()));
        if *long == UFO {
            continue;
        }
        if let [(_, only)] = members.as_slice() {
            out.insert((*long).to_owned(), **only);
            continue;
        }
        let legacy = Feature {
            on: members.iter().any(|(_, f)| f.on),
            fixed: false,
            requested: None,
        };
        out.insert((*long).to_owned(), legacy);
        for (name, f) in members {
            out.insert(name.clone(), *f);
        }
    }
    for (name, f) in &kernel.0 {
        if !grouped.contains(name.as_str()) {
            out.insert(name.clone(), *f);
        }
    }
    Features(out)
}

// ---------------------------------------------------------------- ethtool -c

const COALESCE: &str = "ethtool -c";

/// The numeric fields ethtool 6.x prints in `-c`, in order, grouped by blank
/// lines; the four named in [`Coalesce`] are stored there, the rest in
/// `Coalesce::other`.
const COALESCE_GROUPS: &[&[&str]] = &[
    &[
        "stats-block-usecs",
        "sample-interval",
        "pkt-rate-low",
        "pkt-rate-high",
    ],
    &["rx-usecs", "rx-frames", "rx-usecs-irq", "rx-frames-irq"],
    &["tx-usecs", "tx-frames", "tx-usecs-irq", "tx-frames-irq"],
    &[
        "rx-usecs-low",
        "rx-frame-low",
        "tx-usecs-low",
        "tx-frame-low",
    ],
    &[
        "rx-usecs-high",
        "rx-frame-high",
        "tx-usecs-high",
        "tx-frame-high",
    ],
];

fn coalesce_slot<'c>(c: &'c mut Coalesce, key: &str) -> Option<&'c mut Option<u32>> {
    match key {
        "rx-usecs" => Some(&mut c.rx_usecs),
        "rx-frames" => Some(&mut c.rx_frames),
        "tx-usecs" => Some(&mut c.tx_usecs),
        "tx-frames" => Some(&mut c.tx_frames),
        _ => None,
    }
}

/// `on  TX: off` (after `Adaptive RX:`) → (rx, tx), `n/a` → None.
fn adaptive_pair(rest: &str) -> Result<(Option<bool>, Option<bool>), &'static str> {
    let tri = |v: &str| match v {
        "n/a" => Ok(None),
        v => ON_OFF.parse(v).map(Some),
    };
    match rest.split_whitespace().collect::<Vec<_>>().as_slice() {
        [rx, "TX:", tx] => Ok((tri(rx)?, tri(tx)?)),
        _ => Err("expected `Adaptive RX: on|off|n/a  TX: on|off|n/a`"),
    }
}

/// `key: value`, or `key<TAB>value` (some ethtool versions print
/// `tx-aggr-time-usecs` without a colon).
fn coalesce_key_value(t: &str) -> Option<(&str, &str)> {
    key_value(t).or_else(|| {
        t.split_once(char::is_whitespace)
            .map(|(k, v)| (k.trim(), v.trim()))
    })
}

/// Parse `ethtool -c`: adaptive flags, rx/tx usecs and frames, and every
/// other numeric field into `other`; `n/a` → absent. The `CQE mode` line and
/// other non-numeric lines are ignored. The `Adaptive RX:` line is required.
pub fn parse_coalesce(text: &str) -> Result<Coalesce, ParseError> {
    let mut c = Coalesce::default();
    let mut seen_adaptive = false;
    for (n, line) in numbered(text) {
        let t = line.trim();
        if t.is_empty() || t.starts_with("Coalesce parameters for ") || t.starts_with("CQE mode ") {
            continue;
        }
        if let Some(rest) = t.strip_prefix("Adaptive RX:") {
            (c.adaptive_rx, c.adaptive_tx) =
                adaptive_pair(rest).map_err(|p| bad(COALESCE, n, p, line))?;
            seen_adaptive = true;
            continue;
        }
        let Some((key, value)) = coalesce_key_value(t) else {
            return Err(bad(COALESCE, n, "expected `name: value`", line));
        };
        let parsed = opt_u32(value);
        match (coalesce_slot(&mut c, key), parsed) {
            (Some(slot), Ok(v)) => *slot = v,
            (Some(_), Err(p)) => return Err(bad(COALESCE, n, p, line)),
            (None, Ok(Some(v))) => {
                c.other.insert(key.to_owned(), v);
            }
            (None, _) => {}
        }
    }
    if !seen_adaptive {
        return Err(ParseError::Missing {
            command: COALESCE,
            missing: "Adaptive RX:",
        });
    }
    Ok(c)
}

fn on_off_na(v: Option<bool>) -> &'static str {
    v.map_or("n/a", |b| ON_OFF.text(b))
}

/// Format as `ethtool -c IFNAME` prints it (ethtool 6.x, netlink): every
/// field, `n/a` where absent, groups separated by blank lines. The `CQE mode`
/// line is printed as `n/a` ([`Coalesce`] does not hold it); numeric fields of
/// `other` that ethtool 6.1 does not print follow in one more group.
pub fn format_coalesce(ifname: &str, c: &Coalesce) -> String {
    let mut out = format!(
        "Coalesce parameters for {ifname}:\nAdaptive RX: {}  TX: {}\n",
        on_off_na(c.adaptive_rx),
        on_off_na(c.adaptive_tx)
    );
    let mut named = Coalesce {
        other: Default::default(),
        ..*c
    };
    for (i, group) in COALESCE_GROUPS.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        for key in *group {
            let value =
                coalesce_slot(&mut named, key).map_or_else(|| c.other.get(*key).copied(), |v| *v);
            let _ = writeln!(out, "{key}: {}", na(value));
        }
    }
    out.push_str("\nCQE mode RX: n/a  TX: n/a\n\n");
    let known: BTreeSet<&str> = COALESCE_GROUPS
        .iter()
        .flat_map(|g| g.iter().copied())
        .collect();
    let extra: Vec<_> = c
        .other
        .iter()
        .filter(|(k, _)| !known.contains(k.as_str()))
        .collect();
    for (key, value) in &extra {
        let _ = writeln!(out, "{key}: {value}");
    }
    if !extra.is_empty() {
        out.push('\n');
    }
    out
}

// ---------------------------------------------------------------- ethtool -a

const PAUSE: &str = "ethtool -a";

/// Parse `ethtool -a` (`Autonegotiate`, `RX`, `TX`; `n/a` reads as off).
/// `RX/TX negotiated` and the `Statistics:` block are ignored.
pub fn parse_pause(text: &str) -> Result<Pause, ParseError> {
    let (mut autoneg, mut rx, mut tx) = (None, None, None);
    for (n, line) in numbered(text) {
        let t = line.trim();
        if t.is_empty() || t.starts_with("Pause parameters for ") || t == "Statistics:" {
            continue;
        }
        let Some((key, value)) = key_value(t) else {
            return Err(bad(PAUSE, n, "expected `name: value`", line));
        };
        let slot = match key {
            "Autonegotiate" => &mut autoneg,
            "RX" => &mut rx,
            "TX" => &mut tx,
            _ => continue,
        };
        let on = if value == "n/a" {
            false
        } else {
            ON_OFF.parse(value).map_err(|p| bad(PAUSE, n, p, line))?
        };
        *slot = Some(on);
    }
    let missing = |m| ParseError::Missing {
        command: PAUSE,
        missing: m,
    };
    Ok(Pause {
        autoneg: autoneg.ok_or_else(|| missing("Autonegotiate:"))?,
        rx: rx.ok_or_else(|| missing("RX:"))?,
        tx: tx.ok_or_else(|| missing("TX:"))?,
    })
}

/// Format as `ethtool -a IFNAME` prints it (ethtool 6.x ends with a blank
/// line; the `negotiated` lines need the link partner's modes and are not
/// printed).
pub fn format_pause(ifname: &str, p: &Pause) -> String {
    format!(
        "Pause parameters for {ifname}:\nAutonegotiate:\t{}\nRX:\t\t{}\nTX:\t\t{}\n\n",
        ON_OFF.text(p.autoneg),
        ON_OFF.text(p.rx),
        ON_OFF.text(p.tx)
    )
}

// ---------------------------------------------------------------- ethtool IF

const LINK: &str = "ethtool";

/// `25000Mb/s` → Some(25000), `Unknown!` → None.
fn parse_speed(value: &str) -> Result<Option<u32>, &'static str> {
    if value.starts_with("Unknown") {
        return Ok(None);
    }
    value
        .strip_suffix("Mb/s")
        .and_then(|v| v.parse().ok())
        .map(Some)
        .ok_or("expected `<N>Mb/s` or `Unknown!`")
}

/// Parse `ethtool IF`: speed, duplex, autonegotiation and carrier; every
/// other line (link modes, port, wake-on, ...) is ignored. `Unknown!` speed
/// or duplex → None.
pub fn parse_link(text: &str) -> Result<LinkInfo, ParseError> {
    let mut link = LinkInfo::default();
    let mut seen = false;
    for (n, line) in numbered(text) {
        let t = line.trim();
        if t.starts_with("Settings for ") && t.ends_with(':') {
            seen = true;
            continue;
        }
        let Some((key, value)) = key_value(t) else {
            continue;
        };
        let err = |p| bad(LINK, n, p, line);
        match key {
            "Speed" => link.speed_mbps = parse_speed(value).map_err(err)?,
            "Duplex" if value.starts_with("Unknown") => link.duplex = None,
            "Duplex" => link.duplex = Some(value.to_owned()),
            "Auto-negotiation" => link.autoneg = Some(ON_OFF.parse(value).map_err(err)?),
            "Link detected" => {
                let word = value.split_whitespace().next().unwrap_or("");
                link.link_detected = Some(YES_NO.parse(word).map_err(err)?);
            }
            _ => continue,
        }
        seen = true;
    }
    if !seen {
        return Err(ParseError::Missing {
            command: LINK,
            missing: "Settings for IF:",
        });
    }
    Ok(link)
}

/// Format a minimal `ethtool IFNAME` block: `Speed`, `Duplex`,
/// `Auto-negotiation` and `Link detected`, tab-indented as ethtool prints
/// them. When speed, duplex and autonegotiation are all unknown only
/// `Link detected` is printed, as ethtool does for devices without link
/// settings (`lo`).
pub fn format_link(ifname: &str, link: &LinkInfo) -> String {
    let mut out = format!("Settings for {ifname}:\n");
    let no_settings = link.speed_mbps.is_none() && link.duplex.is_none() && link.autoneg.is_none();
    if !no_settings {
        let speed = link
            .speed_mbps
            .map_or_else(|| "Unknown!".to_owned(), |s| format!("{s}Mb/s"));
        let _ = writeln!(out, "\tSpeed: {speed}");
        let duplex = link.duplex.as_deref().unwrap_or("Unknown! (255)");
        let _ = writeln!(out, "\tDuplex: {duplex}");
        if let Some(a) = link.autoneg {
            let _ = writeln!(out, "\tAuto-negotiation: {}", ON_OFF.text(a));
        }
    }
    if let Some(l) = link.link_detected {
        let _ = writeln!(out, "\tLink detected: {}", YES_NO.text(l));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn dir(flag: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/ethtool")
            .join(flag)
    }

    fn fixture(rel: &str) -> String {
        let path = dir(rel);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Every fixture under `tests/fixtures/ethtool/<flag>/`, with its name.
    fn all(flag: &str) -> Vec<(String, String)> {
        let mut out: Vec<_> = std::fs::read_dir(dir(flag))
            .unwrap_or_else(|e| panic!("{flag}: {e}"))
            .map(|e| {
                let e = e.expect("dir entry");
                let name = e.file_name().to_string_lossy().into_owned();
                let text = std::fs::read_to_string(e.path()).expect("fixture text");
                (name, text)
            })
            .collect();
        out.sort();
        assert!(!out.is_empty(), "no fixtures in {flag}");
        out
    }

    /// The interface named in a `<prefix> IF:` header line.
    fn ifname<'a>(text: &'a str, prefix: &str) -> &'a str {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix)?.strip_suffix(':'))
            .expect("header line")
    }

    #[test]
    fn every_fixture_parses() {
        for (name, text) in all("i") {
            parse_drvinfo(&text).unwrap_or_else(|e| panic!("i/{name}: {e}"));
        }
        for (name, text) in all("S") {
            let stats = parse_stats(&text).unwrap_or_else(|e| panic!("S/{name}: {e}"));
            assert!(!stats.is_empty(), "S/{name}");
        }
        for (name, text) in all("l") {
            parse_channels(&text).unwrap_or_else(|e| panic!("l/{name}: {e}"));
        }
        for (name, text) in all("g") {
            parse_rings(&text).unwrap_or_else(|e| panic!("g/{name}: {e}"));
        }
        for (name, text) in all("k") {
            let f = parse_features(&text).unwrap_or_else(|e| panic!("k/{name}: {e}"));
            assert!(f.0.len() > 50, "k/{name}");
        }
        for (name, text) in all("c") {
            parse_coalesce(&text).unwrap_or_else(|e| panic!("c/{name}: {e}"));
        }
        for (name, text) in all("a") {
            parse_pause(&text).unwrap_or_else(|e| panic!("a/{name}: {e}"));
        }
        for (name, text) in all("link") {
            parse_link(&text).unwrap_or_else(|e| panic!("link/{name}: {e}"));
        }
    }

    #[test]
    fn drvinfo_golden_values() {
        let inbox = parse_drvinfo(&fixture("i/mlx5_core-inbox-2015")).expect("parse");
        assert_eq!(inbox.driver, "mlx5_core");
        assert_eq!(inbox.version, "3.0-1 (January 2015)");
        assert_eq!(inbox.firmware, "12.17.1010");
        assert_eq!(inbox.expansion_rom, "");
        assert_eq!(inbox.bus_info, "0000:82:00.0");
        assert!(inbox.supports_statistics && !inbox.supports_test && !inbox.supports_priv_flags);

        let ofed = parse_drvinfo(&fixture("i/mlx5_core-ofed-4.3")).expect("parse");
        assert_eq!(ofed.version, "4.3-1.0.1");
        assert_eq!(ofed.firmware, "12.17.1010 (MT_2140110033)");
        assert!(ofed.supports_test && ofed.supports_priv_flags);

        let veth = parse_drvinfo(&fixture("i/veth")).expect("parse");
        assert_eq!(
            (veth.driver.as_str(), veth.version.as_str()),
            ("veth", "1.0")
        );
        assert_eq!((veth.firmware.as_str(), veth.bus_info.as_str()), ("", ""));
    }

    #[test]
    fn drvinfo_format_is_byte_exact() {
        for name in ["veth", "virtio_net-6.18", "ifb", "mlx5_core-6.8"] {
            let text = fixture(&format!("i/{name}"));
            let info = parse_drvinfo(&text).expect("parse");
            assert_eq!(format_drvinfo(&info), text, "i/{name}");
        }
    }

    #[test]
    fn stats_golden_values() {
        let mlx5 = parse_stats(&fixture("S/mlx5_core")).expect("parse");
        let get =
            |stats: &[(String, u64)], n: &str| stats.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
        assert_eq!(mlx5[0], ("rx_packets".to_owned(), 845_320_277));
        assert_eq!(get(&mlx5, "rx0_packets"), Some(53_947_906));
        assert_eq!(get(&mlx5, "rx0_bytes"), Some(146_815_482_364));

        let bnxt = parse_stats(&fixture("S/bnxt_en")).expect("parse");
        assert_eq!(
            bnxt[0],
            ("[0]: rx_ucast_packets".to_owned(), 10_198_513_532)
        );
        // Duplicated-looking names stay separate entries in printed order.
        let discards: Vec<_> = bnxt
            .iter()
            .filter(|(k, _)| k.ends_with(": rx_discards"))
            .collect();
        assert_eq!(discards.len(), 12);

        let sfc = parse_stats(&fixture("S/sfc")).expect("parse");
        assert_eq!(sfc[0], ("rx_noskb_drops".to_owned(), 0));

        let veth = parse_stats(&fixture("S/veth")).expect("parse");
        assert_eq!(veth[0], ("peer_ifindex".to_owned(), 2));
        assert_eq!(veth.len(), 37);
    }

    #[test]
    fn stats_reusing_shares_the_names_while_they_stay_the_same() {
        let text = fixture("S/mlx5_core");
        let pairs = parse_stats(&text).expect("parse");
        let first = parse_stats_reusing(&text, None).expect("first");
        assert_eq!(first.to_pairs(), pairs);
        // The same names with other values: the first reading's names, shared.
        let grown = format_stats(
            &pairs
                .iter()
                .map(|(n, v)| (n.clone(), v + 3))
                .collect::<Vec<_>>(),
        );
        let again = parse_stats_reusing(&grown, Some(&first.names)).expect("again");
        assert!(Arc::ptr_eq(&again.names, &first.names));
        assert_eq!(
            again.values,
            pairs.iter().map(|(_, v)| v + 3).collect::<Vec<_>>()
        );
        // A renamed counter in the middle, one more at the end, one fewer:
        // names of their own, the same as a fresh parse.
        let mut changed = pairs.clone();
        changed[7].0 = "rx99_packets".into();
        let mut longer = pairs.clone();
        longer.push(("ch99_events".into(), 1));
        let shorter = pairs[..pairs.len() - 1].to_vec();
        for other in [changed, longer, shorter] {
            let got =
                parse_stats_reusing(&format_stats(&other), Some(&first.names)).expect("changed");
            assert!(!Arc::ptr_eq(&got.names, &first.names));
            assert_eq!(got.to_pairs(), other);
        }
        // A bad line fails as parse_stats fails.
        assert_eq!(
            parse_stats_reusing("rx: 1\ntx: lots\n", Some(&first.names)).map(drop),
            parse_stats("rx: 1\ntx: lots\n").map(drop)
        );
    }

    #[test]
    fn stats_accepts_both_shapes_and_formats_the_real_one() {
        let bare = "rx_packets: 1\nweird name: with: colons: 2\n";
        let real = "NIC statistics:\n     rx_packets: 1\n     weird name: with: colons: 2\n";
        let want = vec![
            ("rx_packets".to_owned(), 1),
            ("weird name: with: colons".to_owned(), 2),
        ];
        assert_eq!(parse_stats(bare).expect("bare"), want);
        assert_eq!(parse_stats(real).expect("real"), want);
        assert_eq!(format_stats(&want), real);
        for name in [
            "veth",
            "virtio_net-6.18",
            "bnxt_en",
            "ice",
            "iavf",
            "i40e-v2.3.2k",
        ] {
            let text = fixture(&format!("S/{name}"));
            let stats = parse_stats(&text).expect("parse");
            assert_eq!(format_stats(&stats), text, "S/{name}");
        }
    }

    #[test]
    fn channels_golden_and_byte_exact() {
        let veth = parse_channels(&fixture("l/veth")).expect("parse");
        assert_eq!(
            (veth.max_rx, veth.max_tx, veth.max_combined),
            (Some(4), Some(4), None)
        );
        assert_eq!((veth.rx, veth.tx, veth.other), (Some(4), Some(4), None));
        let mlx5 = parse_channels(&fixture("l/mlx5_core")).expect("parse");
        assert_eq!(
            (mlx5.max_combined, mlx5.combined, mlx5.rx),
            (Some(12), Some(12), None)
        );
        for name in ["veth", "virtio_net", "mlx5_core"] {
            let text = fixture(&format!("l/{name}"));
            let c = parse_channels(&text).expect("parse");
            let dev = ifname(&text, "Channel parameters for ");
            assert_eq!(format_channels(dev, &c), text, "l/{name}");
        }
    }

    #[test]
    fn channels_old_ioctl_layout() {
        let text = "Channel parameters for eth0:\nPre-set maximums:\nRX:\t\t0\nTX:\t\t0\n\
                    Other:\t\t1\nCombined:\t8\n\nCurrent hardware settings:\nRX:\t\t0\n\
                    TX:\t\t0\nOther:\t\t1\nCombined:\t4\n";
        let c = parse_channels(text).expect("parse");
        assert_eq!(
            (c.max_combined, c.combined, c.rx),
            (Some(8), Some(4), Some(0))
        );
    }

    #[test]
    fn rings_parse_new_lines_and_format_classic_block() {
        let text = fixture("g/mlx5_core");
        let r = parse_rings(&text).expect("parse");
        let want = Rings {
            max_rx: Some(8192),
            max_rx_mini: None,
            max_rx_jumbo: None,
            max_tx: Some(8192),
            rx: Some(1024),
            rx_mini: None,
            rx_jumbo: None,
            tx: Some(1024),
        };
        assert_eq!(r, want);
        for name in ["mlx5_core", "virtio_net"] {
            let text = fixture(&format!("g/{name}"));
            let r = parse_rings(&text).expect("parse");
            let formatted = format_rings(ifname(&text, "Ring parameters for "), &r);
            // ethtool 6.x prints the classic block, then RX Buf Len, CQE Size, ...
            assert!(text.starts_with(&formatted), "g/{name}:\n{formatted}");
        }
        let newer = "Ring parameters for eth1:\nPre-set maximums:\nRX:\t\t4096\nRX Mini:\tn/a\n\
                     RX Jumbo:\tn/a\nTX:\t\t4096\nTX push buff len:\tn/a\n\
                     Current hardware settings:\nRX:\t\t512\nRX Mini:\tn/a\nRX Jumbo:\tn/a\n\
                     TX:\t\t512\nRX Buf Len:\t\tn/a\nCQE Size:\t\tn/a\nTX Push:\toff\n\
                     RX Push:\toff\nTX push buff len:\tn/a\nTCP data split:\tn/a\n";
        let r = parse_rings(newer).expect("parse");
        assert_eq!((r.max_rx, r.rx, r.tx), (Some(4096), Some(512), Some(512)));
    }

    #[test]
    fn features_golden_values() {
        let veth = parse_features(&fixture("k/veth")).expect("parse");
        assert_eq!(veth.on("generic-receive-offload"), Some(false));
        assert_eq!(veth.on("tx-checksum-ip-generic"), Some(true));
        assert_eq!(
            veth.0.get("tx-checksum-ipv4"),
            Some(&Feature {
                on: false,
                fixed: true,
                requested: None
            })
        );
        let mlx5 = parse_features(&fixture("k/mlx5_core")).expect("parse");
        assert_eq!(mlx5.on("large-receive-offload"), Some(false));
        assert_eq!(mlx5.on("receive-hashing"), Some(true));
        assert_eq!(mlx5.on("not-a-feature"), None);
        let requested =
            parse_features("Features for x:\ngeneric-receive-offload: off [requested on]\n")
                .expect("parse");
        assert_eq!(requested.0["generic-receive-offload"].requested, Some(true));
    }

    #[test]
    fn features_format_is_byte_exact() {
        for name in ["veth", "lo", "virtio_net", "mlx5_core"] {
            let text = fixture(&format!("k/{name}"));
            let f = parse_features(&text).expect("parse");
            let formatted = format_features(ifname(&text, "Features for "), &f);
            assert_eq!(formatted, text, "k/{name}");
        }
    }

    #[test]
    fn features_unknown_names_are_kept_and_printed_last() {
        let mut f = parse_features(&fixture("k/lo")).expect("parse");
        let extra = Feature {
            on: true,
            fixed: true,
            requested: Some(false),
        };
        f.0.insert("future-offload".to_owned(), extra);
        let text = format_features("lo", &f);
        assert!(
            text.ends_with("future-offload: on [fixed] [requested off]\n"),
            "{text}"
        );
        assert_eq!(parse_features(&text).expect("parse"), f);
    }

    #[test]
    fn features_from_kernel_matches_ethtool_grouping() {
        let f = |on, fixed| Feature {
            on,
            fixed,
            requested: None,
        };
        let kernel = Features(BTreeMap::from([
            ("tx-scatter-gather".to_owned(), f(true, false)),
            ("tx-checksum-ipv4".to_owned(), f(false, true)),
            ("tx-checksum-ip-generic".to_owned(), f(true, false)),
            ("rx-gro".to_owned(), f(true, false)),
            ("rx-checksum".to_owned(), f(true, true)),
            ("highdma".to_owned(), f(true, true)),
        ]));
        let view = features_from_kernel(&kernel);
        // Single member: shown under the legacy name only, with its own flags.
        assert_eq!(view.0.get("generic-receive-offload"), Some(&f(true, false)));
        assert_eq!(view.0.get("rx-checksumming"), Some(&f(true, true)));
        assert!(!view.0.contains_key("rx-gro") && !view.0.contains_key("rx-checksum"));
        // Several members: legacy name (on if any member is) plus the members.
        assert_eq!(view.0.get("tx-checksumming"), Some(&f(true, false)));
        assert!(view.0.contains_key("tx-checksum-ipv4"));
        // No member: ethtool prints the legacy name as off.
        assert_eq!(view.0.get("large-receive-offload"), Some(&f(false, false)));
        assert!(!view.0.contains_key("udp-fragmentation-offload"));
        assert_eq!(view.0.get("highdma"), Some(&f(true, true)));
        let want = "Features for x:\nrx-checksumming: on [fixed]\ntx-checksumming: on\n\
                    \ttx-checksum-ipv4: off [fixed]\n\ttx-checksum-ip-generic: on\n\
                    scatter-gather: on\ntcp-segmentation-offload: off\n\
                    generic-segmentation-offload: off\ngeneric-receive-offload: on\n\
                    large-receive-offload: off\nrx-vlan-offload: off\ntx-vlan-offload: off\n\
                    ntuple-filters: off\nreceive-hashing: off\nhighdma: on [fixed]\n";
        assert_eq!(format_features("x", &view), want);
    }

    #[test]
    fn features_from_kernel_reproduces_real_outputs() {
        for name in ["veth", "lo", "virtio_net", "mlx5_core"] {
            let shown = parse_features(&fixture(&format!("k/{name}"))).expect("parse");
            // Undo ethtool's grouping: single-member legacy names back to the
            // kernel name, group parents dropped.
            let mut kernel = BTreeMap::new();
            for (n, f) in &shown.0 {
                match LEGACY.iter().find(|(long, _)| long == n) {
                    Some((_, pattern)) if !pattern.contains('*') => {
                        kernel.insert((*pattern).to_owned(), *f);
                    }
                    Some(_) => {}
                    None => {
                        kernel.insert(n.clone(), *f);
                    }
                }
            }
            assert_eq!(features_from_kernel(&Features(kernel)), shown, "k/{name}");
        }
    }

    #[test]
    fn coalesce_golden_and_byte_exact() {
        let mlx5 = parse_coalesce(&fixture("c/mlx5_core")).expect("parse");
        assert_eq!(
            (mlx5.adaptive_rx, mlx5.adaptive_tx),
            (Some(true), Some(true))
        );
        assert_eq!((mlx5.rx_usecs, mlx5.rx_frames), (Some(8), Some(128)));
        assert_eq!((mlx5.tx_usecs, mlx5.tx_frames), (Some(8), Some(128)));
        assert!(mlx5.other.is_empty());
        let text = fixture("c/virtio_net");
        let virtio = parse_coalesce(&text).expect("parse");
        assert_eq!(
            (virtio.adaptive_rx, virtio.adaptive_tx),
            (Some(false), None)
        );
        assert_eq!((virtio.rx_usecs, virtio.rx_frames), (Some(0), Some(1)));
        assert_eq!(format_coalesce("eth0", &virtio), text);
    }

    #[test]
    fn coalesce_other_fields_and_variants() {
        // ioctl-era layout, and the tab-separated key some 6.x versions print.
        let text = "Coalesce parameters for eth0:\nAdaptive RX: off  TX: off\n\
                    stats-block-usecs: 0\nsample-interval: 0\npkt-rate-low: 0\n\
                    rx-usecs: 50\nrx-frames: 0\nrx-usecs-irq: 0\n\ntx-usecs: 50\n\
                    tx-aggr-max-bytes:\tn/a\ntx-aggr-time-usecs\t7\n";
        let c = parse_coalesce(text).expect("parse");
        assert_eq!(
            (c.rx_usecs, c.tx_usecs, c.tx_frames),
            (Some(50), Some(50), None)
        );
        assert_eq!(c.other.get("rx-usecs-irq"), Some(&0));
        assert_eq!(c.other.get("tx-aggr-time-usecs"), Some(&7));
        assert!(!c.other.contains_key("tx-aggr-max-bytes"));
        assert_eq!(
            parse_coalesce(&format_coalesce("eth0", &c)).expect("round trip"),
            c
        );
    }

    #[test]
    fn pause_golden_and_byte_exact() {
        let ice = parse_pause(&fixture("a/ice")).expect("parse");
        assert_eq!(
            ice,
            Pause {
                autoneg: true,
                rx: false,
                tx: false
            }
        );
        let neg = parse_pause(&fixture("a/negotiated")).expect("parse");
        assert_eq!(
            neg,
            Pause {
                autoneg: true,
                rx: true,
                tx: true
            }
        );
        let text = fixture("a/nfp");
        let nfp = parse_pause(&text).expect("parse");
        assert_eq!(
            nfp,
            Pause {
                autoneg: false,
                rx: true,
                tx: true
            }
        );
        assert_eq!(format_pause("enp1s0np0", &nfp), text);
    }

    #[test]
    fn link_golden_and_format() {
        let virtio = parse_link(&fixture("link/virtio_net")).expect("parse");
        assert_eq!(
            virtio,
            LinkInfo {
                speed_mbps: None,
                duplex: None,
                autoneg: Some(false),
                link_detected: Some(true)
            }
        );
        let veth = parse_link(&fixture("link/veth")).expect("parse");
        assert_eq!(veth.speed_mbps, Some(10_000));
        assert_eq!(veth.duplex.as_deref(), Some("Full"));
        let text = fixture("link/lo");
        let lo = parse_link(&text).expect("parse");
        assert_eq!(lo.link_detected, Some(true));
        assert_eq!(format_link("lo", &lo), text);
        // The formatted lines are a subset, in order, of the real output.
        for name in ["veth", "virtio_net"] {
            let text = fixture(&format!("link/{name}"));
            let link = parse_link(&text).expect("parse");
            let formatted = format_link(ifname(&text, "Settings for "), &link);
            let mut real = text.lines();
            for line in formatted.lines() {
                assert!(
                    real.any(|r| r == line),
                    "link/{name}: {line:?} not in order"
                );
            }
        }
        let mlx5 = "Settings for enp1s0f0np0:\n\tSupported ports: [ Backplane ]\n\
                    \tSupported link modes:   1000baseKX/Full\n\t                        25000baseCR/Full\n\
                    \tSpeed: 25000Mb/s\n\tDuplex: Full\n\tAuto-negotiation: on\n\
                    \tLink detected: no (Autoneg, No partner detected)\n";
        let l = parse_link(mlx5).expect("parse");
        assert_eq!(
            (l.speed_mbps, l.autoneg, l.link_detected),
            (Some(25_000), Some(true), Some(false))
        );
    }

    #[test]
    fn round_trips() {
        let info = DrvInfo {
            driver: "ice".into(),
            version: "6.8.0".into(),
            firmware: "4.20 0x8001778b 1.3346.0".into(),
            expansion_rom: "".into(),
            bus_info: "0000:c0:00.0".into(),
            supports_statistics: true,
            supports_test: true,
            supports_eeprom_access: true,
            supports_register_dump: true,
            supports_priv_flags: false,
        };
        assert_eq!(
            parse_drvinfo(&format_drvinfo(&info)).expect("drvinfo"),
            info
        );
        let stats = vec![
            ("[3]: rx_ucast_packets".to_owned(), u64::MAX),
            ("a b".to_owned(), 0),
        ];
        assert_eq!(parse_stats(&format_stats(&stats)).expect("stats"), stats);
        let channels = Channels {
            max_combined: Some(63),
            combined: Some(8),
            max_other: Some(1),
            other: Some(1),
            ..Channels::default()
        };
        assert_eq!(
            parse_channels(&format_channels("eth0", &channels)).expect("l"),
            channels
        );
        let rings = Rings {
            max_rx: Some(8192),
            rx_jumbo: Some(0),
            tx: Some(1024),
            ..Rings::default()
        };
        assert_eq!(
            parse_rings(&format_rings("eth0", &rings)).expect("g"),
            rings
        );
        for text in [fixture("k/veth"), fixture("k/mlx5_core")] {
            let f = parse_features(&text).expect("k");
            assert_eq!(
                parse_features(&format_features("x", &f)).expect("k again"),
                f
            );
        }
        let mut coalesce = Coalesce {
            adaptive_rx: Some(true),
            adaptive_tx: None,
            rx_usecs: Some(8),
            rx_frames: None,
            tx_usecs: Some(16),
            tx_frames: Some(128),
            other: BTreeMap::new(),
        };
        coalesce.other.insert("rx-usecs-high".into(), 100);
        coalesce.other.insert("tx-aggr-max-frames".into(), 4);
        assert_eq!(
            parse_coalesce(&format_coalesce("eth0", &coalesce)).expect("c"),
            coalesce
        );
        for pause in [
            Pause::default(),
            Pause {
                autoneg: true,
                rx: true,
                tx: false,
            },
        ] {
            assert_eq!(
                parse_pause(&format_pause("eth0", &pause)).expect("a"),
                pause
            );
        }
        for link in [
            LinkInfo::default(),
            LinkInfo {
                link_detected: Some(false),
                ..LinkInfo::default()
            },
            LinkInfo {
                speed_mbps: Some(100_000),
                duplex: Some("Half".into()),
                autoneg: None,
                link_detected: Some(true),
            },
        ] {
            assert_eq!(parse_link(&format_link("eth0", &link)).expect("link"), link);
        }
    }

    #[test]
    fn malformed_input_names_the_line() {
        let cases: Vec<(Result<(), ParseError>, usize)> = vec![
            (
                parse_drvinfo("driver: x\nsupports-test: maybe\n").map(drop),
                2,
            ),
            (parse_drvinfo("driver: x\n\nno colon here\n").map(drop), 3),
            (
                parse_stats("NIC statistics:\n     rx: 1\n     tx: lots\n").map(drop),
                3,
            ),
            (parse_stats("no stats available\n").map(drop), 1),
            (
                parse_channels("netlink error: Operation not supported\n").map(drop),
                1,
            ),
            (
                parse_channels("Pre-set maximums:\nRX:\t\tmany\n").map(drop),
                2,
            ),
            (
                parse_rings("Ring parameters for x:\nPre-set maximums:\nTX:\t\t-1\n").map(drop),
                3,
            ),
            (
                parse_features("Features for x:\nhighdma: maybe\n").map(drop),
                2,
            ),
            (
                parse_features("Features for x:\nhighdma: on [sticky]\n").map(drop),
                2,
            ),
            (
                parse_coalesce("Coalesce parameters for x:\nAdaptive RX: yes  TX: no\n").map(drop),
                2,
            ),
            (
                parse_coalesce("Adaptive RX: on  TX: on\nrx-usecs: soon\n").map(drop),
                2,
            ),
            (
                parse_pause("Pause parameters for x:\nAutonegotiate:\tperhaps\n").map(drop),
                2,
            ),
            (parse_link("Settings for x:\n\tSpeed: fast\n").map(drop), 2),
        ];
        for (i, (result, line)) in cases.into_iter().enumerate() {
            let err = result.expect_err(&format!("case {i} should fail"));
            assert_eq!(err.line(), Some(line), "case {i}: {err}");
            assert!(
                err.to_string().contains(&format!("line {line}")),
                "case {i}: {err}"
            );
        }
    }

    #[test]
    fn error_outputs_are_missing_errors() {
        let unsupported = "netlink error: Operation not supported\n";
        assert!(matches!(
            parse_drvinfo("Cannot get driver information: Operation not supported\n"),
            Err(ParseError::Missing {
                missing: "driver:",
                ..
            })
        ));
        assert!(matches!(
            parse_coalesce(unsupported),
            Err(ParseError::Missing { .. })
        ));
        assert!(matches!(
            parse_pause(unsupported),
            Err(ParseError::Missing { .. })
        ));
        assert!(matches!(
            parse_features(""),
            Err(ParseError::Missing { .. })
        ));
        assert!(matches!(
            parse_link("No data available\n"),
            Err(ParseError::Missing { .. })
        ));
        assert!(matches!(
            parse_channels("Channel parameters for x:\nPre-set maximums:\nRX:\t\t1\n"),
            Err(ParseError::Missing {
                missing: CURRENT,
                ..
            })
        ));
    }
}
