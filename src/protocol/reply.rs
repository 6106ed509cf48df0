use bytes::Bytes;

/// A typed reply. RESP2 vs RESP3 is decided only when it is encoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+OK`
    Ok,
    /// A simple string (`+PONG`, `+QUEUED`...).
    Status(Bytes),
    /// An error; the text includes its code (`ERR ...`, `WRONGTYPE ...`).
    Error(Bytes),
    /// An integer (`:42`).
    Integer(i64),
    /// A bulk string (`$3 foo`).
    Bulk(Bytes),
    /// RESP2 `$-1`, RESP3 `_`.
    Null,
    /// RESP2 `*-1`, RESP3 `_`.
    NullArray,
    /// An array of replies.
    Array(Vec<Reply>),
    /// RESP3 map; RESP2 flattens it into an array of key, value, key, value...
    Map(Vec<(Reply, Reply)>),
    /// RESP3 set; RESP2 array.
    Set(Vec<Reply>),
    /// RESP3 double; RESP2 bulk string.
    Double(f64),
    /// A double in Redis's "human" form (`%.17Lf` less trailing zeros: GEOPOS and
    /// WITHCOORD's coordinates): RESP3 double, RESP2 bulk string.
    HumanDouble(f64),
    /// RESP3 boolean; RESP2 integer 1 or 0.
    Bool(bool),
    /// RESP3 verbatim string (`=` with a 3-letter format); RESP2 bulk string.
    Verbatim(&'static str, Bytes),
    /// RESP3 push (pub/sub messages); RESP2 array.
    Push(Vec<Reply>),
    /// Several frames sent back to back for one command (SUBSCRIBE a b confirms each
    /// channel with its own frame). Empty sends nothing.
    Multi(Vec<Reply>),
}

impl Reply {
    /// A simple string reply (`+PONG`).
    pub fn status(s: &'static str) -> Reply {
        Reply::Status(Bytes::from_static(s.as_bytes()))
    }

    /// An error reply from any text; the text must start with its code (`ERR ...`).
    pub fn error(s: impl Into<String>) -> Reply {
        Reply::Error(Bytes::from(s.into()))
    }

    /// A bulk string reply.
    pub fn bulk(b: impl Into<Bytes>) -> Reply {
        Reply::Bulk(b.into())
    }

    /// A bulk string reply holding `s`'s bytes.
    pub fn bulk_str(s: &str) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    /// Whether this is an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }
}

impl From<i64> for Reply {
    fn from(i: i64) -> Reply {
        Reply::Integer(i)
    }
}

impl From<bool> for Reply {
    /// Redis's integer booleans (`:1` / `:0`), as EXISTS-style commands reply.
    fn from(b: bool) -> Reply {
        Reply::Integer(b as i64)
    }
}
