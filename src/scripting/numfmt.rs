//! C's `%.Ng` number formatting, which Redis and Lua use and Rust lacks: Redis turns a
//! Lua number argument of redis.call into text with `%.17g` ("15000", "0.1" as
//! "0.10000000000000001"), Lua's tostring and lua-cjson use `%.14g`.

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

/// A Lua number as Lua 5.1's tostring prints it.
pub fn lua_number(x: f64) -> String {
    fmt_g(x, 14)
}

/// C's `(long long)x` on x86-64: out-of-range and NaN give i64::MIN. Redis converts a
/// Lua number reply this way, so `return 1e20` replies -9223372036854775808.
pub fn c_trunc(x: f64) -> i64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if x.is_nan() || !(-TWO_63..TWO_63).contains(&x) {
        i64::MIN
    } else {
        x.trunc() as i64
    }
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

    #[test]
    fn truncation_matches_c_cast() {
        assert_eq!(c_trunc(3.99), 3);
        assert_eq!(c_trunc(-3.99), -3);
        assert_eq!(c_trunc(1e20), i64::MIN);
        assert_eq!(c_trunc(f64::NAN), i64::MIN);
    }
}
