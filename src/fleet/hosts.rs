//! Which agents a fleet tests: `--hosts a,b,node[01-08]`, `--hosts-file F`
//! (one per line, `#` comments), `--slurm` (the job's node list) and
//! `--dns NAME` (every address a name resolves to: a Kubernetes headless
//! Service answers one per ready pod).
//!
//! Host lists use Slurm's hostlist form everywhere (`node[01-03,07]`,
//! `rack[1-2]-n[1-4]`), expanded as `scontrol show hostnames` does: ranges
//! keep the width of their first bound (`01-10` → `01 … 10`), several
//! bracket groups multiply. Names resolve through the system resolver, like
//! every other host argument.

use std::net::SocketAddr;
use std::path::Path;

/// One agent of the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetHost {
    /// How the user named it (a host name, or the address for `--dns`).
    pub name: String,
    /// Its control address.
    pub addr: SocketAddr,
}

/// A host that could not be taken into the fleet, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    /// As given.
    pub name: String,
    /// Why, for the user.
    pub why: String,
}

/// Host-list failures.
#[derive(Debug, thiserror::Error)]
pub enum HostsError {
    /// A hostlist expression that does not parse.
    #[error("host list {expr:?}: {why}")]
    Syntax {
        /// The expression.
        expr: String,
        /// What is wrong.
        #[source]
        why: HostlistError,
    },
    /// A line of a hosts file that does not parse.
    #[error("host list {at:?}: {source}")]
    Line {
        /// `PATH:LINE`.
        at: String,
        /// What is wrong with the line.
        #[source]
        source: Box<HostsError>,
    },
    /// A file that cannot be read.
    #[error("cannot read the hosts file {path}: {source}")]
    File {
        /// The path.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// `--slurm` outside a job.
    #[error("--slurm: neither SLURM_JOB_NODELIST nor SLURM_NODELIST is set; run `wirescope fleet --slurm` inside a Slurm job (sbatch or salloc), or give --hosts")]
    NoSlurmJob,
    /// `--dns` found nothing.
    #[error("--dns {name}: {why}")]
    Dns {
        /// The name.
        name: String,
        /// What the resolver said.
        why: String,
    },
    /// Too few hosts to test anything.
    #[error("a fleet needs at least 2 hosts; {0}")]
    TooFew(String),
}

/// What is wrong with a hostlist expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostlistError {
    /// `[` inside a bracket group.
    #[error("nested '[' is not a hostlist")]
    Nested,
    /// `]` with no group open.
    #[error("']' without '['")]
    CloseWithoutOpen,
    /// A group that is never closed.
    #[error("'[' without ']'")]
    OpenWithoutClose,
    /// More than [`MAX_HOSTS`] names.
    #[error("expands to more than {MAX_HOSTS} hosts")]
    TooMany,
    /// A name with a space in it.
    #[error("{0:?} holds a space; separate hosts with commas")]
    Space(String),
    /// A group element that is neither a number nor a range.
    #[error("[{group}]: {range:?} is not a number or a range like 01-08")]
    NotNumber {
        /// The group.
        group: String,
        /// The element.
        range: String,
    },
    /// A bound beyond a 64-bit number.
    #[error("[{group}]: {value:?} is too large")]
    TooLarge {
        /// The group.
        group: String,
        /// The bound.
        value: String,
    },
    /// A range whose end is below its start.
    #[error("[{group}]: the range {range} runs backwards")]
    Backwards {
        /// The group.
        group: String,
        /// The range.
        range: String,
    },
    /// One group of more than [`MAX_HOSTS`] values.
    #[error("[{0}]: expands to more than {MAX_HOSTS} hosts")]
    GroupTooMany(String),
}

/// Why a host name does not resolve to a control address.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// `HOST:PORT` with a port that is not a number.
    #[error("{0:?} is not a port number")]
    Port(String),
    /// The resolver failed.
    #[error("does not resolve: {0}")]
    Lookup(#[source] std::io::Error),
    /// The resolver answered with no address.
    #[error("resolves to no address")]
    NoAddress,
}

/// Longest expansion of one hostlist expression (a typo like `n[1-1000000]`
/// must not allocate a million names).
pub const MAX_HOSTS: usize = 100_000;

/// Expand a hostlist: comma-separated items, each with any number of
/// `[a-b,c]` groups. Duplicates are kept out, order is kept.
pub fn expand(expr: &str) -> Result<Vec<String>, HostsError> {
    let err = |why: HostlistError| HostsError::Syntax {
        expr: expr.to_string(),
        why,
    };
    let mut out: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for item in split_top(expr).map_err(&err)? {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        for name in expand_item(item).map_err(&err)? {
            if seen.insert(name.clone()) {
                out.push(name);
                if out.len() > MAX_HOSTS {
                    return Err(err(HostlistError::TooMany));
                }
            }
        }
    }
    Ok(out)
}

/// Split at commas outside brackets.
fn split_top(expr: &str) -> Result<Vec<&str>, HostlistError> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in expr.char_indices() {
        match c {
            '[' if depth == 0 => depth = 1,
            '[' => return Err(HostlistError::Nested),
            ']' if depth == 1 => depth = 0,
            ']' => return Err(HostlistError::CloseWithoutOpen),
            ',' if depth == 0 => {
                parts.push(&expr[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(HostlistError::OpenWithoutClose);
    }
    parts.push(&expr[start..]);
    Ok(parts)
}

/// One item: literal text and bracket groups, multiplied out.
fn expand_item(item: &str) -> Result<Vec<String>, HostlistError> {
    let mut names = vec![String::new()];
    let mut rest = item;
    while !rest.is_empty() {
        let (lit, after) = match rest.find('[') {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        };
        for n in &mut names {
            n.push_str(lit);
        }
        let Some(after) = after else { break };
        let close = after.find(']').ok_or(HostlistError::OpenWithoutClose)?;
        let values = expand_group(&after[..close])?;
        if names.len().saturating_mul(values.len()) > MAX_HOSTS {
            return Err(HostlistError::TooMany);
        }
        names = names
            .iter()
            .flat_map(|n| values.iter().map(move |v| format!("{n}{v}")))
            .collect();
        rest = &after[close + 1..];
    }
    if names.iter().any(|n| n.chars().any(char::is_whitespace)) {
        return Err(HostlistError::Space(item.to_string()));
    }
    Ok(names)
}

/// `01-03,07` → `01 02 03 07`.
fn expand_group(g: &str) -> Result<Vec<String>, HostlistError> {
    let mut out = Vec::new();
    for r in g.split(',') {
        let r = r.trim();
        let (a, b) = r.split_once('-').unwrap_or((r, r));
        let num = |s: &str| {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                Err(HostlistError::NotNumber {
                    group: g.to_string(),
                    range: r.to_string(),
                })
            } else {
                s.parse::<u64>().map_err(|_| HostlistError::TooLarge {
                    group: g.to_string(),
                    value: s.to_string(),
                })
            }
        };
        let (lo, hi) = (num(a)?, num(b)?);
        if hi < lo {
            return Err(HostlistError::Backwards {
                group: g.to_string(),
                range: r.to_string(),
            });
        }
        if hi - lo >= MAX_HOSTS as u64 {
            return Err(HostlistError::GroupTooMany(g.to_string()));
        }
        let width = a.len();
        out.extend((lo..=hi).map(|v| format!("{v:0width$}")));
    }
    Ok(out)
}

/// A hosts file: one hostlist per line, `#` starts a comment.
pub fn read_file(path: &Path) -> Result<Vec<String>, HostsError> {
    let text = std::fs::read_to_string(path).map_err(|source| HostsError::File {
        path: path.display().to_string(),
        source,
    })?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let names = expand(line).map_err(|e| HostsError::Line {
            at: format!("{}:{}", path.display(), n + 1),
            source: Box::new(e),
        })?;
        for name in names {
            if !out.contains(&name) {
                out.push(name);
            }
        }
    }
    Ok(out)
}

/// The node list of the Slurm job this process runs in.
pub fn slurm_nodes() -> Result<Vec<String>, HostsError> {
    let list = ["SLURM_JOB_NODELIST", "SLURM_NODELIST"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()))
        .ok_or(HostsError::NoSlurmJob)?;
    expand(&list)
}

/// Every address `name` resolves to, at `port`, in address order.
pub async fn from_dns(name: &str, port: u16) -> Result<Vec<FleetHost>, HostsError> {
    let dns = |why: String| HostsError::Dns {
        name: name.to_string(),
        why,
    };
    let found = tokio::net::lookup_host((name, port)).await.map_err(|e| {
        dns(format!(
            "{e}; is the name right, and does this host's resolver (/etc/resolv.conf) know it?"
        ))
    })?;
    let mut addrs: Vec<SocketAddr> = found.collect();
    addrs.sort();
    addrs.dedup();
    if addrs.is_empty() {
        return Err(dns(
            "resolves to no address (no ready pod behind the Service?)".into(),
        ));
    }
    Ok(addrs
        .into_iter()
        .map(|addr| FleetHost {
            name: addr.ip().to_string(),
            addr,
        })
        .collect())
}

/// Resolve `HOST`, `HOST:PORT`, `IP`, `[IPv6]:PORT` (default `port`); names
/// that resolve to nothing are returned apart with the reason.
pub async fn resolve(names: &[String], port: u16) -> (Vec<FleetHost>, Vec<Unresolved>) {
    let mut hosts = Vec::new();
    let mut bad = Vec::new();
    for name in names {
        match resolve_one(name, port).await {
            Ok(addr) => hosts.push(FleetHost {
                name: name.clone(),
                addr,
            }),
            Err(why) => bad.push(Unresolved {
                name: name.clone(),
                why: why.to_string(),
            }),
        }
    }
    (hosts, bad)
}

async fn resolve_one(name: &str, port: u16) -> Result<SocketAddr, ResolveError> {
    if let Ok(a) = name.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Ok(ip) = name.parse::<std::net::IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    let (host, port) = match name.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => (
            h,
            p.parse::<u16>()
                .map_err(|_| ResolveError::Port(p.to_string()))?,
        ),
        _ => (name, port),
    };
    let mut found = tokio::net::lookup_host((host, port))
        .await
        .map_err(ResolveError::Lookup)?;
    // IPv4 first: the address a cluster's agents usually listen on.
    let all: Vec<SocketAddr> = found.by_ref().collect();
    all.iter()
        .find(|a| a.is_ipv4())
        .or(all.first())
        .copied()
        .ok_or(ResolveError::NoAddress)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostlists_expand_as_scontrol_does() {
        assert_eq!(expand("a,b,c").unwrap(), ["a", "b", "c"]);
        assert_eq!(
            expand("node[01-03,07],gpu1").unwrap(),
            ["node01", "node02", "node03", "node07", "gpu1"]
        );
        assert_eq!(
            expand("r[1-2]-n[8-10]").unwrap(),
            ["r1-n8", "r1-n9", "r1-n10", "r2-n8", "r2-n9", "r2-n10"]
        );
        assert_eq!(
            expand("n[098-101]").unwrap(),
            ["n098", "n099", "n100", "n101"]
        );
        assert_eq!(expand("a, a ,b,").unwrap(), ["a", "b"]);
    }

    #[test]
    fn bad_hostlists_say_what_is_wrong() {
        for (bad, says) in [
            ("n[1-3", "without ']'"),
            ("n1-3]", "without '['"),
            ("n[3-1]", "backwards"),
            ("n[a-c]", "not a number"),
            ("n[1-1000000]", "more than"),
            ("n[[1]]", "nested"),
            ("a b", "space"),
        ] {
            let e = expand(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn hosts_files_take_comments_and_hostlists() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("hosts");
        std::fs::write(&p, "# the rack\nnode[1-2]  # two\n\n10.0.0.9:6000\nnode1\n").unwrap();
        assert_eq!(read_file(&p).unwrap(), ["node1", "node2", "10.0.0.9:6000"]);
        std::fs::write(&p, "ok\nn[1-\n").unwrap();
        let e = read_file(&p).unwrap_err().to_string();
        assert!(e.contains(":2"), "{e}");
    }

    #[tokio::test]
    async fn names_resolve_with_the_default_port_and_bad_ones_are_set_apart() {
        let names: Vec<String> = [
            "127.0.0.1",
            "127.0.0.2:6000",
            "[::1]:7000",
            "localhost",
            "no-such-host.invalid",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (ok, bad) = resolve(&names, 5310).await;
        let addrs: Vec<String> = ok.iter().map(|h| h.addr.to_string()).collect();
        assert_eq!(
            addrs,
            [
                "127.0.0.1:5310",
                "127.0.0.2:6000",
                "[::1]:7000",
                "127.0.0.1:5310"
            ]
        );
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].name, "no-such-host.invalid");
        assert!(bad[0].why.contains("does not resolve"), "{}", bad[0].why);
    }
}
