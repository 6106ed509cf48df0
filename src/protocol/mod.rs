//! RESP framing and replies. Knows nothing of commands: requests come in as argument
//! vectors, replies go out as [`Reply`] values encoded for the connection's protocol.

mod decode;
mod encode;
pub mod errors;
pub mod numfmt;
mod reply;

pub(crate) use decode::parse_int;
pub use decode::{parse_request, parse_request_into, peek_requests, Limits, ProtocolError};
pub use encode::encode;
pub(crate) use encode::human_double;
pub use reply::Reply;
