//! Reply -> bytes, for RESP2 or RESP3.

use super::Reply;
use bytes::{BufMut, BytesMut};

/// Appends `reply` to `out` in protocol `proto` (2 or 3).
pub fn encode(reply: &Reply, proto: u8, out: &mut BytesMut) {
    let resp3 = proto >= 3;
    match reply {
        Reply::Ok => out.put_slice(b"+OK\r\n"),
        Reply::Status(s) => line(out, b'+', s),
        Reply::Error(e) => line(out, b'-', e),
        Reply::Integer(i) => int_line(out, b':', *i),
        Reply::Bulk(b) => bulk(out, b),
        Reply::Null if resp3 => out.put_slice(b"_\r\n"),
        Reply::Null => out.put_slice(b"$-1\r\n"),
        Reply::NullArray if resp3 => out.put_slice(b"_\r\n"),
        Reply::NullArray => out.put_slice(b"*-1\r\n"),
        Reply::Array(items) => seq(out, b'*', items, proto),
        Reply::Set(items) => seq(out, if resp3 { b'~' } else { b'*' }, items, proto),
        Reply::Push(items) => seq(out, if resp3 { b'>' } else { b'*' }, items, proto),
        Reply::Multi(frames) => frames.iter().for_each(|f| encode(f, proto, out)),
        Reply::Map(pairs) => {
            if resp3 {
                int_line(out, b'%', pairs.len() as i64);
            } else {
                int_line(out, b'*', pairs.len() as i64 * 2);
            }
            for (k, v) in pairs {
                encode(k, proto, out);
                encode(v, proto, out);
            }
        }
        Reply::Double(d) => {
            let text = format_double(*d);
            if resp3 {
                line(out, b',', text.as_bytes());
            } else {
                bulk(out, text.as_bytes());
            }
        }
        Reply::HumanDouble(d) => {
            let text = human_double(*d);
            if resp3 {
                line(out, b',', text.as_bytes());
            } else {
                bulk(out, text.as_bytes());
            }
        }
        Reply::Bool(b) if resp3 => out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
        Reply::Bool(b) => int_line(out, b':', *b as i64),
        Reply::Verbatim(format, text) if resp3 => {
            int_line(out, b'=', (text.len() + 4) as i64);
            out.put_slice(format.as_bytes());
            out.put_u8(b':');
            out.put_slice(text);
            out.put_slice(b"\r\n");
        }
        Reply::Verbatim(_, text) => bulk(out, text),
    }
}

fn seq(out: &mut BytesMut, kind: u8, items: &[Reply], proto: u8) {
    int_line(out, kind, items.len() as i64);
    for item in items {
        encode(item, proto, out);
    }
}

fn line(out: &mut BytesMut, kind: u8, text: &[u8]) {
    out.reserve(text.len() + 3);
    out.put_u8(kind);
    out.put_slice(text);
    out.put_slice(b"\r\n");
}

fn int_line(out: &mut BytesMut, kind: u8, i: i64) {
    let mut digits = itoa::Buffer::new();
    line(out, kind, digits.format(i).as_bytes());
}

fn bulk(out: &mut BytesMut, b: &[u8]) {
    int_line(out, b'$', b.len() as i64);
    out.reserve(b.len() + 2);
    out.put_slice(b);
    out.put_slice(b"\r\n");
}

/// Doubles as Redis 7.0 prints them (`%.17g`): `inf`, `-inf`, integers without a
/// fraction, `0.10000000000000001`.
pub(crate) fn format_double(d: f64) -> String {
    super::numfmt::fmt_g(d, 17)
}

/// Redis's LD_STR_HUMAN form: `%.17Lf` with the trailing zeros (and a bare point)
/// removed, "-0" as "0".
pub(crate) fn human_double(d: f64) -> String {
    if !d.is_finite() {
        return format_double(d);
    }
    let mut s = format!("{d:.17}");
    if s.contains('.') {
        let trimmed = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(trimmed);
    }
    if s == "-0" {
        s = "0".to_string();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn enc(r: Reply, proto: u8) -> Vec<u8> {
        let mut out = BytesMut::new();
        encode(&r, proto, &mut out);
        out.to_vec()
    }

    #[test]
    fn human_doubles_are_redis_text() {
        assert_eq!(human_double(13.361389338970184), "13.36138933897018433");
        assert_eq!(human_double(2.0), "2");
        assert_eq!(human_double(-0.0), "0");
        assert_eq!(enc(Reply::HumanDouble(0.5), 3), b",0.5\r\n");
        assert_eq!(enc(Reply::HumanDouble(0.5), 2), b"$3\r\n0.5\r\n");
    }

    #[test]
    fn null_differs_by_protocol() {
        assert_eq!(enc(Reply::Null, 2), b"$-1\r\n");
        assert_eq!(enc(Reply::NullArray, 2), b"*-1\r\n");
        assert_eq!(enc(Reply::Null, 3), b"_\r\n");
    }

    #[test]
    fn map_flattens_in_resp2() {
        let m = Reply::Map(vec![(Reply::bulk_str("proto"), Reply::Integer(3))]);
        assert_eq!(enc(m.clone(), 2), b"*2\r\n$5\r\nproto\r\n:3\r\n");
        assert_eq!(enc(m, 3), b"%1\r\n$5\r\nproto\r\n:3\r\n");
    }

    #[test]
    fn bulk_and_errors() {
        assert_eq!(enc(Reply::Bulk(Bytes::from("ab")), 2), b"$2\r\nab\r\n");
        assert_eq!(enc(Reply::error("ERR x"), 3), b"-ERR x\r\n");
    }
}
