//! Host-wide settings (IRQ affinity, CPU governor, irqbalance) through a
//! directory laid out like `/`: a real capture of the test VM, copied to a
//! temporary directory so the writes land there and never on this machine.

use std::path::{Path, PathBuf};
use std::process::Command;
use wirescope::tune::apply::{self, ApplyOptions};
use wirescope::tune::{Host, Profile, ResolveOpts, StateDir};

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// A private copy of the captured VM.
fn root() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tune/vm");
    copy_tree(&src, d.path());
    d
}

fn read(root: &Path, p: &str) -> String {
    std::fs::read_to_string(root.join(p)).unwrap()
}

fn apply_profile(
    p: &Profile,
    host: &Host,
    state: &StateDir,
) -> Result<wirescope::tune::ApplyReport, wirescope::tune::TuneError> {
    apply::apply(
        p,
        host,
        state,
        &ResolveOpts::default(),
        &ApplyOptions::default(),
    )
}

/// The files the host-wide profile touches (and IRQ 37, which it must not).
fn host_wide_files(root: &Path) -> Vec<String> {
    [
        "proc/irq/37/smp_affinity_list",
        "proc/irq/38/smp_affinity_list",
        "proc/irq/39/smp_affinity_list",
        "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
        "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
    ]
    .iter()
    .map(|f| read(root, f))
    .collect()
}

const HOST_WIDE: &str = r#"
name = "host-wide"
[host]
governor = "performance"
irqbalance = "stopped"
[[interface]]
match = "eth0"
irq_affinity = "local"
"#;

#[test]
fn irq_affinity_and_governor_apply_and_roll_back_exactly() {
    let _share = crate::common::traffic();
    let r = root();
    let st = tempfile::tempdir().unwrap();
    let host = Host::at_root(r.path());
    let state = StateDir::at(st.path());
    let p = Profile::parse(HOST_WIDE, "host-wide.toml").unwrap();
    let before = host_wide_files(r.path());

    let report = apply_profile(&p, &host, &state).unwrap();
    let changed: Vec<(String, String, String)> = report
        .changes
        .iter()
        .map(|c| (c.setting.clone(), c.before.clone(), c.after.clone()))
        .collect();
    assert_eq!(
        changed,
        vec![
            ("cpu0 governor".into(), "schedutil".into(), "performance".into()),
            ("cpu1 governor".into(), "schedutil".into(), "performance".into()),
            ("irq 38 (virtio2-input.0) affinity".into(), "0-1".into(), "0".into()),
            ("irq 39 (virtio2-output.0) affinity".into(), "0-1".into(), "1".into()),
        ],
        "data IRQs spread round-robin over the local CPUs; the config IRQ 37 untouched; irqbalance already stopped"
    );
    assert_eq!(report.unchanged, 1);
    assert_eq!(read(r.path(), "proc/irq/38/smp_affinity_list"), "0\n");
    assert_eq!(read(r.path(), "proc/irq/39/smp_affinity_list"), "1\n");
    assert_eq!(
        read(
            r.path(),
            "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor"
        ),
        "performance\n"
    );
    assert_eq!(read(r.path(), "proc/irq/37/smp_affinity_list"), before[0]);

    let rb = apply::rollback(&host, &state).unwrap();
    assert_eq!(rb.restored.len(), 4);
    assert_eq!(host_wide_files(r.path()), before, "byte for byte");
    // Nothing left to roll back.
    assert!(apply::rollback(&host, &state).is_err());
}

#[test]
fn unsupported_host_settings_are_reported_before_anything_changes() {
    let _share = crate::common::traffic();
    let r = root();
    let st = tempfile::tempdir().unwrap();
    let host = Host::at_root(r.path());
    let state = StateDir::at(st.path());
    // A governor the cpufreq driver does not offer, irqbalance that a directory cannot start.
    let p = Profile::parse(
        "name = \"x\"\n[host]\ngovernor = \"ondemand\"\nirqbalance = \"running\"\n[[interface]]\nmatch = \"eth0\"\nirq_affinity = \"local\"\n",
        "x.toml",
    )
    .unwrap();
    let e = apply_profile(&p, &host, &state).unwrap_err().to_string();
    assert!(e.contains("nothing was changed"), "{e}");
    assert!(e.contains("cpu0 governor: governor ondemand is not available; one of: performance, powersave, schedutil"), "{e}");
    assert!(e.contains("irqbalance:"), "{e}");
    assert_eq!(read(r.path(), "proc/irq/38/smp_affinity_list"), "0-1\n");
    assert!(
        !st.path().join("backups").exists(),
        "no backup is written for a plan that is refused"
    );
}

#[test]
fn dry_run_against_a_capture_prints_the_commands() {
    let _share = crate::common::traffic();
    let r = root();
    let st = tempfile::tempdir().unwrap();
    let file = st.path().join("host-wide.toml");
    std::fs::write(&file, HOST_WIDE).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_wirescope"))
        .args(["profile", "apply"])
        .arg(&file)
        .arg("--dry-run")
        .arg("--from")
        .arg(r.path())
        .arg("--state-dir")
        .arg(st.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "echo performance > /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor\n\
         echo performance > /sys/devices/system/cpu/cpu1/cpufreq/scaling_governor\n\
         echo 0 > /proc/irq/38/smp_affinity_list\n\
         echo 1 > /proc/irq/39/smp_affinity_list\n"
    );
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("4 change(s), 1 already set; nothing was changed"));
    assert_eq!(read(r.path(), "proc/irq/38/smp_affinity_list"), "0-1\n");
}

#[test]
fn save_of_a_capture_then_diff_shows_no_difference() {
    let _share = crate::common::traffic();
    let r = root();
    let st = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_wirescope");
    let run = |args: &[&str]| {
        Command::new(bin)
            .args(args)
            .arg("--state-dir")
            .arg(st.path())
            .arg("--from")
            .arg(r.path())
            .output()
            .unwrap()
    };
    let out = run(&["profile", "save", "vm"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let saved = std::fs::read_to_string(st.path().join("profiles/vm.toml")).unwrap();
    assert!(saved.contains("\"virtio2-input.0\" = \"0-1\""), "{saved}");
    assert!(saved.contains("governor = \"schedutil\""), "{saved}");
    assert!(
        saved.contains("\"net.ipv4.tcp_rmem\" = \"4096 131072 33554432\""),
        "{saved}"
    );
    let out = run(&["profile", "diff", "vm", "live", "--exit-code"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("no differences"), "{text}");
}
