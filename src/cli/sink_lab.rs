//! `wirescope sink-lab` (hidden): the argument types (the command is in `face::sink_lab`).

use crate::traffic::sink::{SinkMode, SinkSpec, TxPath};
use crate::units::{parse_cpu_list, parse_duration, CpuId};
use clap::Args;
use std::time::Duration;

/// `wirescope sink-lab`.
#[derive(Debug, Args)]
pub struct SinkLabArgs {
    /// Interface the sink counts on.
    #[arg(long, value_name = "IF")]
    pub sink_iface: String,
    /// Network namespace of the sink's interface (`ip netns` name).
    #[arg(long, value_name = "NS")]
    pub sink_netns: Option<String>,
    /// Interface the generator sends on (none: only count, e.g. for trafgen).
    #[arg(long, value_name = "IF")]
    pub gen_iface: Option<String>,
    /// Network namespace of the generator's interface.
    #[arg(long, value_name = "NS")]
    pub gen_netns: Option<String>,
    /// Without --gen-iface: the address another tool sends from (the XDP
    /// sinks count only its frames that look like wirescope's: source port
    /// 32768 + flow, "WS" at the start of the payload).
    #[arg(long, value_name = "ADDR", conflicts_with = "gen_iface")]
    pub from_ip: Option<std::net::Ipv4Addr>,
    /// Sink mode.
    #[arg(long, value_enum, default_value = "af-xdp")]
    pub sink: SinkMode,
    /// Generator path.
    #[arg(long, value_enum, default_value = "auto")]
    pub tx_path: TxPath,
    /// Ethernet frame size incl. FCS (64-9000).
    #[arg(long, default_value_t = 64)]
    pub frame_size: u32,
    /// Threads (and queues) per side.
    #[arg(long, default_value_t = 1)]
    pub queues: u32,
    /// Distinct flows (default: 16 per queue, at least 64).
    #[arg(long)]
    pub flows: Option<u32>,
    /// Packets per second in total; 0 = as fast as possible.
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// CPUs of the generator threads, e.g. 0-3.
    #[arg(long, value_parser = parse_cpus, value_name = "LIST")]
    pub cpus: Option<CpuSet>,
    /// CPUs of the sink threads.
    #[arg(long, value_parser = parse_cpus, value_name = "LIST")]
    pub peer_cpus: Option<CpuSet>,
    /// How long the generator sends.
    #[arg(long, short = 't', default_value = "5s", value_parser = parse_duration)]
    pub time: Duration,
    /// Sampling period.
    #[arg(long, short = 'i', default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// One point per value: `frame=64,128,1518` or `cores=0;1;0,1` (sink CPU sets).
    #[arg(long, value_name = "PARAM=LIST")]
    pub sweep: Option<String>,
    /// Fail instead of falling back to the next mode.
    #[arg(long)]
    pub no_fallback: bool,
    /// JSON lines (`interval` and `summary` records) instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// A CPU list as one clap value.
#[derive(Debug, Clone)]
pub struct CpuSet(pub Vec<CpuId>);

fn parse_cpus(s: &str) -> Result<CpuSet, String> {
    parse_cpu_list(s).map(CpuSet)
}

/// A sweep: the specs of its points.
/// The points a sink-lab run makes (one per swept value).
pub fn points(a: &SinkLabArgs, base: &SinkSpec) -> Result<Vec<SinkSpec>, String> {
    let Some(sw) = &a.sweep else {
        return Ok(vec![base.clone()]);
    };
    let (param, list) = sw
        .split_once('=')
        .ok_or_else(|| format!("--sweep {sw}: use frame=64,128 or cores=0;1;0,1"))?;
    match param {
        "frame" => list
            .split(',')
            .map(|v| {
                let f: u32 = v
                    .trim()
                    .parse()
                    .map_err(|_| format!("--sweep frame: '{v}' is not a frame size"))?;
                Ok(SinkSpec {
                    frame_size: f,
                    ..base.clone()
                })
            })
            .collect(),
        "cores" => list
            .split(';')
            .map(|v| {
                let cpus = parse_cpu_list(v)?;
                Ok(SinkSpec {
                    queues: cpus.len() as u32,
                    peer_cpus: cpus.clone(),
                    cpus,
                    ..base.clone()
                })
            })
            .collect(),
        other => Err(format!(
            "--sweep {other}: only frame=... and cores=... exist"
        )),
    }
}
