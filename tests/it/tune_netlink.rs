//! The ethtool `*_SET` and rtnetlink MTU requests against a real veth, from
//! a thread that has entered a namespace this test created: the kernel
//! parses every message, so its answers (and its extended-ack texts) show the
//! attributes are encoded as it expects.

use crate::common;

use common::Pair;
use std::os::fd::AsFd;
use wirescope::probe::netlink::ethtool_set::{
    ChannelKind, CoalesceValue, EthtoolSet, PauseKind, RingKind,
};
use wirescope::probe::netlink::link::LinkNl;
use wirescope::probe::netlink::{EthtoolNl, NlError};

/// Run `f` on a thread inside network namespace `ns`.
fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let fd = std::fs::File::open(&path).unwrap();
        nix::sched::setns(fd.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        f()
    })
    .join()
    .unwrap()
}

#[test]
fn set_requests_are_understood_by_the_kernel() {
    let pair = Pair::new();
    in_netns(&pair.a, || {
        let mut set = EthtoolSet::open().unwrap();
        let mut get = EthtoolNl::open().unwrap();

        set.set_channel("veth-a", ChannelKind::Rx, 2).unwrap();
        let ch = get.channels("veth-a", "veth");
        assert_eq!(ch.value().and_then(|c| c.rx), Some(2), "{ch:?}");
        match set.set_channel("veth-a", ChannelKind::Rx, 64) {
            Err(NlError::Kernel { errno, message, .. }) => {
                assert_eq!(errno, libc::EINVAL);
                assert!(message.unwrap_or_default().contains("exceeds maximum"));
            }
            other => panic!("{other:?}"),
        }

        set.set_features("veth-a", &[("rx-gro", true)]).unwrap();
        let f = get.features("veth-a", "veth");
        assert_eq!(f.value().and_then(|f| f.on("rx-gro")), Some(true));
        set.set_features("veth-a", &[("rx-gro", false)]).unwrap();
        let f = get.features("veth-a", "veth");
        assert_eq!(f.value().and_then(|f| f.on("rx-gro")), Some(false));
        // The kernel looks names up itself ("bit name not found" is EOPNOTSUPP).
        assert!(set
            .set_features("veth-a", &[("no-such-feature", true)])
            .is_err());

        // veth has no rings, coalescing or pause: the driver says so.
        for r in [
            set.set_ring("veth-a", RingKind::Rx, 512),
            set.set_coalesce("veth-a", "rx-usecs", CoalesceValue::Num(0)),
            set.set_pause("veth-a", PauseKind::Rx, true),
        ] {
            assert!(matches!(r, Err(NlError::NotSupported { .. })), "{r:?}");
        }
        assert!(matches!(
            set.set_channel("nope0", ChannelKind::Rx, 1),
            Err(NlError::NoDevice { .. })
        ));

        let mut link = LinkNl::open().unwrap();
        let m = link.mtu("veth-a").unwrap();
        assert_eq!((m.mtu, m.min, m.max), (1500, Some(68), Some(65535)));
        link.set_mtu("veth-a", 9000).unwrap();
        assert_eq!(link.mtu("veth-a").unwrap().mtu, 9000);
        assert!(matches!(
            link.set_mtu("veth-a", 70000),
            Err(NlError::Kernel { .. })
        ));
        assert!(matches!(link.mtu("nope0"), Err(NlError::NoDevice { .. })));
    });
}
