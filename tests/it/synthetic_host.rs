//! The synthetic big host (256 CPUs on 2 NUMA nodes, 8 mlx5 NICs × 64
//! queues, ~1,500 interrupt lines) read by the real sampler through
//! `CaptureDir`, exactly as `wirescope watch --from DIR` reads a capture:
//! the Samples carry the figures the generator wrote, and the diagnosis
//! rules on them name the softirq-saturated cores in one finding. No timing is asserted.

use std::time::Duration;
use wirescope::diagnose::live::LiveDiagnosis;
use wirescope::diagnose::{
    diagnose, diagnose_cached, Evidence, FactsCache, Finding, HostRole, Input, Severity, Value,
    Window,
};
use wirescope::probe::ebpf::EbpfUnavailable;
use wirescope::probe::ethtool_names::Dir;
use wirescope::probe::facts::{HostFacts, Support};
use wirescope::probe::sample::{QueueSource, Sample};
use wirescope::probe::sampler::{EbpfLoader, Sampler};
use wirescope::probe::snapshot::snapshot;
use wirescope::probe::source::HostSource;
use wirescope::probe::synthetic::{Layout, SyntheticHost, USER_HZ};
use wirescope::probe::system::parse_interrupts;
use wirescope::units::{parse_cpu_list, BitsPerSec};

fn host() -> SyntheticHost {
    SyntheticHost::in_temp(Layout::default()).unwrap()
}

/// The sampler `watch --from DIR` builds: the directory as its HostSource,
/// no qstats, no eBPF (a directory is not a running kernel).
fn sampler(h: &SyntheticHost) -> Sampler {
    let loader: EbpfLoader = Box::new(|_, _| Err(EbpfUnavailable::Disabled("synthetic".into())));
    let mut s = Sampler::with(Box::new(h.source()), None, loader);
    s.set_ifaces(&h.nic_names());
    s.begin(None, Duration::ZERO, Duration::from_secs(1));
    s
}

#[test]
fn the_tree_has_the_big_host_shape_in_the_capture_layout() {
    let h = host();
    let src = h.source();
    let (cpus, lines) = parse_interrupts(&src.read("/proc/interrupts").unwrap());
    assert_eq!(cpus.len(), 256);
    assert!(lines.len() >= 1_500, "{} lines", lines.len());
    assert_eq!(lines.len(), h.irq_line_count());
    assert!(lines.iter().all(|l| l.counts.len() == 256));
    let comp = lines.iter().find(|l| l.irq == h.queue_irq(0, 12)).unwrap();
    assert_eq!(comp.name(), "mlx5_comp12@pci:0000:17:00.0");
    let eth = src.ethtool("ens1f0np0");
    assert_eq!(eth.drvinfo.value().unwrap().driver, "mlx5_core");
    assert_eq!(eth.drvinfo.value().unwrap().bus_info, "0000:17:00.0");
    assert_eq!(eth.channels.value().unwrap().combined, Some(64));
    let stats = eth.stats.value().unwrap();
    let per = |p: &str| stats.iter().filter(|(n, _)| n.starts_with(p)).count();
    assert_eq!(per("rx63_"), 23, "mlx5's rx queue counters");
    assert_eq!(per("tx63_"), 15, "mlx5's tx queue counters");
    assert!(stats.len() > 2_500, "{} counters", stats.len());
    assert_eq!(
        src.read("/sys/devices/system/node/node1/cpulist").unwrap(),
        "64-127,192-255\n"
    );
    assert_eq!(
        src.read("/sys/devices/system/cpu/cpu200/topology/thread_siblings_list")
            .unwrap(),
        "72,200\n"
    );
    // What `watch --from DIR` reads: every interface found without being
    // named, every fact present, 512 rx queues split from ethtool -S.
    let snap = snapshot(&src, &[]);
    assert_eq!(
        snap.ifaces.keys().cloned().collect::<Vec<_>>(),
        h.nic_names()
    );
    assert!(
        snap.facts.unavailable.is_empty(),
        "{:?}",
        snap.facts.unavailable
    );
    let rx: usize = snap
        .queues
        .values()
        .map(|q| q.iter().filter(|x| x.dir == Dir::Rx).count())
        .sum();
    assert_eq!(rx, 512);
    assert_eq!(snap.softnet.len(), 256);
    assert!(src.skipped().is_empty(), "{:?}", src.skipped());
    // The counters move by the stated rates: IRQ of rx queue 3 of the first
    // NIC (1 Mpps) on cpu3 only.
    let mut h = h;
    let irq = h.queue_irq(0, 3);
    let count = |h: &SyntheticHost| {
        let (_, l) = parse_interrupts(&h.source().read("/proc/interrupts").unwrap());
        l.into_iter().find(|l| l.irq == irq).unwrap().counts
    };
    let a = count(&h);
    h.advance(2).unwrap();
    let b = count(&h);
    let moved: Vec<(usize, u64)> = a
        .iter()
        .zip(&b)
        .enumerate()
        .filter(|(_, (x, y))| x != y)
        .map(|(c, (x, y))| (c, y - x))
        .collect();
    assert_eq!(moved, vec![(3, 2 * (1_000_000 / 32 + 10))]);
    assert_eq!(h.queue_irq_per_s(0, 3), 1_000_000 / 32 + 10);
}

#[test]
fn bad_layouts_are_refused_with_the_reason() {
    let e = SyntheticHost::in_temp(Layout {
        cpus: 255,
        ..Layout::default()
    })
    .unwrap_err();
    assert!(e.to_string().contains("multiple of 2"), "{e}");
    let e = SyntheticHost::in_temp(Layout {
        hot_cpus: vec![300],
        ..Layout::default()
    })
    .unwrap_err();
    assert!(e.to_string().contains("cpu300"), "{e}");
}

fn queue<'a>(
    s: &'a Sample,
    iface: &str,
    dir: Dir,
    q: u32,
) -> &'a wirescope::probe::sample::QueueSample {
    s.queues
        .iter()
        .find(|x| x.iface == iface && x.dir == dir && x.queue == q)
        .unwrap_or_else(|| panic!("{iface} {dir:?} {q} missing"))
}

#[test]
fn the_sampler_reports_what_the_generator_wrote() {
    let mut h = host();
    let mut s = sampler(&h);
    h.advance(1).unwrap();
    let x = s.sample();
    assert!(x.probe_errors.is_empty(), "{:?}", x.probe_errors);

    // 256 CPUs; the 8 hot ones 100 % softirq, the rest 10 % busy.
    assert_eq!(x.cpus.len(), 256);
    for c in &x.cpus {
        let want = h.cpu_load(c.cpu.0);
        assert!((c.busy().0 - want.busy() as f64).abs() < 1e-9, "{c:?}");
        assert!((c.softirq.0 - want.softirq as f64).abs() < 1e-9, "{c:?}");
    }
    let hot: Vec<u32> = x
        .cpus
        .iter()
        .filter(|c| c.busy().0 >= 99.999 && c.softirq.0 >= 99.999)
        .map(|c| c.cpu.0)
        .collect();
    assert_eq!(hot, (0..8).collect::<Vec<_>>());
    let cpu77 = x.cpus.iter().find(|c| c.cpu.0 == 77).unwrap();
    assert!((cpu77.busy().0 - 10.0).abs() < 1e-9, "{cpu77:?}");
    assert_eq!(USER_HZ, 100);

    // softirqs and softnet per CPU.
    assert_eq!(x.softirqs.len(), 256);
    let si = |c: u32| x.softirqs.iter().find(|s| s.cpu.0 == c).unwrap();
    assert_eq!(si(5).net_rx, 40_000);
    assert_eq!(si(130).net_rx, h.net_rx_per_s(130));
    assert_eq!(x.softnet.len(), 256);
    let sn = |c: u32| x.softnet.iter().find(|s| s.cpu.0 == c).unwrap().delta;
    assert_eq!(sn(2).processed, 1_000_000);
    assert_eq!(sn(2).time_squeeze, 20);
    assert_eq!(sn(200).processed, 10_000);

    // 512 rx + 512 tx queues from ethtool -S; every one with its own rate.
    let names = h.nic_names();
    assert_eq!(x.queues.len(), 1024);
    assert!(x.queues.iter().all(|q| q.source == QueueSource::Ethtool));
    for (n, name) in names.iter().enumerate() {
        for dir in [Dir::Rx, Dir::Tx] {
            for qi in 0..64 {
                let want = h.queue_rate(n as u32, dir, qi);
                let got = queue(&x, name, dir, qi);
                assert_eq!(got.packets, Some(want.pps), "{got:?}");
                assert_eq!(got.bytes, Some(want.pps * want.bytes_per_packet), "{got:?}");
            }
        }
    }
    let rx_sum: u64 = x
        .queues
        .iter()
        .filter(|q| q.dir == Dir::Rx)
        .filter_map(|q| q.packets)
        .sum();
    // 8 hot queues at 1 Mpps; 504 others at 10,000 + 1,000 × nic + 10 × queue.
    let cold: u64 = (0..8u64)
        .flat_map(|n| (0..64u64).map(move |q| (n, q)))
        .filter(|(n, q)| !(*n == 0 && *q < 8))
        .map(|(n, q)| 10_000 + 1_000 * n + 10 * q)
        .sum();
    assert_eq!(rx_sum, 8 * 1_000_000 + cold);
    assert_eq!(queue(&x, "ens1f0np0", Dir::Rx, 3).packets, Some(1_000_000));
    assert_eq!(queue(&x, "ens3f1np1", Dir::Rx, 40).packets, Some(15_400));
    assert_eq!(queue(&x, "ens4f1np1", Dir::Tx, 63).packets, Some(8_815));

    // /proc/net/dev of the 8 interfaces.
    assert_eq!(x.ifaces.len(), 8);
    for (n, i) in x.ifaces.iter().enumerate() {
        assert_eq!(i.delta.rx_packets, h.nic_pps(n as u32, Dir::Rx));
        assert!(i.rx_bps.0 > 0.0);
    }

    device_wide(&h, &x, 1);

    // Facts: the first Sample of a point carries them.
    let f = x.facts.as_deref().expect("facts in the first Sample");
    assert_eq!(f.cpus, 256);
    assert_eq!(f.numa.len(), 2);
    assert_eq!(f.cpu_places.len(), 256);
    let p200 = f.cpu_places.iter().find(|p| p.cpu.0 == 200).unwrap();
    assert_eq!(p200.numa_node, Some(1));
    assert_eq!(p200.smt_siblings, vec![wirescope::units::CpuId(72)]);
    assert_eq!(f.nics.len(), 8);
    for (n, nic) in f.nics.iter().enumerate() {
        assert_eq!(nic.rx_queues, Some(64));
        assert_eq!(
            nic.irqs.len(),
            65,
            "{}: async + 64 completion vectors",
            nic.name
        );
        let n = n as u32;
        for q in [0, 17, 63] {
            let irq = nic
                .irqs
                .iter()
                .find(|i| i.irq == h.queue_irq(n, q))
                .unwrap();
            assert_eq!(irq.name, format!("mlx5_comp{q}@pci:{}", h.nic_bus(n)));
            assert_eq!(irq.affinity, h.queue_cpu(n, q).to_string());
        }
    }

    // Two seconds later: twice the packets (the rates are per second).
    h.advance(2).unwrap();
    let y = s.sample();
    assert_eq!(queue(&y, "ens1f0np0", Dir::Rx, 3).packets, Some(2_000_000));
    assert_eq!(
        y.softirqs.iter().find(|s| s.cpu.0 == 5).unwrap().net_rx,
        80_000
    );
    assert!(y.facts.is_none(), "facts unchanged: not repeated");
    device_wide(&h, &y, 2);
}

/// The device-wide ethtool -S counters that moved over `secs` seconds of
/// the generator's rates, by name: none that stood still, no queue's.
fn device_wide(h: &SyntheticHost, x: &Sample, secs: u64) {
    for (n, name) in h.nic_names().iter().enumerate() {
        let moved = |c: &str| {
            x.nic_counters
                .iter()
                .find(|k| k.iface == *name && k.name == c)
                .map(|k| k.delta)
        };
        assert_eq!(
            moved("rx_packets"),
            Some(secs * h.nic_pps(n as u32, Dir::Rx))
        );
        assert_eq!(
            moved("tx_bytes_phy"),
            Some(secs * h.nic_bytes_per_s(n as u32, Dir::Tx))
        );
        assert_eq!(moved("rx_vport_multicast_packets"), None, "it stands still");
    }
    assert!(x
        .nic_counters
        .iter()
        .all(|k| !k.name.starts_with("rx3_") && !k.name.starts_with("tx3_")));
}

/// Five 1-second intervals of the synthetic host, as a session hands them
/// to the rules: the session's interval clock (1 s each: the synthetic
/// clock, not the few milliseconds the test took) and the engine's figure
/// (the traffic of the first NIC; engines are not part of a host tree).
fn five_intervals(h: &mut SyntheticHost) -> Vec<Sample> {
    let mut s = sampler(h);
    (0..5)
        .map(|i| {
            h.advance(1).unwrap();
            let mut x = s.sample();
            x.start_s = i as f64;
            x.end_s = i as f64 + 1.0;
            x.engine.rx_bytes = h.nic_bytes_per_s(0, Dir::Rx);
            x.engine.rx_bps = BitsPerSec::from_bytes(x.engine.rx_bytes, 1.0);
            x
        })
        .collect()
}

/// The cores a finding names: its subject and every `cpuLIST` word of its
/// title (`cpu7`, `cpu0-7`).
fn cores_named(f: &Finding) -> Vec<u32> {
    let list = |w: &str| -> Vec<u32> {
        w.strip_prefix("cpu")
            .and_then(|l| parse_cpu_list(l).ok())
            .map(|v| v.into_iter().map(|c| c.0).collect())
            .unwrap_or_default()
    };
    let mut v = list(&f.subject);
    for w in f.title.split_whitespace() {
        v.extend(list(w.trim_end_matches([',', ':', ';', '.', ')'])));
    }
    v.sort_unstable();
    v.dedup();
    v
}

fn evidence<'a>(f: &'a Finding, what: &str) -> &'a Evidence {
    f.evidence
        .iter()
        .find(|e| e.what == what)
        .unwrap_or_else(|| panic!("no evidence {what:?} in {:#?}", f.evidence))
}

#[test]
fn the_rules_name_the_softirq_saturated_cores_and_no_other() {
    let mut h = host();
    let samples = five_intervals(&mut h);
    let input = Input {
        local: Window::from_samples(&samples),
        ..Default::default()
    };
    let findings = diagnose(&input);
    for f in &findings {
        eprintln!("{} [{}] {:?}: {}", f.id, f.subject, f.severity, f.title);
    }
    let named: Vec<u32> = findings.iter().flat_map(cores_named).collect();
    assert!(
        named.iter().all(|c| h.is_hot(*c)),
        "only saturated cores are named: {named:?}"
    );
    let hot: Vec<u32> = (0..256).filter(|c| h.is_hot(*c)).collect();
    assert_eq!(hot.len(), 8);
    let of = |id: &str| -> Vec<&Finding> { findings.iter().filter(|f| f.id == id).collect() };
    // One finding names all 8 saturated cores, what they carry, and each
    // core's evidence: its softirq time and the completion vectors of the
    // four node-0 NICs pinned to it.
    let single = of("cpu.single-core-saturated");
    assert_eq!(single.len(), 1, "{single:#?}");
    let single = single[0];
    assert_eq!(cores_named(single), hot, "{}", single.title);
    assert_eq!(single.subject, "cpu0-7");
    assert!(
        single
            .title
            .starts_with("8 of 256 cores saturated (softirq 100 %)"),
        "{}",
        single.title
    );
    assert!(
        single.title.contains("ens1f0np0 rx queues 0-7 (8.00 Mpps)"),
        "{}",
        single.title
    );
    for cpu in &hot {
        let busy = evidence(single, &format!("cpu{cpu} busy"));
        assert_eq!(busy.value, Value::Num(100.0));
        let Value::Text(irqs) =
            &evidence(single, &format!("IRQs with effective affinity cpu{cpu}")).value
        else {
            panic!("IRQ list is text");
        };
        for n in 0..4 {
            let irq = h.queue_irq(n, *cpu).to_string();
            assert!(irqs.split(',').any(|i| i == irq), "IRQ {irq} in {irqs}");
        }
    }
    assert!(
        single
            .fix
            .iter()
            .any(|x| x.contains("/sys/class/net/ens1f0np0/queues/rx-0/rps_cpus")),
        "{:#?}",
        single.fix
    );
    // The receive softirqs held on those 8 of 256 cores.
    let conc = of("softirq.concentrated");
    assert_eq!(conc.len(), 1, "{conc:#?}");
    assert_eq!(conc[0].subject, "cpu0-7");
    assert_eq!(conc[0].severity, Severity::Warn);
    assert!(
        conc[0].title.contains("8 of 256 cores"),
        "{}",
        conc[0].title
    );
    // One firmware finding for the 8 NICs of one driver and firmware.
    let fw = of("firmware.outdated");
    assert_eq!(fw.len(), 1, "{fw:#?}");
    assert!(fw[0].title.starts_with("8 NICs ("), "{}", fw[0].title);
    for nic in h.nic_names() {
        assert!(fw[0].title.contains(&nic), "{nic} in {}", fw[0].title);
    }
    assert!(fw[0].title.contains("mlx5_core"), "{}", fw[0].title);
    // softnet: 8 cores × 20 squeezes per second.
    let sq = findings.iter().find(|f| f.id == "softnet.squeeze").unwrap();
    assert!(sq.title.contains("160/s"), "{}", sq.title);
}

#[test]
fn a_live_diagnosis_derives_from_the_facts_again_when_they_change() {
    let mut h = host();
    let samples = five_intervals(&mut h);
    let a = samples
        .iter()
        .find_map(|s| s.facts.clone())
        .expect("the first Sample carries the facts");
    // The same host with an outdated inbox driver on every NIC.
    let mut b = (*a).clone();
    for nic in &mut b.nics {
        let Support::Value(d) = &mut nic.drvinfo else {
            panic!("{}: no ethtool -i", nic.name);
        };
        d.version = "5.0-0".into();
    }
    fn with<'a>(samples: &'a [Sample], f: &'a HostFacts) -> Input<'a> {
        Input {
            local: Window {
                samples,
                facts: Some(f),
            },
            ..Default::default()
        }
    }
    let input = |f| with(&samples, f);
    let outdated = |v: &[Finding]| v.iter().any(|f| f.id == "driver.mlx5-outdated");
    assert!(!outdated(&diagnose(&input(&a))));
    assert!(outdated(&diagnose(&input(&b))));

    let mut cache = FactsCache::default();
    assert_eq!(diagnose_cached(&input(&a), &cache), diagnose(&input(&a)));
    // Until told, the cache keeps what it derived from the facts it saw.
    assert!(!outdated(&diagnose_cached(&input(&b), &cache)));
    cache.forget(HostRole::Local);
    assert_eq!(diagnose_cached(&input(&b), &cache), diagnose(&input(&b)));

    // A live diagnosis forgets by itself when a Sample brings new facts.
    let mut live = LiveDiagnosis::default();
    for s in &samples {
        live.push(Some(s), None, None);
    }
    assert!(!live.active().is_empty());
    assert!(!outdated(&live.active()));
    let mut next = samples[4].clone();
    next.facts = Some(Box::new(b));
    for _ in 0..3 {
        live.push(Some(&next), None, None);
        next.facts = None;
    }
    assert!(outdated(&live.active()), "{:#?}", live.active());
}

/// `n` 1-second intervals of the big host as both hosts of a pair (40
/// sampled, then repeated with their own numbers and times).
fn pair_intervals(h: &mut SyntheticHost, n: usize) -> Vec<(Sample, Sample)> {
    let mut s = sampler(h);
    let sampled: Vec<Sample> = (0..40)
        .map(|_| {
            h.advance(1).unwrap();
            s.sample()
        })
        .collect();
    (0..n)
        .map(|i| {
            let mut l = sampled[i % sampled.len()].clone();
            l.index = i as u32;
            l.start_s = i as f64;
            l.end_s = i as f64 + 1.0;
            if i > 0 {
                l.facts = None;
            }
            let mut p = l.clone();
            p.host = HostRole::Peer;
            (l, p)
        })
        .collect()
}

#[test]
fn a_big_hosts_log_sums_its_rows_every_few_intervals_and_a_day_stays_under_a_gigabyte() {
    use wirescope::probe::sample::Detail;
    use wirescope::record::log::{read_log, LogWriter};
    use wirescope::record::schema::{Event, Record};
    let mut h = host();
    let n = 200;
    let live = pair_intervals(&mut h, n);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl");
    let event = |t: f64, kind: &str| {
        Record::Event(Event {
            t,
            kind: kind.into(),
            message: String::new(),
        })
    };
    let mut w = LogWriter::create(&path).unwrap();
    w.write(&event(0.0, "point_start")).unwrap();
    for (l, p) in &live {
        w.write(&Record::Sample(Box::new(l.clone()))).unwrap();
        w.write(&Record::Sample(Box::new(p.clone()))).unwrap();
    }
    w.write(&event(n as f64, "interrupted")).unwrap();
    w.finish().unwrap();
    drop(w);

    // Within a gigabyte a day before compression, both hosts at 1 s.
    let bytes = std::fs::metadata(&path).unwrap().len() as f64;
    eprintln!(
        "big host log: {:.0} bytes per interval, {:.2} GB a day",
        bytes / n as f64,
        bytes / n as f64 * 86_400.0 / 1e9
    );
    assert!(
        bytes / n as f64 * 86_400.0 <= 1e9,
        "{:.0} bytes per interval: {:.2} GB a day",
        bytes / n as f64,
        bytes / n as f64 * 86_400.0 / 1e9
    );

    // On disk: the first interval with its own rows, then lines without
    // rows and a detail line summing them every few intervals, the last
    // closed by the point's end.
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &serde_json::Value| v["type"] == "sample" && v["host"] == "local")
        .collect();
    assert_eq!(lines.len(), n);
    assert!(lines[0].get("detail").is_none());
    assert!(lines[0].get("queue_blocks").is_some());
    let spans: Vec<usize> = (0..n)
        .filter(|i| lines[*i]["detail"].get("span").is_some())
        .collect();
    assert!(spans.len() >= 2, "detail lines at {spans:?}");
    assert_eq!(
        spans.last(),
        Some(&(n - 1)),
        "the point's end closes its span"
    );
    assert!(spans[0] > 1, "detail lines at {spans:?}");
    for (i, v) in lines.iter().enumerate().skip(1) {
        if spans.contains(&i) {
            assert!(v.get("queue_blocks").is_some() && v.get("cpu_cols").is_some());
        } else {
            assert_eq!(v["detail"], "later", "line {i}");
            for k in [
                "queue_blocks",
                "cpu_cols",
                "softirq_cols",
                "softnet_cols",
                "cpus",
                "queues",
            ] {
                let empty = v
                    .get(k)
                    .is_none_or(|x| x.as_array().is_some_and(Vec::is_empty));
                assert!(empty, "line {i} has {k}");
            }
            // Its own figures are there: the interfaces' traffic.
            assert!(!v["ifaces"].as_array().unwrap().is_empty());
        }
    }

    // Read back: the detail lines' counts are the sums of their intervals'
    // (exact), their CPU times the means; the lines between have no rows,
    // so sums over the Samples stay exact.
    let records = read_log(&path).unwrap();
    let read: Vec<Sample> = records
        .iter()
        .filter_map(|r| match r {
            Record::Sample(s) if s.host == HostRole::Local => Some((**s).clone()),
            _ => None,
        })
        .collect();
    assert_eq!(read.len(), n);
    assert_eq!(read[0].detail, Detail::Own);
    assert_eq!(read[0].queues, live[0].0.queues);
    let mut prev = 0;
    for (i, s) in read.iter().enumerate().skip(1) {
        if !spans.contains(&i) {
            assert_eq!(s.detail, Detail::Later, "interval {i}");
            assert!(s.cpus.is_empty() && s.queues.is_empty(), "interval {i}");
            continue;
        }
        assert_eq!(s.cpus.len(), 256, "interval {i}");
        assert_eq!(s.queues.len(), 1024, "interval {i}");
        let Detail::Span { start_s, end_s } = s.detail else {
            panic!("interval {i}: {:?}", s.detail);
        };
        assert_eq!(end_s, s.end_s);
        let summed = &live[start_s as usize..end_s as usize];
        assert_eq!(
            summed.len(),
            i - prev,
            "interval {i} sums those since the last"
        );
        prev = i;
        let mut want: std::collections::HashMap<_, u64> = Default::default();
        for x in summed.iter().flat_map(|(l, _)| &l.queues) {
            let key = format!("{} {:?} {} {:?}", x.iface, x.dir, x.queue, x.source);
            *want.entry(key).or_default() += x.packets.unwrap_or(0);
        }
        for q in &s.queues {
            let key = format!("{} {:?} {} {:?}", q.iface, q.dir, q.queue, q.source);
            let w = want.get(&key).copied();
            assert_eq!(q.packets, w, "{} {:?} {}", q.iface, q.dir, q.queue);
        }
        let rx: u64 = summed
            .iter()
            .flat_map(|(l, _)| &l.softirqs)
            .map(|c| c.net_rx)
            .sum();
        assert_eq!(s.softirqs.iter().map(|c| c.net_rx).sum::<u64>(), rx);
        for c in &s.cpus {
            let mean = summed
                .iter()
                .filter_map(|(l, _)| l.cpus.iter().find(|x| x.cpu == c.cpu))
                .map(|x| x.busy().0)
                .sum::<f64>()
                / summed.len() as f64;
            // The log keeps CPU times to 0.1 %.
            assert!(
                (c.busy().0 - mean).abs() < 0.2,
                "cpu{}: {} vs {mean}",
                c.cpu.0,
                c.busy().0
            );
        }
    }

    // A replay shows every interval with rows: the lines between show their
    // host's latest detail line, with its span.
    let mut last_span = Detail::Span {
        start_s: 0.0,
        end_s: 1.0,
    };
    let shown: Vec<Sample> = wirescope::record::replay::outputs(records)
        .into_iter()
        .filter_map(|o| match o {
            wirescope::record::pipeline::Output::Interval { local, .. } => local.map(|s| *s),
            _ => None,
        })
        .collect();
    assert_eq!(shown.len(), n);
    for (i, s) in shown.iter().enumerate().skip(1) {
        assert_eq!(s.cpus.len(), 256, "interval {i}");
        assert_eq!(s.queues.len(), 1024, "interval {i}");
        if spans.contains(&i) {
            last_span = s.detail;
        } else {
            assert_eq!(s.detail, last_span, "interval {i} shows the latest detail");
        }
    }
}

/// The first NIC's 64 queue IRQs moved onto 4 cores of the other node: one
/// finding that says so in those words, with its evidence and fixes a
/// screen long (IRQs grouped by CPU list, one command for the 64 moves).
#[test]
fn a_nics_irqs_on_four_cores_of_the_other_node_are_one_finding_in_those_words() {
    let mut h = host();
    assert_eq!(h.nic_node(0), 0);
    let remote: Vec<u32> = h.node_cpus(1).iter().take(4).map(|c| c.0).collect();
    for q in 0..64 {
        let irq = h.queue_irq(0, q);
        for f in ["effective_affinity_list", "smp_affinity_list"] {
            let path = h.root().join(format!("proc/irq/{irq}/{f}"));
            std::fs::write(path, format!("{}\n", remote[q as usize % 4])).unwrap();
        }
    }
    let samples = five_intervals(&mut h);
    let input = Input {
        local: Window::from_samples(&samples),
        ..Default::default()
    };
    let findings = diagnose(&input);
    let moved: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.id == "irq.remote-numa")
        .collect();
    assert_eq!(moved.len(), 1, "{moved:#?}");
    let f = moved[0];
    assert_eq!(f.subject, "ens1f0np0");
    assert_eq!(
        f.title,
        "ens1f0np0: 64 IRQs on 4 cores of node 1 (cpu64-67), outside its NUMA node 0"
    );
    // One evidence line per CPU (16 IRQs each) besides the local CPUs.
    assert_eq!(f.evidence.len(), 5, "{:#?}", f.evidence);
    let on_64: Vec<u32> = (0..64)
        .filter(|q| q % 4 == 0)
        .map(|q| h.queue_irq(0, q))
        .collect();
    let list = on_64
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(
        evidence(f, &format!("IRQs {list} effective affinity")).value,
        Value::Text("64".into())
    );
    // One command moves the 64 back, each onto a core of the NIC's node.
    assert_eq!(f.fix.len(), 1, "{:?}", f.fix);
    let pairs: Vec<(u32, u32)> = f.fix[0]
        .strip_prefix("for p in ")
        .and_then(|x| x.split_once(';'))
        .map(|(p, _)| p)
        .unwrap()
        .split(' ')
        .map(|p| {
            let (i, c) = p.split_once(':').unwrap();
            (i.parse().unwrap(), c.parse().unwrap())
        })
        .collect();
    let irqs: Vec<u32> = pairs.iter().map(|p| p.0).collect();
    assert_eq!(irqs, (0..64).map(|q| h.queue_irq(0, q)).collect::<Vec<_>>());
    assert!(pairs.iter().all(|(_, c)| h.cpu_node(*c) == 0), "{pairs:?}");
}
