//! Files that `ip netns exec NS` bind-mounts over /etc: whatever is in
//! `/etc/netns/NS/` (`hosts`, `resolv.conf`) replaces the file of that name
//! for every command run in the namespace. Written on creation, the
//! directory removed on drop (and `/etc/netns` too when nothing else is
//! left in it).

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

/// Creating `/etc/netns/NS` and removing an empty `/etc/netns` take turns:
/// one test's rmdir must not fall between another's two mkdirs.
static ETC_NETNS: Mutex<()> = Mutex::new(());

/// `/etc/netns/NS/`, removed on drop.
pub struct EtcNetns {
    dir: PathBuf,
}

impl EtcNetns {
    /// `/etc/netns/NS/NAME` for each `(NAME, text)`.
    pub fn new(ns: &str, files: &[(&str, &str)]) -> EtcNetns {
        assert!(
            !ns.is_empty() && !ns.contains('/') && ns != "." && ns != "..",
            "namespace name {ns:?}"
        );
        let e = EtcNetns {
            dir: PathBuf::from("/etc/netns").join(ns),
        };
        let _turn = ETC_NETNS.lock().unwrap_or_else(PoisonError::into_inner);
        std::fs::create_dir_all(&e.dir)
            .unwrap_or_else(|err| panic!("create {}: {err}", e.dir.display()));
        for (name, text) in files {
            let p = e.dir.join(name);
            std::fs::write(&p, text).unwrap_or_else(|err| panic!("write {}: {err}", p.display()));
        }
        e
    }
}

impl Drop for EtcNetns {
    fn drop(&mut self) {
        let _turn = ETC_NETNS.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = std::fs::remove_dir_all(&self.dir);
        // Only when empty: other tests may have theirs there.
        let _ = std::fs::remove_dir("/etc/netns");
    }
}
