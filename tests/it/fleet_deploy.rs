//! Where a fleet's agents come from, each with the real component: a Slurm
//! job (a real slurmctld and one slurmd per node in namespaces, the shipped
//! `deploy/slurm/wirescope-fleet.sbatch`), a DNS name with many addresses
//! (a real dnsmasq in a namespace, `fleet --dns`), and the Kubernetes
//! manifests of `deploy/kubernetes/` (every container's command parsed by
//! the real CLI; no cluster runs here).

use crate::common::etc_netns::EtcNetns;
use crate::common::fleet::Fleet;
use crate::common::slurm::{require_slurm, Slurm};
use crate::common::{bin, stderr, traffic, TOKEN};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use wirescope::fleet::log::{read, FleetRecord, PairRecord};

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The pair records of a fleet log.
fn pair_records(log: &Path) -> Vec<PairRecord> {
    read(log)
        .unwrap_or_else(|e| panic!("fleet log: {e}"))
        .into_iter()
        .filter_map(|r| match r {
            FleetRecord::Pair(p) => Some(*p),
            _ => None,
        })
        .collect()
}

/// Every pair of `want` (unordered) tested, each direction with a throughput.
fn assert_pairs_measured(log: &Path, want: &[(String, String)]) {
    let pairs = pair_records(log);
    let got: BTreeSet<(String, String)> = pairs
        .iter()
        .map(|p| (p.a.clone().min(p.b.clone()), p.a.clone().max(p.b.clone())))
        .collect();
    let want: BTreeSet<(String, String)> = want
        .iter()
        .map(|(a, b)| (a.clone().min(b.clone()), a.clone().max(b.clone())))
        .collect();
    assert_eq!(got, want, "{pairs:#?}");
    assert_eq!(pairs.len(), want.len(), "each pair once: {pairs:#?}");
    for p in &pairs {
        assert_eq!(p.directions.len(), 2, "both directions: {p:#?}");
        for d in &p.directions {
            assert!(
                d.error.is_none() && d.bps.is_some_and(|b| b > 0.0),
                "{p:#?}"
            );
        }
    }
}

/// The ring's pairs over `names`: (i, i+1 mod N).
fn ring(names: &[String]) -> Vec<(String, String)> {
    (0..names.len())
        .map(|i| (names[i].clone(), names[(i + 1) % names.len()].clone()))
        .collect()
}

/// The token file a job's user (root here) can read, 0600 like the agent wants.
fn token_file(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("token");
    std::fs::write(&p, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// Wait for `child` until `limit`; kill it (and fail) past that.
fn wait_or_kill(
    mut child: Child,
    limit: Duration,
    what: &str,
    more: impl Fn() -> String,
) -> std::process::Output {
    let t = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "{what} still running after {limit:?}: {}{}\n{}",
                String::from_utf8_lossy(&o.stdout),
                stderr(&o),
                more()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_slurm_batch_job_runs_the_shipped_sbatch_script_and_tests_the_ring_of_its_nodes() {
    let _traffic = traffic();
    let s = Slurm::new(4);
    let dir = s.dir.path();
    let token = token_file(dir);
    let log = dir.join("fleet.jsonl");
    let script = repo("deploy/slurm/wirescope-fleet.sbatch");
    let out = dir.join("job.out");
    let run = dir.join("run");
    // The batch script runs on node1 (inside its namespace); sbatch waits
    // for the job and exits with its code.
    let child = s
        .on_ctl(&[
            "sbatch",
            "--wait",
            "--nodes=4",
            "--time=5",
            &format!("--chdir={}", dir.display()),
            &format!("--output={}", out.display()),
            script.to_str().unwrap(),
        ])
        .env("WIRESCOPE_BIN", bin())
        .env("TOKEN_FILE", &token)
        .env("LOG", &log)
        .env("RUN_DIR", &run)
        .env("FLEET_ARGS", "--pattern ring -t 1s --ebpf off")
        .env_remove("WIRESCOPE_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = wait_or_kill(child, Duration::from_secs(240), "sbatch --wait", || {
        std::fs::read_to_string(&out).unwrap_or_default() + &s.logs()
    });
    let job = std::fs::read_to_string(&out).unwrap_or_default();
    let agents: String = (0..4)
        .map(|i| {
            let f = run.join(format!("agent-{}.log", s.node_name(i)));
            format!(
                "--- {}\n{}",
                f.display(),
                std::fs::read_to_string(&f).unwrap_or_default()
            )
        })
        .collect();
    // 0: nothing named; 3: the fleet named an outlier. Either way every pair ran.
    assert!(
        matches!(o.status.code(), Some(0 | 3)),
        "sbatch: {:?} {}{}\njob output:\n{job}\n{agents}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        stderr(&o),
        s.logs()
    );
    assert!(job.contains("agents listen"), "{job}");
    let names: Vec<String> = (0..4).map(|i| s.node_name(i)).collect();
    // The coordinator took the job's nodes, by name, at their addresses.
    let header = match read(&log).unwrap().into_iter().next() {
        Some(FleetRecord::FleetHeader(h)) => h,
        other => panic!("no fleet header: {other:?}"),
    };
    let hosts: Vec<(String, String)> = header.hosts.clone();
    let want: Vec<(String, String)> = (0..4)
        .map(|i| (s.node_name(i), format!("{}:5310", s.addr(i))))
        .collect();
    assert_eq!(hosts, want, "{job}");
    assert_eq!(header.pattern, "ring");
    assert_pairs_measured(&log, &ring(&names));
}

#[test]
fn fleet_slurm_outside_a_job_says_so_and_exits_2() {
    let o = Command::new(bin())
        .args(["fleet", "--slurm", "--plan"])
        .env_remove("SLURM_JOB_NODELIST")
        .env_remove("SLURM_NODELIST")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("SLURM_JOB_NODELIST") && e.contains("inside a Slurm job"),
        "{e}"
    );
}

#[test]
fn hostlists_expand_as_the_real_scontrol_show_hostnames_does() {
    require_slurm();
    // scontrol reads a slurm.conf before anything; a minimal one, no daemon.
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("slurm.conf");
    std::fs::write(&conf, "ClusterName=wirescope\nSlurmctldHost=localhost\n").unwrap();
    let scontrol = |expr: &str| {
        let o = Command::new("scontrol")
            .args(["show", "hostnames", expr])
            .env("SLURM_CONF", &conf)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let valid = o.status.success()
            && !text.contains("Invalid hostlist")
            && !stderr(&o).contains("Invalid");
        (valid, text.lines().map(str::to_string).collect::<Vec<_>>())
    };
    // Both accept these, with the same names in the same order; where
    // scontrol repeats a name, wirescope keeps its first place only.
    for expr in [
        "a,b,c",
        "node[01-03,07],gpu1",
        "r[1-2]-n[8-10]",
        "n[098-101]",
        "n[9-11],m[1,3-4]",
        "a[1-2]b[3-4]",
        "gpu-[0001-0003],cpu[7]",
        "n[01-1],x[1-02]",
        "n[1-3],n2,a,a",
        "n[1-2],",
        "node[1-4]",
    ] {
        let (valid, names) = scontrol(expr);
        assert!(valid, "scontrol refused {expr:?}: {names:?}");
        let mut first = Vec::new();
        for n in names {
            if !first.contains(&n) {
                first.push(n);
            }
        }
        let ours = wirescope::fleet::hosts::expand(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        assert_eq!(ours, first, "{expr}");
    }
    // Both refuse these.
    for expr in ["n[3-1]", "n[a-c]", "n[[1]]"] {
        let (valid, names) = scontrol(expr);
        assert!(!valid, "scontrol took {expr:?}: {names:?}");
        assert!(wirescope::fleet::hosts::expand(expr).is_err(), "{expr}");
    }
}

/// dnsmasq in a namespace, answering `name` with `addrs`; killed on drop.
struct Dnsmasq {
    child: Child,
    log: PathBuf,
}

impl Dnsmasq {
    fn start(ns: &str, listen: &str, name: &str, addrs: &[String], dir: &Path) -> Dnsmasq {
        let hosts = dir.join("dns-hosts");
        let text: String = addrs.iter().map(|a| format!("{a} {name}\n")).collect();
        std::fs::write(&hosts, text).unwrap();
        let log = dir.join("dnsmasq.log");
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                ns,
                "dnsmasq",
                "--keep-in-foreground",
                "--log-facility=-",
                "--log-queries",
            ])
            .args([
                "--conf-file=/dev/null",
                "--no-resolv",
                "--no-hosts",
                "--no-poll",
                "--bind-interfaces",
            ])
            .arg(format!("--listen-address={listen}"))
            .arg(format!("--addn-hosts={}", hosts.display()))
            .args(["--pid-file=", "--user=root", "--group=root", "--port=53"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("dnsmasq: {e}: this test needs `apt-get install -y dnsmasq-base`")
            });
        let d = Dnsmasq { child, log };
        // Its marker: the hosts file read, one address per line.
        let want = format!("{} - {} names", hosts.display(), addrs.len());
        let want_addrs = format!("{} - {} addresses", hosts.display(), addrs.len());
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            let text = std::fs::read_to_string(&d.log).unwrap_or_default();
            if text.contains(&want) || text.contains(&want_addrs) {
                return d;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "dnsmasq did not start: {}",
            std::fs::read_to_string(&d.log).unwrap_or_default()
        );
    }
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn fleet_dns_takes_every_address_a_real_dns_server_gives_one_name() {
    let _traffic = traffic();
    // Nodes 0-2 run agents; node 3 runs the DNS server.
    let mut f = Fleet::new(4);
    let name = "agents.wirescope.test";
    let agents: Vec<String> = (0..3).map(|i| f.addr(i)).collect();
    let dns = Dnsmasq::start(&f.nodes[3], &f.addr(3), name, &agents, f.dir.path());
    // The coordinator's resolver: that server only.
    let _resolv = EtcNetns::new(
        &f.coord,
        &[("resolv.conf", &format!("nameserver {}\n", f.addr(3)))],
    );

    let o = f.fleet(&["--dns", name, "--pattern", "ring", "--plan"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{text}{}\n{}",
        stderr(&o),
        std::fs::read_to_string(&dns.log).unwrap_or_default()
    );
    let listed: Vec<String> = text
        .lines()
        .skip_while(|l| !l.starts_with("hosts ("))
        .skip(1)
        .take_while(|l| l.starts_with("  ") && !l.trim_start().starts_with("round"))
        .map(|l| l.split_whitespace().nth(2).unwrap_or_default().to_string())
        .collect();
    let want: Vec<String> = agents.iter().map(|a| format!("{a}:5310")).collect();
    assert_eq!(listed, want, "{text}");
    assert!(text.contains("hosts (3):"), "{text}");
    let queries = std::fs::read_to_string(&dns.log).unwrap_or_default();
    assert!(
        queries.contains(&format!("query[A] {name}")),
        "the server answered: {queries}"
    );

    // A whole ring over those addresses.
    for i in 0..3 {
        f.start_agent_with_token(i, TOKEN);
    }
    let log = f.dir.path().join("dns.jsonl");
    let o = f.fleet(&[
        "--dns",
        name,
        "--pattern",
        "ring",
        "-t",
        "1s",
        "--ebpf",
        "off",
        "--log",
        log.to_str().unwrap(),
    ]);
    assert!(
        matches!(o.status.code(), Some(0 | 3)),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        stderr(&o)
    );
    assert_pairs_measured(&log, &ring(&agents));

    // A name the server does not know: a usage error that names it.
    let o = f.fleet(&["--dns", "nobody.wirescope.test", "--plan"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("--dns nobody.wirescope.test") && e.contains("resolver"),
        "{e}"
    );
}

/// Every document of every manifest in deploy/kubernetes/, with its file.
fn manifests() -> Vec<(String, serde_yaml::Value)> {
    let dir = repo("deploy/kubernetes");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no manifests in {}", dir.display());
    let mut docs = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let v = <serde_yaml::Value as serde::Deserialize>::deserialize(doc)
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            if !v.is_null() {
                docs.push((f.file_name().unwrap().to_string_lossy().into_owned(), v));
            }
        }
    }
    docs
}

fn s<'a>(v: &'a serde_yaml::Value, path: &str) -> &'a serde_yaml::Value {
    path.split('.')
        .filter(|k| !k.is_empty())
        .fold(v, |v, k| &v[k])
}

fn text(v: &serde_yaml::Value, path: &str) -> String {
    match s(v, path) {
        serde_yaml::Value::String(t) => t.clone(),
        serde_yaml::Value::Number(n) => n.to_string(),
        serde_yaml::Value::Bool(b) => b.to_string(),
        other => panic!("{path}: not a scalar: {other:?}"),
    }
}

fn strings(v: &serde_yaml::Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| s.iter().map(|x| text(x, "")).collect())
        .unwrap_or_default()
}

/// `$(VAR)` in a container's command replaced as the kubelet does, with a
/// sample of the value its `env` entry gives.
fn expand_env(arg: &str, env: &serde_yaml::Value) -> String {
    let mut out = arg.to_string();
    while let Some(start) = out.find("$(") {
        let end = start
            + out[start..]
                .find(')')
                .unwrap_or_else(|| panic!("{arg}: unclosed $("));
        let var = &out[start + 2..end];
        let entry = env
            .as_sequence()
            .and_then(|e| e.iter().find(|e| e["name"].as_str() == Some(var)))
            .unwrap_or_else(|| panic!("{arg}: ${var} is not in the container's env"));
        let value = match (
            entry["value"].as_str(),
            s(entry, "valueFrom.fieldRef.fieldPath").as_str(),
        ) {
            (Some(v), _) => v.to_string(),
            (None, Some("status.podIP" | "status.hostIP")) => "10.0.0.7".to_string(),
            (None, Some("spec.nodeName" | "metadata.name")) => "node-7".to_string(),
            (None, other) => panic!("{arg}: no sample for ${var} ({other:?})"),
        };
        out.replace_range(start..=end, &value);
    }
    out
}

#[test]
fn every_kubernetes_manifest_command_is_accepted_by_the_real_cli() {
    use clap::Parser;
    use wirescope::cli::{Cli, Command as Sub};
    let docs = manifests();
    let of_kind = |k: &str| -> Vec<&serde_yaml::Value> {
        docs.iter()
            .filter(|(_, d)| d["kind"].as_str() == Some(k))
            .map(|(_, d)| d)
            .collect()
    };
    // One namespace for everything.
    let namespace = text(of_kind("Namespace")[0], "metadata.name");
    for (file, d) in &docs {
        if d["kind"].as_str() != Some("Namespace") {
            assert_eq!(text(d, "metadata.namespace"), namespace, "{file}");
        }
    }
    let [secret] = of_kind("Secret")[..] else {
        panic!("one Secret")
    };
    let secret_name = text(secret, "metadata.name");
    // The placeholder token is refused by the agent's own token loader.
    let placeholder = text(secret, "stringData.token");
    let e = wirescope::session::auth::Token::from_text(&placeholder, "the Secret").unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
    let [service] = of_kind("Service")[..] else {
        panic!("one Service")
    };
    assert_eq!(
        text(service, "spec.clusterIP"),
        "None",
        "a headless Service"
    );
    assert_eq!(text(service, "spec.publishNotReadyAddresses"), "false");
    let service_port = text(&s(service, "spec.ports")[0], "port");
    let service_dns = format!(
        "{}.{namespace}.svc.cluster.local",
        text(service, "metadata.name")
    );

    let mut seen = Vec::new();
    for (file, d) in &docs {
        let pod = s(d, "spec.template.spec");
        if pod.is_null() {
            continue;
        }
        let containers = pod["containers"]
            .as_sequence()
            .into_iter()
            .chain(pod["initContainers"].as_sequence())
            .flatten();
        for c in containers {
            let at = format!("{file}: {} container {}", text(d, "kind"), text(c, "name"));
            let argv: Vec<String> = strings(&c["command"])
                .into_iter()
                .chain(strings(&c["args"]))
                .map(|a| expand_env(&a, &c["env"]))
                .collect();
            assert!(
                argv.first()
                    .is_some_and(|a| a.rsplit('/').next() == Some("wirescope")),
                "{at}: {argv:?}"
            );
            let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{at}: {argv:?}:\n{e}"));
            // The token file: the Secret, mounted with no bits for others.
            let token = argv
                .iter()
                .position(|a| a == "--token-file")
                .map(|i| argv[i + 1].clone());
            let token = token.unwrap_or_else(|| panic!("{at}: no --token-file"));
            let mount = c["volumeMounts"]
                .as_sequence()
                .into_iter()
                .flatten()
                .find(|m| token.starts_with(&format!("{}/", text(m, "mountPath"))))
                .unwrap_or_else(|| panic!("{at}: {token} is on no volume"));
            let volume = pod["volumes"]
                .as_sequence()
                .into_iter()
                .flatten()
                .find(|v| v["name"] == mount["name"])
                .unwrap_or_else(|| panic!("{at}: no volume {:?}", mount["name"]));
            assert_eq!(text(volume, "secret.secretName"), secret_name, "{at}");
            let key = token.rsplit('/').next().unwrap();
            assert!(
                !s(secret, "stringData")[key].is_null(),
                "{at}: the Secret has no key {key}"
            );
            let mode = s(volume, "secret.defaultMode").as_u64().unwrap_or(0o644);
            assert_eq!(
                mode & 0o077,
                0,
                "{at}: the agent refuses a token file mode {mode:o}"
            );
            let sc = &c["securityContext"];
            assert_ne!(sc["privileged"].as_bool(), Some(true), "{at}: privileged");
            assert_eq!(strings(s(sc, "capabilities.drop")), ["ALL"], "{at}");
            match cli.command {
                Some(Sub::Agent(a)) => {
                    assert_eq!(
                        pod["hostNetwork"].as_bool(),
                        Some(true),
                        "{at}: the agent tests the node's network"
                    );
                    assert_eq!(a.listen.port().to_string(), service_port, "{at}");
                    let ports: Vec<String> = c["ports"]
                        .as_sequence()
                        .into_iter()
                        .flatten()
                        .map(|p| text(p, "containerPort"))
                        .collect();
                    assert_eq!(ports, std::slice::from_ref(&service_port), "{at}");
                    // The Service selects these pods.
                    let labels = s(d, "spec.template.metadata.labels");
                    for (k, v) in s(service, "spec.selector").as_mapping().unwrap() {
                        assert_eq!(&labels[k], v, "{at}: the Service's selector");
                    }
                    // The capabilities are the systemd unit's bounding set.
                    let unit =
                        std::fs::read_to_string(repo("deploy/systemd/wirescope-agent.service"))
                            .unwrap();
                    let line = unit
                        .lines()
                        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
                        .unwrap();
                    let want: BTreeSet<String> = line
                        .split_whitespace()
                        .map(|c| c.trim_start_matches("CAP_").to_string())
                        .collect();
                    let got: BTreeSet<String> =
                        strings(s(sc, "capabilities.add")).into_iter().collect();
                    assert_eq!(got, want, "{at}");
                    seen.push("agent");
                }
                Some(Sub::Fleet(f)) => {
                    assert_eq!(
                        f.dns.as_deref(),
                        Some(service_dns.as_str()),
                        "{at}: --dns names the headless Service"
                    );
                    assert_eq!(f.port.to_string(), service_port, "{at}");
                    f.test_plan().unwrap_or_else(|e| panic!("{at}: {e}"));
                    assert!(
                        strings(s(sc, "capabilities.add")).is_empty(),
                        "{at}: the coordinator needs no capability"
                    );
                    seen.push("fleet");
                }
                other => panic!("{at}: neither agent nor fleet: {other:?}"),
            }
        }
    }
    seen.sort_unstable();
    assert_eq!(
        seen,
        ["agent", "fleet"],
        "one agent DaemonSet and one fleet Job"
    );
    assert_eq!(of_kind("DaemonSet").len(), 1);
    assert_eq!(of_kind("Job").len(), 1);
}
