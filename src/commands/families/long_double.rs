//! Redis's float increments (INCRBYFLOAT, HINCRBYFLOAT) in C's long double, through
//! `long_double.c` (built by build.rs): see that file for why f64 is not enough.

use bytes::Bytes;

/// Redis's MAX_LONG_DOUBLE_CHARS: the reply buffer (1.1e4932 prints in ~4,950 bytes).
const MAX_CHARS: usize = 5 * 1024;

extern "C" {
    fn redlockd_ld_parse(s: *const u8, len: usize, out: *mut [u8; 16]) -> i32;
    fn redlockd_ld_is_finite(a: *const [u8; 16]) -> i32;
    fn redlockd_ld_add(
        a: *const [u8; 16],
        b: *const [u8; 16],
        out: *mut u8,
        len: usize,
    ) -> std::ffi::c_long;
}

/// A C long double, as opaque bytes.
#[derive(Clone, Copy)]
pub struct LongDouble([u8; 16]);

impl LongDouble {
    /// Parses as Redis's string2ld: the whole text, no leading space, no NaN, not out of
    /// range (strtold's forms: "1.5", "1e10", "0x1p4", "inf").
    pub fn parse(text: &[u8]) -> Option<LongDouble> {
        let mut out = [0u8; 16];
        // SAFETY: the C side reads `len` bytes of `text` and writes 16 bytes to `out`.
        let ok = unsafe { redlockd_ld_parse(text.as_ptr(), text.len(), &mut out) };
        (ok == 1).then_some(LongDouble(out))
    }

    pub fn zero() -> LongDouble {
        LongDouble::parse(b"0").expect("0 parses")
    }

    /// Neither NaN nor infinite.
    pub fn is_finite(&self) -> bool {
        // SAFETY: reads the 16 bytes a parse wrote.
        unsafe { redlockd_ld_is_finite(&self.0) == 1 }
    }

    /// `self + other` as Redis prints it ("%.17Lf" less trailing zeros), or `None`
    /// when the sum is NaN or infinite.
    pub fn add(&self, other: &LongDouble) -> Option<Bytes> {
        let mut out = vec![0u8; MAX_CHARS];
        // SAFETY: the C side writes at most `out.len()` bytes (snprintf's bound) and
        // returns how many, or a negative number.
        let n = unsafe { redlockd_ld_add(&self.0, &other.0, out.as_mut_ptr(), out.len()) };
        let n = usize::try_from(n).ok()?;
        out.truncate(n);
        Some(Bytes::from(out))
    }
}

#[cfg(test)]
mod tests {
    use super::LongDouble;

    fn add(a: &str, b: &str) -> Option<String> {
        let a = LongDouble::parse(a.as_bytes())?;
        let b = LongDouble::parse(b.as_bytes())?;
        a.add(&b).map(|t| String::from_utf8(t.to_vec()).unwrap())
    }

    #[test]
    fn sums_print_as_redis_prints_them() {
        assert_eq!(add("0.1", "0.2").as_deref(), Some("0.3"));
        assert_eq!(add("10.5", "0.1").as_deref(), Some("10.6"));
        assert_eq!(add("3.0", "0").as_deref(), Some("3"));
        assert_eq!(add("-1.5", "1.5").as_deref(), Some("0"));
        assert_eq!(add("5.0e3", "2.0e2").as_deref(), Some("5200"));
        assert_eq!(add("0x10", "0").as_deref(), Some("16"));
        // Past f64's range: long double goes on.
        let big = add("1e4000", "0").unwrap();
        assert_eq!(big.len(), 4000, "{big}");
        assert_eq!(add("1e308", "1e308").map(|s| s.len()), Some(309));
    }

    #[test]
    fn parse_refuses_what_string2ld_refuses() {
        for bad in ["", " 1", "1 ", "abc", "1.5x", "nan", "1e99999", "1\0"] {
            assert!(LongDouble::parse(bad.as_bytes()).is_none(), "{bad:?}");
        }
        assert!(LongDouble::parse(&vec![b'1'; 5 * 1024]).is_none());
        assert!(!LongDouble::parse(b"inf").unwrap().is_finite());
        assert!(LongDouble::parse(b"-1.5e10").unwrap().is_finite());
        assert!(add("inf", "-inf").is_none());
        assert!(add("1e4932", "1e4932").is_none());
    }
}
