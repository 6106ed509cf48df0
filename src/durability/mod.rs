//! What a node must not forget across a restart, and what it does because it forgot
//! the rest: the one way a file is written whole (`atomic`), the data directory and
//! `node.state` (`data_dir`), the fencing-token mark
//! (`tokens`), how far granted locks reach (`reach`), the clean-shutdown snapshot's file format (`snapshot`), boot and the
//! clean-shutdown save (`restart`), and the restart fence with the max-TTL rule
//! (`fence`).

pub mod aof;
pub(crate) mod atomic;
pub mod data_dir;
pub(crate) mod fence;
pub(crate) mod reach;
pub(crate) mod restart;
pub(crate) mod snapshot;
pub(crate) mod tokens;

pub(crate) use atomic::atomic_write;
