//! `fleet --metrics`: the fleet's results as Prometheus gauges on the
//! [`MetricsHub`] of `record::metrics`. Label sets are bounded by the
//! fleet: one series per tested link, per outlier and per odd setting.
//!
//! * `wirescope_fleet_link_bytes_per_second{sender,receiver}` — each tested
//!   direction, updated as pairs finish;
//! * `wirescope_fleet_slow_link{sender,receiver} 1`,
//!   `wirescope_fleet_slow_node{host,direction} 1`,
//!   `wirescope_fleet_odd_setting{host,key,value} 1` — after the run;
//! * `wirescope_fleet_pairs{state="run"|"failed"}`,
//!   `wirescope_fleet_rounds{state="run"|"planned"}`.

use super::analyze::Matrix;
use super::log::FleetSummary;
use crate::record::metrics::{MetricsError, MetricsHub};

fn l(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The links measured so far.
pub fn publish_matrix(hub: &MetricsHub, m: &Matrix) -> Result<(), MetricsError> {
    let series = m
        .links()
        .map(|(i, j, v)| {
            (
                l(&[("sender", &m.hosts[i]), ("receiver", &m.hosts[j])]),
                v / 8.0,
            )
        })
        .collect();
    hub.set_gauges(
        "wirescope_fleet_link_bytes_per_second",
        "Throughput of each tested fleet link (bytes/s; Gb/s = 8e-9 x this).",
        series,
    )
}

/// The whole result of a run: the matrix, the outliers, the counts.
pub fn publish_summary(hub: &MetricsHub, s: &FleetSummary) -> Result<(), MetricsError> {
    publish_matrix(hub, &s.matrix)?;
    hub.set_gauges(
        "wirescope_fleet_slow_link",
        "A fleet link below half the median of both its hosts' other links (1).",
        s.slow_links
            .iter()
            .map(|x| {
                (
                    l(&[("sender", &x.what.from), ("receiver", &x.what.to)]),
                    1.0,
                )
            })
            .collect(),
    )?;
    hub.set_gauges(
        "wirescope_fleet_slow_node",
        "A fleet node most of whose links in one direction are below half the fleet median (1).",
        s.slow_nodes
            .iter()
            .map(|x| {
                (
                    l(&[("host", &x.what.host), ("direction", &x.what.direction)]),
                    1.0,
                )
            })
            .collect(),
    )?;
    hub.set_gauges(
        "wirescope_fleet_odd_setting",
        "A setting in which this host differs from the fleet's majority (1).",
        s.odd_facts
            .iter()
            .flat_map(|o| {
                o.odd
                    .iter()
                    .map(|(h, v)| (l(&[("host", h), ("key", &o.key), ("value", v)]), 1.0))
            })
            .collect(),
    )?;
    hub.set_gauges(
        "wirescope_fleet_pairs",
        "Pair tests of the last fleet run, by state.",
        vec![
            (l(&[("state", "run")]), s.pairs_run as f64),
            (l(&[("state", "failed")]), s.failed.len() as f64),
        ],
    )?;
    hub.set_gauges(
        "wirescope_fleet_rounds",
        "Rounds of the last fleet run, by state.",
        vec![
            (l(&[("state", "run")]), s.rounds_run as f64),
            (l(&[("state", "planned")]), s.rounds_planned as f64),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::metrics::Format;

    #[test]
    fn the_matrix_and_the_outliers_become_bounded_gauges() {
        let hub = MetricsHub::new("fleet");
        let mut m = Matrix::new(vec!["n1".into(), "n2".into(), "n3".into()]);
        m.set(0, 1, 9e9);
        m.set(1, 0, 1e9);
        publish_matrix(&hub, &m).unwrap();
        let text = hub.encode(Format::OpenMetrics).unwrap();
        assert!(
            text.contains(
                "wirescope_fleet_link_bytes_per_second{sender=\"n1\",receiver=\"n2\"} 1125000000"
            ),
            "{text}"
        );
        assert_eq!(
            text.matches("wirescope_fleet_link_bytes_per_second{")
                .count(),
            2,
            "{text}"
        );
        let s = FleetSummary {
            matrix: m,
            slow_nodes: Vec::new(),
            slow_links: vec![super::super::log::Explained {
                what: super::super::analyze::SlowLink {
                    from: "n2".into(),
                    to: "n1".into(),
                    bps: 1e9,
                    from_median_bps: 9e9,
                    to_median_bps: 9e9,
                },
                evidence: Vec::new(),
            }],
            odd_facts: vec![super::super::analyze::OddFact {
                key: "nic.mtu".into(),
                majority: "1500".into(),
                majority_hosts: 2,
                odd: vec![("n3".into(), "1400".into())],
            }],
            untested: Vec::new(),
            failed: Vec::new(),
            rounds_run: 3,
            rounds_planned: 3,
            pairs_run: 3,
            interrupted: false,
            wall_s: 1.0,
            test_s: 1.0,
        };
        publish_summary(&hub, &s).unwrap();
        let text = hub.encode(Format::OpenMetrics).unwrap();
        for want in [
            "wirescope_fleet_slow_link{sender=\"n2\",receiver=\"n1\"} 1",
            "wirescope_fleet_odd_setting{host=\"n3\",key=\"nic.mtu\",value=\"1400\"} 1",
            "wirescope_fleet_rounds{state=\"planned\"} 3",
        ] {
            assert!(text.contains(want), "{want} missing:\n{text}");
        }
    }
}
