//! redlockd: a Redis-compatible lock server with monotonic TTLs and a restart fence.

pub mod clock;
pub mod fence;
pub mod protocol;
pub mod redlock;
pub mod store;

pub use clock::Clock;
