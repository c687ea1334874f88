//! `check` on captured directories built from real `ethtool -i` outputs
//! (tests/fixtures/diagnose/, copied from the shared fixtures).

use wirescope::diagnose::{Finding, HostRole, Severity};
use wirescope::face::check::{render, run_check};
use wirescope::probe::capture_dir::CaptureDir;
use wirescope::probe::system::read_host_facts;

fn facts(name: &str) -> wirescope::probe::facts::HostFacts {
    let root = format!(
        "{}/tests/fixtures/diagnose/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    read_host_facts(&CaptureDir::new(root), &["eth0".to_string()])
}

fn find<'a>(f: &'a [Finding], id: &str) -> Vec<&'a Finding> {
    f.iter().filter(|x| x.id == id).collect()
}

#[test]
fn inbox_2015_driver_is_outdated() {
    let f = run_check(&facts("inbox-2015"), None);
    eprintln!("{}", render(&f));
    let d = find(&f, "driver.mlx5-outdated");
    assert_eq!(d.len(), 1, "{f:#?}");
    assert_eq!(d[0].severity, Severity::Error);
    assert!(d[0].title.contains("inbox"), "{}", d[0].title);
    assert!(d[0].title.contains("3.0-1 (January 2015)"));
    assert_eq!(d[0].host, HostRole::Local);
    // ConnectX-4 firmware 12.17 is below the catalog floor of major 12.
    let fw = find(&f, "firmware.outdated");
    assert_eq!(fw.len(), 1);
    assert!(fw[0].title.contains("ConnectX-4"));
    // Facts captured alongside: GRO off, IOMMU without pt, PCIe x8 of x16, MTU 1500 at 100G.
    assert_eq!(find(&f, "nic.gro-off")[0].severity, Severity::Warn);
    assert_eq!(
        find(&f, "nic.gro-off")[0].fix,
        vec!["ethtool -K eth0 gro on".to_string()]
    );
    assert_eq!(find(&f, "platform.iommu").len(), 1);
    assert_eq!(find(&f, "pcie.link-downgraded").len(), 1);
    assert_eq!(find(&f, "nic.mtu-small")[0].severity, Severity::Info);
    // The driver error ranks first.
    assert_eq!(f[0].id, "driver.mlx5-outdated");
}

#[test]
fn ofed_4_3_is_not_flagged_as_inbox() {
    let f = run_check(&facts("ofed-4.3"), None);
    eprintln!("{}", render(&f));
    assert!(find(&f, "driver.mlx5-outdated").is_empty(), "{f:#?}");
    assert!(f.iter().all(|x| !x.title.contains("inbox")));
    // The firmware (same card) is still old, compared within major 12 only.
    assert_eq!(find(&f, "firmware.outdated").len(), 1);
    // iommu=pt is present.
    assert!(find(&f, "platform.iommu").is_empty());
}

#[test]
fn mtu_mismatch_between_hosts_is_a_warning() {
    let f = run_check(&facts("inbox-2015"), Some(&facts("ofed-4.3")));
    let m: Vec<_> = find(&f, "nic.mtu-small")
        .into_iter()
        .filter(|x| x.severity == Severity::Warn)
        .collect();
    assert_eq!(m.len(), 1, "{f:#?}");
    assert_eq!(m[0].host, HostRole::Local);
    assert!(m[0].fix[0].starts_with("ip link set dev eth0 mtu 9000"));
    // Both hosts audited.
    assert!(f.iter().any(|x| x.host == HostRole::Peer));
    // The peer's side read as loopback (a peer on this very host): no MTU
    // advice derived from it.
    let mut lo = facts("ofed-4.3");
    lo.nics[0].name = "lo".into();
    lo.nics[0].mtu = Some(65536);
    let f = run_check(&facts("inbox-2015"), Some(&lo));
    assert!(
        f.iter()
            .all(|x| x.fix.iter().all(|c| !c.contains("mtu 65536"))),
        "{f:#?}"
    );
}

#[test]
fn json_output_has_the_documented_keys() {
    let f = run_check(&facts("inbox-2015"), None);
    let v = serde_json::to_value(&f).expect("json");
    let first = &v[0];
    assert_eq!(first["id"], "driver.mlx5-outdated");
    assert_eq!(first["severity"], "error");
    assert_eq!(first["host"], "local");
    assert!(first["evidence"].as_array().is_some_and(|e| !e.is_empty()));
    assert!(first["fix"].as_array().is_some_and(|e| !e.is_empty()));
    let back: Vec<Finding> = serde_json::from_value(v).expect("round trip");
    assert_eq!(back, f);
}
