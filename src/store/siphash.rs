//! SipHash over a key's bytes in one pass: the shard tables' hash (and lock
//! introspection's, `commands::families::locks`).
//!
//! A keyed hash, because keys come from clients: with a secret key, nobody can craft
//! keys that all land in one bucket (Redis hashes its keys with SipHash-1-2 for the
//! same reason). std's `DefaultHasher` is SipHash-1-3 too, but through `Hasher` a
//! key cost ~300 instructions: the seed, a length prefix and the bytes each went
//! through its buffering `write`. Here the bytes are read 8 at a time, and the key is
//! 128 bits (the seed stretched), not a seed hashed in as a prefix.

/// SipHash with `C` compression and `D` finalization rounds (the paper's SipHash-c-d),
/// keyed by `k0`, `k1`.
pub(crate) fn siphash<const C: usize, const D: usize>(k0: u64, k1: u64, data: &[u8]) -> u64 {
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    let mut compress = |m: u64| {
        v[3] ^= m;
        for _ in 0..C {
            round(&mut v);
        }
        v[0] ^= m;
    };
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        compress(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
    }
    // The last block: the bytes left over, little-endian, and the length's low byte
    // on top.
    let mut last = (data.len() as u64) << 56;
    for (i, &b) in chunks.remainder().iter().enumerate() {
        last |= u64::from(b) << (8 * i);
    }
    compress(last);
    v[2] ^= 0xff;
    for _ in 0..D {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

#[inline(always)]
fn round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's key: bytes 00..0f, read little-endian.
    const K0: u64 = 0x0706_0504_0302_0100;
    const K1: u64 = 0x0f0e_0d0c_0b0a_0908;

    #[test]
    fn siphash_2_4_matches_the_reference_vectors() {
        // The empty message, and the paper's example message 00..0e.
        assert_eq!(siphash::<2, 4>(K0, K1, b""), 0x726f_db47_dd0e_0e31);
        let msg: Vec<u8> = (0u8..15).collect();
        assert_eq!(siphash::<2, 4>(K0, K1, &msg), 0xa129_ca61_49be_45e5);
    }

    #[test]
    fn every_byte_and_the_length_count() {
        let base = siphash::<1, 3>(1, 2, b"lock:12345678");
        assert_ne!(base, siphash::<1, 3>(1, 2, b"lock:12345679"));
        assert_ne!(base, siphash::<1, 3>(1, 2, b"lock:1234567"));
        assert_ne!(base, siphash::<1, 3>(1, 2, b"lock:12345678\0"));
        assert_ne!(base, siphash::<1, 3>(1, 3, b"lock:12345678"));
        assert_eq!(base, siphash::<1, 3>(1, 2, b"lock:12345678"));
    }
}
