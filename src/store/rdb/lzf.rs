//! LZF as Redis's RDB strings use it (liblzf with Redis's settings: a 2^16-slot hash,
//! VERY_FAST). `compress` makes the same choices as Redis's lzf_c.c, so a DUMP
//! payload matches redis-server's byte for byte.

const HLOG: u32 = 16;
const MAX_LIT: usize = 1 << 5;
const MAX_OFF: usize = 1 << 13;
const MAX_REF: usize = (1 << 8) + (1 << 3);

fn idx(h: u32) -> usize {
    ((h >> (3 * 8 - HLOG)).wrapping_sub(h.wrapping_mul(5)) & ((1 << HLOG) - 1)) as usize
}

/// `input` compressed into at most `out_len` bytes, or `None` when it does not fit.
pub fn compress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    let n = input.len();
    if n < 3 || out_len == 0 {
        return None;
    }
    // Slots hold a position + 1 (0: empty), as liblzf's offsets from the input's
    // start (where position 0 can never be a reference).
    let mut htab = vec![0u32; 1 << HLOG];
    let mut out = vec![0u8; out_len + 4];
    let mut op = 1usize; // out[0] starts the first literal run
    let mut lit = 0usize;
    let mut ip = 0usize;
    let next = |h: u32, at: usize| (h << 8) | input[at + 2] as u32;
    let mut hval = (input[0] as u32) << 8 | input[1] as u32;
    while ip + 2 < n {
        hval = next(hval, ip);
        let slot = idx(hval);
        let reference = htab[slot] as usize; // position + 1
        htab[slot] = ip as u32 + 1;
        let matched = reference > 1 && {
            let r = reference - 1;
            ip - r - 1 < MAX_OFF
                && input[r + 2] == input[ip + 2]
                && input[r..r + 2] == input[ip..ip + 2]
        };
        if matched {
            let r = reference - 1;
            let off = ip - r - 1;
            let mut len = 2usize;
            let maxlen = (n - ip - len).min(MAX_REF);
            if op + 4 >= out_len && op - usize::from(lit == 0) + 4 >= out_len {
                return None;
            }
            out[op - lit - 1] = (lit as u8).wrapping_sub(1); // stop the run
            op -= usize::from(lit == 0); // drop an empty run
            let mut unrolled_mismatch = false;
            if maxlen > 16 {
                for _ in 0..16 {
                    len += 1;
                    if input[r + len] != input[ip + len] {
                        unrolled_mismatch = true;
                        break;
                    }
                }
            }
            if !unrolled_mismatch {
                loop {
                    len += 1;
                    if !(len < maxlen && input[r + len] == input[ip + len]) {
                        break;
                    }
                }
            }
            len -= 2; // octets - 1... minus one more
            ip += 1;
            if len < 7 {
                out[op] = ((off >> 8) + (len << 5)) as u8;
                op += 1;
            } else {
                out[op] = ((off >> 8) + (7 << 5)) as u8;
                out[op + 1] = (len - 7) as u8;
                op += 2;
            }
            out[op] = off as u8;
            op += 1;
            lit = 0;
            op += 1; // start a run
            ip += len + 1;
            if ip + 2 >= n {
                break;
            }
            ip -= 2;
            hval = (input[ip] as u32) << 8 | input[ip + 1] as u32;
            hval = next(hval, ip);
            htab[idx(hval)] = ip as u32 + 1;
            ip += 1;
            hval = next(hval, ip);
            htab[idx(hval)] = ip as u32 + 1;
            ip += 1;
        } else {
            if op >= out_len {
                return None;
            }
            lit += 1;
            out[op] = input[ip];
            op += 1;
            ip += 1;
            if lit == MAX_LIT {
                out[op - lit - 1] = (lit - 1) as u8;
                lit = 0;
                op += 1;
            }
        }
    }
    if op + 3 > out_len {
        return None;
    }
    while ip < n {
        lit += 1;
        out[op] = input[ip];
        op += 1;
        ip += 1;
        if lit == MAX_LIT {
            out[op - lit - 1] = (lit - 1) as u8;
            lit = 0;
            op += 1;
        }
    }
    out[op - lit - 1] = (lit as u8).wrapping_sub(1);
    op -= usize::from(lit == 0);
    out.truncate(op);
    Some(out)
}

/// LZF decompression to exactly `out_len` bytes; `None` for anything malformed.
pub fn decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(out_len.min(input.len().saturating_mul(64)));
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            out.extend_from_slice(input.get(i..i + n)?);
            i += n;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(i)? as usize;
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + *input.get(i)? as usize + 1;
            i += 1;
            let start = out.len().checked_sub(back)?;
            for k in 0..len + 2 {
                let c = out[start + k];
                out.push(c);
            }
        }
        if out.len() > out_len {
            return None;
        }
    }
    (out.len() == out_len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_references_expand() {
        // Literal "abc", then a back reference of length 3+2... to distance 3.
        let input = [2, b'a', b'b', b'c', 0x60, 2];
        assert_eq!(decompress(&input, 8), Some(b"abcabcab".to_vec()));
    }

    #[test]
    fn compress_round_trips() {
        let samples: Vec<Vec<u8>> = vec![
            vec![b'a'; 21],
            b"hello hello hello hello hello world".to_vec(),
            (0..5000u32)
                .flat_map(|i| (i % 97).to_string().into_bytes())
                .collect(),
            vec![0u8; 70000],
        ];
        for s in samples {
            let packed = compress(&s, s.len() - 4).expect("compressible");
            assert!(packed.len() <= s.len() - 4);
            assert_eq!(decompress(&packed, s.len()), Some(s));
        }
    }

    #[test]
    fn incompressible_input_is_refused() {
        let s: Vec<u8> = (0..64u8).collect();
        assert_eq!(compress(&s, s.len() - 4), None);
    }
}
