//! Hash slots: CRC16 (XMODEM: polynomial 0x1021, initial 0, no reflection) of the key,
//! or of its hash tag, modulo 16384, as Redis Cluster computes them.

/// How many hash slots a cluster has.
pub const SLOTS: usize = 16384;

/// The CRC16 table for polynomial 0x1021, built at compile time.
const TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// CRC16 (XMODEM) of `bytes`, as Redis Cluster's `crc16`.
pub fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ TABLE[usize::from(((crc >> 8) as u8) ^ b)]
    })
}

/// The part of a key that is hashed: the bytes between the first `{` and the first `}`
/// after it, when there are any; else the whole key (`{}` hashes the whole key).
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// The key's hash slot, 0..16383.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) & (SLOTS as u16 - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // Values from redis-server 7.0's CLUSTER KEYSLOT.
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"a"), 15495);
        assert_eq!(key_slot(b"b"), 3300);
        assert_eq!(key_slot(b"{user1}a"), 8106);
        assert_eq!(key_slot(b"{user1}a"), key_slot(b"user1"));
        assert_eq!(key_slot(b"{}a"), crc16(b"{}a") & 16383);
        assert_eq!(key_slot(b"a{}{b}"), crc16(b"a{}{b}") & 16383);
        assert_eq!(key_slot(b"a{b}{c}"), key_slot(b"b"));
        assert_eq!(key_slot(b"{a"), crc16(b"{a") & 16383);
        assert_eq!(key_slot(b""), 0);
    }
}
