//! Preparing an engine for one side of a point: what the session must know
//! about each engine beyond its spec (which host resources it uses, what it
//! exchanges before the start). Runs off the async threads: preparing may
//! allocate large buffers or open devices.

use crate::traffic::{prepare_engine, Engine, EngineError, EngineSpec, Side};
use std::net::IpAddr;

/// Prepare `side` of `spec`; `peer` is the other host's address as this
/// side sees it (engines pick the interface or device that routes to it).
pub fn prepare(
    spec: &EngineSpec,
    side: Side,
    peer: Option<IpAddr>,
) -> Result<Box<dyn Engine>, EngineError> {
    let _ = peer;
    prepare_engine(spec, side)
}
