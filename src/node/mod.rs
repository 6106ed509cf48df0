//! The node's runtime state: `Shared` (everything one server shares between its
//! connections, how it is built and booted), the client registry's entries
//! (`clients`), the test backend's network faults (`faults`), what an operator reads
//! about commands (`stats`) and the expiry sweeper (`sweeper`).

pub(crate) mod clients;
pub(crate) mod faults;
pub(crate) mod shared;
pub(crate) mod stats;
pub(crate) mod sweeper;

pub use clients::{ClientInfo, ClientState};
pub use faults::NetState;
pub use shared::Shared;
