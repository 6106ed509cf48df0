/*
 * INCRBYFLOAT and HINCRBYFLOAT compute in C's long double (80-bit on x86-64, 128-bit
 * on aarch64), read with strtold and printed with "%.17Lf" less its trailing zeros.
 * Rust has no long double, and f64 prints other text for everyday sums (0.1 + 0.2 is
 * "0.3" in Redis, 0.30000000000000004 in f64) and overflows at 1.8e308 where Redis
 * goes on to 1.1e4932. These few lines make the same libc calls Redis makes, so the
 * replies are the same bytes on the same platform. The Rust side is long_double.rs.
 *
 * A value crosses into Rust as 16 opaque bytes (sizeof(long double) is at most 16).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(long double) <= 16, "a long double must fit in 16 bytes");

/* Redis's MAX_LONG_DOUBLE_CHARS: the longest text accepted, and the reply buffer. */
#define LD_MAX_CHARS (5 * 1024)

/* Parses `len` bytes as Redis's string2ld does: all of them, no leading space, no
 * NaN, not out of range. Returns 1 and writes the value to `out`, or 0. */
int redlockd_ld_parse(const char *s, size_t len, unsigned char out[16]) {
    char buf[LD_MAX_CHARS];
    char *end;
    long double v;
    if (len == 0 || len >= sizeof(buf)) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    v = strtold(buf, &end);
    if (isspace((unsigned char)buf[0]) || *end != '\0' || (size_t)(end - buf) != len ||
        (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || fpclassify(v) == FP_ZERO)) ||
        errno == EINVAL || isnan(v))
        return 0;
    memset(out, 0, 16);
    memcpy(out, &v, sizeof(v));
    return 1;
}

/* 1 when the value is neither NaN nor infinite. */
int redlockd_ld_is_finite(const unsigned char a[16]) {
    long double v;
    memcpy(&v, a, sizeof(v));
    return !isnan(v) && !isinf(v);
}

/* a + b printed as Redis's ld2string(LD_STR_HUMAN) prints it, into `out` (at least
 * LD_MAX_CHARS bytes). Returns the length, or -1 when the sum is NaN or infinite. */
long redlockd_ld_add(const unsigned char a[16], const unsigned char b[16], char *out,
                     size_t out_len) {
    long double x, y, sum;
    int l;
    memcpy(&x, a, sizeof(x));
    memcpy(&y, b, sizeof(y));
    sum = x + y;
    if (isnan(sum) || isinf(sum)) return -1;
    l = snprintf(out, out_len, "%.17Lf", sum);
    if (l < 0 || (size_t)l + 1 > out_len) return -2;
    if (memchr(out, '.', (size_t)l) != NULL) {
        while (out[l - 1] == '0') l--;
        if (out[l - 1] == '.') l--;
    }
    if (l == 2 && out[0] == '-' && out[1] == '0') {
        out[0] = '0';
        l = 1;
    }
    return l;
}
