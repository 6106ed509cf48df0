//! redlockd: a Redis-compatible lock server with monotonic TTLs and a restart fence,
//! usable as a binary or in-process (tests start servers and groups of them with a manual
//! clock), plus a Redlock client for any Redis-compatible nodes.
//!
//! The public API:
//! - [`Server`], [`ServerHandle`], [`StartError`]: run a node in your process, set up
//!   by a [`Config`] ([`config`] also holds its TLS and Redis Cluster settings).
//! - [`Clock`]: the real or a manual clock (`clock::MANUAL_WALL_START_MS`).
//! - [`testing`]: `TestServer` / `TestGroup` with fault controls.
//! - [`redlock`]: the Redlock client.
//! - [`inmem`]: one session on an in-memory server, for benchmarks and fuzzing.
//! - [`slot`]: a key's Redis Cluster hash slot.
//!
//! Features: `server` (the server, `testing`, `inmem`), `client` (the Redlock client),
//! `cli` (the `redlockd` binary; implies both). All are on by default;
//! `default-features = false, features = ["client"]` builds the client alone, without
//! Lua, dashmap or clap. Server and client both speak TLS (rustls with ring):
//! [`config::TlsConfig`] for the server, `redlock::TlsOptions` for `rediss://` nodes.
// The list above names every feature's items; a build with only some of the features
// has no target for the others' links.
#![cfg_attr(
    not(all(feature = "server", feature = "client")),
    allow(rustdoc::broken_intra_doc_links)
)]
// The public API is documented, item by item, and every `unsafe` block says why it is
// sound; CI's `cargo clippy -- -D warnings` turns both into errors.
#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

// The server's rooms and what the library exports of them (`server` feature). One
// attribute per item, not a macro: rustfmt and cargo-mutants only follow `mod` lines
// they can see.
#[cfg(feature = "server")]
pub(crate) mod acl;
#[cfg(feature = "server")]
pub(crate) mod alloc;
#[cfg(feature = "server")]
pub mod clock;
#[cfg(feature = "server")]
pub(crate) mod cluster;
#[cfg(feature = "server")]
pub(crate) mod commands;
#[cfg(feature = "server")]
pub mod config;
#[cfg(feature = "server")]
pub(crate) mod durability;
#[cfg(feature = "server")]
pub(crate) mod glob;
#[cfg(feature = "server")]
pub mod inmem;
#[cfg(feature = "server")]
pub(crate) mod node;
#[cfg(feature = "server")]
pub(crate) mod protocol;
#[cfg(feature = "server")]
pub(crate) mod scripting;
#[cfg(feature = "server")]
mod server;
#[cfg(feature = "server")]
pub(crate) mod store;
#[cfg(feature = "server")]
pub mod testing;
#[cfg(feature = "server")]
pub use clock::Clock;
#[cfg(feature = "server")]
pub use config::Config;
// `redlockd init`'s: the binary declares a brand-new node's data directory.
/// The operator's slot move, for the binary's `slots move`.
#[cfg(feature = "server")]
#[doc(hidden)]
pub use cluster::operator as cluster_operator;
#[cfg(feature = "server")]
#[doc(hidden)]
pub use durability::data_dir::NodeDir;
#[cfg(feature = "server")]
pub use server::{Server, ServerHandle, StartError};

#[cfg(feature = "client")]
pub mod redlock;
#[cfg(any(feature = "server", feature = "client"))]
pub mod slot;

#[cfg(any(feature = "server", feature = "client"))]
pub(crate) mod tls;
