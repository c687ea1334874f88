//! A real Slurm cluster on this machine (Debian's slurm-wlm and munge, no
//! fakes): slurmctld and munged in one namespace, one slurmd per node in a
//! namespace of its own, each daemon in its own UTS namespace too, so that a
//! job's task on node i has node i's name, address and interfaces.
//!
//! ```text
//! wsl-PID-K-sw   bridge br0 (nothing of the cluster is in the host's namespace)
//!   ├─ wsl-PID-K-c   10.98.K.253  hostname ctl    munged + slurmctld; sbatch and sinfo run here
//!   ├─ wsl-PID-K-1   10.98.K.1    hostname node1  slurmd -N node1; job steps run here
//!   └─ ...
//! ```
//!
//! Names resolve in every namespace through `/etc/netns/NS/hosts`
//! ([`EtcNetns`]). Everything lives in a temporary directory (slurm.conf,
//! the munge key and socket, state, logs). On drop every process in the
//! cluster's namespaces is stopped (TERM, then KILL after 5 s: slurmstepd
//! ignores TERM), then the namespaces and the /etc/netns files go. One
//! cluster at a time ([`Slurm::new`] holds a lock for its life).
//!
//! Why it is built this way (learnt on Debian 12's Slurm 22.05):
//! * `ip netns exec` mounts a fresh /sys, which hides /sys/fs/cgroup;
//!   slurmd's cgroup autodetection then fails. `CgroupPlugin=cgroup/v1`
//!   skips it, and no plugin in use (proctrack/linuxproc, task/none) needs
//!   cgroups.
//! * slurmctld starts only when its hostname is SlurmctldHost's: its UTS
//!   namespace says `ctl`. Each slurmd runs as `slurmd -N nodeI` with that
//!   hostname, so `hostname` in a task prints its node.
//! * munged runs with its own key and socket (its directory mode 0755, which
//!   munged insists on); the namespaces share the file system, so one munged
//!   serves them all.

use super::etc_netns::EtcNetns;
use super::require_root;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

static ONE_CLUSTER: Mutex<()> = Mutex::new(());
static K: AtomicU32 = AtomicU32::new(0);

/// The programs the cluster needs, and where they come from.
const PROGRAMS: [&str; 8] = [
    "munged",
    "slurmctld",
    "slurmd",
    "sbatch",
    "sinfo",
    "scontrol",
    "srun",
    "unshare",
];

/// Fail loudly, naming the package, when a program is missing.
pub fn require_slurm() {
    for p in PROGRAMS {
        let found = std::env::var_os("PATH")
            .map(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()))
            .unwrap_or(false);
        assert!(found, "{p} not found: this test needs `apt-get install -y slurm-wlm munge` (.ci/run installs them)");
    }
}

/// A running cluster.
pub struct Slurm {
    /// Node i's namespace (`nodeI+1` in Slurm).
    pub nodes: Vec<String>,
    /// slurmctld's namespace.
    pub ctl: String,
    sw: String,
    net: u32,
    /// slurm.conf, logs, state, and the tests' own files.
    pub dir: tempfile::TempDir,
    created: Vec<String>,
    etc: Vec<EtcNetns>,
    _one: MutexGuard<'static, ()>,
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

impl Slurm {
    /// A cluster of `n` nodes, every node idle.
    pub fn new(n: usize) -> Slurm {
        require_root();
        require_slurm();
        assert!((1..=50).contains(&n), "1 to 50 nodes");
        let one = ONE_CLUSTER.lock().unwrap_or_else(PoisonError::into_inner);
        let k = K.fetch_add(1, Ordering::SeqCst);
        let id = std::process::id();
        let name = |s: &str| format!("wsl-{id}-{k}-{s}");
        let mut s = Slurm {
            nodes: (1..=n).map(|i| name(&i.to_string())).collect(),
            ctl: name("c"),
            sw: name("sw"),
            net: k % 250,
            dir: tempfile::tempdir().expect("tempdir"),
            created: Vec::new(),
            etc: Vec::new(),
            _one: one,
        };
        s.network();
        s.config();
        s.start();
        s
    }

    /// Node i's Slurm name (`node1` for i = 0).
    pub fn node_name(&self, i: usize) -> String {
        format!("node{}", i + 1)
    }

    /// Node i's address.
    pub fn addr(&self, i: usize) -> String {
        format!("10.98.{}.{}", self.net, i + 1)
    }

    fn ctl_addr(&self) -> String {
        format!("10.98.{}.253", self.net)
    }

    /// slurm.conf.
    pub fn conf(&self) -> PathBuf {
        self.dir.path().join("slurm.conf")
    }

    fn network(&mut self) {
        ip(&["netns", "add", &self.sw]);
        self.created.push(self.sw.clone());
        ip(&["-n", &self.sw, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &self.sw, "link", "set", "br0", "up"]);
        let all: Vec<(String, String)> = std::iter::once((self.ctl.clone(), self.ctl_addr()))
            .chain(
                self.nodes
                    .iter()
                    .enumerate()
                    .map(|(i, ns)| (ns.clone(), self.addr(i))),
            )
            .collect();
        let mut hosts =
            String::from("127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n");
        hosts += &format!("{} ctl\n", self.ctl_addr());
        for i in 0..self.nodes.len() {
            hosts += &format!("{} {}\n", self.addr(i), self.node_name(i));
        }
        for (p, (ns, addr)) in all.iter().enumerate() {
            ip(&["netns", "add", ns]);
            self.created.push(ns.clone());
            let port = format!("p{p}");
            ip(&[
                "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", &port, "netns",
                &self.sw,
            ]);
            ip(&["-n", &self.sw, "link", "set", &port, "master", "br0"]);
            ip(&["-n", &self.sw, "link", "set", &port, "up"]);
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
            self.etc.push(EtcNetns::new(ns, &[("hosts", &hosts)]));
        }
    }

    fn config(&self) {
        let d = self.dir.path();
        let munge = d.join("munge");
        std::fs::create_dir_all(&munge).expect("munge dir");
        let mut key = vec![0u8; 1024];
        std::io::Read::read_exact(
            &mut std::fs::File::open("/dev/urandom").expect("/dev/urandom"),
            &mut key,
        )
        .expect("read /dev/urandom");
        write_mode(&munge.join("munge.key"), &key, 0o600);
        set_mode(&munge, 0o755);
        set_mode(d, 0o755);
        let n = self.nodes.len();
        let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
        let d = d.display();
        let conf = format!(
            "ClusterName=wirescope\n\
             SlurmctldHost=ctl({ctl})\n\
             SlurmUser=root\n\
             AuthType=auth/munge\n\
             AuthInfo=socket={d}/munge/munge.socket\n\
             CredType=cred/munge\n\
             StateSaveLocation={d}/ctld\n\
             SlurmctldPidFile={d}/ctld/slurmctld.pid\n\
             SlurmctldLogFile={d}/ctld/slurmctld.log\n\
             SlurmdSpoolDir={d}/%n\n\
             SlurmdPidFile={d}/%n/slurmd.pid\n\
             SlurmdLogFile={d}/%n/slurmd.log\n\
             ProctrackType=proctrack/linuxproc\n\
             TaskPlugin=task/none\n\
             JobAcctGatherType=jobacct_gather/none\n\
             AccountingStorageType=accounting_storage/none\n\
             SelectType=select/cons_tres\n\
             SelectTypeParameters=CR_Core\n\
             ReturnToService=2\n\
             MpiDefault=none\n\
             MailProg=/bin/true\n\
             SlurmdParameters=config_overrides\n\
             NodeName=node[1-{n}] NodeAddr={net}.[1-{n}] CPUs={cpus} State=UNKNOWN\n\
             PartitionName=debug Nodes=node[1-{n}] Default=YES MaxTime=INFINITE State=UP\n",
            ctl = self.ctl_addr(),
            net = format_args!("10.98.{}", self.net),
        );
        std::fs::write(self.conf(), conf).expect("slurm.conf");
        std::fs::write(
            self.dir.path().join("cgroup.conf"),
            "CgroupPlugin=cgroup/v1\n",
        )
        .expect("cgroup.conf");
        std::fs::create_dir_all(self.dir.path().join("ctld")).expect("ctld dir");
        for i in 0..n {
            std::fs::create_dir_all(self.dir.path().join(self.node_name(i))).expect("node dir");
        }
    }

    /// `ip netns exec NS CMD...` with SLURM_CONF set.
    pub fn in_ns(&self, ns: &str, cmd: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns])
            .args(cmd)
            .env("SLURM_CONF", self.conf());
        c
    }

    /// A command on the controller's host (sbatch, sinfo, scontrol).
    pub fn on_ctl(&self, cmd: &[&str]) -> Command {
        self.in_ns(&self.ctl, cmd)
    }

    fn daemon(&self, ns: &str, cmd: &[&str], log: &Path) {
        let o = self.in_ns(ns, cmd).output().expect("start a daemon");
        assert!(
            o.status.success(),
            "{}: {}{}\n{}",
            cmd.join(" "),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }

    fn start(&self) {
        let d = self.dir.path().display().to_string();
        let m = |f: &str| format!("{d}/munge/{f}");
        self.daemon(
            &self.ctl,
            &[
                "munged",
                &format!("--socket={}", m("munge.socket")),
                &format!("--key-file={}", m("munge.key")),
                &format!("--pid-file={}", m("munged.pid")),
                &format!("--log-file={}", m("munged.log")),
                &format!("--seed-file={}", m("munged.seed")),
            ],
            Path::new(&m("munged.log")),
        );
        self.daemon(
            &self.ctl,
            &[
                "unshare",
                "--uts",
                "sh",
                "-c",
                "hostname ctl && exec slurmctld",
            ],
            &self.dir.path().join("ctld/slurmctld.log"),
        );
        for (i, ns) in self.nodes.iter().enumerate() {
            let name = self.node_name(i);
            self.daemon(
                ns,
                &[
                    "unshare",
                    "--uts",
                    "sh",
                    "-c",
                    &format!("hostname {name} && exec slurmd -N {name}"),
                ],
                &self.dir.path().join(&name).join("slurmd.log"),
            );
        }
        // Every node registered and idle.
        let t = Instant::now();
        let mut last = String::new();
        while t.elapsed() < Duration::from_secs(60) {
            let o = self
                .on_ctl(&["sinfo", "-h", "-N", "-t", "idle", "-o", "%N"])
                .output()
                .expect("sinfo");
            last = String::from_utf8_lossy(&o.stdout).into_owned()
                + &String::from_utf8_lossy(&o.stderr);
            let idle: std::collections::BTreeSet<&str> = last.lines().map(str::trim).collect();
            if (0..self.nodes.len()).all(|i| idle.contains(self.node_name(i).as_str())) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "the nodes did not become idle within 60 s; sinfo: {last}\n{}",
            self.logs()
        );
    }

    /// The daemons' logs, for a failure message.
    pub fn logs(&self) -> String {
        let mut s = String::new();
        let mut files = vec![
            self.dir.path().join("munge/munged.log"),
            self.dir.path().join("ctld/slurmctld.log"),
        ];
        files.extend(
            (0..self.nodes.len())
                .map(|i| self.dir.path().join(self.node_name(i)).join("slurmd.log")),
        );
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(30).collect();
            s += &format!("--- {} (last lines)\n", f.display());
            for l in tail.into_iter().rev() {
                s += l;
                s += "\n";
            }
        }
        s
    }

    fn pids(&self) -> Vec<i32> {
        let mut pids = Vec::new();
        for ns in &self.created {
            if let Ok(o) = Command::new("ip").args(["netns", "pids", ns]).output() {
                pids.extend(
                    String::from_utf8_lossy(&o.stdout)
                        .split_whitespace()
                        .filter_map(|p| p.parse::<i32>().ok()),
                );
            }
        }
        pids
    }
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", p.display()));
}

fn write_mode(p: &Path, bytes: &[u8], mode: u32) {
    std::fs::write(p, bytes).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
    set_mode(p, mode);
}

impl Drop for Slurm {
    fn drop(&mut self) {
        use nix::sys::signal::{kill, Signal};
        use nix::unistd::Pid;
        let signal = |pids: &[i32], s: Signal| {
            for p in pids {
                let _ = kill(Pid::from_raw(*p), s);
            }
        };
        let pids = self.pids();
        signal(&pids, Signal::SIGTERM);
        // slurmctld saves its state on TERM; slurmstepd ignores TERM.
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) && !self.pids().is_empty() {
            std::thread::sleep(Duration::from_millis(100));
        }
        let left = self.pids();
        signal(&left, Signal::SIGKILL);
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) && !self.pids().is_empty() {
            std::thread::sleep(Duration::from_millis(50));
        }
        for ns in self.created.iter().rev() {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        self.etc.clear();
    }
}
