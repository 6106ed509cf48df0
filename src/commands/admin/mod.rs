//! The server's own commands: the connection's (`session`: PING, HELLO, AUTH, CLIENT...),
//! ACL (`acl_command`), INFO, CONFIG, COMMAND and friends (`server`), MEMORY, the
//! operator's SLOWLOG / LATENCY / WAIT (`ops`) and DEBUG.

pub mod acl_command;
pub mod cluster;
pub mod config_command;
pub mod debug;
pub mod info;
pub mod memory;
pub mod monitor;
pub mod ops;
pub mod redis_settings;
pub mod server;
pub mod session;
pub mod tracking;
