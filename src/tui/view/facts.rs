//! Host facts of both hosts side by side; rows that differ are marked `≠`
//! and highlighted. Interfaces are compared in the order each host lists
//! them (the interface under test first). When one row per NIC and fact
//! does not fit (8 NICs of one kind), [`super::facts_group`] shows each
//! fact once per host with the NICs that share its value.

use super::super::model::Model;
use super::{alert_if, host_name, style, title};
use crate::probe::facts::{HostFacts, NicFacts, Support};
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier};
use ratatui::text::Span;
use ratatui::widgets::{Block, Borders, Cell, Row, Table};
use ratatui::Frame;
use std::collections::BTreeSet;

/// Draw the facts table.
pub fn render(frame: &mut Frame, area: Rect, m: &Model) {
    let block = Block::default().borders(Borders::ALL).title(Span::styled(
        " Host facts (≠ differs between hosts) ",
        title(m),
    ));
    let (l, p) = (m.facts.local.as_ref(), m.facts.peer.as_ref());
    let mut rows = fact_rows(l, p);
    // Header row and borders.
    let room = usize::from(area.height.saturating_sub(3));
    let many = |h: Option<&HostFacts>| h.is_some_and(|h| h.nics.len() > 1);
    if rows.len() > room && (many(l) || many(p)) {
        rows = super::facts_group::fact_rows(l, p);
    }
    if let Some(e) = &m.ebpf {
        let line = |s: &Option<_>| {
            s.as_ref()
                .map(|s: &crate::probe::ebpf::EbpfStatus| s.line())
                .unwrap_or_else(|| "-".into())
        };
        rows.insert(
            0,
            ("eBPF probes".to_string(), line(&e.local), line(&e.peer)),
        );
    }
    if let Some(row) = placed_cores(m) {
        rows.insert(0, row);
    }
    render_table(frame, area, m, block, rows);
}

/// A test pinned to cores (a packet test's sink cores): where those cores
/// sit on their host, as its engine names them.
fn placed_cores(m: &Model) -> Option<(String, String, String)> {
    let live = m.current().map_or([None, None], |i| {
        [i.local.as_ref(), i.peer.as_ref()].map(|s| s.and_then(|s| s.engine.extra.as_ref()))
    });
    let placed = m.spec.as_ref()?.placed_cores(live)?;
    let on_local = placed.side == crate::traffic::Side::Controller;
    let host = if on_local {
        m.facts.local.as_ref()
    } else {
        m.facts.peer.as_ref()
    }?;
    // The engine's own interface (its Samples name it), else the first watched.
    let nic = placed
        .iface
        .as_deref()
        .or_else(|| host.nics.first().map(|n| n.name.as_str()));
    let line = crate::probe::topology::CoreTopology::from_facts(host, &placed.cpus, nic).describe();
    let (l, p) = if on_local {
        (line, "-".to_string())
    } else {
        ("-".to_string(), line)
    };
    Some((placed.label.to_string(), l, p))
}

/// The rows as a table (scrolled), a fact that differs between the hosts marked.
fn render_table(
    frame: &mut Frame,
    area: Rect,
    m: &Model,
    block: Block,
    rows: Vec<(String, String, String)>,
) {
    let inner_h = usize::from(block.inner(area).height.saturating_sub(1));
    let skip = usize::from(m.scroll).min(rows.len().saturating_sub(inner_h));
    let longest_key = rows
        .iter()
        .map(|(k, ..)| k.chars().count())
        .max()
        .unwrap_or(4)
        .min(usize::from(u16::MAX)) as u16;
    let table_rows: Vec<Row> = rows
        .into_iter()
        .skip(skip)
        .map(|(k, l, p)| {
            // Interface names differ by design (veth-a / veth-b); the rest should not.
            let differs = l != p && !k.ends_with("interface");
            let st = alert_if(m, differs);
            Row::new(vec![
                Cell::from(format!("{}{k}", if differs { "≠ " } else { "  " })).style(st),
                Cell::from(l),
                Cell::from(p).style(st),
            ])
        })
        .collect();
    let w = area.width.saturating_sub(2);
    // The longest name in full (sysctl names run to 30+ characters), unless
    // that would leave the values less than half the width.
    let key_w = (longest_key + 2).min(w / 2);
    let val_w = (w.saturating_sub(key_w + 2)) / 2;
    let header = Row::new(vec![
        Cell::from("fact"),
        Cell::from(format!("local {}", host_name(m, true))),
        Cell::from(format!("peer {}", host_name(m, false))),
    ])
    .style(style(m, Color::Gray).add_modifier(Modifier::BOLD));
    let table = Table::new(
        table_rows,
        [
            Constraint::Length(key_w),
            Constraint::Length(val_w),
            Constraint::Length(val_w),
        ],
    )
    .header(header)
    .block(block);
    frame.render_widget(table, area);
}

fn sup<T>(s: &Support<T>, f: impl Fn(&T) -> String) -> String {
    match s {
        Support::Value(v) => f(v),
        Support::NotSupported { driver } => format!("not supported ({driver})"),
        Support::Error(e) => format!("error: {e}"),
        Support::Unknown => "-".into(),
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

fn feature(n: &NicFacts, name: &str) -> String {
    sup(&n.features, |f| match f.on(name) {
        Some(true) => "on".into(),
        Some(false) => "off".into(),
        None => "-".into(),
    })
}

/// How a NIC fact is read for its row.
pub(super) type Getter = fn(&NicFacts) -> String;

/// The NIC facts, one row each (per NIC in the detailed table).
pub(super) const NIC_ROWS: &[(&str, Getter)] = &[
    ("interface", |n| n.name.clone()),
    ("driver", |n| sup(&n.drvinfo, |d| d.driver.clone())),
    ("driver version", |n| sup(&n.drvinfo, |d| d.version.clone())),
    ("firmware", |n| {
        sup(&n.drvinfo, |d| {
            if d.firmware.is_empty() {
                "none".into()
            } else {
                d.firmware.clone()
            }
        })
    }),
    ("bus", |n| {
        sup(&n.drvinfo, |d| {
            if d.bus_info.is_empty() {
                "virtual".into()
            } else {
                d.bus_info.clone()
            }
        })
    }),
    ("link speed", |n| {
        sup(&n.link, |l| {
            l.speed_mbps
                .map(|s| format!("{s} Mb/s"))
                .unwrap_or_else(|| "unknown".into())
        })
    }),
    ("MTU", |n| opt(n.mtu)),
    ("channels rx/tx/comb", |n| {
        sup(&n.channels, |c| {
            format!("{}/{}/{}", opt(c.rx), opt(c.tx), opt(c.combined))
        })
    }),
    ("rings rx/tx", |n| {
        sup(&n.rings, |r| format!("{}/{}", opt(r.rx), opt(r.tx)))
    }),
    ("GRO", |n| feature(n, "generic-receive-offload")),
    ("TSO", |n| feature(n, "tcp-segmentation-offload")),
    ("GSO", |n| feature(n, "generic-segmentation-offload")),
    ("LRO", |n| feature(n, "large-receive-offload")),
    ("adaptive rx coalesce", |n| {
        sup(&n.coalesce, |c| opt(c.adaptive_rx))
    }),
    ("NUMA node of NIC", |n| opt(n.numa_node)),
    ("qdisc", |n| opt(n.qdisc.as_ref())),
    ("IRQs", |n| n.irqs.len().to_string()),
    ("rx/tx queues", |n| {
        format!("{}/{}", opt(n.rx_queues), opt(n.tx_queues))
    }),
];

/// (fact, local, peer) rows.
pub fn fact_rows(l: Option<&HostFacts>, p: Option<&HostFacts>) -> Vec<(String, String, String)> {
    let mut rows = host_rows(l, p);
    let n = l
        .map(|h| h.nics.len())
        .unwrap_or(0)
        .max(p.map(|h| h.nics.len()).unwrap_or(0));
    for i in 0..n {
        for (k, get) in NIC_ROWS {
            let v = |h: Option<&HostFacts>| {
                h.and_then(|h| h.nics.get(i))
                    .map(get)
                    .unwrap_or_else(|| "-".into())
            };
            let key = if i == 0 {
                (*k).to_string()
            } else {
                format!("nic{i} {k}")
            };
            rows.push((key, v(l), v(p)));
        }
    }
    rows.extend(sysctl_rows(l, p));
    rows
}

/// The host-wide rows: kernel, CPU model, CPUs, NUMA nodes, irqbalance, governor.
pub(super) fn host_rows(
    l: Option<&HostFacts>,
    p: Option<&HostFacts>,
) -> Vec<(String, String, String)> {
    let mut rows = Vec::new();
    let both = |f: &dyn Fn(&HostFacts) -> String| {
        (
            l.map(f).unwrap_or_else(|| "-".into()),
            p.map(f).unwrap_or_else(|| "-".into()),
        )
    };
    let mut add = |k: &str, (a, b): (String, String)| rows.push((k.to_string(), a, b));
    add("kernel", both(&|h| h.kernel.clone()));
    add("CPU model", both(&|h| h.cpu_model.clone()));
    add("CPUs", both(&|h| h.cpus.to_string()));
    add("NUMA nodes", both(&|h| h.numa.len().to_string()));
    add("irqbalance", both(&|h| opt(h.irqbalance)));
    add(
        "governor",
        both(&|h| {
            if h.governors.is_empty() {
                "none (no cpufreq)".into()
            } else {
                h.governors.keys().cloned().collect::<Vec<_>>().join(",")
            }
        }),
    );
    rows
}

/// One row per sysctl either host has.
pub(super) fn sysctl_rows(
    l: Option<&HostFacts>,
    p: Option<&HostFacts>,
) -> Vec<(String, String, String)> {
    let mut rows = Vec::new();
    let keys: BTreeSet<&String> = l
        .iter()
        .chain(p.iter())
        .flat_map(|h| h.sysctls.keys())
        .collect();
    for k in keys {
        let v = |h: Option<&HostFacts>| {
            h.and_then(|h| h.sysctls.get(k))
                .cloned()
                .unwrap_or_else(|| "-".into())
        };
        rows.push((k.clone(), v(l), v(p)));
    }
    rows
}
