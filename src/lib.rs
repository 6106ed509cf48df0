//! redlockd: a Redis-compatible lock server with monotonic TTLs and a restart fence,
//! usable as a binary or in-process (tests start servers and clusters with a manual
//! clock), plus a Redlock client for any Redis-compatible nodes.

pub mod clock;
pub mod commands;
pub mod config;
pub mod fence;
pub mod glob;
pub mod protocol;
pub mod redlock;
pub mod scripting;
pub mod server;
pub mod store;
pub mod testing;

pub use clock::Clock;
pub use config::Config;
pub use server::{Server, ServerHandle};
