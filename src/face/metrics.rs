//! `--metrics ADDR` of the faces: the hub each face feeds and its endpoint,
//! started before anything else so that an address that cannot be bound is
//! the first error (the hub and the server are in [`crate::record::metrics`]).

use super::FaceError;
use crate::probe::live_host::LiveHost;
use crate::probe::totals::user_hz;
use crate::record::metrics::http::MetricsServer;
use crate::record::metrics::MetricsHub;
use std::net::SocketAddr;
use std::sync::Arc;

/// A hub for `face` whose host `live` is this one, served on `addr`; None
/// without `--metrics`. Keep the server: dropping it stops serving.
pub fn serve(
    face: &str,
    live: &str,
    addr: Option<SocketAddr>,
) -> Result<(Option<MetricsHub>, Option<MetricsServer>), FaceError> {
    let Some(addr) = addr else {
        return Ok((None, None));
    };
    let hub = MetricsHub::new(face).with_live_host(live, Arc::new(LiveHost::default()), user_hz());
    let server = MetricsServer::start(addr, hub.clone()).map_err(anyhow::Error::from)?;
    Ok((Some(hub), Some(server)))
}

/// `wirescope agent --metrics`: this host under
/// [`crate::session::agent::METRICS_HOST`].
pub fn serve_agent(
    addr: Option<SocketAddr>,
) -> Result<(Option<MetricsHub>, Option<MetricsServer>), FaceError> {
    serve("agent", crate::session::agent::METRICS_HOST, addr)
}
