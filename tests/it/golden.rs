//! Golden outputs: every real captured output in tests/fixtures, parsed, as
//! JSON snapshots (tests/it/snapshots/). A parser change that alters what is
//! read from a real host shows up as a snapshot diff to review.

use std::path::Path;
use wirescope::probe::ethtool_names::per_queue;
use wirescope::probe::ethtool_text as t;

fn fixtures(dir: &str) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir);
    let mut v: Vec<(String, String)> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_to_string(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no fixtures in {dir}");
    v
}

macro_rules! golden {
    ($test:ident, $dir:literal, $parse:expr) => {
        #[test]
        fn $test() {
            for (name, text) in fixtures($dir) {
                let parsed = $parse(&text).unwrap_or_else(|e| panic!("{}/{name}: {e}", $dir));
                insta::assert_json_snapshot!(format!("{}-{}", stringify!($test), name), parsed);
            }
        }
    };
}

golden!(ethtool_i, "ethtool/i", t::parse_drvinfo);
golden!(ethtool_l, "ethtool/l", t::parse_channels);
golden!(ethtool_g, "ethtool/g", t::parse_rings);
golden!(ethtool_k, "ethtool/k", t::parse_features);
golden!(ethtool_c, "ethtool/c", t::parse_coalesce);
golden!(ethtool_a, "ethtool/a", t::parse_pause);
golden!(ethtool_link, "ethtool/link", t::parse_link);

/// `ethtool -S`: the per-queue split and the device-wide rest, per driver.
#[test]
fn ethtool_s_per_queue() {
    for (name, text) in fixtures("ethtool/S") {
        let stats = t::parse_stats(&text).unwrap_or_else(|e| panic!("S/{name}: {e}"));
        let driver = name.split('-').next().unwrap_or(&name);
        let (queues, globals) = per_queue(driver, &stats);
        let summary = serde_json::json!({
            "counters": stats.len(),
            "queues": queues.len(),
            "first_queues": queues.iter().take(2).collect::<Vec<_>>(),
            "globals": globals.len(),
            "first_globals": globals.iter().take(8).collect::<Vec<_>>(),
        });
        insta::assert_json_snapshot!(format!("ethtool_s-{name}"), summary);
    }
}

/// /proc and interrupts parsers on the captures of this project's machine.
#[test]
fn proc_files() {
    use wirescope::probe::{cpu, netstat, softirq, system};
    let read = |f: &str| {
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/proc")
                .join(f),
        )
        .unwrap()
    };
    insta::assert_json_snapshot!(
        "proc-stat",
        cpu::parse_proc_stat(&read("stat-a"))
            .unwrap()
            .iter()
            .map(|(c, t)| (c.0, t.user, t.system, t.idle, t.softirq))
            .collect::<Vec<_>>()
    );
    insta::assert_json_snapshot!(
        "proc-softnet",
        softirq::parse_softnet(&read("softnet_stat"), &[])
    );
    let s = softirq::parse_softirqs(&read("softirqs"));
    insta::assert_json_snapshot!(
        "proc-softirqs",
        (s.cpus.iter().map(|c| c.0).collect::<Vec<_>>(), s.vectors)
    );
    let (cpus, irqs) = system::parse_interrupts(&read("interrupts"));
    insta::assert_json_snapshot!(
        "proc-interrupts",
        (
            cpus.len(),
            irqs.iter()
                .map(|l| (l.irq, l.name().to_string(), l.counts.clone()))
                .collect::<Vec<_>>()
        )
    );
    insta::assert_json_snapshot!(
        "proc-net-snmp-tcp",
        netstat::parse_snmp(&read("net-snmp"))
            .into_iter()
            .filter(|(k, _)| k.starts_with("Tcp."))
            .collect::<std::collections::BTreeMap<_, _>>()
    );
}
