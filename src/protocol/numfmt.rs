//! C's `%.Ng` number formatting, which Redis uses and Rust lacks: Redis 7.0 prints a
//! double reply (a sorted-set score, a RESP3 double) with `%.17g`, and turns a Lua
//! number argument of redis.call into text the same way ("15000", "0.1" as
//! "0.10000000000000001"). Also `hex`: bytes as lowercase hex (digests, node ids).

/// Formats like C's `printf("%.{precision}g", x)`.
pub fn fmt_g(x: f64, precision: usize) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let p = precision.max(1);
    let sci = format!("{:.*e}", p - 1, x);
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return sci;
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        let mantissa = strip_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        strip_zeros(&format!("{x:.decimals$}")).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// `bytes` as lowercase hex, two digits each (digests, node ids, password hashes).
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_c_printf_g17() {
        assert_eq!(fmt_g(15000.0, 17), "15000");
        assert_eq!(fmt_g(1.5, 17), "1.5");
        assert_eq!(fmt_g(0.1, 17), "0.10000000000000001");
        assert_eq!(fmt_g(1.0 / 3.0, 17), "0.33333333333333331");
        assert_eq!(fmt_g(1e20, 17), "1e+20");
        assert_eq!(fmt_g(-0.0, 17), "-0");
        assert_eq!(fmt_g(1e-5, 17), "1.0000000000000001e-05");
        assert_eq!(fmt_g(100000000000000.0, 14), "1e+14");
        assert_eq!(fmt_g(1.0 / 3.0, 14), "0.33333333333333");
        assert_eq!(fmt_g(1e300, 14), "1e+300");
        assert_eq!(fmt_g(123456.0, 14), "123456");
    }
}
