//! Request framing: RESP multibulk (`*N\r\n$len\r\n...`) and inline commands
//! (`PING\r\n`), decoded here, not by a crate.
//!
//! The scan reads the frame's headers first: that bounds every announced count and
//! length (nothing is allocated for what a client merely announces), refuses nesting
//! (requests are flat arrays of bulk strings), and slices the arguments out of the
//! buffer as `Bytes` (no copy) only once the frame is complete, so a large request that
//! arrives in many reads is not re-parsed from the start each time. (Handing a
//! validated frame to the redis-protocol crate instead cost about 45% of a GET's
//! instructions under callgrind: 4347 against 2354.) The Redlock client
//! (`redlock/conn.rs`) reads replies with the redis-protocol crate.

use bytes::{Buf, Bytes, BytesMut};

/// Longest header line or inline request without a newline (Redis's PROTO_INLINE_MAX_SIZE).
const MAX_LINE: usize = 64 * 1024;

/// The bounds a request must stay within (Redis's `proto-max-bulk-len` and its own
/// fixed limits); past them the parser answers an error instead of buffering more.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest bulk string accepted (`proto-max-bulk-len`).
    pub max_bulk_len: usize,
    /// Most arguments in one request.
    pub max_args: usize,
    /// The client has not authenticated yet (and a password is required): Redis's
    /// fix for CVE-2021-32675 allows then at most `UNAUTH_MAX_ARGS` arguments of at
    /// most `UNAUTH_MAX_BULK` bytes, refused from the header, before the bytes arrive.
    pub unauthenticated: bool,
}

/// Most arguments in one request before AUTH (Redis: 10).
pub const UNAUTH_MAX_ARGS: i64 = 10;
/// Largest bulk string before AUTH (Redis: 16384).
pub const UNAUTH_MAX_BULK: usize = 16 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
            max_args: 1024 * 1024,
            unauthenticated: false,
        }
    }
}

/// A framing error: the connection gets `-ERR <text>` and is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl ProtocolError {
    fn new(s: impl Into<String>) -> Self {
        ProtocolError(format!("Protocol error: {}", s.into()))
    }
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProtocolError {}

/// Takes one request off the front of `buf`: `Ok(None)` when more bytes are needed,
/// `Ok(Some(args))` with the arguments (an empty vector for a blank line or `*0`, which
/// the caller skips), or an error.
pub fn parse_request(
    buf: &mut BytesMut,
    limits: &Limits,
) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let mut args = Vec::new();
    Ok(parse_request_into(buf, limits, &mut args)?.then_some(args))
}

/// `parse_request` into `args` (cleared first, its capacity reused: a connection
/// allocates no argument vector per request): whether a whole request was taken.
pub fn parse_request_into(
    buf: &mut BytesMut,
    limits: &Limits,
    args: &mut Vec<Bytes>,
) -> Result<bool, ProtocolError> {
    args.clear();
    if buf.is_empty() {
        return Ok(false);
    }
    if buf[0] == b'*' {
        parse_multibulk(buf, limits, args)
    } else {
        Ok(parse_inline(buf)?
            .map(|inline| args.extend(inline))
            .is_some())
    }
}

/// The position of the first "\r\n" at or after `from`.
fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    loop {
        let cr = at + buf.get(at..)?.iter().position(|&b| b == b'\r')?;
        if buf.get(cr + 1) == Some(&b'\n') {
            return Some(cr);
        }
        at = cr + 1;
    }
}

/// A count or length as Redis's string2ll reads it: an optional '-', then digits with
/// no leading zero (Rust's parser would also take "+3" and "03", which Redis refuses);
/// `None` past the i64 range. Accumulated by hand: it runs for every header line.
pub(crate) fn parse_int(b: &[u8]) -> Option<i64> {
    let negative = b.first() == Some(&b'-');
    let digits = if negative { &b[1..] } else { b };
    if digits.is_empty() || (digits[0] == b'0' && b.len() > 1) {
        return None;
    }
    let mut n: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        let d = i64::from(c - b'0');
        // Negative numbers accumulate downwards so that i64::MIN parses.
        n = n.checked_mul(10)?;
        n = if negative {
            n.checked_sub(d)?
        } else {
            n.checked_add(d)?
        };
    }
    Some(n)
}

/// Where a complete, well-formed multibulk request at the front of a buffer lies:
/// `count` arguments (0 for `*0` or a negative count), the first one's header at
/// `first`, the request's end at `end`.
struct Frame {
    count: usize,
    first: usize,
    end: usize,
}

/// Checks the multibulk request at the front of `buf` (which starts with '*') by its
/// headers alone, copying nothing: `Ok(None)` while it is incomplete. Both the parser
/// and `peek_requests` judge requests with it.
fn scan_multibulk(buf: &[u8], limits: &Limits) -> Result<Option<Frame>, ProtocolError> {
    let Some(eol) = find_crlf(buf, 1) else {
        if buf.len() > MAX_LINE {
            return Err(ProtocolError::new("too big mbulk count string"));
        }
        return Ok(None);
    };
    let count = match parse_int(&buf[1..eol]) {
        Some(n) if n <= limits.max_args as i64 => n,
        _ => return Err(ProtocolError::new("invalid multibulk length")),
    };
    if limits.unauthenticated && count > UNAUTH_MAX_ARGS {
        return Err(ProtocolError::new("unauthenticated multibulk length"));
    }
    let first = eol + 2;
    let count = usize::try_from(count).unwrap_or(0);
    let mut pos = first;
    for _ in 0..count {
        let Some(&kind) = buf.get(pos) else {
            return Ok(None);
        };
        if kind != b'$' {
            return Err(ProtocolError::new(format!(
                "expected '$', got '{}'",
                kind as char
            )));
        }
        let Some(eol) = find_crlf(buf, pos + 1) else {
            if buf.len() - pos > MAX_LINE {
                return Err(ProtocolError::new("too big bulk count string"));
            }
            return Ok(None);
        };
        let len = match parse_int(&buf[pos + 1..eol]) {
            Some(n) if n >= 0 && n as u64 <= limits.max_bulk_len as u64 => n as usize,
            _ => return Err(ProtocolError::new("invalid bulk length")),
        };
        if limits.unauthenticated && len > UNAUTH_MAX_BULK {
            return Err(ProtocolError::new("unauthenticated bulk length"));
        }
        pos = eol + 2 + len;
        if buf.len() < pos + 2 {
            return Ok(None);
        }
        if &buf[pos..pos + 2] != b"\r\n" {
            return Err(ProtocolError::new("expected CRLF after bulk string"));
        }
        pos += 2;
    }
    Ok(Some(Frame {
        count,
        first,
        end: pos,
    }))
}

/// The argument whose header starts at `at` in a frame `scan_multibulk` accepted: its
/// bytes' range, and where the next header starts.
fn arg_at(frame: &[u8], at: usize) -> (std::ops::Range<usize>, usize) {
    let end = find_crlf(frame, at + 1).expect("checked by scan_multibulk");
    let len = parse_int(&frame[at + 1..end]).expect("checked by scan_multibulk") as usize;
    let start = end + 2;
    (start..start + len, start + len + 2)
}

fn parse_multibulk(
    buf: &mut BytesMut,
    limits: &Limits,
    args: &mut Vec<Bytes>,
) -> Result<bool, ProtocolError> {
    let Some(f) = scan_multibulk(buf, limits)? else {
        return Ok(false);
    };
    // The frame is complete and well formed: slice the arguments out of it without
    // copying, walking the headers just checked (no second parser over the frame).
    let mut frame = buf.split_to(f.end).freeze();
    args.reserve(f.count);
    let mut at = f.first;
    for _ in 1..f.count {
        let (bytes, next) = arg_at(&frame, at);
        args.push(frame.slice(bytes));
        at = next;
    }
    // The last argument is the frame itself, narrowed: each slice is an atomic
    // increment of the buffer's count (and its drop a decrement), and the frame's
    // own handle would be dropped here anyway.
    if f.count > 0 {
        let (bytes, _) = arg_at(&frame, at);
        frame.truncate(bytes.end);
        frame.advance(bytes.start);
        args.push(frame);
    }
    Ok(true)
}

/// Walks the complete multibulk requests at the front of `buf` without consuming
/// them, handing `f` each one's first two arguments (the second is empty for a
/// one-word request), until `f` says stop. The requests are judged as the parser
/// judges them (`scan_multibulk`, under `limits`); the walk ends quietly at the first
/// incomplete, inline, empty or malformed one, which `parse_request_into` answers.
pub fn peek_requests<'b>(
    buf: &'b [u8],
    limits: &Limits,
    mut f: impl FnMut(&'b [u8], &'b [u8]) -> bool,
) {
    let mut rest = buf;
    while rest.first() == Some(&b'*') {
        let Ok(Some(frame)) = scan_multibulk(rest, limits) else {
            return;
        };
        if frame.count == 0 {
            return;
        }
        let (cmd, next) = arg_at(rest, frame.first);
        let key = if frame.count > 1 {
            arg_at(rest, next).0
        } else {
            0..0
        };
        if !f(&rest[cmd], &rest[key]) {
            return;
        }
        rest = &rest[frame.end..];
    }
}

fn parse_inline(buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > MAX_LINE {
            return Err(ProtocolError::new("too big inline request"));
        }
        return Ok(None);
    };
    let line = buf.split_to(nl + 1);
    let mut line = &line[..nl];
    if line.last() == Some(&b'\r') {
        line = &line[..line.len() - 1];
    }
    split_args(line)
        .map(Some)
        .ok_or_else(|| ProtocolError::new("unbalanced quotes in request"))
}

/// Splits an inline request as Redis's `sdssplitargs` does: spaces separate arguments;
/// "double quotes" take \n \r \t \b \a \\ \" and \xHH escapes; 'single quotes' take \';
/// a closing quote must be followed by a space or the end. `None` for unbalanced quotes.
pub(crate) fn split_args(line: &[u8]) -> Option<Vec<Bytes>> {
    let mut args = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= n {
            return Some(args);
        }
        let mut cur = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 3 < n && line[i + 1] == b'x' {
                    if let (Some(h), Some(l)) = (hex(line[i + 2]), hex(line[i + 3])) {
                        cur.push(h * 16 + l);
                        i += 4;
                        continue;
                    }
                }
                if c == b'\\' && i + 1 < n {
                    cur.push(match line[i + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                    i += 2;
                } else if c == b'"' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                    i += 1;
                }
            } else if in_sq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    cur.push(b'\'');
                    i += 2;
                } else if c == b'\'' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                    i += 1;
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => {
                        i += 1;
                        break;
                    }
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    c => cur.push(c),
                }
                i += 1;
            }
        }
        args.push(Bytes::from(cur));
    }
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(input: &[u8]) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        let mut buf = BytesMut::from(input);
        parse_request(&mut buf, &Limits::default())
    }

    #[test]
    fn multibulk_is_split_into_arguments() {
        let args = parse(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n").unwrap().unwrap();
        assert_eq!(args, vec![Bytes::from("GET"), Bytes::from("k")]);
    }

    fn peeked(input: &[u8], stop_after: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut seen = Vec::new();
        peek_requests(input, &Limits::default(), |cmd, key| {
            seen.push((cmd.to_vec(), key.to_vec()));
            seen.len() < stop_after
        });
        seen
    }

    #[test]
    fn peeking_sees_each_complete_request_and_consumes_nothing() {
        let input = b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n*1\r\n$4\r\nPING\r\n\
                      *2\r\n$3\r\nGET\r\n$2\r\nbb\r\n*2\r\n$3\r\nGET\r\n$2\r\ncc";
        let pair = |c: &str, k: &str| (c.as_bytes().to_vec(), k.as_bytes().to_vec());
        let all = vec![pair("SET", "a"), pair("PING", ""), pair("GET", "bb")];
        // The last request is incomplete: not seen.
        assert_eq!(peeked(input, usize::MAX), all);
        assert_eq!(peeked(input, 2), all[..2].to_vec());
        // The parser still finds every request where it was.
        let mut buf = BytesMut::from(&input[..]);
        let first = parse_request(&mut buf, &Limits::default())
            .unwrap()
            .unwrap();
        assert_eq!(first[0], "SET");
    }

    #[test]
    fn peeking_stops_at_what_only_the_parser_may_judge() {
        // Inline, malformed, or an empty multibulk: nothing past it is peeked.
        assert!(peeked(b"GET a\r\n*2\r\n$3\r\nGET\r\n$1\r\nb\r\n", 9).is_empty());
        assert!(peeked(b"*2\r\n:3\r\nGET\r\n", 9).is_empty());
        assert!(peeked(b"*0\r\n*2\r\n$3\r\nGET\r\n$1\r\nb\r\n", 9).is_empty());
        assert!(peeked(b"*2\r\n$-1\r\n$3\r\nGET\r\n", 9).is_empty());
        assert!(peeked(b"*2\r\n$9223372036854775807\r\nGET\r\n", 9).is_empty());
    }

    /// Peeking and parsing agree: on thousands of pipelines with random damage, the
    /// requests `peek_requests` sees are the ones the parser takes off the buffer, in
    /// order, up to where the parser stops (at an incomplete or malformed request, or
    /// at an inline or empty one, which the peek leaves to the parser).
    #[test]
    fn peeking_agrees_with_the_parser_on_damaged_pipelines() {
        use rand::{rngs::SmallRng, Rng, SeedableRng};
        let mut rng = SmallRng::seed_from_u64(14);
        let pieces: [&[u8]; 5] = [
            b"*3\r\n$3\r\nSET\r\n$5\r\nlock1\r\n$2\r\nv1\r\n",
            b"*2\r\n$3\r\nGET\r\n$0\r\n\r\n",
            b"*1\r\n$4\r\nPING\r\n",
            b"*0\r\n",
            b"GET inline\r\n",
        ];
        for _ in 0..5000 {
            let mut input = Vec::new();
            for _ in 0..rng.random_range(1..6) {
                input.extend_from_slice(pieces[rng.random_range(0..pieces.len())]);
            }
            for _ in 0..rng.random_range(0..3) {
                let at = rng.random_range(0..input.len());
                input[at] = b"*$\r\n0139-x"[rng.random_range(0..10)];
            }
            input.truncate(rng.random_range(0..=input.len()));
            let peeked = peeked(&input, usize::MAX);
            let mut buf = BytesMut::from(&input[..]);
            let mut parsed = Vec::new();
            let mut args = Vec::new();
            let limits = Limits::default();
            let incomplete = loop {
                if buf.first() != Some(&b'*') {
                    break false;
                }
                match parse_request_into(&mut buf, &limits, &mut args) {
                    Ok(true) if !args.is_empty() => {
                        let key = args.get(1).map_or(Vec::new(), |k| k.to_vec());
                        parsed.push((args[0].to_vec(), key));
                    }
                    Ok(true) => break false,
                    Ok(false) => break true,
                    Err(_) => break false,
                }
            };
            let agreed = peeked.len().min(parsed.len());
            assert_eq!(peeked[..agreed], parsed[..agreed], "input {input:?}");
            // One judge for both: the peek sees exactly what the parser takes.
            assert_eq!(peeked, parsed, "input {input:?}");
            if incomplete {
                assert_eq!(peeked.len(), parsed.len(), "input {input:?}");
            } else {
                assert!(peeked.len() >= parsed.len(), "input {input:?}");
            }
        }
    }

    #[test]
    fn partial_multibulk_waits_for_more() {
        assert_eq!(parse(b"*2\r\n$3\r\nGET\r\n$1\r").unwrap(), None);
        assert_eq!(parse(b"*2\r\n$3\r\nGE").unwrap(), None);
        assert_eq!(parse(b"*2").unwrap(), None);
    }

    #[test]
    fn huge_announced_lengths_are_refused_without_waiting() {
        let limits = Limits {
            max_bulk_len: 1024,
            max_args: 8,
            unauthenticated: false,
        };
        let mut buf = BytesMut::from(&b"*1\r\n$4096\r\n"[..]);
        let err = parse_request(&mut buf, &limits).unwrap_err();
        assert_eq!(err.0, "Protocol error: invalid bulk length");
        let mut buf = BytesMut::from(&b"*9\r\n"[..]);
        let err = parse_request(&mut buf, &limits).unwrap_err();
        assert_eq!(err.0, "Protocol error: invalid multibulk length");
    }

    #[test]
    fn lengths_with_a_plus_sign_or_leading_zero_are_refused() {
        let err = parse(b"*1\r\n$+3\r\nget\r\n").unwrap_err();
        assert_eq!(err.0, "Protocol error: invalid bulk length");
        let err = parse(b"*1\r\n$03\r\nget\r\n").unwrap_err();
        assert_eq!(err.0, "Protocol error: invalid bulk length");
        let err = parse(b"*+1\r\n$3\r\nget\r\n").unwrap_err();
        assert_eq!(err.0, "Protocol error: invalid multibulk length");
        assert_eq!(
            parse(b"*1\r\n$0\r\n\r\n").unwrap(),
            Some(vec![Bytes::new()])
        );
    }

    #[test]
    fn nested_arrays_are_refused() {
        let err = parse(b"*1\r\n*1\r\n$1\r\na\r\n").unwrap_err();
        assert_eq!(err.0, "Protocol error: expected '$', got '*'");
    }

    #[test]
    fn inline_commands_split_on_spaces_and_quotes() {
        let args = parse(b"SET k \"a b\\x41\" 'c\\'d'\r\n").unwrap().unwrap();
        assert_eq!(
            args,
            vec![
                Bytes::from("SET"),
                Bytes::from("k"),
                Bytes::from("a bA"),
                Bytes::from("c'd")
            ]
        );
    }

    #[test]
    fn inline_unbalanced_quotes_is_an_error() {
        let err = parse(b"SET k \"abc\r\n").unwrap_err();
        assert_eq!(err.0, "Protocol error: unbalanced quotes in request");
    }

    /// Counts and lengths parse as Redis's string2ll does.
    #[test]
    fn counts_parse_like_string2ll() {
        assert_eq!(parse_int(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_int(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_int(b"9223372036854775808"), None);
        assert_eq!(parse_int(b"-9223372036854775809"), None);
        assert_eq!(parse_int(b"-"), None);
        assert_eq!(parse_int(b""), None);
        assert_eq!(parse_int(b"12a"), None);
        assert_eq!(parse_int(b"0"), Some(0));
    }

    #[test]
    fn empty_inline_line_is_an_empty_request() {
        assert_eq!(parse(b"\r\n").unwrap(), Some(vec![]));
    }
}
