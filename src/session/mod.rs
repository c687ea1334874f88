//! The node pair: control protocol, agent, controller and the embedded local pair.
//!
//! One control connection per controller (TCP, or a unix socket for the local
//! pair) carries length-prefixed JSON [`proto::Msg`]s; the data connections of
//! a test are separate TCP sockets to the agent's port, each introduced by a
//! magic, the test's random cookie and its index ([`proto::DataHello`]).
//! Either side may vanish at any moment: the other stops its engine, keeps
//! what it measured and reports the loss.

pub mod agent;
pub mod auth;
pub mod controller;
pub mod localpair;
pub mod netns;
pub mod proto;

pub use proto::{ProtoError, DEFAULT_PORT, PROTOCOL_VERSION};
