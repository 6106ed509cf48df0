//! The command families, one file each, as Redis's `t_*.c`: strings (and the native
//! compare-and-set, `cas`), keys, expiry, hashes, lists, sets, sorted sets (single
//! members `zsets`, ranges `zranges`, algebra `zalgebra`), the collection cursors
//! (`scan`), streams (entries and reads `streams`, consumer groups and XINFO
//! `stream_groups`), pub/sub and fencing tokens; `typed` is what the collection families share.
//! SORT (`sort`), DUMP / RESTORE (`dump`) and OBJECT (`object`) read any type.
//! Over strings: bitmaps (`bits`), HyperLogLog (`hll`) and LCS (`lcs`); over sorted
//! sets: GEO (`geo`).

pub mod bits;
pub mod cas;
pub mod dump;
pub mod expire;
pub mod fencing;
pub mod geo;
pub mod hashes;
pub mod hll;
pub mod keys;
pub mod lcs;
pub mod lists;
pub mod locks;
mod long_double;
pub mod object;
pub mod pubsub;
mod scan;
pub mod sets;
pub mod sort;
pub mod stream_groups;
pub mod stream_reads;
pub mod streams;
pub mod strings;
pub(crate) mod typed;
pub mod zalgebra;
pub mod zranges;
pub mod zsets;
