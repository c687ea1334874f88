//! `--metrics`: the real binary's endpoint checked by the real Prometheus
//! tools from Debian — `promtool check metrics` on a scrape of `wirescope
//! watch`, and a Prometheus server scraping `wirescope agent` inside a
//! namespace, queried through its HTTP API — plus the throughput of a real
//! test through the agent, and the errors of a bad address.
//!
//! Each test builds its own namespace joined to this one by a veth
//! (198.19.X.1 here ⇄ 198.19.X.2 inside), so this process reaches what runs
//! inside; the namespace (and with it the veth) is removed on every exit path.
//! Without the Prometheus binaries the tests say so and pass only when `CI`
//! is unset; under CI a missing binary fails them.

use super::common::{bin, require_root, traffic, Traffic, TOKEN};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long anything may take to appear before the test fails (liveness, not timing).
const LIVENESS: Duration = Duration::from_secs(30);

/// The Debian tool `name`, or None when it is missing and CI is unset.
pub(crate) fn tool(name: &str) -> Option<&'static str> {
    let path: &'static str = match name {
        "prometheus" => "/usr/bin/prometheus",
        _ => "/usr/bin/promtool",
    };
    if Path::new(path).exists() {
        return Some(path);
    }
    let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false");
    assert!(
        !ci,
        "{path} is missing: install Debian's prometheus package (apt-get install prometheus)"
    );
    eprintln!("SKIPPED: {path} is missing (apt-get install prometheus); CI is unset");
    None
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

static N: AtomicU32 = AtomicU32::new(0);

/// A namespace joined to this one by a veth; the processes it started are
/// killed and the namespace deleted on drop.
struct Node {
    ns: String,
    /// This namespace's end of the veth.
    here: String,
    /// The address inside.
    inside: String,
    dir: tempfile::TempDir,
    children: Vec<Child>,
    _traffic: Traffic,
}

impl Node {
    fn new() -> Node {
        require_root();
        let traffic = traffic();
        let n = N.fetch_add(1, Ordering::SeqCst);
        let id = std::process::id();
        // A /30 of 198.19.0.0/16 (benchmarking range) per process and node.
        let net = (id.wrapping_mul(7).wrapping_add(n * 13)) % 16_000;
        let (hi, lo) = (net / 64, (net % 64) * 4);
        let node = Node {
            ns: format!("wst-{id}-{n}-m"),
            here: format!("wsm{}-{n}", id % 100_000),
            inside: format!("198.19.{hi}.{}", lo + 2),
            dir: tempfile::tempdir().unwrap(),
            children: Vec::new(),
            _traffic: traffic,
        };
        ip(&["netns", "add", &node.ns]);
        ip(&[
            "link",
            "add",
            &node.here,
            "numtxqueues",
            "4",
            "numrxqueues",
            "4",
            "type",
            "veth",
            "peer",
            "name",
            "veth-m",
            "netns",
            &node.ns,
            "numtxqueues",
            "4",
            "numrxqueues",
            "4",
        ]);
        let here_addr = format!("198.19.{hi}.{}/30", lo + 1);
        ip(&["addr", "add", &here_addr, "dev", &node.here]);
        ip(&["link", "set", &node.here, "up"]);
        let inside_addr = format!("{}/30", node.inside);
        ip(&["-n", &node.ns, "addr", "add", &inside_addr, "dev", "veth-m"]);
        ip(&["-n", &node.ns, "link", "set", "veth-m", "up"]);
        ip(&["-n", &node.ns, "link", "set", "lo", "up"]);
        node
    }

    /// Start `wirescope ARGS` inside; its stderr goes to `name` in the test's directory.
    fn spawn(&mut self, name: &str, args: &[&str]) {
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns, bin()])
            .args(args)
            .env("WIRESCOPE_TOKEN", TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.path().join(name)).unwrap())
            .spawn()
            .unwrap();
        self.children.push(child);
    }

    /// Start a process here (not inside), its output to `name`.
    fn spawn_here(&mut self, name: &str, cmd: &mut Command) -> u32 {
        let log = std::fs::File::create(self.dir.path().join(name)).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let pid = child.id();
        self.children.push(child);
        pid
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default()
    }

    /// Wait until the log `name` says `marker`; panics with the log after [`LIVENESS`].
    fn wait_for(&self, name: &str, marker: &str) -> String {
        let t = Instant::now();
        loop {
            let log = self.log(name);
            if log.contains(marker) {
                return log;
            }
            assert!(t.elapsed() < LIVENESS, "no {marker:?} in {name}:\n{log}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Deleting the namespace deletes the veth pair.
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
        let _ = Command::new("ip")
            .args(["link", "del", &self.here])
            .stderr(Stdio::null())
            .status();
    }
}

/// One HTTP/1.0 GET (or another method): status, headers (lower-case names), body.
fn http(addr: &str, method: &str, path: &str, accept: Option<&str>) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(LIVENESS)).unwrap();
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\n{accept}\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_ascii_lowercase(), body.to_string())
}

fn scrape(addr: &str, accept: Option<&str>) -> String {
    let (status, head, body) = http(addr, "GET", "/metrics", accept);
    assert_eq!(status, 200, "{head}\n{body}");
    body
}

/// Scrape until `pred` holds (the first Samples take an interval or two).
fn scrape_until(addr: &str, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let t = Instant::now();
    loop {
        let body = scrape(addr, None);
        if pred(&body) {
            return body;
        }
        assert!(t.elapsed() < LIVENESS, "never {what}:\n{body}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The address in "serving metrics at http://ADDR/metrics".
fn served_at(log: &str) -> String {
    log.split("serving metrics at http://")
        .nth(1)
        .and_then(|r| r.split("/metrics").next())
        .unwrap_or_else(|| panic!("no metrics address in:\n{log}"))
        .to_string()
}

fn query_escape(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The result vector of a Prometheus instant query.
fn prom_query(api: &str, q: &str) -> Vec<serde_json::Value> {
    let (status, head, body) = http(
        api,
        "GET",
        &format!("/api/v1/query?query={}", query_escape(q)),
        None,
    );
    assert_eq!(status, 200, "{head}\n{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "success", "{body}");
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn promtool_passes_a_scrape_of_watch() {
    let Some(promtool) = tool("promtool") else {
        return;
    };
    let mut node = Node::new();
    let listen = format!("{}:9464", node.inside);
    node.spawn(
        "watch.err",
        &[
            "watch",
            "--iface",
            "veth-m",
            "--metrics",
            &listen,
            "-t",
            "60s",
        ],
    );
    let addr = served_at(&node.wait_for("watch.err", "serving metrics at"));
    assert_eq!(addr, listen);
    // The first Sample brings the queue counters of veth-m.
    scrape_until(&addr, "a queue counter of veth-m", |b| {
        b.contains("wirescope_queue_packets_total{host=\"local\",iface=\"veth-m\"")
    });
    // promtool reads the Prometheus text format: ask for it, as it would.
    let text = scrape(&addr, Some("text/plain; version=0.0.4"));
    let mut check = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = check.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "promtool check metrics: {said}\n{text}"
    );
    assert!(
        said.trim().is_empty(),
        "promtool has lint problems: {said}\n{text}"
    );
    for family in [
        "node_cpu_seconds_total{",
        "node_softirqs_functions_total{",
        "node_softnet_processed_total{",
        "node_softnet_dropped_total{",
        "node_softnet_times_squeezed_total{",
        "wirescope_build_info{",
    ] {
        assert!(text.contains(family), "no {family} in\n{text}");
    }
    // The default answer is OpenMetrics; other paths and methods are refused.
    let (status, head, body) = http(&addr, "GET", "/metrics", None);
    assert_eq!(status, 200);
    assert!(
        head.contains("content-type: application/openmetrics-text; version=1.0.0; charset=utf-8"),
        "{head}"
    );
    assert!(body.ends_with("# EOF\n"), "{body}");
    let (status, _, body) = http(&addr, "GET", "/", None);
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("/metrics"), "{body}");
    assert_eq!(http(&addr, "POST", "/metrics", None).0, 405);
}

#[test]
fn a_prometheus_server_scrapes_the_agent_in_a_namespace() {
    let Some(prometheus) = tool("prometheus") else {
        return;
    };
    let mut node = Node::new();
    let target = format!("{}:9464", node.inside);
    node.spawn(
        "agent.err",
        &[
            "agent",
            "--listen",
            &format!("{}:5310", node.inside),
            "--metrics",
            &target,
        ],
    );
    node.wait_for("agent.err", "listening on");
    let config = node.dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: wirescope\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let api = format!("127.0.0.1:{}", free_port());
    let tsdb = node.dir.path().join("tsdb");
    node.spawn_here(
        "prometheus.log",
        Command::new(prometheus).args([
            &format!("--config.file={}", config.display()),
            &format!("--storage.tsdb.path={}", tsdb.display()),
            &format!("--web.listen-address={api}"),
        ]),
    );
    node.wait_for("prometheus.log", "Server is ready to receive web requests");
    let t = Instant::now();
    let cpu = loop {
        let r = prom_query(&api, "node_cpu_seconds_total");
        if !r.is_empty() {
            break r;
        }
        assert!(
            t.elapsed() < LIVENESS,
            "Prometheus has no node_cpu_seconds_total; targets: {}\nits log:\n{}",
            http(&api, "GET", "/api/v1/targets", None).2,
            node.log("prometheus.log")
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    let mut modes = BTreeSet::new();
    let mut cpus = BTreeSet::new();
    for s in &cpu {
        let m = &s["metric"];
        assert_eq!(m["job"], "wirescope", "{s}");
        assert_eq!(m["instance"], target.as_str(), "{s}");
        assert_eq!(m["host"], "local", "{s}");
        let c: usize = m["cpu"]
            .as_str()
            .and_then(|c| c.parse().ok())
            .unwrap_or(usize::MAX);
        assert!(c < 4096, "{s}");
        cpus.insert(c);
        modes.insert(m["mode"].as_str().unwrap_or("").to_string());
        let v: f64 = s["value"][1]
            .as_str()
            .and_then(|v| v.parse().ok())
            .unwrap_or(-1.0);
        assert!(v >= 0.0 && v.is_finite(), "{s}");
    }
    let expected: BTreeSet<String> = [
        "user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal",
    ]
    .map(String::from)
    .into();
    assert_eq!(modes, expected);
    // Each CPU once per mode.
    assert_eq!(cpu.len(), 8 * cpus.len(), "{cpu:?}");
    // The host has been up for a while: some CPU spent time idle.
    let idle = prom_query(&api, "sum(node_cpu_seconds_total{mode=\"idle\"})");
    let idle: f64 = idle[0]["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    assert!(idle > 0.0, "{idle}");
    let up = prom_query(&api, "up{job=\"wirescope\"}");
    assert_eq!(up.len(), 1, "{up:?}");
    assert_eq!(up[0]["value"][1], "1", "{up:?}");
    let info = prom_query(&api, "wirescope_build_info");
    assert_eq!(info[0]["metric"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(info[0]["metric"]["face"], "agent");
}

#[test]
fn the_agent_serves_the_running_tests_throughput() {
    let mut node = Node::new();
    let metrics = format!("{}:9464", node.inside);
    node.spawn(
        "agent.err",
        &[
            "agent",
            "--listen",
            &format!("{}:5310", node.inside),
            "--metrics",
            &metrics,
        ],
    );
    node.wait_for("agent.err", "listening on");
    let idle = scrape(&metrics, None);
    assert!(
        !idle.contains("wirescope_engine_bytes_per_second{"),
        "{idle}"
    );
    let mut run = Command::new(bin());
    run.args(["run", "--peer", &node.inside, "-t", "20s"])
        .env("WIRESCOPE_TOKEN", TOKEN);
    node.spawn_here("run.out", &mut run);
    // While it runs, the agent's side (rx of a stream) shows in its metrics.
    let busy = scrape_until(&metrics, "the engine's throughput", |b| {
        b.lines().any(|l| {
            l.starts_with(
                "wirescope_engine_bytes_per_second{host=\"local\",engine=\"tcp\",direction=\"rx\"}",
            ) && l
                .rsplit(' ')
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .is_some_and(|v| v > 0.0)
        })
    });
    assert!(
        busy.contains("wirescope_queue_packets_total{host=\"local\",iface=\"veth-m\""),
        "{busy}"
    );
    // Stopping the controller ends the test: the series goes away.
    for c in &mut node.children[1..] {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(c.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        );
        let _ = c.wait();
    }
    scrape_until(&metrics, "the throughput series gone", |b| {
        !b.contains("wirescope_engine_bytes_per_second{")
    });
}

#[test]
fn an_address_that_cannot_be_bound_fails_first_and_names_it() {
    // Not an address of this host: the agent stops before it listens.
    let out = Command::new(bin())
        .args([
            "agent",
            "--listen",
            "127.0.0.1:0",
            "--metrics",
            "203.0.113.7:9464",
        ])
        .env("WIRESCOPE_TOKEN", TOKEN)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("cannot serve metrics on 203.0.113.7:9464"),
        "{err}"
    );
    assert!(err.contains("--metrics ADDR:PORT"), "{err}");
    assert!(!err.contains("listening on"), "{err}");
    // Taken: watch says so before it samples anything.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr: SocketAddr = taken.local_addr().unwrap();
    let out = Command::new(bin())
        .args([
            "watch",
            "--iface",
            "lo",
            "-t",
            "5s",
            "--metrics",
            &addr.to_string(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("cannot serve metrics on {addr}")),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "watch started: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    // And a value that is no address is a usage error.
    let out = Command::new(bin())
        .args(["watch", "--metrics", "9464"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("e.g. 127.0.0.1:9464"));
}
