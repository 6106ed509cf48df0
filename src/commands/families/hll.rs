//! HyperLogLog: PFADD, PFCOUNT, PFMERGE, PFDEBUG and PFSELFTEST over string values in
//! Redis's own format, byte for byte, since clients GET, SET and DUMP these strings
//! and hand them between servers.
//!
//! The format (Redis 7.0's hyperloglog.c): a 16-byte header, "HYLL", the encoding
//! (0 dense, 1 sparse), three zero bytes, and the cached cardinality as 8 bytes
//! little-endian whose top bit marks it stale. 16384 registers (the low 14 bits of
//! MurmurHash64A, seed 0xadc83b19, pick one; the run of zeros after them, plus one,
//! is its value). Dense: 6 bits a register, least significant first (12304 bytes in
//! all). Sparse: opcodes ZERO (00xxxxxx: 1-64 zero registers), XZERO (01xxxxxx
//! yyyyyyyy: 1-16384 zeros) and VAL (1vvvvvxx: 1-4 registers of value 1-32), turned
//! dense when a value passes 32 or the string would pass `hll-sparse-max-bytes`
//! (CONFIG SET; 3000 by default). Every change is made as Redis makes it (its sparse splits
//! and merges), so the bytes are the same as redis-server's for the same commands.
//! The estimate is Ertl's, as Redis 7 computes it.

use crate::commands::notify::{self as nt, notify};
use crate::commands::{CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::{Entry, Slot, Value, ValueRef};
use bytes::Bytes;

const P: u32 = 14;
const REGISTERS: usize = 1 << P;
const Q: usize = 64 - P as usize;
const HDR: usize = 16;
const DENSE_SIZE: usize = HDR + REGISTERS * 6 / 8;
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;

const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

fn corrupt() -> Reply {
    Reply::error(CORRUPT)
}

/// MurmurHash64A as Redis has it (blocks read little-endian on every machine).
fn murmur64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut blocks = data.chunks_exact(8);
    for b in blocks.by_ref() {
        let mut k = u64::from_le_bytes(b.try_into().unwrap());
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, b) in tail.iter().enumerate().rev() {
            h ^= u64::from(*b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element goes to and the value it offers (Redis's hllPatLen).
fn pattern(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Whether `s` is a HyperLogLog Redis would accept (isHLLObjectOrReply).
fn valid(s: &[u8]) -> bool {
    s.len() >= HDR
        && &s[..4] == b"HYLL"
        && s[4] <= SPARSE
        && (s[4] != DENSE || s.len() == DENSE_SIZE)
}

fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let b0 = u32::from(regs[byte]);
    let b1 = u32::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) & 63) as u8
}

fn dense_set(regs: &mut [u8], i: usize, val: u8) {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let v = u32::from(val);
    regs[byte] &= !((63u32 << fb) as u8);
    regs[byte] |= (v << fb) as u8;
    if let Some(b1) = regs.get_mut(byte + 1) {
        *b1 &= !((63u32 >> (8 - fb)) as u8);
        *b1 |= (v >> (8 - fb)) as u8;
    }
}

/// One sparse opcode at `at`: (bytes it takes, registers it covers, value). A
/// truncated XZERO reads a zero second byte, as Redis reads its string's terminator.
fn opcode(s: &[u8], at: usize) -> (usize, usize, u8) {
    let b = s[at];
    if b & 0xc0 == 0 {
        (1, usize::from(b & 0x3f) + 1, 0)
    } else if b & 0xc0 == 0x40 {
        let b1 = s.get(at + 1).copied().unwrap_or(0);
        (2, ((usize::from(b & 0x3f) << 8) | usize::from(b1)) + 1, 0)
    } else {
        (1, usize::from(b & 3) + 1, ((b >> 2) & 0x1f) + 1)
    }
}

fn is_val(b: u8) -> bool {
    b & 0x80 != 0
}

fn val_op(value: u8, len: usize) -> u8 {
    0x80 | ((value - 1) << 2) | (len as u8 - 1)
}

fn zeros_op(out: &mut Vec<u8>, len: usize) {
    if len > ZERO_MAX_LEN {
        out.push(((len - 1) >> 8) as u8 | 0x40);
        out.push(((len - 1) & 0xff) as u8);
    } else {
        out.push((len - 1) as u8);
    }
}

/// A new, empty HyperLogLog: sparse, one XZERO, cardinality 0 cached.
fn empty() -> Vec<u8> {
    let mut s = vec![0u8; HDR];
    s[..4].copy_from_slice(b"HYLL");
    s[4] = SPARSE;
    zeros_op(&mut s, XZERO_MAX_LEN);
    s
}

fn invalidate_cache(s: &mut [u8]) {
    s[15] |= 0x80;
}

/// The registers of a sparse `s` (`None`: its opcodes do not cover exactly 16384
/// registers).
fn sparse_registers(s: &[u8]) -> Option<Vec<u8>> {
    let mut regs = vec![0u8; REGISTERS];
    let mut idx = 0;
    let mut at = HDR;
    while at < s.len() {
        let (oplen, run, value) = opcode(s, at);
        if value > 0 {
            if idx + run > REGISTERS {
                return None;
            }
            regs[idx..idx + run].fill(value);
        }
        idx += run;
        at += oplen;
    }
    (idx == REGISTERS).then_some(regs)
}

/// Turns a sparse `s` dense, keeping its header (Redis's hllSparseToDense).
fn to_dense(s: &mut Vec<u8>) -> Result<(), Reply> {
    if s[4] == DENSE {
        return Ok(());
    }
    let regs = sparse_registers(s).ok_or_else(corrupt)?;
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HDR].copy_from_slice(&s[..HDR]);
    dense[4] = DENSE;
    for (i, v) in regs.into_iter().enumerate() {
        if v != 0 {
            dense_set(&mut dense[HDR..], i, v);
        }
    }
    *s = dense;
    Ok(())
}

/// Sets register `index` to `count` if that raises it: whether it changed. Sparse
/// follows Redis's hllSparseSet step by step (split the opcode covering the
/// register, then merge equal neighbouring values), going dense when needed.
fn set_register(s: &mut Vec<u8>, index: usize, count: u8, max_bytes: usize) -> Result<bool, Reply> {
    if s[4] == DENSE {
        let regs = &mut s[HDR..];
        if dense_get(regs, index) >= count {
            return Ok(false);
        }
        dense_set(regs, index, count);
        return Ok(true);
    }
    if count > VAL_MAX_VALUE {
        return promote(s, index, count);
    }
    let end = s.len();
    let (mut at, mut first, mut span, mut prev) = (HDR, 0usize, 0usize, None);
    let mut oplen = 1;
    while at < end {
        let (len, run, _) = opcode(s, at);
        oplen = len;
        span = run;
        if index < first + span {
            break;
        }
        prev = Some(at);
        at += len;
        first += span;
    }
    if span == 0 || at >= end {
        return Err(corrupt());
    }
    let (_, runlen, value) = opcode(s, at);
    let zero = value == 0;
    if !zero && value >= count {
        return Ok(false);
    }
    if runlen == 1 && (!zero || oplen == 1) {
        s[at] = val_op(count, 1);
    } else {
        let last = first + span - 1;
        let mut seq = Vec::with_capacity(5);
        if zero {
            if index != first {
                zeros_op(&mut seq, index - first);
            }
            seq.push(val_op(count, 1));
            if index != last {
                zeros_op(&mut seq, last - index);
            }
        } else {
            if index != first {
                seq.push(val_op(value, index - first));
            }
            seq.push(val_op(count, 1));
            if index != last {
                seq.push(val_op(value, last - index));
            }
        }
        if seq.len() > oplen && s.len() + seq.len() - oplen > max_bytes {
            return promote(s, index, count);
        }
        // A truncated last XZERO: Redis writes the new opcodes over it but makes the
        // string `seq.len() - 2` bytes longer, one less than what it wrote.
        let new_len = s.len() + seq.len() - oplen;
        s.splice(at..(at + oplen).min(end), seq);
        s.truncate(new_len);
    }
    // Merge runs of equal values, scanning five opcodes from the one before.
    let mut p = prev.unwrap_or(HDR);
    let mut scan = 5;
    while p < s.len() && scan > 0 {
        scan -= 1;
        let b = s[p];
        if !is_val(b) {
            p += if b & 0xc0 == 0x40 { 2 } else { 1 };
            continue;
        }
        if s.get(p + 1).is_some_and(|n| is_val(*n)) {
            let (_, l1, v1) = opcode(s, p);
            let (_, l2, v2) = opcode(s, p + 1);
            if v1 == v2 && l1 + l2 <= VAL_MAX_LEN {
                s[p + 1] = val_op(v1, l1 + l2);
                s.remove(p);
                continue;
            }
        }
        p += 1;
    }
    invalidate_cache(s);
    Ok(true)
}

fn promote(s: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Reply> {
    to_dense(s)?;
    dense_set(&mut s[HDR..], index, count);
    Ok(true)
}

/// Adds `max[i] = max(max[i], register i)` for the HyperLogLog `s`.
fn merge_into(max: &mut [u8], s: &[u8]) -> Result<(), Reply> {
    if s[4] == DENSE {
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(&s[HDR..], i));
        }
        return Ok(());
    }
    let regs = sparse_registers(s).ok_or_else(corrupt)?;
    for (m, r) in max.iter_mut().zip(regs) {
        *m = (*m).max(r);
    }
    Ok(())
}

/// The histogram of register values: `None` when a sparse string's opcodes do not
/// cover exactly the registers (the counts are taken all the same, as Redis does).
fn histogram(s: &[u8]) -> (Vec<u32>, bool) {
    let mut h = vec![0u32; 64];
    if s[4] == DENSE {
        for i in 0..REGISTERS {
            h[usize::from(dense_get(&s[HDR..], i))] += 1;
        }
        return (h, true);
    }
    let mut idx = 0usize;
    let mut at = HDR;
    while at < s.len() {
        let (oplen, run, value) = opcode(s, at);
        idx += run;
        h[usize::from(value)] += run as u32;
        at += oplen;
    }
    (h, idx == REGISTERS)
}

fn raw_histogram(regs: &[u8]) -> Vec<u32> {
    let mut h = vec![0u32; 64];
    for r in regs {
        h[usize::from(*r)] += 1;
    }
    h
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

/// Ertl's estimator over the register histogram (Redis's hllCount).
fn estimate(h: &[u32]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - f64::from(h[Q + 1])) / m);
    for j in (1..=Q).rev() {
        z += f64::from(h[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(h[0]) / m);
    (0.721_347_520_444_481_7 * m * m / z).round() as u64
}

/// The HyperLogLog at `key` copied out: `None` when missing; WRONGTYPE for another
/// type or a string that is not one.
fn read_hll(ctx: &Ctx, key: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
    match ctx.db().get(key, ctx.now_ms) {
        None => Ok(None),
        Some(e) => match e.value() {
            ValueRef::Str(s) if valid(s) => Ok(Some(s.to_vec())),
            ValueRef::Str(_) => Err(Reply::error(NOT_HLL)),
            _ => Err(errors::wrongtype()),
        },
    }
}

/// Runs `f` on a copy of the HyperLogLog at `key` (created when missing and `create`)
/// and stores the copy back when `f` says it changed (also when it failed after
/// changing it: Redis changes its string in place).
fn update<T>(
    ctx: &Ctx,
    key: &[u8],
    create: bool,
    f: impl FnOnce(&mut Vec<u8>, &mut bool) -> Result<T, Reply>,
) -> Result<Option<T>, Reply> {
    match ctx.db().entry(key, ctx.now_ms) {
        Slot::Occupied(mut e) => {
            let mut s = match e.value() {
                ValueRef::Str(s) if valid(s) => s.to_vec(),
                ValueRef::Str(_) => return Err(Reply::error(NOT_HLL)),
                _ => return Err(errors::wrongtype()),
            };
            let mut changed = false;
            let out = f(&mut s, &mut changed);
            if changed {
                e.set_str(&s);
            }
            out.map(Some)
        }
        Slot::Vacant(v) => {
            if !create {
                return Ok(None);
            }
            ctx.shared.fence.check_has_ttl()?;
            let mut s = empty();
            let mut changed = true;
            let out = f(&mut s, &mut changed);
            v.insert(Entry::new(Value::Str(Bytes::from(s))));
            out.map(Some)
        }
    }
}

/// `hll-sparse-max-bytes`.
fn sparse_max_bytes(ctx: &Ctx) -> usize {
    let v = ctx
        .shared
        .hll_sparse_max_bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// PFADD key [element...]: 1 when a register changed or the key was created.
pub fn pfadd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let max_bytes = sparse_max_bytes(ctx);
    let updated = update(ctx, &args[1], true, |s, changed| {
        // A new key starts out changed (and counts as an update).
        let mut updated = *changed;
        let mut registers = false;
        for ele in &args[2..] {
            let (index, count) = pattern(ele);
            let set = set_register(s, index, count, max_bytes);
            *changed |= !matches!(set, Ok(false));
            if set? {
                registers = true;
            }
        }
        updated |= registers;
        // As Redis: a new key counts as an update, so even an empty PFADD leaves the
        // cached estimate marked stale.
        if updated {
            invalidate_cache(s);
        }
        Ok(updated)
    })?;
    if updated == Some(true) {
        notify(ctx, nt::STRING, "pfadd", &args[1]);
    }
    Ok(Reply::Integer((updated == Some(true)) as i64))
}

/// PFCOUNT key [key...]: the estimated cardinality (of the union, for several keys).
/// One key's estimate is cached in its header, as Redis caches it.
pub fn pfcount(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len() > 2 {
        let mut max = vec![0u8; REGISTERS];
        for key in &args[1..] {
            if let Some(s) = read_hll(ctx, key)? {
                merge_into(&mut max, &s)?;
            }
        }
        return Ok(Reply::Integer(estimate(&raw_histogram(&max)) as i64));
    }
    let cached =
        |s: &[u8]| (s[15] & 0x80 == 0).then(|| u64::from_le_bytes(s[8..16].try_into().unwrap()));
    // A valid cached estimate is read without touching the key.
    match read_hll(ctx, &args[1])? {
        None => return Ok(Reply::Integer(0)),
        Some(s) => {
            if let Some(card) = cached(&s) {
                return Ok(Reply::Integer(card as i64));
            }
        }
    }
    let card = update(ctx, &args[1], false, |s, changed| {
        if let Some(card) = cached(s) {
            return Ok(card);
        }
        let (h, ok) = histogram(s);
        if !ok {
            return Err(corrupt());
        }
        let card = estimate(&h);
        s[8..16].copy_from_slice(&card.to_le_bytes());
        *changed = true;
        Ok(card)
    })?;
    Ok(Reply::Integer(card.unwrap_or(0) as i64))
}

/// PFMERGE destkey [sourcekey...]: the destination (itself a source) holds the union.
/// It goes dense when any source is dense.
pub fn pfmerge(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let max_bytes = sparse_max_bytes(ctx);
    let mut max = vec![0u8; REGISTERS];
    let mut dense = false;
    for key in &args[1..] {
        match read_hll(ctx, key)? {
            Some(s) => {
                dense |= s[4] == DENSE;
                merge_into(&mut max, &s)?;
            }
            None => nt::key_miss(ctx, key),
        }
    }
    update(ctx, &args[1], true, |s, changed| {
        *changed = true;
        if dense {
            to_dense(s)?;
        }
        for (i, m) in max.iter().enumerate() {
            if *m != 0 {
                // As Redis: a sparse register that cannot be set is passed over.
                let _ = set_register(s, i, *m, max_bytes);
            }
        }
        invalidate_cache(s);
        Ok(())
    })?;
    notify(ctx, nt::STRING, "pfadd", &args[1]);
    Ok(Reply::Ok)
}

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key: Redis's debugging view.
pub fn pfdebug(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let sub = args[1].to_ascii_lowercase();
    let key = &args[2];
    let out = update(ctx, key, false, |s, changed| match sub.as_slice() {
        b"getreg" => {
            if s[4] == SPARSE {
                to_dense(s)?;
                *changed = true;
            }
            Ok(Reply::Array(
                (0..REGISTERS)
                    .map(|i| Reply::Integer(i64::from(dense_get(&s[HDR..], i))))
                    .collect(),
            ))
        }
        b"decode" => {
            if s[4] != SPARSE {
                return Err(Reply::error("ERR HLL encoding is not sparse"));
            }
            let mut parts = Vec::new();
            let mut at = HDR;
            while at < s.len() {
                let (oplen, run, value) = opcode(s, at);
                parts.push(match (value, oplen) {
                    (0, 1) => format!("z:{run}"),
                    (0, _) => format!("Z:{run}"),
                    _ => format!("v:{value},{run}"),
                });
                at += oplen;
            }
            Ok(Reply::Bulk(Bytes::from(parts.join(" "))))
        }
        b"encoding" => Ok(Reply::status(if s[4] == DENSE {
            "dense"
        } else {
            "sparse"
        })),
        b"todense" => {
            let sparse = s[4] == SPARSE;
            if sparse {
                to_dense(s)?;
                *changed = true;
            }
            Ok(Reply::Integer(sparse as i64))
        }
        _ => Err(Reply::error(format!(
            "ERR Unknown PFDEBUG subcommand '{}'",
            String::from_utf8_lossy(&args[1])
        ))),
    })?;
    out.ok_or_else(|| Reply::error("ERR The specified key does not exist"))
}

/// PFSELFTEST: Redis's self test of this implementation: the dense register packing
/// with random values, then 10 million elements added to a dense and a sparse
/// HyperLogLog side by side, checking at 1, 10, 100... that the sparse one is still
/// sparse while small, that both estimate alike, and that the error is within bounds.
pub fn pfselftest(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let max_bytes = sparse_max_bytes(ctx);
    use rand::Rng;
    let mut rng = rand::rng();
    let mut regs = vec![0u8; DENSE_SIZE - HDR];
    let mut expect = vec![0u8; REGISTERS];
    for _ in 0..1000 {
        for (i, e) in expect.iter_mut().enumerate() {
            *e = rng.random::<u8>() & 63;
            dense_set(&mut regs, i, *e);
        }
        for (i, e) in expect.iter().enumerate() {
            let got = dense_get(&regs, i);
            if got != *e {
                return Err(Reply::error(format!(
                    "TESTFAILED Register {i} should be {e} but is {got}"
                )));
            }
        }
    }
    let mut dense = empty();
    to_dense(&mut dense)?;
    let mut sparse = empty();
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let seed: u64 = rng.random();
    let mut checkpoint: u64 = 1;
    for j in 1..=10_000_000u64 {
        let ele = (j ^ seed).to_le_bytes();
        let (index, count) = pattern(&ele);
        set_register(&mut dense, index, count, max_bytes)?;
        set_register(&mut sparse, index, count, max_bytes)?;
        if j != checkpoint {
            continue;
        }
        if j < (max_bytes / 2) as u64 && sparse[4] != SPARSE {
            return Err(Reply::error("TESTFAILED sparse encoding not used"));
        }
        let card = estimate(&histogram(&dense).0);
        if card != estimate(&histogram(&sparse).0) {
            return Err(Reply::error("TESTFAILED dense/sparse disagree"));
        }
        let maxerr = if j == 10 {
            1
        } else {
            (relerr * 6.0 * checkpoint as f64).ceil() as u64
        };
        if checkpoint.abs_diff(card) > maxerr {
            return Err(Reply::error(format!(
                "TESTFAILED Too big error. card:{checkpoint} abserr:{}",
                checkpoint.abs_diff(card)
            )));
        }
        checkpoint *= 10;
    }
    Ok(Reply::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_hll_is_redis_bytes() {
        let s = empty();
        assert_eq!(s, b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff");
        let (h, ok) = histogram(&s);
        assert!(ok);
        assert_eq!(estimate(&h), 0);
    }

    #[test]
    fn dense_registers_round_trip() {
        let mut regs = vec![0u8; DENSE_SIZE - HDR];
        for i in 0..REGISTERS {
            dense_set(&mut regs, i, (i % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&regs, i), (i % 64) as u8, "{i}");
        }
    }

    #[test]
    fn sparse_and_dense_agree() {
        let mut sparse = empty();
        let mut dense = empty();
        to_dense(&mut dense).unwrap();
        for j in 0..300u32 {
            let (i, c) = pattern(&j.to_le_bytes());
            assert_eq!(
                set_register(&mut sparse, i, c, 3000).unwrap(),
                set_register(&mut dense, i, c, 3000).unwrap()
            );
        }
        assert_eq!(
            estimate(&histogram(&sparse).0),
            estimate(&histogram(&dense).0)
        );
        assert_eq!(sparse[4], SPARSE);
        to_dense(&mut sparse).unwrap();
        assert_eq!(sparse[HDR..], dense[HDR..]);
    }
}
