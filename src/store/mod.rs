//! The keyspace: 16 databases of `Bytes -> Entry` in dashmaps, with lazy expiry on
//! every access and an active sweeper. Knows nothing of the network or of commands.

mod db;
mod expiry;
mod set;
pub mod snapshot;
mod value;
mod watch;
mod zset;

pub use db::{Db, Keyspace};
pub use set::Set;
pub use value::{Entry, Value};
pub use watch::WatchFlag;
pub use zset::{LexBound, ScoreBound, ZSet};
