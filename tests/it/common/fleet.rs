//! A fleet of agents in namespaces: `wst-PID-fN-i` per node and one for the
//! coordinator, all on a bridge in a switch namespace (10.99.N.0/24; node i
//! is 10.99.N.(i+1), the coordinator 10.99.N.254). Removed on drop, with
//! every agent it started.

use super::{bin, require_root, TOKEN};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static N: AtomicU32 = AtomicU32::new(0);

/// Namespaces, bridge and agents.
pub struct Fleet {
    /// Node namespaces, in order.
    pub nodes: Vec<String>,
    /// The coordinator's namespace.
    pub coord: String,
    sw: String,
    net: u32,
    agents: Vec<Option<Child>>,
    /// Logs and files.
    pub dir: tempfile::TempDir,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Run a command inside `ns`, asserting success.
pub fn in_ns(ns: &str, cmd: &[&str]) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(cmd)
        .output()
        .expect("run ip netns exec");
    assert!(
        out.status.success(),
        "{ns}: {}: {}",
        cmd.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Fleet {
    /// `n` nodes on a bridge, no agents yet.
    pub fn new(n: usize) -> Fleet {
        require_root();
        let k = N.fetch_add(1, Ordering::SeqCst);
        let id = std::process::id();
        let net = 100 + k % 100;
        let name = |s: &str| format!("wst-{id}-f{k}-{s}");
        let mut f = Fleet {
            nodes: (0..n).map(|i| name(&i.to_string())).collect(),
            coord: name("c"),
            sw: name("sw"),
            net,
            agents: (0..n).map(|_| None).collect(),
            dir: tempfile::tempdir().unwrap(),
        };
        ip(&["netns", "add", &f.sw]);
        ip(&["-n", &f.sw, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &f.sw, "link", "set", "br0", "up"]);
        let all: Vec<(String, String)> = f
            .nodes
            .iter()
            .enumerate()
            .map(|(i, ns)| (ns.clone(), format!("10.99.{net}.{}", i + 1)))
            .chain(std::iter::once((
                f.coord.clone(),
                format!("10.99.{net}.254"),
            )))
            .collect();
        for (i, (ns, addr)) in all.iter().enumerate() {
            ip(&["netns", "add", ns]);
            let port = format!("p{i}");
            ip(&[
                "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", &port, "netns",
                &f.sw,
            ]);
            ip(&["-n", &f.sw, "link", "set", &port, "master", "br0"]);
            ip(&["-n", &f.sw, "link", "set", &port, "up"]);
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "eth0",
            ]);
            ip(&["-n", ns, "link", "set", "eth0", "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        f.net = net;
        f
    }

    /// Node i's address.
    pub fn addr(&self, i: usize) -> String {
        format!("10.99.{}.{}", self.net, i + 1)
    }

    /// `a,b,c` of every node's address.
    pub fn hosts(&self) -> String {
        (0..self.nodes.len())
            .map(|i| self.addr(i))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Start node i's agent with `token` and wait until it listens.
    pub fn start_agent_with_token(&mut self, i: usize, token: &str) {
        let log = self.dir.path().join(format!("agent-{i}.log"));
        let child = Command::new("ip")
            .args(["netns", "exec", &self.nodes[i]])
            .args([
                bin(),
                "agent",
                "--listen",
                &format!("{}:5310", self.addr(i)),
            ])
            .env("WIRESCOPE_TOKEN", token)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        self.agents[i] = Some(child);
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("listening on")
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "agent {i} did not start: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// Start every agent with the test token.
    pub fn start_agents(&mut self) {
        for i in 0..self.nodes.len() {
            self.start_agent_with_token(i, TOKEN);
        }
    }

    /// Kill node i's agent.
    pub fn kill_agent(&mut self, i: usize) {
        if let Some(mut c) = self.agents[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Node i's agent log.
    pub fn agent_log(&self, i: usize) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("agent-{i}.log"))).unwrap_or_default()
    }

    /// `wirescope fleet ARGS` in the coordinator's namespace.
    pub fn fleet_cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.coord, bin(), "fleet"])
            .args(args)
            .env("WIRESCOPE_TOKEN", TOKEN);
        c
    }

    /// Run `wirescope fleet ARGS` to its end.
    pub fn fleet(&self, args: &[&str]) -> Output {
        self.fleet_cmd(args).output().unwrap()
    }

    /// Cap every node's egress at `rate` (htb, default class 1:10), as a
    /// fabric's line rate: the tests' figures then come from the links, not
    /// from how two shared cores are split between the tests of a round.
    pub fn line_rate(&self, rate: &str) {
        for ns in &self.nodes {
            in_ns(
                ns,
                &[
                    "tc", "qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "htb",
                    "default", "10",
                ],
            );
            in_ns(
                ns,
                &[
                    "tc", "class", "replace", "dev", "eth0", "parent", "1:", "classid", "1:10",
                    "htb", "rate", rate,
                ],
            );
        }
    }

    /// Shape only node `from`'s traffic to node `to` down to `rate` (htb
    /// class 1:20 and a u32 match on the destination address).
    pub fn slow_link(&self, from: usize, to: usize, rate: &str) {
        let ns = &self.nodes[from];
        in_ns(
            ns,
            &[
                "tc", "class", "replace", "dev", "eth0", "parent", "1:", "classid", "1:20", "htb",
                "rate", rate,
            ],
        );
        in_ns(
            ns,
            &[
                "tc",
                "filter",
                "replace",
                "dev",
                "eth0",
                "parent",
                "1:",
                "protocol",
                "ip",
                "prio",
                "1",
                "u32",
                "match",
                "ip",
                "dst",
                &format!("{}/32", self.addr(to)),
                "flowid",
                "1:20",
            ],
        );
    }

    /// Remove the slow-link filters of node `from`.
    pub fn clear_filters(&self, from: usize) {
        in_ns(
            &self.nodes[from],
            &["tc", "filter", "del", "dev", "eth0", "parent", "1:"],
        );
    }

    /// Make node i's egress slow: its default class at `rate`.
    pub fn slow_node(&self, i: usize, rate: &str) {
        in_ns(
            &self.nodes[i],
            &[
                "tc", "class", "change", "dev", "eth0", "parent", "1:", "classid", "1:10", "htb",
                "rate", rate,
            ],
        );
    }
}

/// Ctrl-C to a command started under `ip netns exec` (which forks it: the
/// signal goes to that child).
pub fn interrupt(child: &Child) {
    let pid = child.id();
    let target = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()
        .and_then(|c| {
            c.split_whitespace()
                .next()
                .and_then(|p| p.parse::<i32>().ok())
        })
        .unwrap_or(pid as i32);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(target), nix::sys::signal::SIGINT)
        .expect("send SIGINT");
}

/// Kills a command started under `ip netns exec` (and the child it forked)
/// when dropped, so a test that fails before it ends the command leaves no
/// process behind (a `fleet --metrics` serves until Ctrl-C).
pub struct Reap(pub u32);

impl Drop for Reap {
    fn drop(&mut self) {
        let pid = self.0;
        let kids =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        // Only a process that still runs `wirescope fleet`: a pid the test
        // already waited for may belong to another process by now.
        let ours = |p: i32| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains("fleet"))
                .unwrap_or(false)
        };
        for p in kids
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
            .chain([pid as i32])
        {
            if ours(p) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(p),
                    nix::sys::signal::SIGKILL,
                );
            }
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for i in 0..self.agents.len() {
            self.kill_agent(i);
        }
        for ns in self.nodes.iter().chain([&self.coord, &self.sw]) {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}
