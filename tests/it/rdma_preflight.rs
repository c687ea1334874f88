//! The missing-library / missing-device path on the real machine, through
//! the real libibverbs loader (rdma-core-mummy's dlopen and our own).
//! Ground truth comes from the dynamic linker's cache (`ldconfig -p`) and
//! sysfs, independently of the code under test.

use wirescope::probe::live_host::LiveHost as Live;
use wirescope::probe::rdma::preflight::preflight;
use wirescope::traffic::rdma::preflight::INSTALL_LIBIBVERBS;
use wirescope::traffic::rdma::sideway::SidewayProvider;
use wirescope::traffic::rdma::verbs::VerbsProvider;

fn libibverbs_installed() -> bool {
    let out = std::process::Command::new("ldconfig")
        .arg("-p")
        .output()
        .expect("ldconfig -p (libc-bin) must run");
    String::from_utf8_lossy(&out.stdout).contains("libibverbs.so.1 ")
}

fn rdma_device_present() -> bool {
    std::fs::read_dir("/sys/class/infiniband")
        .map(|mut d| d.next().is_some())
        .unwrap_or(false)
}

#[test]
fn preflight_says_what_this_host_lacks() {
    let lib = libibverbs_installed();
    let dev = rdma_device_present();
    eprintln!("ground truth: libibverbs installed = {lib}, RDMA device present = {dev}");
    assert_eq!(SidewayProvider.library().is_ok(), lib);
    let r = preflight(
        &Live::default(),
        &SidewayProvider,
        "this host",
        Some("eth0"),
    );
    match (lib, dev) {
        (true, true) => {
            // A host with rdma-core and a device (not this VM): it lists them.
            let p = r.unwrap_or_else(|e| panic!("{e}"));
            assert!(!p.devices.is_empty());
        }
        _ => {
            let e = r.unwrap_err().to_string();
            eprintln!("{e}");
            assert_eq!(e.lines().count(), 1);
            assert_eq!(e.contains("libibverbs is not installed"), !lib, "{e}");
            assert_eq!(e.contains(INSTALL_LIBIBVERBS), !lib, "{e}");
            assert_eq!(e.contains("no RDMA device"), !dev, "{e}");
            if !dev {
                assert!(
                    e.contains("modprobe mlx5_ib")
                        && e.contains("rdma link add rxe0 type rxe netdev eth0"),
                    "{e}"
                );
            }
        }
    }
}

#[test]
fn opening_a_device_that_is_not_there_fails_with_the_fix() {
    // A name no host has: without libibverbs the fix is the install command,
    // with it the error lists what libibverbs sees.
    let e = SidewayProvider
        .open("wst_absent_0", 1)
        .err()
        .expect("no host has this device")
        .to_string();
    eprintln!("{e}");
    if libibverbs_installed() {
        assert!(
            e.contains("RDMA device wst_absent_0 not found by libibverbs"),
            "{e}"
        );
    } else {
        assert!(e.contains(INSTALL_LIBIBVERBS), "{e}");
    }
}
