//! Shared helpers for integration tests: the real binary, real namespaces.
//!
//! Every namespace a test creates has a unique name (`wst-PID-N-a/b`) and is
//! removed by [`Pair`]'s Drop, on success, failure and panic alike.

#![allow(dead_code)]

pub mod etc_netns;
pub mod fleet;
pub mod slurm;

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};
use wirescope::probe::sample::{HostRole, Sample};
use wirescope::record::log::read_log;
use wirescope::record::schema::{Header, Record, Summary};

/// One binary runs every area's tests side by side; these locks keep apart
/// the tests that, as separate binaries, never ran at the same time.
///
/// * [`cores`]: the machine's cores to one test alone;
/// * [`traffic`]: a share of them, held by every [`Pair`] and every local
///   pair ([`local_pair_turn`]) for as long as it lives, so that no test's
///   traffic runs beside a test that holds the cores alone;
/// * [`local_pair_turn`]: one embedded local pair starting at a time.
///
/// A test takes [`cores`] before anything else (a thread that already shares
/// the cores panics instead of waiting for itself).
static CORES: RwLock<()> = RwLock::new(());
static LOCAL_PAIR: Mutex<()> = Mutex::new(());

thread_local! {
    /// This test's thread holds [`CORES`] alone.
    static ALONE: Cell<bool> = const { Cell::new(false) };
    /// The share of [`CORES`] this test's thread holds, while anything holds it.
    static SHARED: RefCell<Weak<RwLockReadGuard<'static, ()>>> = const { RefCell::new(Weak::new()) };
}

/// The machine's cores, to the test that holds this alone.
pub struct Cores(RwLockWriteGuard<'static, ()>);

impl Drop for Cores {
    fn drop(&mut self) {
        ALONE.with(|a| a.set(false));
    }
}

/// The two CPUs of this machine, for one test at a time: a test that brings
/// its own CPU load (the fault suite), pins threads and counts every frame or
/// packet (sink, eBPF), or compares two runs' rates takes turns with every
/// other such test, whatever its area, and no [`Pair`] or local pair of
/// another test runs meanwhile.
pub fn cores() -> Cores {
    assert!(
        SHARED.with(|s| s.borrow().strong_count() == 0),
        "take common::cores() before creating a Pair or a local pair (this test already shares the cores)"
    );
    let guard = CORES.write().unwrap_or_else(PoisonError::into_inner);
    ALONE.with(|a| a.set(true));
    Cores(guard)
}

/// A share of the cores for a test that loads them — sends traffic, or
/// starts the binary (each start costs system time, which the fault suite's
/// CPU rules would see on its hog's core): many tests hold one at once,
/// none while a test holds [`cores`]. Within one test's thread the
/// share is taken once and kept while any holder lives; `None` inside a test
/// that holds the cores alone.
pub type Traffic = Option<Rc<RwLockReadGuard<'static, ()>>>;

/// This test's share of the cores (see [`Traffic`]).
pub fn traffic() -> Traffic {
    if ALONE.with(Cell::get) {
        return None;
    }
    SHARED.with(|s| {
        let held = s.borrow().upgrade();
        if held.is_some() {
            return held;
        }
        let share = Rc::new(CORES.read().unwrap_or_else(PoisonError::into_inner));
        *s.borrow_mut() = Rc::downgrade(&share);
        Some(share)
    })
}

/// One local pair starting at a time, with this test's share of the cores.
pub struct LocalPairTurn {
    _turn: MutexGuard<'static, ()>,
    _traffic: Traffic,
}

/// Each embedded local pair sweeps the `ws-a-PID`/`ws-b-PID` namespaces of
/// dead processes when it starts: a test that plants stale ones, and every
/// test that starts a local pair, take turns so that no sweep meets an
/// `ip netns add` that is still mounting. The share of the cores is taken
/// first, so a test holding [`cores`] never waits for a turn held by a test
/// that waits for the cores.
pub fn local_pair_turn() -> LocalPairTurn {
    let traffic = traffic();
    LocalPairTurn {
        _turn: LOCAL_PAIR.lock().unwrap_or_else(PoisonError::into_inner),
        _traffic: traffic,
    }
}

pub const TOKEN: &str = "wirescope-test-token-0123456789abcdef";

/// Every `.rs` file under `src/`, sorted: what the source-reading tests check.
pub fn src_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).expect("read src") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
    out.sort();
    out
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_wirescope")
}

pub fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root for network namespaces (CI runs as root); run `cargo test` as root"
    );
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

/// Two namespaces joined by a 4-queue veth (198.18.0.1 ⇄ 198.18.0.2), removed on drop.
pub struct Pair {
    pub a: String,
    pub b: String,
    agent: Option<Child>,
    pub dir: tempfile::TempDir,
    /// This test's share of the cores while the pair lives ([`traffic`]).
    _traffic: Traffic,
}

static N: AtomicU32 = AtomicU32::new(0);

impl Pair {
    pub fn new() -> Pair {
        require_root();
        let traffic = traffic();
        let n = N.fetch_add(1, Ordering::SeqCst);
        let id = std::process::id();
        let (a, b) = (format!("wst-{id}-{n}-a"), format!("wst-{id}-{n}-b"));
        let p = Pair {
            a: a.clone(),
            b: b.clone(),
            agent: None,
            dir: tempfile::tempdir().unwrap(),
            _traffic: traffic,
        };
        ip(&["netns", "add", &a]);
        ip(&["netns", "add", &b]);
        ip(&[
            "link",
            "add",
            "veth-a",
            "netns",
            &a,
            "numtxqueues",
            "4",
            "numrxqueues",
            "4",
            "type",
            "veth",
            "peer",
            "name",
            "veth-b",
            "netns",
            &b,
            "numtxqueues",
            "4",
            "numrxqueues",
            "4",
        ]);
        ip(&["-n", &a, "addr", "add", "198.18.0.1/30", "dev", "veth-a"]);
        ip(&["-n", &b, "addr", "add", "198.18.0.2/30", "dev", "veth-b"]);
        for (ns, dev) in [(&a, "veth-a"), (&b, "veth-b")] {
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        p
    }

    /// Start `wirescope agent` in namespace b and wait until it listens.
    pub fn start_agent(&mut self) {
        self.start_agent_under(&[]);
    }

    /// Start the agent under a wrapper command (e.g. `prlimit --nofile=256`).
    #[allow(dead_code)]
    pub fn start_agent_under(&mut self, wrapper: &[&str]) {
        self.start_agent_with(wrapper, &[]);
    }

    /// Start the agent under `wrapper` with extra agent options.
    #[allow(dead_code)]
    pub fn start_agent_with(&mut self, wrapper: &[&str], extra: &[&str]) {
        let log = self.dir.path().join("agent.log");
        let child = Command::new("ip")
            .args(["netns", "exec", &self.b])
            .args(wrapper)
            .args([bin(), "agent"])
            // -p chooses the port itself (and excludes --listen).
            .args(if extra.contains(&"-p") {
                &[][..]
            } else {
                &["--listen", "198.18.0.2:5310"][..]
            })
            .args(extra)
            .env("WIRESCOPE_TOKEN", TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        self.agent = Some(child);
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
            "agent did not start: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    pub fn agent_pid(&self) -> u32 {
        self.agent.as_ref().unwrap().id()
    }

    pub fn kill_agent(&mut self) {
        if let Some(mut c) = self.agent.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn agent_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("agent.log")).unwrap_or_default()
    }

    /// `wirescope run --peer 198.18.0.2 ARGS` from namespace a.
    pub fn run_cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args([
            "netns",
            "exec",
            &self.a,
            bin(),
            "run",
            "--peer",
            "198.18.0.2",
        ])
        .args(args)
        .env("WIRESCOPE_TOKEN", TOKEN);
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.run_cmd(args).output().unwrap()
    }

    pub fn log_path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        self.kill_agent();
        let _ = Command::new("ip").args(["netns", "del", &self.a]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.b]).status();
    }
}

/// The records of a log, split by kind.
pub struct Log {
    pub records: Vec<Record>,
}

impl Log {
    pub fn read(p: &Path) -> Log {
        let text = std::fs::read_to_string(p).unwrap();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(
                v.get("type").and_then(|t| t.as_str()).is_some(),
                "record without type: {line}"
            );
        }
        Log {
            records: read_log(p).unwrap(),
        }
    }
    #[allow(dead_code)]
    pub fn header(&self) -> &Header {
        match self.records.first() {
            Some(Record::Header(h)) => h,
            other => panic!("the log does not start with a header: {other:?}"),
        }
    }
    pub fn samples(&self, host: HostRole) -> Vec<&Sample> {
        self.records
            .iter()
            .filter_map(|r| {
                if let Record::Sample(s) = r {
                    Some(&**s)
                } else {
                    None
                }
            })
            .filter(|s| s.host == host)
            .collect()
    }
    pub fn summaries(&self) -> Vec<&Summary> {
        self.records
            .iter()
            .filter_map(|r| {
                if let Record::Summary(s) = r {
                    Some(&**s)
                } else {
                    None
                }
            })
            .collect()
    }
    pub fn events(&self, kind: &str) -> usize {
        self.records
            .iter()
            .filter(|r| matches!(r, Record::Event(e) if e.kind == kind))
            .count()
    }
}

/// Wait until the log at `path` holds `n` local Samples (not a fixed sleep:
/// start-up time varies with the machine's load); panics after 20 s.
#[allow(dead_code)]
pub fn wait_for_local_samples(path: &Path, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(path)
        .unwrap_or_default()
        .matches("\"type\":\"sample\",\"host\":\"local\"")
        .count()
        < n
    {
        assert!(
            Instant::now() < deadline,
            "the run never logged {n} intervals"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Namespaces named like the local pair's for `pid`.
pub fn local_pair_namespaces(pid: u32) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n == format!("ws-a-{pid}") || *n == format!("ws-b-{pid}"))
        .map(String::from)
        .collect()
}

pub fn process_alive(pid: u32) -> bool {
    // A zombie still has /proc/PID; treat it as gone.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .split(')')
            .nth(1)
            .map(|r| r.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

/// True while an XDP program is attached to `dev` in namespace `ns` (`ip -d link`).
pub fn xdp_attached(ns: &str, dev: &str) -> bool {
    let out = Command::new("ip")
        .args(["-n", ns, "-d", "link", "show", "dev", dev])
        .output()
        .expect("run ip");
    assert!(out.status.success(), "ip -d link show {dev} in {ns}");
    String::from_utf8_lossy(&out.stdout).contains("prog/xdp")
}

/// Packet sockets open in namespace `ns` (`/proc/net/packet`).
pub fn packet_sockets(ns: &str) -> usize {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "cat", "/proc/net/packet"])
        .output()
        .expect("read /proc/net/packet");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .count()
        .saturating_sub(1)
}

/// Socket descriptors of process `pid`.
pub fn sockets_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .map(|t| t.to_string_lossy().starts_with("socket:"))
                        .unwrap_or(false)
                })
                .count()
        })
        .unwrap_or(0)
}

/// Load an nft ruleset into namespace `ns`.
pub fn nft(ns: &str, script: &str) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(script.as_bytes())?;
            c.wait_with_output()
        })
        .expect("run nft (install nftables: apt-get install nftables)");
    assert!(
        out.status.success(),
        "nft -f in {ns}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Drop every 100th packet-test frame (exactly 1 %) at `hook` of `dev`.
pub fn drop_one_percent(ns: &str, hook: &str, dev: &str) {
    nft(
        ns,
        &format!(
            "table netdev wst_loss {{\n chain c {{\n  type filter hook {hook} device {dev} priority 0\n  \
             udp dport {port} numgen inc mod 100 == 0 counter drop\n }}\n}}\n",
            port = wirescope::traffic::sink::spec::DEFAULT_DST_PORT
        ),
    );
}
