//! Driver and firmware rules (facts + embedded catalog): driver.mlx5-outdated,
//! firmware.outdated. A rule speaks only of the drivers it knows (mlx5_core):
//! another driver (virtio_net, ice, ...) gets no finding at all (its version
//! is in the facts); an mlx5 version or firmware the catalog does not list is
//! "not in catalog" (info), never "outdated".

use crate::diagnose::catalog::{catalog, Mlx5Version};
use crate::diagnose::finding::{Evidence, Finding, Severity};
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
    // NICs with the same driver and firmware get one firmware finding.
    let mut same_fw: Vec<(FirmwareKey, Vec<NicDrv>)> = Vec::new();
    for nic in &facts.nics {
        let Some(d) = nic.drvinfo.value() else {
            continue;
        };
        if CATALOGUED.contains(&d.driver.as_str()) {
            out.extend(mlx5_driver(nic, d, host));
            let key = (d.driver.as_str(), d.firmware.as_str());
            match same_fw.iter_mut().find(|g| g.0 == key) {
                Some(g) => g.1.push((nic, d)),
                None => same_fw.push((key, vec![(nic, d)])),
            }
        }
    }
    for (_, nics) in &same_fw {
        out.extend(firmware(nics, host));
    }
    out
}

fn src(nic: &NicFacts) -> String {
    format!("ethtool -i {}", nic.name)
}

fn not_in_catalog(id: &str, nic: &NicFacts, host: HostRole, what: String) -> Finding {
    not_in_catalog_of(id, &nic.name, host, what)
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
    .ev(Evidence::text(
        "catalog date",
        catalog().updated.clone(),
        "assets/catalog.toml",
    ))
    .why("wirescope has no minimum version for it; check the vendor's release notes.");
    // Not the rule's own reference (NVIDIA's notes): this device is not in the catalog.
    f.reference =
        "assets/catalog.toml (no entry for this device); its vendor's release notes".into();
    f
}

fn mlx5_driver(nic: &NicFacts, d: &DrvInfo, host: HostRole) -> Option<Finding> {
    let cat = catalog();
    let base = |sev: Severity, title: String, impact: f64| {
        Finding::new(
            "driver.mlx5-outdated",
            sev,
            host,
            nic.name.clone(),
            title,
            impact,
        )
        .ev(Evidence::text(
            "driver version",
            d.version.clone(),
            src(nic),
        ))
        .ev(Evidence::text(
            "catalog date",
            cat.updated.clone(),
            "assets/catalog.toml",
        ))
    };
    match cat.mlx5_version(&d.version) {
        Mlx5Version::InboxOutdated(i) => Some(
            base(i.severity, format!("{}: outdated inbox mlx5_core \"{}\" (not MLNX_OFED)", nic.name, d.version), prior("driver.mlx5-outdated"))
                .ev(Evidence::text("kind", "inbox (distribution kernel)", "catalog"))
                .ev(Evidence::text("catalog source", i.source.clone(), "assets/catalog.toml"))
                .why(format!("This is {}.", i.note))
                .fix("install MLNX_OFED / DOCA-OFED (or a kernel with a current mlx5_core), then: modprobe -r mlx5_ib mlx5_core && modprobe mlx5_core")
                .fix(format!("ethtool -i {}  # verify: version like 24.07-0.6.1", nic.name)),
        ),
        Mlx5Version::Ofed { outdated: true } => Some(
            base(Severity::Warn, format!("{}: MLNX_OFED {} is older than {}", nic.name, d.version, cat.mlx5.ofed_min), prior("driver.mlx5-outdated") * 0.6)
                .ev(Evidence::text("kind", "MLNX_OFED", "catalog"))
                .ev(Evidence::text("catalog minimum", cat.mlx5.ofed_min.clone(), cat.mlx5.ofed_source.clone()))
                .why("Old MLNX_OFED releases lack performance and stability fixes for ConnectX adapters.")
                .fix("install a current MLNX_OFED / DOCA-OFED LTS release"),
        ),
        Mlx5Version::Ofed { outdated: false } | Mlx5Version::InboxKernel => None,
        Mlx5Version::Unknown => Some(not_in_catalog("driver.mlx5-outdated", nic, host, format!("mlx5_core version \"{}\"", d.version))),
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
        return firmware_of(&nic.name, &d.firmware, &d.bus_info, &src(nic), host);
    }
    let names: Vec<&str> = nics.iter().map(|(n, _)| n.name.as_str()).collect();
    let subject = format!("{} NICs ({})", nics.len(), names.join(", "));
    let source = format!("ethtool -i {}", names.join(", "));
    let bus = if d.bus_info.is_empty() {
        &nic.name
    } else {
        &d.bus_info
    };
    let mut f = firmware_of(&subject, &d.firmware, bus, &source, host)?;
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
        .map(|(n, d)| {
            let dev = if d.bus_info.is_empty() {
                &n.name
            } else {
                &d.bus_info
            };
            format!("mlxfwmanager --query -d {dev}")
        })
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
        Finding::new(
            "firmware.outdated",
            Severity::Warn,
            host,
            subject.to_string(),
            format!("{subject}: {} firmware {fw} is older than {}", floor.device, floor.floor),
            prior("firmware.outdated"),
        )
        .ev(Evidence::text("firmware version", fw_full.to_string(), source.to_string()))
        .ev(Evidence::text("device family (firmware major)", format!("{} ({})", floor.device, floor.major), "assets/catalog.toml"))
        .ev(Evidence::text("catalog floor", floor.floor.clone(), floor.source.clone()))
        .why("Old firmware misses performance and stability fixes; NVIDIA supports drivers only with matching firmware.")
        .fix(format!("mlxfwmanager --query -d {}", if bus.is_empty() { subject } else { bus }))
        .fix("mlxfwmanager --online -u  # or flint with the PSID's image from the firmware download page"),
    )
}
