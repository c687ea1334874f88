//! The hub on the synthetic host: what the kernel files and the Samples
//! say moved is what the counters serve, under bounded label sets.

use super::*;
use crate::diagnose::Severity;
use crate::probe::ebpf::EbpfUnavailable;
use crate::probe::ethtool_names::Dir;
use crate::probe::sampler::{EbpfLoader, Sampler};
use crate::probe::synthetic::{Layout, SyntheticHost, USER_HZ};
use std::time::Duration;

fn small() -> SyntheticHost {
    SyntheticHost::in_temp(Layout {
        cpus: 8,
        nodes: 1,
        nics: 2,
        queues: 4,
        nvme: 0,
        nvme_queues: 0,
        hot_cpus: vec![0, 1],
    })
    .unwrap()
}

/// Every sample line of a family (the name with its suffix): labels → value.
fn series(text: &str, name: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let (labels, value) = match rest.strip_prefix('{') {
                Some(r) => {
                    let (labels, v) = r.split_once("} ")?;
                    (labels.to_string(), v)
                }
                None => (String::new(), rest.strip_prefix(' ')?),
            };
            Some((labels, value.parse().unwrap()))
        })
        .collect()
}

fn value(text: &str, name: &str, labels: &str) -> f64 {
    *series(text, name)
        .get(labels)
        .unwrap_or_else(|| panic!("no {name}{{{labels}}} in\n{text}"))
}

/// The label names of one series' label text, in order.
fn label_names(labels: &str) -> Vec<&str> {
    labels
        .split("\",")
        .filter_map(|kv| kv.split_once('=').map(|(k, _)| k))
        .collect()
}

fn sampler(h: &SyntheticHost) -> Sampler {
    let loader: EbpfLoader = Box::new(|_, _| Err(EbpfUnavailable::Disabled("synthetic".into())));
    let mut s = Sampler::with(Box::new(h.source()), None, loader);
    s.set_ifaces(&h.nic_names());
    s.begin(None, Duration::ZERO, Duration::from_secs(1));
    s
}

#[test]
fn the_live_host_serves_the_kernel_totals_as_node_exporter_does() {
    let mut h = small();
    let hub = MetricsHub::new("test").with_live_host("node", Arc::new(h.source()), USER_HZ);
    let before = hub.encode(Format::OpenMetrics).unwrap();
    h.advance(3).unwrap();
    let after = hub.encode(Format::OpenMetrics).unwrap();
    let diff =
        |name: &str, labels: &str| value(&after, name, labels) - value(&before, name, labels);
    for cpu in 0..8 {
        let load = h.cpu_load(cpu);
        let secs = |ticks: u64| (ticks * 3) as f64 / USER_HZ as f64;
        for (mode, ticks) in [
            ("softirq", load.softirq),
            ("user", load.user),
            ("system", load.system),
            ("idle", USER_HZ - load.busy()),
            ("steal", 0),
        ] {
            let l = format!("host=\"node\",cpu=\"{cpu}\",mode=\"{mode}\"");
            let d = diff("node_cpu_seconds_total", &l);
            assert!((d - secs(ticks)).abs() < 1e-6, "cpu{cpu} {mode}: {d}");
        }
        let l = format!("host=\"node\",cpu=\"{cpu}\",type=\"NET_RX\"");
        let d = diff("node_softirqs_functions_total", &l);
        assert_eq!(d, (h.net_rx_per_s(cpu) * 3) as f64, "cpu{cpu}");
        // 32-bit counters: the synthetic host's have wrapped (a counter reset for Prometheus).
        let l = format!("host=\"node\",cpu=\"{cpu}\"");
        let d = diff("node_softnet_processed_total", &l) as i64;
        assert_eq!(d.rem_euclid(1 << 32), (h.softnet_per_s(cpu) * 3) as i64);
    }
    // Absolute: ticks since boot over USER_HZ.
    let stat = h.source().read("/proc/stat").unwrap();
    let ticks = crate::probe::cpu::parse_proc_stat(&stat).unwrap()[0]
        .1
        .softirq;
    let l = "host=\"node\",cpu=\"0\",mode=\"softirq\"";
    assert_eq!(
        value(&after, "node_cpu_seconds_total", l),
        ticks as f64 / 100.0
    );
    // Every mode of every CPU, nothing else.
    assert_eq!(series(&after, "node_cpu_seconds_total").len(), 8 * 8);
}

#[test]
fn samples_of_another_host_are_accumulated_with_bounded_labels() {
    let mut h = small();
    let mut s = sampler(&h);
    let hub = MetricsHub::new("test");
    for _ in 0..2 {
        h.advance(2).unwrap();
        let mut sample = s.sample();
        // The synthetic clock moved 2 s; the wall clock did not.
        (sample.start_s, sample.end_s) = (0.0, 2.0);
        hub.publish_sample("peer", &sample);
    }
    let text = hub.encode(Format::OpenMetrics).unwrap();
    // Queues: the synthetic NICs' ethtool -S counters, 4 s of each queue's rate.
    let packets = series(&text, "wirescope_queue_packets_total");
    assert_eq!(packets.len(), 2 * 4 * 2, "{packets:?}");
    for labels in packets
        .keys()
        .chain(series(&text, "wirescope_queue_bytes_total").keys())
    {
        assert_eq!(
            label_names(labels),
            ["host", "iface", "queue", "direction", "source"],
            "no label per ethtool counter name: {labels}"
        );
    }
    for (nic, name) in h.nic_names().iter().enumerate() {
        for q in 0..4 {
            let rate = h.queue_rate(nic as u32, Dir::Rx, q);
            let l = format!(
                "host=\"peer\",iface=\"{name}\",queue=\"{q}\",direction=\"rx\",source=\"ethtool\""
            );
            assert_eq!(packets[&l], (rate.pps * 4) as f64, "{l}");
            let bytes = value(&text, "wirescope_queue_bytes_total", &l);
            assert_eq!(bytes, (rate.pps * rate.bytes_per_packet * 4) as f64, "{l}");
        }
    }
    for cpu in 0..8 {
        let l = format!("host=\"peer\",cpu=\"{cpu}\"");
        let processed = value(&text, "node_softnet_processed_total", &l);
        assert_eq!(processed, (h.softnet_per_s(cpu) * 4) as f64);
        let l = format!("host=\"peer\",cpu=\"{cpu}\",type=\"NET_RX\"");
        let raised = value(&text, "node_softirqs_functions_total", &l);
        assert_eq!(raised, (h.net_rx_per_s(cpu) * 4) as f64);
        // CPU seconds: each mode's share times the interval.
        let load = h.cpu_load(cpu);
        let l = format!("host=\"peer\",cpu=\"{cpu}\",mode=\"softirq\"");
        let secs = value(&text, "node_cpu_seconds_total", &l);
        assert!(
            (secs - load.softirq as f64 / 100.0 * 4.0).abs() < 1e-9,
            "{secs}"
        );
    }
    // Softirq types are the kernel's rows, each CPU once per type.
    let types: std::collections::BTreeSet<String> = series(&text, "node_softirqs_functions_total")
        .keys()
        .filter_map(|l| {
            l.split("type=\"")
                .nth(1)
                .map(|t| t.trim_end_matches('"').to_string())
        })
        .collect();
    assert!(types.len() <= 10 && types.contains("NET_TX"), "{types:?}");
    // A hostile share or span adds nothing (counters never go down or become NaN).
    let mut odd = s.sample();
    (odd.start_s, odd.end_s) = (0.0, f64::INFINITY);
    hub.publish_sample("peer", &odd);
    (odd.start_s, odd.end_s) = (0.0, 1.0);
    for c in &mut odd.cpus {
        c.softirq = crate::units::Percent(f64::NAN);
        c.user = crate::units::Percent(-50.0);
    }
    hub.publish_sample("peer", &odd);
    let again = hub.encode(Format::OpenMetrics).unwrap();
    for mode in ["softirq", "user"] {
        let l = format!("host=\"peer\",cpu=\"0\",mode=\"{mode}\"");
        let (before, after) = (
            value(&text, "node_cpu_seconds_total", &l),
            value(&again, "node_cpu_seconds_total", &l),
        );
        assert_eq!(before, after, "{mode}");
    }
    // No engine runs: no throughput series; nothing dropped.
    assert!(series(&text, "wirescope_engine_bytes_per_second").is_empty());
    assert_eq!(
        value(&text, "wirescope_metrics_dropped_series_total", ""),
        0.0
    );
}

#[test]
fn the_live_hosts_samples_add_only_queues_and_the_engine() {
    let mut h = small();
    let mut s = sampler(&h);
    let hub = MetricsHub::new("test").with_live_host("node", Arc::new(h.source()), USER_HZ);
    hub.set_engine("node", Some(EngineKind::Tcp));
    h.advance(1).unwrap();
    let mut sample = s.sample();
    sample.engine.tx_bps = crate::units::BitsPerSec(9.4e9);
    hub.publish_sample("node", &sample);
    let text = hub.encode(Format::OpenMetrics).unwrap();
    // CPU series once (from the kernel), not again from the Sample.
    assert_eq!(series(&text, "node_cpu_seconds_total").len(), 8 * 8);
    let l = "host=\"node\",engine=\"tcp\",direction=\"tx\"";
    assert_eq!(
        value(&text, "wirescope_engine_bytes_per_second", l),
        9.4e9 / 8.0
    );
    assert!(!series(&text, "wirescope_queue_packets_total").is_empty());
    hub.set_engine("node", None);
    let text = hub.encode(Format::OpenMetrics).unwrap();
    assert!(series(&text, "wirescope_engine_bytes_per_second").is_empty());
}

#[test]
fn queue_series_stop_at_their_bound_and_say_so() {
    let h = small();
    let mut sample = sampler(&h).sample();
    let q = sample.queues[0].clone();
    sample.queues = (0..MAX_QUEUE_SERIES as u32 + 10)
        .map(|i| crate::probe::sample::QueueSample {
            queue: i,
            packets: Some(1),
            ..q.clone()
        })
        .collect();
    let hub = MetricsHub::new("test");
    hub.publish_sample("peer", &sample);
    let text = hub.encode(Format::OpenMetrics).unwrap();
    assert_eq!(
        series(&text, "wirescope_queue_packets_total").len(),
        MAX_QUEUE_SERIES
    );
    assert_eq!(
        value(&text, "wirescope_metrics_dropped_series_total", ""),
        10.0
    );
}

#[test]
fn findings_are_the_active_set_one_series_each() {
    let hub = MetricsHub::new("test");
    let f = |id: &str, sev, subject: &str| {
        crate::diagnose::Finding::new(id, sev, HostRole::Peer, subject, "t", 0.5)
    };
    hub.publish_findings(&[
        f("cpu.single-core-saturated", Severity::Error, "cpu1"),
        f("cpu.single-core-saturated", Severity::Error, "cpu1"),
        f("nic.gro-off", Severity::Warn, "veth \"b\""),
    ]);
    let text = hub.encode(Format::OpenMetrics).unwrap();
    let found = series(&text, "wirescope_finding");
    assert_eq!(found.len(), 2, "{found:?}");
    let l = "host=\"peer\",id=\"cpu.single-core-saturated\",severity=\"error\",subject=\"cpu1\"";
    assert_eq!(found[l], 1.0);
    // Label values are escaped.
    assert!(found.contains_key(
        "host=\"peer\",id=\"nic.gro-off\",severity=\"warn\",subject=\"veth \\\"b\\\"\""
    ));
    hub.publish_findings(&[]);
    let text = hub.encode(Format::OpenMetrics).unwrap();
    assert!(series(&text, "wirescope_finding").is_empty());
}

#[test]
fn caller_gauges_are_served_and_bad_ones_refused_with_the_reason() {
    let hub = MetricsHub::new("fleet");
    let link = |s: &str, r: &str| {
        vec![
            ("sender".to_string(), s.to_string()),
            ("receiver".to_string(), r.to_string()),
        ]
    };
    hub.set_gauges(
        "wirescope_fleet_link_bits_per_second",
        "Throughput of each link (bits/s).",
        vec![(link("a", "b"), 9.0e10), (link("b", "a"), 4.5e10)],
    )
    .unwrap();
    let text = hub.encode(Format::OpenMetrics).unwrap();
    let m = series(&text, "wirescope_fleet_link_bits_per_second");
    assert_eq!(m["sender=\"b\",receiver=\"a\""], 4.5e10);
    assert!(text.contains("# TYPE wirescope_fleet_link_bits_per_second gauge\n"));
    let refused = |name: &str, help: &str, series| {
        hub.set_gauges(name, help, series).unwrap_err().to_string()
    };
    assert!(refused("9bad", "h", vec![]).contains("not a metric name"));
    assert!(refused("node_cpu_seconds", "h", vec![]).contains("serves a family of that name"));
    assert!(refused("x_total", "h", vec![]).contains("must not end in _total"));
    assert!(refused("wirescope_finding", "h", vec![]).contains("serves a family of that name"));
    assert!(refused("x", "two\nlines", vec![]).contains("one line"));
    assert!(
        refused("x", "h", vec![(link("a", "b"), 1.0), (link("a", "b"), 2.0)])
            .contains("given twice")
    );
    let bad_label = vec![(vec![("bad-label".to_string(), "v".to_string())], 1.0)];
    assert!(refused("x", "h", bad_label).contains("\"bad-label\" is not valid"));
    // Replaced, not appended.
    hub.set_gauges("wirescope_fleet_link_bits_per_second", "h", vec![])
        .unwrap();
    let text = hub.encode(Format::OpenMetrics).unwrap();
    assert!(series(&text, "wirescope_fleet_link_bits_per_second").is_empty());
}

#[test]
fn both_formats_name_the_build_and_end_as_their_format_says() {
    let hub = MetricsHub::new("watch");
    let om = hub.encode(Format::OpenMetrics).unwrap();
    assert!(om.ends_with("# EOF\n"));
    let l = format!("version=\"{}\",face=\"watch\"", env!("CARGO_PKG_VERSION"));
    assert_eq!(value(&om, "wirescope_build_info", &l), 1.0);
    assert!(om.contains("# TYPE node_cpu_seconds counter\n"));
    let text = hub.encode(Format::PrometheusText).unwrap();
    assert!(!text.contains("# EOF"));
    assert!(text.contains("# TYPE node_cpu_seconds_total counter\n"));
}

#[test]
fn accept_picks_openmetrics_unless_only_text_is_asked() {
    let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    assert_eq!(Format::from_accept(Some(prometheus)), Format::OpenMetrics);
    assert_eq!(Format::from_accept(None), Format::OpenMetrics);
    assert_eq!(Format::from_accept(Some("*/*")), Format::OpenMetrics);
    assert_eq!(
        Format::from_accept(Some("text/plain;version=0.0.4")),
        Format::PrometheusText
    );
}

#[test]
fn a_pipelines_outputs_feed_both_hosts_and_the_findings() {
    let mut h = small();
    let mut s = sampler(&h);
    let hub = MetricsHub::new("watch").with_live_host("local", Arc::new(h.source()), USER_HZ);
    h.advance(1).unwrap();
    let local = s.sample();
    let mut peer = local.clone();
    peer.host = HostRole::Peer;
    (peer.start_s, peer.end_s) = (0.0, 1.0);
    let finding = crate::diagnose::Finding::new(
        "cpu.single-core-saturated",
        Severity::Error,
        HostRole::Peer,
        "cpu0",
        "t",
        0.9,
    );
    hub.set_engine("peer", Some(EngineKind::Grpc));
    hub.publish_output(&Output::Interval {
        local: Some(Box::new(local)),
        peer: Some(Box::new(peer)),
        changes: Vec::new(),
        active: vec![finding],
    });
    let text = hub.encode(Format::OpenMetrics).unwrap();
    let cpu = series(&text, "node_cpu_seconds_total");
    // The live host once from the kernel, the peer once from its Sample.
    assert_eq!(cpu.len(), 2 * 8 * 8, "{cpu:?}");
    let l = "host=\"peer\",cpu=\"0\",mode=\"softirq\"";
    assert!((cpu[l] - 1.0).abs() < 1e-9, "{}", cpu[l]);
    let queues = series(&text, "wirescope_queue_packets_total");
    assert_eq!(queues.len(), 2 * (2 * 4 * 2), "both hosts' queues");
    assert_eq!(series(&text, "wirescope_finding").len(), 1);
    assert_eq!(series(&text, "wirescope_engine_bytes_per_second").len(), 2);
    hub.publish_output(&Output::Failed("gone".into()));
    let text = hub.encode(Format::OpenMetrics).unwrap();
    assert!(series(&text, "wirescope_engine_bytes_per_second").is_empty());
}
