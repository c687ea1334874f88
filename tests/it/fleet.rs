//! `wirescope fleet` on agents in namespaces on a bridge: the rounds, the
//! matrix, the slow link, the slow node and the odd settings it names, and
//! what it does when hosts are unreachable, refuse the token, die mid-round
//! or the user presses Ctrl-C.

use crate::common::fleet::{in_ns, Fleet};
use crate::common::{cores, stderr};
use wirescope::fleet::log::{read, FleetRecord, FleetSummary};

fn summary(path: &std::path::Path) -> (Vec<FleetRecord>, FleetSummary) {
    let recs = read(path).expect("fleet log");
    let s = match recs.last() {
        Some(FleetRecord::FleetSummary(s)) => (**s).clone(),
        other => panic!("the log does not end with fleet_summary: {other:?}"),
    };
    (recs, s)
}

fn pairs(recs: &[FleetRecord]) -> usize {
    recs.iter()
        .filter(|r| matches!(r, FleetRecord::Pair(_)))
        .count()
}

#[test]
fn all_pairs_of_eight_names_the_slow_link_the_slow_node_and_the_odd_host() {
    let _cores = cores();
    let mut f = Fleet::new(8);
    f.start_agents();
    f.line_rate("400mbit");
    let run = |f: &Fleet, name: &str| {
        let log = f.dir.path().join(name);
        let o = f.fleet(&[
            "--hosts",
            &f.hosts(),
            "--pattern",
            "all-pairs",
            "-t",
            "1s",
            "--ebpf",
            "off",
            "--log",
            log.to_str().unwrap(),
        ]);
        let (recs, s) = summary(&log);
        (o, recs, s)
    };
    let name = |i: usize| f.addr(i);

    // Healthy: 28 pairs in 7 rounds, both directions, nothing named, exit 0.
    let (o, recs, s) = run(&f, "healthy.jsonl");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        stderr(&o)
    );
    assert_eq!((s.rounds_run, s.rounds_planned, s.pairs_run), (7, 7, 28));
    assert_eq!(pairs(&recs), 28);
    let cells = s
        .matrix
        .cells
        .iter()
        .flatten()
        .filter(|c| c.is_some())
        .count();
    assert_eq!(cells, 56, "both directions of every pair");
    assert!(
        s.slow_nodes.is_empty() && s.slow_links.is_empty() && s.odd_facts.is_empty(),
        "{s:#?}"
    );
    let hosts = recs
        .iter()
        .filter(|r| matches!(r, FleetRecord::Host(_)))
        .count();
    assert_eq!(hosts, 8, "every host's facts logged once");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("no slow node, no slow link, no odd setting"),
        "{text}"
    );

    // One slow link: node 3 → node 5 only.
    f.slow_link(3, 5, "40mbit");
    let (o, _, s) = run(&f, "link.jsonl");
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let links: Vec<(String, String)> = s
        .slow_links
        .iter()
        .map(|l| (l.what.from.clone(), l.what.to.clone()))
        .collect();
    assert_eq!(links, vec![(name(3), name(5))], "{s:#?}");
    assert!(s.slow_nodes.is_empty(), "{:#?}", s.slow_nodes);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!("slow link {} → {}", name(3), name(5))),
        "{text}"
    );
    f.clear_filters(3);

    // One slow node (its egress), and another node's settings odd.
    f.slow_node(2, "40mbit");
    in_ns(&f.nodes[6], &["ip", "link", "set", "eth0", "mtu", "1400"]);
    in_ns(
        &f.nodes[6],
        &["sysctl", "-qw", "net.ipv4.tcp_rmem=4096 65536 1048576"],
    );
    let (o, _, s) = run(&f, "node.jsonl");
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let nodes: Vec<(String, String)> = s
        .slow_nodes
        .iter()
        .map(|n| (n.what.host.clone(), n.what.direction.clone()))
        .collect();
    assert_eq!(nodes, vec![(name(2), "sending".to_string())], "{s:#?}");
    assert!(s.slow_links.is_empty(), "{:#?}", s.slow_links);
    let odd: Vec<&str> = s.odd_facts.iter().map(|o| o.key.as_str()).collect();
    assert!(
        odd.contains(&"nic.mtu") && odd.contains(&"sysctl.net.ipv4.tcp_rmem"),
        "{odd:?}"
    );
    for o in &s.odd_facts {
        let who: Vec<&str> = o.odd.iter().map(|(h, _)| h.as_str()).collect();
        assert_eq!(who, vec![name(6).as_str()], "{o:?}");
    }
    let mtu = s.odd_facts.iter().find(|o| o.key == "nic.mtu").unwrap();
    assert_eq!((mtu.majority.as_str(), mtu.majority_hosts), ("1500", 7));
}

#[test]
fn unreachable_hosts_wrong_tokens_and_dead_agents_lose_only_their_pairs() {
    let mut f = Fleet::new(5);
    for i in 0..4 {
        f.start_agent_with_token(i, crate::common::TOKEN);
    }
    // Node 3 has another token; node 4 runs no agent at all.
    f.kill_agent(3);
    f.start_agent_with_token(3, "another-token-of-another-fleet-000000");
    let log = f.dir.path().join("bad.jsonl");
    let o = f.fleet(&[
        "--hosts",
        &f.hosts(),
        "--pattern",
        "all-pairs",
        "-t",
        "1s",
        "--ebpf",
        "off",
        "--log",
        log.to_str().unwrap(),
    ]);
    let (recs, s) = summary(&log);
    let untested: Vec<&str> = s.untested.iter().map(|(h, _)| h.as_str()).collect();
    assert_eq!(
        untested,
        vec![f.addr(3).as_str(), f.addr(4).as_str()],
        "{s:#?}"
    );
    assert!(s.untested[0].1.contains("token"), "{:?}", s.untested[0]);
    assert!(
        s.untested[1].1.contains("cannot connect"),
        "{:?}",
        s.untested[1]
    );
    // The three good nodes still test their 3 pairs, both ways.
    assert_eq!(pairs(&recs), 3);
    assert_eq!(
        s.matrix
            .cells
            .iter()
            .flatten()
            .filter(|c| c.is_some())
            .count(),
        6
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!("not tested {}", f.addr(4))),
        "{text}"
    );
}

#[test]
fn an_agent_killed_mid_round_loses_its_pair_and_ctrl_c_keeps_the_partial_matrix() {
    let mut f = Fleet::new(4);
    f.start_agents();
    // A ring of 4 with long tests; kill node 1's agent while round 1 runs.
    let log = f.dir.path().join("kill.jsonl");
    let child = f
        .fleet_cmd(&[
            "--hosts",
            &f.hosts(),
            "--pattern",
            "ring",
            "-t",
            "4s",
            "--ebpf",
            "off",
            "--log",
            log.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let _reap = crate::common::fleet::Reap(child.id());
    std::thread::sleep(std::time::Duration::from_millis(2500));
    f.kill_agent(1);
    let o = child.wait_with_output().unwrap();
    let (recs, s) = summary(&log);
    assert!(
        !s.failed.is_empty(),
        "the killed agent's tests failed: {s:#?}\n{}",
        stderr(&o)
    );
    assert!(
        s.failed
            .iter()
            .all(|(a, b, _)| *a == f.addr(1) || *b == f.addr(1)),
        "{:?}",
        s.failed
    );
    // The other pair of round 1 (2-3) completed both ways.
    let ok = s.matrix.cells[2][3].is_some() && s.matrix.cells[3][2].is_some();
    assert!(ok, "{s:#?}");
    assert_eq!(s.rounds_run, s.rounds_planned);
    assert!(pairs(&recs) >= 3);

    // Ctrl-C during the first round: the run ends, the log holds what ran.
    f.start_agent_with_token(1, crate::common::TOKEN);
    let log = f.dir.path().join("int.jsonl");
    let child = f
        .fleet_cmd(&[
            "--hosts",
            &f.hosts(),
            "--pattern",
            "all-pairs",
            "-t",
            "3s",
            "--ebpf",
            "off",
            "--log",
            log.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let _reap = crate::common::fleet::Reap(child.id());
    // `ip netns exec` runs the coordinator as its child: signal the coordinator.
    std::thread::sleep(std::time::Duration::from_millis(2000));
    crate::common::fleet::interrupt(&child);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let (_, s) = summary(&log);
    assert!(s.interrupted);
    assert!(s.rounds_run < s.rounds_planned, "{s:#?}");
}

#[test]
fn bidir_tests_both_directions_at_once_and_grpc_runs_agent_to_agent() {
    let mut f = Fleet::new(3);
    f.start_agents();
    let hub = f.addr(0);
    let log = f.dir.path().join("bidir.jsonl");
    let o = f.fleet(&[
        "--hosts",
        &f.hosts(),
        "--pattern",
        "star",
        "--hub",
        &hub,
        "--bidir",
        "-t",
        "1s",
        "--ebpf",
        "off",
        "--log",
        log.to_str().unwrap(),
    ]);
    let (recs, s) = summary(&log);
    assert_eq!((s.rounds_planned, s.pairs_run), (2, 2), "{}", stderr(&o));
    for r in &recs {
        if let FleetRecord::Pair(p) = r {
            assert_eq!(p.a, hub);
            let dirs: Vec<(&str, &str)> = p
                .directions
                .iter()
                .map(|d| (d.from.as_str(), d.to.as_str()))
                .collect();
            assert_eq!(
                dirs,
                vec![(p.a.as_str(), p.b.as_str()), (p.b.as_str(), p.a.as_str())]
            );
            assert!(
                p.directions.iter().all(|d| d.bps.is_some_and(|b| b > 0.0)),
                "{p:?}"
            );
        }
    }
    // gRPC between two agents, one way.
    let log = f.dir.path().join("grpc.jsonl");
    let o = f.fleet(&[
        "--hosts",
        &format!("{},{}", f.addr(1), f.addr(2)),
        "--engine",
        "grpc",
        "--one-way",
        "-t",
        "1s",
        "--ebpf",
        "off",
        "--log",
        log.to_str().unwrap(),
    ]);
    let (_, s) = summary(&log);
    assert!(s.failed.is_empty(), "{:?}\n{}", s.failed, stderr(&o));
    assert!(
        s.matrix.cells[0][1].is_some_and(|b| b > 0.0) && s.matrix.cells[1][0].is_none(),
        "{s:#?}"
    );
    // Sweeps stay with `run`: a usage error before anything starts.
    let o = f.fleet(&["--hosts", &f.hosts(), "--sweep", "size=1K,64K"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("drop --sweep"), "{}", stderr(&o));
}

/// GET http://ADDR/metrics from inside `ns`, in the Prometheus text format.
fn scrape_in(ns: &str, addr: &str) -> Option<String> {
    let code = format!(
        "import urllib.request as u; r = u.Request('http://{addr}/metrics', headers={{'Accept': 'text/plain; version=0.0.4'}}); print(u.urlopen(r, timeout=5).read().decode(), end='')"
    );
    let o = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "python3", "-c", &code])
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
}

#[test]
fn fleet_metrics_serve_the_matrix_and_outliers_and_pass_promtool() {
    let Some(promtool) = crate::metrics::tool("promtool") else {
        return;
    };
    let mut f = Fleet::new(3);
    f.start_agents();
    let addr = format!("10.99.{}.254:9477", f.addr(0).split('.').nth(2).unwrap());
    let child = f
        .fleet_cmd(&[
            "--hosts",
            &f.hosts(),
            "--pattern",
            "ring",
            "-t",
            "1s",
            "--ebpf",
            "off",
            "--metrics",
            &addr,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let _reap = crate::common::fleet::Reap(child.id());
    // After the run the last matrix stays served until Ctrl-C.
    let t = std::time::Instant::now();
    let text = loop {
        if let Some(t) =
            scrape_in(&f.coord, &addr).filter(|t| t.contains("wirescope_fleet_rounds{"))
        {
            break t;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(60),
            "no fleet summary on /metrics"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    };
    let links = text
        .matches("wirescope_fleet_link_bytes_per_second{")
        .count();
    assert_eq!(links, 6, "3 ring links, both ways:\n{text}");
    assert!(
        text.contains("wirescope_fleet_pairs{state=\"run\"} 3"),
        "{text}"
    );
    let mut check = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut check.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let out = check.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool: {said}\n{text}"
    );
    // Ctrl-C ends the serving; the exit code is the run's, not 130.
    crate::common::fleet::interrupt(&child);
    let o = child.wait_with_output().unwrap();
    assert!(
        matches!(o.status.code(), Some(0) | Some(3)),
        "{}",
        stderr(&o)
    );
}
