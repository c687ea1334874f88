//! Real-kernel tests: namespaces, veth, loopback and the host's own NIC.

use super::*;
use crate::probe::facts::Support;
use std::process::Command;

fn ifindex(ns: Option<&str>, name: &str) -> u32 {
    let path = format!("/sys/class/net/{name}/ifindex");
    let text = match ns {
        None => std::fs::read_to_string(&path).expect("ifindex"),
        Some(ns) => {
            let out = Command::new("ip")
                .args(["netns", "exec", ns, "cat", &path])
                .output()
                .expect("ip netns exec");
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    text.trim().parse().expect("ifindex number")
}

#[test]
fn explore() {
    let mut e = EthtoolNl::open().expect("open");
    for i in ["lo", "eth0"] {
        eprintln!("{i} channels {:?}", e.channels(i, "x"));
        eprintln!("{i} rings {:?}", e.rings(i, "x"));
        eprintln!("{i} coalesce {:?}", e.coalesce(i, "x"));
        eprintln!("{i} link {:?}", e.link(i, "x"));
        eprintln!("{i} pause {:?}", e.pause(i, "x"));
        let f = e.features(i, "x");
        eprintln!("{i} features {:?}", f.value().map(|f| f.0.len()).ok_or(&f));
        eprintln!("{i} rx-gro {:?}", f.value().map(|f| f.0.get("rx-gro")));
    }
    eprintln!("nosuch {:?}", e.channels("nosuchif0", "x"));
    let mut n = NetdevNl::open().expect("open netdev");
    for i in ["lo", "eth0"] {
        eprintln!("{i} qstats {:?}", n.qstats(ifindex(None, i)));
    }
    eprintln!("9999 qstats {:?}", n.qstats(9999));
    let _ = Support::<u32>::Unknown;
}
