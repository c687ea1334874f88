//! The sampler on recorded inputs: two real /proc snapshots, /proc/net/dev
//! with known deltas, qstats and eBPF counts from fakes of their kernel
//! boundaries, and a real engine counter behind a loopback socket.

use super::*;
use crate::probe::ebpf::{EbpfCounters, EbpfIface, EbpfMode, EbpfReadError, EbpfStatus};
use crate::probe::ethtool_names::Dir;
use crate::probe::facts::Support;
use crate::probe::netlink::{NlError, QueueStat, QueueType};
use crate::probe::sample::{QueueCpu, QueueSource};
use crate::probe::source::{EthtoolView, HostSource};
use crate::traffic::{ConnRole, EngineControl, EngineCounters, RunningEngine};
use crate::units::CpuId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A host recorded at several moments: every read returns the file as it
/// was at the current moment (`Moment`, advanced by the test); a file with
/// fewer recordings keeps its last one.
#[derive(Default)]
struct Scripted {
    files: HashMap<String, Vec<String>>,
    moment: Moment,
}

#[derive(Default, Clone)]
struct Moment(Arc<AtomicUsize>);

impl Moment {
    fn advance(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Scripted {
    fn with(mut self, path: &str, texts: &[&str]) -> Self {
        self.files
            .insert(path.into(), texts.iter().map(|t| t.to_string()).collect());
        self
    }
}

impl HostSource for Scripted {
    fn read(&self, path: &str) -> std::io::Result<String> {
        let v = self
            .files
            .get(path)
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))?;
        let i = self.moment.0.load(Ordering::SeqCst).min(v.len() - 1);
        Ok(v[i].clone())
    }
    fn list(&self, path: &str) -> std::io::Result<Vec<String>> {
        if path == "/sys/class/net/veth-x/queues" {
            return Ok(vec![
                "rx-0".into(),
                "rx-1".into(),
                "tx-0".into(),
                "tx-1".into(),
            ]);
        }
        Err(std::io::ErrorKind::NotFound.into())
    }
    fn link_name(&self, _: &str) -> std::io::Result<String> {
        Err(std::io::ErrorKind::NotFound.into())
    }
    fn ethtool(&self, _: &str) -> EthtoolView {
        EthtoolView::default()
    }
    fn ethtool_stats(&self, _: &str) -> Support<crate::probe::nic::NicStats> {
        Support::Unknown
    }
    fn qdisc(&self, _: &str) -> Option<String> {
        None
    }
    fn processes(&self) -> Option<Vec<String>> {
        None
    }
    fn describe(&self) -> String {
        "scripted host".into()
    }
    /// It stands for a running host, so the eBPF loader is asked.
    fn is_live(&self) -> bool {
        true
    }
}

/// qstats that grow by 100 packets per read on rx queue 1.
struct Qstats(u64);

impl QstatsSource for Qstats {
    fn qstats(&mut self, ifindex: u32) -> Result<Vec<QueueStat>, NlError> {
        self.0 += 100;
        Ok(vec![QueueStat {
            ifindex,
            queue_type: QueueType::Rx,
            queue_id: 1,
            packets: Some(self.0),
            bytes: Some(self.0 * 1500),
            drops: Some(0),
            alloc_fail: None,
            stop: None,
            wake: None,
            other: Default::default(),
        }])
    }
}

/// eBPF maps: each read, cpu 1 handled 7 packets of veth-x rx queue 0.
struct Maps(Vec<EbpfIface>);

impl EbpfSource for Maps {
    fn status(&self) -> EbpfStatus {
        EbpfStatus::off(EbpfMode::Default, "scripted")
    }
    fn ifaces(&self) -> &[EbpfIface] {
        &self.0
    }
    fn probes(&self) -> Vec<String> {
        vec!["netif_receive_skb".into()]
    }
    fn read(&mut self) -> Result<EbpfCounters, EbpfReadError> {
        Ok(EbpfCounters {
            softirq: Vec::new(),
            queue_cpus: vec![QueueCpu {
                iface: "veth-x".into(),
                dir: Dir::Rx,
                queue: Some(0),
                cpu: CpuId(1),
                packets: 7,
                bytes: 7000,
            }],
            napi: Vec::new(),
            observed: None,
        })
    }
}

fn net_dev(rx_bytes: u64, rx_packets: u64) -> String {
    format!(
        "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\nveth-x: {rx_bytes} {rx_packets} 0 0 0 0 0 0 500 5 0 0 0 0 0 0\n"
    )
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/proc")
            .join(name),
    )
    .unwrap()
}

#[test]
fn two_recorded_snapshots_become_one_interval_of_deltas_and_rates() {
    let (a, b) = (fixture("stat-a"), fixture("stat-b"));
    let src = Scripted::default()
        .with("/proc/stat", &[&a, &b])
        .with(
            "/proc/net/dev",
            &[&net_dev(0, 0), &net_dev(3_000_000, 2_000)],
        )
        .with("/sys/class/net/veth-x/ifindex", &["7\n"]);
    let moment = src.moment.clone();
    let loader: EbpfLoader = Box::new(|_, ifaces: &[EbpfIface]| {
        Ok(Box::new(Maps(ifaces.to_vec())) as Box<dyn EbpfSource>)
    });
    let mut s = Sampler::with(Box::new(src), Some(Box::new(Qstats(0))), loader);
    s.set_ebpf(EbpfMode::Default, Vec::new());
    s.set_ifaces(&["veth-x".to_string()]);
    // A real socket behind a real engine counter.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let counters = Arc::new(EngineCounters::new(1, 0));
    let engine = RunningEngine {
        threads: Vec::new(),
        counters: Arc::clone(&counters),
        sockets: vec![c],
        control: EngineControl::default(),
        roles: vec![ConnRole::Sender],
        probe: None,
    };
    s.begin(
        EngineView::of(&engine),
        Duration::ZERO,
        Duration::from_secs(1),
    );
    counters.conns[0]
        .tx_bytes
        .store(125_000_000, Ordering::Relaxed);
    moment.advance();
    let x = s.sample();

    // The engine: bytes over the span between the two counter reads.
    assert_eq!(x.index, 0);
    assert_eq!(x.engine.tx_bytes, 125_000_000);
    let span = x.end_s - x.start_s;
    assert!(span > 0.0 && x.start_s == 0.0, "{x:?}");
    let want = 125_000_000.0 * 8.0 / span;
    assert!((x.engine.tx_bps.0 - want).abs() / want < 1e-9);
    // This process's CPU over the interval, % of one core (a test process
    // of several threads may use more than one).
    let cpu = x.engine.process_cpu_pct.expect("the engine's process CPU");
    assert!(cpu >= 0.0, "{cpu}");
    assert_eq!(x.conns.len(), 1);
    assert!(x.conns[0].tcp.is_some(), "TCP_INFO of the engine's socket");

    // CPUs: stat-b minus stat-a, by CPU number (cpu0 idled 100 ticks).
    let cpu0 = x.cpus.iter().find(|c| c.cpu == CpuId(0)).unwrap();
    assert!((cpu0.idle.0 - 100.0).abs() < 1e-9, "{cpu0:?}");
    let cpu1 = x.cpus.iter().find(|c| c.cpu == CpuId(1)).unwrap();
    // cpu1: user +46, system +53 ticks, nothing else: 99 ticks in all.
    assert!((cpu1.user.0 - 46.0 / 99.0 * 100.0).abs() < 1e-9, "{cpu1:?}");
    assert!(
        (cpu1.system.0 - 53.0 / 99.0 * 100.0).abs() < 1e-9,
        "{cpu1:?}"
    );

    // The interface: known deltas.
    let i = &x.ifaces[0];
    assert_eq!(
        (i.name.as_str(), i.delta.rx_bytes, i.delta.rx_packets),
        ("veth-x", 3_000_000, 2_000)
    );

    // Queues: qstats (100 packets since the last read) and eBPF rows, each named by source.
    let q = x
        .queues
        .iter()
        .find(|q| q.source == QueueSource::Qstats)
        .unwrap();
    assert_eq!((q.queue, q.packets), (1, Some(100)));
    let e = x
        .queues
        .iter()
        .find(|q| q.source == QueueSource::Ebpf && q.dir == Dir::Rx && q.queue == 0)
        .unwrap();
    assert_eq!(e.packets, Some(7));
    assert_eq!(x.queue_cpus.len(), 1);
    assert_eq!(x.probes, vec!["netif_receive_skb".to_string()]);

    // The observer's own cost is measured, and the next Sample starts where this one ended.
    let y = s.sample();
    assert_eq!(y.index, 1);
    assert!((y.start_s - x.end_s).abs() < 1e-12);
    assert_eq!(y.engine.tx_bytes, 0);
    let _ = x.sampler_cpu_us;
}

#[test]
fn the_sampler_thread_answers_in_order_and_joins_on_drop() {
    let src = Scripted::default().with("/proc/stat", &[&fixture("stat-a"), &fixture("stat-b")]);
    let t = thread::SamplerThread::spawn("ws-test-sampler", move || {
        Sampler::with(
            Box::new(src),
            None,
            Box::new(|_, _: &[EbpfIface]| {
                Err(crate::probe::ebpf::EbpfUnavailable::Disabled("test".into()))
            }),
        )
    })
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        t.begin(None, Duration::ZERO, Duration::from_secs(1))
            .await
            .unwrap();
        let a = t.request().unwrap();
        let b = t.request().unwrap();
        let (a, b) = (a.await.unwrap(), b.await.unwrap());
        assert_eq!((a.index, b.index), (0, 1));
        assert!(b.start_s >= a.end_s);
        assert_eq!(t.end().await.unwrap(), None);
    });
    drop(t);
}

#[test]
fn a_net_dev_that_does_not_parse_is_a_probe_error_and_the_rest_is_sampled() {
    let (a, b) = (fixture("stat-a"), fixture("stat-b"));
    let bad = "Inter-|\n face |\nveth-x: 12 x 0 0 0 0 0 0 500 5 0 0 0 0 0 0\n";
    let src = Scripted::default()
        .with("/proc/stat", &[&a, &b])
        .with("/proc/net/dev", &[&net_dev(0, 0), bad])
        .with("/sys/class/net/veth-x/ifindex", &["7\n"]);
    let moment = src.moment.clone();
    let loader: EbpfLoader = Box::new(|_, _: &[EbpfIface]| {
        Err(crate::probe::ebpf::EbpfUnavailable::Disabled("test".into()))
    });
    let mut s = Sampler::with(Box::new(src), None, loader);
    s.set_ifaces(&["veth-x".to_string()]);
    moment.advance();
    let x = s.sample();
    assert!(x.ifaces.is_empty(), "{:?}", x.ifaces);
    assert!(
        x.probe_errors
            .iter()
            .any(|e| e.starts_with("nic: /proc/net/dev is not in the kernel's format")),
        "{:?}",
        x.probe_errors
    );
    assert_eq!(x.cpus.len(), 2, "/proc/stat is still read");
}

#[test]
fn the_facts_are_re_read_less_often_where_reading_them_costs_more() {
    assert_eq!(facts_stride(0), FACTS_EVERY);
    assert_eq!(
        facts_stride(FACTS_BUDGET_US * u64::from(FACTS_EVERY)),
        FACTS_EVERY
    );
    // The synthetic big host's 22 ms: every 44 intervals or more.
    assert_eq!(facts_stride(22_000), 44);
    assert_eq!(facts_stride(u64::MAX), FACTS_MAX_EVERY);
}

#[test]
fn device_wide_counters_grow_by_index_or_by_name_and_a_repeated_name_by_its_listing() {
    use crate::probe::ethtool_names::Class;
    use crate::probe::nic::NicStats;
    let run = |prev: &NicStats, cur: &NicStats| -> Vec<(String, u64)> {
        let mut out = Vec::new();
        global_deltas("eth0", prev, cur, &vec![Class::Global; cur.len()], &mut out);
        assert!(out.iter().all(|c| c.iface == "eth0"));
        out.into_iter().map(|c| (c.name, c.delta)).collect()
    };
    let prev = NicStats::from(vec![
        ("a".to_string(), 1),
        ("dup".to_string(), 10),
        ("dup".to_string(), 100),
    ]);
    // The same names (shared): by index; a counter that stood still is left out.
    let cur = NicStats {
        names: prev.names.clone(),
        values: vec![2, 10, 105],
    };
    assert_eq!(run(&prev, &cur), [("a".into(), 1), ("dup".into(), 5)]);
    // Other names (one more in front): by name, each listing of a repeated
    // name against the same listing before; a new name has nothing to grow from.
    let cur = NicStats::from(vec![
        ("new".to_string(), 7),
        ("a".to_string(), 3),
        ("dup".to_string(), 12),
        ("dup".to_string(), 100),
    ]);
    assert_eq!(run(&prev, &cur), [("a".into(), 2), ("dup".into(), 2)]);
}
