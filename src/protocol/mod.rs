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

/// Parses an argument as Redis's string2ll does: an optional '-', digits, no spaces,
/// no '+', no leading zeros beyond "0". (Commands reach it as `commands::parse_i64`;
/// the command descriptor and acl/ read numkeys and counts with it.)
pub fn parse_i64(arg: &[u8]) -> Option<i64> {
    if arg.len() > 20 {
        return None;
    }
    parse_int(arg)
}
