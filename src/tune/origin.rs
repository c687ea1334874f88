//! Where a backup was taken: the network namespace's identity, strong enough
//! that a namespace created later with a reused inode number is not taken
//! for the one that is gone, and its name for people.
//!
//! A namespace is identified by its inode and device (what `/proc/self/ns/net`
//! names), the boot it belongs to (`/proc/sys/kernel/random/boot_id`) and
//! its cookie (`SO_NETNS_COOKIE`, kernel 5.14 and later): a 64-bit number the
//! kernel gives each namespace once per boot and never reuses. The name is
//! the `ip netns` name bound to it (`/run/netns/NAME`), if any — shown in
//! listings, never compared. This module only reads; [`super::apply`] decides.

use serde::{Deserialize, Serialize};
use std::os::unix::fs::MetadataExt;

/// The identity of a network namespace (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetnsId {
    /// Inode of the namespace file.
    pub inode: u64,
    /// Device of the namespace file system.
    pub dev: u64,
    /// `SO_NETNS_COOKIE` (None before kernel 5.14).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookie: Option<u64>,
    /// The boot the namespace belongs to.
    pub boot_id: String,
    /// Its `ip netns` name, when one is bound (for people; not compared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `SO_NETNS_COOKIE` (include/uapi/asm-generic/socket.h).
const SO_NETNS_COOKIE: libc::c_int = 71;

/// The cookie of the calling thread's network namespace, through a socket
/// made in it; None where the kernel does not have the option.
pub fn netns_cookie() -> Option<u64> {
    use std::os::fd::AsRawFd;
    let s = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::DGRAM, None).ok()?;
    let mut v: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: v and len are valid for the sizes given; the fd is open.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_NETNS_COOKIE,
            (&mut v as *mut u64).cast(),
            &mut len,
        )
    };
    (r == 0 && len as usize == std::mem::size_of::<u64>()).then_some(v)
}

impl NetnsId {
    /// The namespace of the calling thread; None when /proc cannot say.
    pub fn current() -> Option<NetnsId> {
        let m = std::fs::metadata("/proc/thread-self/ns/net")
            .or_else(|_| std::fs::metadata("/proc/self/ns/net"))
            .ok()?;
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()?
            .trim()
            .to_string();
        Some(NetnsId {
            inode: m.ino(),
            dev: m.dev(),
            cookie: netns_cookie(),
            boot_id,
            name: name_of(m.ino(), m.dev()),
        })
    }

    /// Is `other` the same namespace (the name aside)? Cookies are compared
    /// when both sides have one.
    pub fn same(&self, other: &NetnsId) -> bool {
        self.inode == other.inode
            && self.dev == other.dev
            && self.boot_id == other.boot_id
            && match (self.cookie, other.cookie) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    }

    /// For messages and listings: `netns ws-a-1234 (net:[4026532281], cookie 7)`.
    pub fn describe(&self) -> String {
        let cookie = self
            .cookie
            .map(|c| format!(", cookie {c}"))
            .unwrap_or_default();
        match &self.name {
            Some(n) => format!("netns {n} (net:[{}]{cookie})", self.inode),
            None => format!("net:[{}] (dev {}{cookie})", self.inode, self.dev),
        }
    }

    /// Check one read from a file: bounded text.
    pub fn validate(&self) -> Result<(), super::key::RecordError> {
        let ok = |t: &str| t.len() <= 64 && !t.chars().any(char::is_control);
        if !ok(&self.boot_id) || self.name.as_deref().is_some_and(|n| !ok(n)) {
            return Err(super::key::RecordError::Namespace);
        }
        Ok(())
    }
}

/// This process's command line, quoted for the shell and bounded: which
/// command made a backup.
pub fn command_line() -> String {
    let mut s = std::env::args_os()
        .map(|a| super::key::sh_quote(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ");
    if s.len() > 1024 {
        let mut end = 1024;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str(" ...");
    }
    s.chars().filter(|c| !c.is_control()).collect()
}

/// The `ip netns` name bound to this namespace, if any.
fn name_of(inode: u64, dev: u64) -> Option<String> {
    std::fs::read_dir("/run/netns")
        .ok()?
        .flatten()
        .take(4096)
        .find(|e| std::fs::metadata(e.path()).is_ok_and(|m| m.ino() == inode && m.dev() == dev))
        .map(|e| e.file_name().to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_namespace_is_itself_and_a_reused_inode_is_not() {
        let me = NetnsId::current().expect("/proc is mounted");
        assert!(me.same(&me));
        assert!(me.same(&NetnsId {
            name: Some("other-name".into()),
            ..me.clone()
        }));
        // Same inode and device, another cookie: a namespace made later.
        if let Some(c) = me.cookie {
            let later = NetnsId {
                cookie: Some(c + 1),
                ..me.clone()
            };
            assert!(!me.same(&later));
        }
        let other_boot = NetnsId {
            boot_id: "x".into(),
            ..me.clone()
        };
        assert!(!me.same(&other_boot));
        assert!(me.describe().contains(&format!("net:[{}]", me.inode)));
    }
}
