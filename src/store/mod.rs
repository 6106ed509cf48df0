//! The keyspace: 16 databases of sharded tables of packed entries (key, value and
//! deadline in one heap block), with lazy expiry on every access and an active
//! sweeper. Knows nothing of the network or of commands.

mod db;
pub mod events;
pub mod lock;
mod packed;
pub mod rdb;
mod set;
mod shard_table;
pub(crate) mod siphash;
mod slab;
mod snapshot;
pub mod stream;
mod tracking;
pub(crate) mod value;
mod watch;
mod zset;

pub use db::{Carried, Db, Keyspace, Slot};
pub use set::Set;
pub use snapshot::{Render, SnapshotWalk};
pub use stream::{Stream, StreamId};
pub use tracking::Actor;
pub use value::{Entry, Value, ValueMut, ValueRef};
pub use watch::WatchFlag;
pub use zset::{LexBound, ScoreBound, ZSet};
