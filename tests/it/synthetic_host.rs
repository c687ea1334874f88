//! The synthetic big host (256 CPUs on 2 NUMA nodes, 8 mlx5 NICs × 64
//! queues, ~1,500 interrupt lines) read by the real sampler through
//! `CaptureDir`, exactly as `wirescope watch --from DIR` reads a capture:
//! the Samples carry the figures the generator wrote, and the diagnosis
//! rules on them name the softirq-saturated cores in one finding. No timing is asserted.

use std::time::Duration;
use wirescope::diagnose::{diagnose, Evidence, Finding, Input, Severity, Value, Window};
use wirescope::probe::ebpf::EbpfUnavailable;
use wirescope::probe::ethtool_names::Dir;
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
