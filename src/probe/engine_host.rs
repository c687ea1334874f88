//! The live host as the engines see it while they prepare one side of a
//! point ([`EngineHost`]): routes, the NUMA node of an interface, the
//! counters along a packet's path, RDMA devices. The session hands
//! [`LiveEngineHost`] to [`EngineSpecOps::prepare`], so each engine prepares
//! itself and the data plane never reads the host on its own. Reads only.
//!
//! [`EngineSpecOps::prepare`]: crate::traffic::EngineSpecOps::prepare

use super::live_host::LiveHost;
use crate::traffic::rdma::preflight::PreflightError;
use crate::traffic::EngineHost;
use crate::units::CpuId;
use std::net::IpAddr;

/// This host, read live.
#[derive(Debug, Default)]
pub struct LiveEngineHost {
    host: LiveHost,
}

impl EngineHost for LiveEngineHost {
    fn route_iface(&self, to: IpAddr) -> Option<String> {
        super::system::route_iface(to)
    }

    fn default_route_iface(&self) -> Option<String> {
        super::system::default_route_iface(&self.host)
    }

    fn route_to(&self, to: IpAddr) -> (Option<String>, Option<IpAddr>) {
        super::system::route_to(to)
    }

    fn nic_node_cpus(&self, iface: &str) -> Option<Vec<CpuId>> {
        super::topology::nic_node_cpus(&self.host, iface)
    }

    fn path_opener(&self) -> crate::traffic::paths::PathOpener {
        super::packet_path::PathProbe::opener()
    }

    fn verbs_preflight(
        &self,
        provider: &dyn crate::traffic::rdma::verbs::VerbsProvider,
        here: &str,
        iface: Option<&str>,
    ) -> Result<(), PreflightError> {
        super::rdma::preflight::preflight(&self.host, provider, here, iface).map(|_| ())
    }

    fn verbs_device(
        &self,
        want: &crate::traffic::rdma::RdmaEndpoint,
        route_iface: Option<&str>,
        local: Option<IpAddr>,
    ) -> Result<crate::traffic::rdma::Chosen, PreflightError> {
        let facts = super::rdma::read_rdma_facts(&self.host);
        super::rdma::preflight::choose(&facts, want, route_iface, local)
    }
}
