//! Driver and firmware rules (facts + embedded catalog): driver.mlx5-outdated,
//! firmware.outdated. NICs that share a driver version (or a firmware) get one
//! finding that names them all ("8 NICs (ens1f0np0, ...)"): one cause, one
//! fix, however many ports a host has. A rule speaks only of the drivers it knows (mlx5_core):
//! another driver (virtio_net, ice, ...) gets no finding at all (its version
//! is in the facts); an mlx5 version or firmware the catalog does not list is
//! "not in catalog" (info), never "outdated".

use crate::diagnose::catalog::{catalog, Mlx5Version};
use crate::diagnose::finding::{Finding, Severity};
use crate::diagnose::impact::prior;
use crate::diagnose::util::version_numbers;
use crate::probe::facts::{DrvInfo, HostFacts, NicFacts};
use crate::probe::sample::HostRole;

/// Drivers whose version and firmware the catalog knows.
const CATALOGUED: &[&str] = &["mlx5_core"];

/// A driver and its firmware version, as `ethtool -i` prints them.
type FirmwareKey<'a> = (&'a str, &'a str);
/// A NIC and its `ethtool -i`.
type NicDrv<'a> = (&'a NicFacts, &'a DrvInfo);

/// All driver/firmware rules of one host.
pub fn rules(facts: &HostFacts, host: HostRole) -> Vec<Finding> {
    let mut out = Vec::new();
    // NICs with the same driver version get one driver finding; those with
    // the same driver and firmware one firmware finding.
    let mut same_drv: Vec<(&str, Vec<NicDrv>)> = Vec::new();
    let mut same_fw: Vec<(FirmwareKey, Vec<NicDrv>)> = Vec::new();
    for nic in &facts.nics {
        let Some(d) = nic.drvinfo.value() else {
            continue;
        };
        if CATALOGUED.contains(&d.driver.as_str()) {
            group(&mut same_drv, d.version.as_str(), (nic, d));
            group(
                &mut same_fw,
                (d.driver.as_str(), d.firmware.as_str()),
                (nic, d),
            );
        }
    }
    for (_, nics) in &same_drv {
        out.extend(mlx5_driver(nics, host));
    }
    for (_, nics) in &same_fw {
        out.extend(firmware(nics, host));
    }
    out
}

/// Add `nic` to the group of `key` (groups keep the order NICs are listed in).
fn group<'a, K: PartialEq>(groups: &mut Vec<(K, Vec<NicDrv<'a>>)>, key: K, nic: NicDrv<'a>) {
    match groups.iter_mut().find(|g| g.0 == key) {
        Some(g) => g.1.push(nic),
        None => groups.push((key, vec![nic])),
    }
}

/// The subject of a group of NICs: the NIC's name, or "8 NICs (a, b, ...)";
/// and the `ethtool -i` source that names them all.
fn group_names(nics: &[NicDrv]) -> (String, String) {
    let names: Vec<&str> = nics.iter().map(|(n, _)| n.name.as_str()).collect();
    let source = format!("ethtool -i {}", names.join(", "));
    let subject = match names.as_slice() {
        [one] => (*one).to_string(),
        _ => format!("{} NICs ({})", names.len(), names.join(", ")),
    };
    (subject, source)
}

/// The PCI address of a NIC for `mlxfwmanager -d`, else its name.
fn device<'a>((nic, d): &NicDrv<'a>) -> &'a str {
    if d.bus_info.is_empty() {
        &nic.name
    } else {
        &d.bus_info
    }
}

/// "not in catalog" (info) about `subject` (an interface or an RDMA device).
pub(super) fn not_in_catalog_of(id: &str, subject: &str, host: HostRole, what: String) -> Finding {
    let mut f = Finding::new(
        id,
        Severity::Info,
        host,
        format!("{subject} catalog"),
        format!("{subject}: {what} is not in catalog"),
        0.0,
    )
    .text(
        "catalog date",
        catalog().updated.clone(),
        "assets/catalog.toml",
    )
    .why("wirescope has no minimum version for it; check the vendor's release notes.");
    // Not the rule's own reference (NVIDIA's notes): this device is not in the catalog.
    f.reference =
        "assets/catalog.toml (no entry for this device); its vendor's release notes".into();
    f
}

/// driver.mlx5-outdated of the NICs that share one mlx5_core version.
fn mlx5_driver(nics: &[NicDrv], host: HostRole) -> Option<Finding> {
    let [(nic, d), ..] = nics else {
        return None;
    };
    let cat = catalog();
    let (subject, source) = group_names(nics);
    let base = |sev: Severity, title: String, impact: f64| {
        Finding::new(
            "driver.mlx5-outdated",
            sev,
            host,
            subject.clone(),
            title,
            impact,
        )
        .text("driver version", d.version.clone(), source.clone())
        .text("catalog date", cat.updated.clone(), "assets/catalog.toml")
    };
    let each = match nics.len() {
        1 => String::new(),
        n => format!(" on each of the {n} NICs"),
    };
    let verify = format!(
        "ethtool -i {}  # verify{each}: version like 24.07-0.6.1",
        nic.name
    );
    match cat.mlx5_version(&d.version) {
        Mlx5Version::InboxOutdated(i) => Some(
            base(i.severity, format!("{subject}: outdated inbox mlx5_core \"{}\" (not MLNX_OFED)", d.version), prior("driver.mlx5-outdated"))
                .text("kind", "inbox (distribution kernel)", "catalog")
                .text("catalog source", i.source.clone(), "assets/catalog.toml")
                .why(format!("This is {}.", i.note))
                .fix("install MLNX_OFED / DOCA-OFED (or a kernel with a current mlx5_core), then: modprobe -r mlx5_ib mlx5_core && modprobe mlx5_core")
                .fix(verify),
        ),
        Mlx5Version::Ofed { outdated: true } => Some(
            base(Severity::Warn, format!("{subject}: MLNX_OFED {} is older than {}", d.version, cat.mlx5.ofed_min), prior("driver.mlx5-outdated") * 0.6)
                .text("kind", "MLNX_OFED", "catalog")
                .text("catalog minimum", cat.mlx5.ofed_min.clone(), cat.mlx5.ofed_source.clone())
                .why("Old MLNX_OFED releases lack performance and stability fixes for ConnectX adapters.")
                .fix("install a current MLNX_OFED / DOCA-OFED LTS release"),
        ),
        Mlx5Version::Ofed { outdated: false } | Mlx5Version::InboxKernel => None,
        Mlx5Version::Unknown => Some(not_in_catalog_of("driver.mlx5-outdated", &subject, host, format!("mlx5_core version \"{}\"", d.version))),
    }
}

/// firmware.outdated of NICs that share a driver and a firmware version:
/// one finding, named after the one NIC or listing them all ("8 NICs
/// (ens1f0np0, ...)"), with a query fix per PCI device.
fn firmware(nics: &[NicDrv], host: HostRole) -> Option<Finding> {
    let [(nic, d), rest @ ..] = nics else {
        return None;
    };
    if rest.is_empty() {
        let source = format!("ethtool -i {}", nic.name);
        return firmware_of(&nic.name, &d.firmware, &d.bus_info, &source, host);
    }
    let (subject, source) = group_names(nics);
    let mut f = firmware_of(&subject, &d.firmware, device(&nics[0]), &source, host)?;
    if f.severity == Severity::Info {
        return Some(f);
    }
    f.title = format!(
        "{subject}: {} {}",
        d.driver,
        f.title.trim_start_matches(&format!("{subject}: "))
    );
    // The query fix of each device, after the first one's.
    let queries: Vec<String> = rest
        .iter()
        .map(|n| format!("mlxfwmanager --query -d {}", device(n)))
        .collect();
    let at = f.fix.len().min(1);
    f.fix.splice(at..at, queries);
    Some(f)
}

/// firmware.outdated of a ConnectX firmware version `fw` seen by `source` on
/// `subject` (an interface, or an RDMA device's `fw_ver`); `bus` is the PCI
/// address for the fix, when known.
pub(super) fn firmware_of(
    subject: &str,
    fw_full: &str,
    bus: &str,
    source: &str,
    host: HostRole,
) -> Option<Finding> {
    let v = version_numbers(fw_full);
    if v.len() < 3 {
        return None;
    }
    let Some(floor) = catalog().firmware_floor(v[0]) else {
        return Some(not_in_catalog_of(
            "firmware.outdated",
            subject,
            host,
            format!("firmware major {} ({})", v[0], fw_full),
        ));
    };
    let min = version_numbers(&floor.floor);
    if v[..3] >= min[..min.len().min(3)] {
        return None;
    }
    let fw = fw_full.split_whitespace().next().unwrap_or("");
    Some(
        Finding::rule(
            "firmware.outdated",
            Severity::Warn,
            host,
            subject.to_string(),
            format!("{subject}: {} firmware {fw} is older than {}", floor.device, floor.floor),
        )
        .text("firmware version", fw_full.to_string(), source.to_string())
        .text("device family (firmware major)", format!("{} ({})", floor.device, floor.major), "assets/catalog.toml")
        .text("catalog floor", floor.floor.clone(), floor.source.clone())
        .why("Old firmware misses performance and stability fixes; NVIDIA supports drivers only with matching firmware.")
        .fix(format!("mlxfwmanager --query -d {}", if bus.is_empty() { subject } else { bus }))
        .fix("mlxfwmanager --online -u  # or flint with the PSID's image from the firmware download page"),
    )
}

#[cfg(test)]
mod tests {
    use super::rules;
    use crate::diagnose::finding::{Finding, Severity};
    use crate::probe::facts::{HostFacts, Support};
    use crate::probe::sample::HostRole;
    use crate::probe::synthetic::{Layout, SyntheticHost};
    use crate::probe::system::read_host_facts;

    /// The synthetic big host's facts (8 mlx5 NICs of one driver and
    /// firmware), its NICs' driver version set by `version(nic index)`.
    fn big_host(version: impl Fn(usize) -> &'static str) -> (SyntheticHost, HostFacts) {
        let h = SyntheticHost::in_temp(Layout::default()).expect("synthetic host");
        let mut f = read_host_facts(&h.source(), &h.nic_names());
        for (i, nic) in f.nics.iter_mut().enumerate() {
            let Support::Value(d) = &mut nic.drvinfo else {
                panic!("{}: no ethtool -i", nic.name);
            };
            d.version = version(i).into();
        }
        (h, f)
    }

    fn driver_findings(f: &HostFacts) -> Vec<Finding> {
        rules(f, HostRole::Local)
            .into_iter()
            .filter(|f| f.id == "driver.mlx5-outdated")
            .collect()
    }

    #[test]
    fn eight_nics_of_one_outdated_driver_are_one_finding_naming_them() {
        let (h, f) = big_host(|_| "5.0-0");
        let found = driver_findings(&f);
        assert_eq!(found.len(), 1, "{found:#?}");
        let d = &found[0];
        let names = h.nic_names();
        assert_eq!(names.len(), 8);
        assert_eq!(d.subject, format!("8 NICs ({})", names.join(", ")));
        assert!(
            d.title
                .starts_with("8 NICs (ens1f0np0, ens1f1np1, ens2f0np0"),
            "{}",
            d.title
        );
        assert!(
            d.title
                .ends_with("outdated inbox mlx5_core \"5.0-0\" (not MLNX_OFED)"),
            "{}",
            d.title
        );
        assert_eq!(d.severity, Severity::Warn);
        let ev = d
            .evidence
            .iter()
            .find(|e| e.what == "driver version")
            .expect("evidence");
        for n in &names {
            assert!(ev.source.contains(n.as_str()), "{n} in {}", ev.source);
        }
        // The current driver the generator writes: no finding at all.
        let (_, current) = big_host(|_| "24.10-1.1.4");
        assert!(driver_findings(&current).is_empty());
    }

    #[test]
    fn distinct_driver_versions_are_one_finding_per_version_group() {
        // NICs 0-5 on the 2015 inbox driver, 6-7 on an unknown build.
        let (h, f) = big_host(|i| {
            if i < 6 {
                "3.0-1 (January 2015)"
            } else {
                "custom-build"
            }
        });
        let names = h.nic_names();
        let found = driver_findings(&f);
        assert_eq!(found.len(), 2, "{found:#?}");
        let old = found
            .iter()
            .find(|f| f.severity == Severity::Error)
            .expect("the 2015 group");
        assert_eq!(old.subject, format!("6 NICs ({})", names[..6].join(", ")));
        let odd = found
            .iter()
            .find(|f| f.severity == Severity::Info)
            .expect("the unknown group");
        assert_eq!(
            odd.subject,
            format!("2 NICs ({}) catalog", names[6..].join(", "))
        );
        assert!(odd.title.contains("not in catalog"), "{}", odd.title);
        // One NIC alone keeps its own name as the subject.
        let (_, one) = big_host(|i| if i == 3 { "5.0-0" } else { "24.10-1.1.4" });
        let found = driver_findings(&one);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0].subject, names[3]);
        assert!(
            found[0]
                .title
                .starts_with(&format!("{}: outdated inbox", names[3])),
            "{}",
            found[0].title
        );
    }
}
