//! The integration suite, one binary: one module per area (`cargo test --test it pair::`
//! runs one area). The real binary, real namespaces and real sockets; the
//! helpers every area shares live in [`common`].

mod agent_hardening;
mod agent_log;
mod checklist_pair;
mod cli;
mod cli_props;
mod code_shape;
mod common;
mod diagnose_faults;
mod diagnose_log;
mod diagnose_offline;
mod diagnose_rules;
mod ebpf_object;
mod ebpf_pair;
mod fleet;
mod fleet_deploy;
mod fuzz_props;
mod golden;
mod grpc;
mod grpc_hardening;
mod grpc_memory;
mod grpc_pair;
mod grpc_proto;
mod grpc_session;
mod handshake;
mod localpair;
mod memory_bounds;
mod metrics;
mod module_edges;
mod pair;
mod pipeline_faces;
mod rdma_cli;
// They load libibverbs through the verbs layer of the `rdma` feature.
#[cfg(feature = "rdma")]
mod rdma_device;
#[cfg(feature = "rdma")]
mod rdma_preflight;
mod rdma_probe;
mod report;
mod sink_cleanup;
mod sink_ebpf_object;
mod sink_pair;
mod sink_session;
mod synthetic_host;
mod telemetry;
mod tui_big_host;
mod tui_e2e;
mod tui_fleet;
mod tui_keys;
mod tui_views;
mod tune_hardening;
mod tune_netlink;
mod tune_netns;
mod tune_root;
