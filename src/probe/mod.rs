//! Observers: read the host, never change it.
//!
//! Every probe reads through [`source::HostSource`], so the same parsing code
//! runs on the live host and on recorded files in tests. Probes return plain
//! data; [`sampler::Sampler`] combines them with the engine counters into one
//! [`sample::Sample`] per interval.

pub mod capture_dir;
pub mod capture_writer;
pub mod cpu;
pub mod ebpf;
pub mod engine_host;
pub mod ethtool_names;
pub mod ethtool_text;
pub mod facts;
pub mod live_host;
pub mod netlink;
pub mod netstat;
pub mod nic;
pub mod packet_path;
pub mod procfs;
pub mod queues;
pub mod rdma;
pub mod sample;
pub mod sampler;
pub mod snapshot;
pub mod softirq;
pub mod source;
pub mod synthetic;
pub mod system;
pub mod tcpinfo;
pub mod topology;
pub mod totals;
pub mod trusted;
pub mod untrusted;
