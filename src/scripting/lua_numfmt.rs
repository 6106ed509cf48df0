//! Lua's number formatting: tostring and lua-cjson use `%.14g`; redis.call arguments
//! use `%.17g` (shared with the protocol's double replies).

pub use crate::protocol::numfmt::fmt_g;

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
    fn truncation_matches_c_cast() {
        assert_eq!(c_trunc(3.99), 3);
        assert_eq!(c_trunc(-3.99), -3);
        assert_eq!(c_trunc(1e20), i64::MIN);
        assert_eq!(c_trunc(f64::NAN), i64::MIN);
    }
}
