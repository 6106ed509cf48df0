//! redlockd: a Redis-compatible lock server with monotonic TTLs and a restart fence,
//! usable as a binary or in-process (tests start servers and clusters with a manual
//! clock), plus a Redlock client for any Redis-compatible nodes.
//!
//! The public API:
//! - [`Server`], [`ServerHandle`], [`Config`]: run a node in your process.
//! - [`Clock`]: the real or a manual clock (`clock::MANUAL_WALL_START_MS`).
//! - [`testing`]: `TestServer` / `TestCluster` with fault controls.
//! - [`redlock`]: the Redlock client (and, with the `cli` feature, `redlockd lock`).
//! - [`inmem`]: one session on an in-memory server, for benchmarks and fuzzing.
//!
//! Features: `server` (the server, `testing`, `inmem`), `client` (the Redlock client),
//! `cli` (the `redlockd` binary and `redlock::flock`; implies both). All are on by
//! default; `default-features = false, features = ["client"]` builds the client alone,
//! without Lua, dashmap or clap. Server and client both speak TLS (rustls with ring):
//! [`TlsConfig`] for the server, `redlock::TlsOptions` for `rediss://` nodes.
// The list above names every feature's items; a build with only some of the features
// has no target for the others' links.
#![cfg_attr(
    not(all(feature = "server", feature = "client")),
    allow(rustdoc::broken_intra_doc_links)
)]

/// Items that exist only with the `server` feature.
macro_rules! server {
    ($($item:item)*) => { $(#[cfg(feature = "server")] $item)* };
}

server! {
    pub(crate) mod acl;
    pub mod clock;
    pub(crate) mod commands;
    pub mod config;
    pub(crate) mod durability;
    pub(crate) mod glob;
    pub mod inmem;
    pub(crate) mod alloc;
    pub(crate) mod node;
    pub(crate) mod protocol;
    pub(crate) mod scripting;
    mod server;
    pub(crate) mod store;
    pub mod testing;

    pub use clock::Clock;
    pub use config::{AuthClients, Config, ConfigError, DurationError, TlsConfig};
    pub use server::{Server, ServerHandle, StartError};
    pub use durability::data_dir::NodeDir;
}

#[cfg(feature = "client")]
pub mod redlock;

#[cfg(any(feature = "server", feature = "client"))]
pub(crate) mod tls;
