//! Before an RDMA test: is libibverbs there, is there an RDMA device, and
//! which device, port and GID to use. Each failure is one line that says what
//! is missing and the command that fixes it (`run --engine rdma` prints it and
//! exits 2).
//!
//! Reads sysfs through [`HostSource`] and asks the [`VerbsProvider`] only
//! whether the library loads and which devices it sees; opens nothing.

use super::{read_rdma_facts, RdmaFacts, SYSFS_ROOT};
use crate::probe::source::HostSource;
use crate::traffic::rdma::preflight::PreflightError;
use crate::traffic::rdma::spec::RdmaEndpoint;
use crate::traffic::rdma::verbs::{VerbsError, VerbsProvider};
use crate::traffic::rdma::Chosen;
use std::net::IpAddr;

/// What is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preflight {
    /// Devices the kernel lists and libibverbs sees.
    pub devices: Vec<String>,
}

/// Check library and device. `host` names the host in the message ("this
/// host", "the peer"); `iface` is the interface towards the peer, for the
/// soft-RoCE command.
pub fn preflight(
    src: &dyn HostSource,
    provider: &dyn VerbsProvider,
    host: &str,
    iface: Option<&str>,
) -> Result<Preflight, PreflightError> {
    let iface = iface.unwrap_or("IF");
    // Why the library does not load, in the loader's words.
    let lib = provider.library().map_err(|e| match e {
        VerbsError::NoLibrary(why) => why,
        other => other.to_string(),
    });
    let facts = read_rdma_facts(src);
    let kernel: Vec<String> = facts.devices.iter().map(|d| d.name.clone()).collect();
    let sysfs = format!("{SYSFS_ROOT} {}", super::sysfs_state(src));
    let host = host.to_string();
    match (lib, kernel.is_empty()) {
        (Err(why), true) => Err(PreflightError::NothingThere {
            host,
            why,
            sysfs,
            iface: iface.to_string(),
        }),
        (Err(why), false) => Err(PreflightError::NoLibrary { host, why, kernel }),
        (Ok(()), true) => Err(PreflightError::NoDevice {
            host,
            sysfs,
            iface: iface.to_string(),
        }),
        (Ok(()), false) => {
            let seen = match provider.devices() {
                Ok(seen) => seen,
                Err(source) => return Err(PreflightError::Devices { host, source }),
            };
            let usable: Vec<String> = kernel
                .iter()
                .filter(|k| seen.contains(k))
                .cloned()
                .collect();
            if usable.is_empty() {
                return Err(PreflightError::NoProvider { host, kernel });
            }
            Ok(Preflight { devices: usable })
        }
    }
}

/// Choose per the spec's endpoint, else the device behind `route_iface`
/// (the interface that routes to the peer) and the RoCE v2 GID of `local_ip`.
pub fn choose(
    facts: &RdmaFacts,
    want: &RdmaEndpoint,
    route_iface: Option<&str>,
    local_ip: Option<IpAddr>,
) -> Result<Chosen, PreflightError> {
    let names = || {
        facts
            .devices
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let routed = route_iface.and_then(|i| facts.port_of_netdev(i));
    let dev = match (&want.ib_dev, routed) {
        (Some(n), _) => facts
            .device(n)
            .ok_or_else(|| PreflightError::NoSuchDevice {
                name: n.clone(),
                devices: names(),
            })?,
        (None, Some((d, _))) => d,
        (None, None) if facts.devices.len() == 1 => &facts.devices[0],
        (None, None) => {
            return Err(PreflightError::Ambiguous {
                count: facts.devices.len(),
                devices: names(),
                iface: route_iface
                    .unwrap_or("the interface towards the peer")
                    .to_string(),
            })
        }
    };
    let port = match want.ib_port {
        Some(p) => dev
            .ports
            .iter()
            .find(|x| x.port == u32::from(p))
            .ok_or_else(|| PreflightError::NoSuchPort {
                device: dev.name.clone(),
                port: p,
            })?,
        None => routed
            .filter(|(d, _)| d.name == dev.name)
            .map(|(_, p)| p)
            .or_else(|| dev.ports.iter().find(|p| p.is_active()))
            .or_else(|| dev.ports.first())
            .ok_or_else(|| PreflightError::NoPorts {
                device: dev.name.clone(),
            })?,
    };
    if !port.is_active() {
        return Err(PreflightError::PortDown {
            device: dev.name.clone(),
            port: port.port,
            state: port
                .state
                .as_ref()
                .map_or("not ACTIVE", |s| s.name.as_str())
                .to_string(),
        });
    }
    let gid_index = match want.gid_index {
        Some(g) if port.gids.is_empty() || port.gids.iter().any(|x| x.index == g) => Some(g),
        Some(g) => {
            return Err(PreflightError::NoSuchGid {
                device: dev.name.clone(),
                port: port.port,
                gid: g,
                populated: port
                    .gids
                    .iter()
                    .map(|x| x.index.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
        }
        None if port.is_roce() => Some(
            port.default_gid(local_ip)
                .ok_or_else(|| PreflightError::NoGid {
                    device: dev.name.clone(),
                    port: port.port,
                })?
                .index,
        ),
        None => None,
    };
    Ok(Chosen {
        device: dev.name.clone(),
        port: u8::try_from(port.port).map_err(|_| PreflightError::PortRange { port: port.port })?,
        gid_index,
        netdev: port.netdev.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::testdata;
    use super::*;
    use crate::probe::capture_dir::CaptureDir as Dir;
    use crate::traffic::rdma::preflight::INSTALL_LIBIBVERBS;
    use crate::traffic::rdma::verbs::{Verbs, VerbsError};

    /// TEST DOUBLE of the verbs library's presence (this machine can show
    /// "missing" for real, see tests/it/rdma_preflight.rs, but not "present with a device").
    struct TestDoubleLibrary {
        loads: bool,
        sees: Vec<&'static str>,
    }

    impl VerbsProvider for TestDoubleLibrary {
        fn library(&self) -> Result<(), VerbsError> {
            if self.loads {
                Ok(())
            } else {
                Err(VerbsError::NoLibrary(
                    "libibverbs.so.1: cannot open shared object file: No such file or directory"
                        .into(),
                ))
            }
        }
        fn devices(&self) -> Result<Vec<String>, VerbsError> {
            Ok(self.sees.iter().map(|s| s.to_string()).collect())
        }
        fn open(&self, _: &str, _: u8) -> Result<Box<dyn Verbs>, VerbsError> {
            Err(VerbsError::Port("not used".into()))
        }
    }

    #[test]
    fn each_missing_piece_is_one_line_with_its_fix() {
        let none = tempfile::tempdir().unwrap();
        let empty = Dir::new(none.path());
        let roce = testdata::roce_copy(9000);
        let dev = Dir::new(roce.root());
        let lib = |loads, sees: &[&'static str]| TestDoubleLibrary {
            loads,
            sees: sees.to_vec(),
        };
        let both = preflight(&empty, &lib(false, &[]), "this host", Some("eth0"))
            .unwrap_err()
            .to_string();
        assert!(
            both.contains("libibverbs is not installed") && both.contains("no RDMA device"),
            "{both}"
        );
        assert!(
            both.contains(INSTALL_LIBIBVERBS)
                && both.contains("rdma link add rxe0 type rxe netdev eth0"),
            "{both}"
        );
        let no_lib = preflight(&dev, &lib(false, &[]), "the peer", None)
            .unwrap_err()
            .to_string();
        assert!(
            no_lib.starts_with("RDMA unavailable on the peer: libibverbs is not installed"),
            "{no_lib}"
        );
        assert!(
            no_lib.contains("hfi1_0, mlx4_0, mlx5_0") && !no_lib.contains("modprobe"),
            "{no_lib}"
        );
        let no_dev = preflight(&empty, &lib(true, &[]), "this host", None)
            .unwrap_err()
            .to_string();
        assert!(
            no_dev.contains("no RDMA device (/sys/class/infiniband absent)"),
            "{no_dev}"
        );
        assert!(
            no_dev.contains("modprobe mlx5_ib") && no_dev.contains("netdev IF"),
            "{no_dev}"
        );
        let no_provider = preflight(&dev, &lib(true, &[]), "this host", None)
            .unwrap_err()
            .to_string();
        assert!(no_provider.contains("ibverbs-providers"), "{no_provider}");
        for m in [&both, &no_lib, &no_dev, &no_provider] {
            assert_eq!(m.lines().count(), 1, "{m}");
        }
        let ok = preflight(&dev, &lib(true, &["mlx5_0", "rxe9"]), "this host", None).unwrap();
        assert_eq!(ok.devices, ["mlx5_0"]);
    }

    #[test]
    fn choose_follows_the_route_and_the_roce_v2_gid() {
        let c = testdata::roce_copy(9000);
        let f = read_rdma_facts(&Dir::new(c.root()));
        let any = RdmaEndpoint::default();
        let ip = "198.18.0.1".parse().ok();
        let x = choose(&f, &any, Some("eth0"), ip).unwrap();
        assert_eq!(
            x,
            Chosen {
                device: "mlx5_0".into(),
                port: 1,
                gid_index: Some(3),
                netdev: Some("eth0".into()),
            }
        );
        // Three devices and none behind the interface: ask.
        let e = choose(&f, &any, Some("eth9"), ip).unwrap_err().to_string();
        assert!(
            e.contains("3 RDMA devices (hfi1_0, mlx4_0, mlx5_0)") && e.contains("--ib-dev"),
            "{e}"
        );
        // Explicit choices; IB ports use LIDs (no GID).
        let want = RdmaEndpoint {
            ib_dev: Some("mlx4_0".into()),
            ib_port: Some(2),
            gid_index: None,
        };
        let x = choose(&f, &want, None, None).unwrap();
        assert_eq!(
            (x.device.as_str(), x.port, x.gid_index),
            ("mlx4_0", 2, None)
        );
        let bad = |w: RdmaEndpoint| choose(&f, &w, Some("eth0"), ip).unwrap_err().to_string();
        assert!(bad(RdmaEndpoint {
            ib_dev: Some("mlx9_9".into()),
            ..Default::default()
        })
        .contains("does not exist"));
        assert!(bad(RdmaEndpoint {
            ib_port: Some(2),
            ..Default::default()
        })
        .contains("no port 2"));
        assert!(bad(RdmaEndpoint {
            gid_index: Some(9),
            ..Default::default()
        })
        .contains("no GID index 9 (populated: 0, 1, 2, 3)"));
        // A DOWN port is refused with the command to look at it.
        c.put("sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN\n");
        let f = read_rdma_facts(&Dir::new(c.root()));
        let e = choose(&f, &any, Some("eth0"), ip).unwrap_err().to_string();
        assert!(
            e.contains("port 1 is DOWN") && e.contains("rdma link show mlx5_0/1"),
            "{e}"
        );
    }

    #[test]
    fn the_default_follows_the_real_route() {
        // Loopback routes via lo from 127.0.0.1; no RDMA device is behind lo.
        let (iface, local) = crate::probe::system::route_to("127.0.0.1".parse().unwrap());
        assert_eq!(iface.as_deref(), Some("lo"));
        assert_eq!(local, "127.0.0.1".parse().ok());
        let c = testdata::roce_copy(9000);
        let f = read_rdma_facts(&Dir::new(c.root()));
        let e = choose(&f, &RdmaEndpoint::default(), iface.as_deref(), local)
            .unwrap_err()
            .to_string();
        assert!(e.contains("none is behind lo"), "{e}");
    }
}
