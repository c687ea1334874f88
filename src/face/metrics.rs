//! `--metrics ADDR` of the faces: the hub each face feeds and its endpoint,
//! started before anything else so that an address that cannot be bound is
//! the first error (the hub and the server are in [`crate::record::metrics`]).

use super::FaceError;
use crate::probe::live_host::LiveHost;
use crate::probe::sample::HostRole;
use crate::probe::totals::user_hz;
use crate::record::metrics::http::MetricsServer;
use crate::record::metrics::{HostFeed, MetricsHub};
use crate::session::agent::Observer;
use std::net::SocketAddr;
use std::sync::Arc;

/// The agent's side of `--metrics`: what its tests feed, and the endpoint.
pub type AgentMetrics = (Arc<dyn Observer>, MetricsServer);

/// A hub for `face` whose host `live` is this one, served on `addr`; None
/// without `--metrics`. Keep the server: dropping it stops serving.
pub fn serve(
    face: &str,
    live: &str,
    addr: Option<SocketAddr>,
) -> Result<Option<(MetricsHub, MetricsServer)>, FaceError> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let hub = MetricsHub::new(face).with_live_host(live, Arc::new(LiveHost::default()), user_hz());
    let server = MetricsServer::start(addr, hub.clone()).map_err(anyhow::Error::from)?;
    Ok(Some((hub, server)))
}

/// `wirescope agent --metrics`: this host, labelled `local`; the agent's
/// tests feed it through the returned observer.
pub fn serve_agent(addr: Option<SocketAddr>) -> Result<Option<AgentMetrics>, FaceError> {
    let local = HostRole::Local.name();
    Ok(serve("agent", local, addr)?.map(|(hub, server)| {
        let feed: Arc<dyn Observer> = Arc::new(HostFeed::new(hub, local));
        (feed, server)
    }))
}
