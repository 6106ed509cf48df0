use super::*;
use crate::store::packed::CLOCK_MASK;
use crate::store::Value;

fn entry_with_deadline(d: Option<u64>) -> Entry {
    Entry {
        value: Value::Str(Bytes::from("v")),
        deadline_ms: d,
    }
}

#[test]
fn prefetch_changes_nothing_and_never_waits_for_a_shard() {
    let db = Db::new(7);
    if let Slot::Vacant(v) = db.entry(b"k", 0) {
        v.insert(entry_with_deadline(Some(100)));
    }
    for key in [&b"k"[..], b"absent"] {
        let hash = db.prefetch_slots(key);
        db.prefetch_entry(hash);
    }
    assert_eq!(db.get(b"k", 0).map(|e| e.deadline_ms()), Some(Some(100)));
    assert!(db.get(b"absent", 0).is_none());
    // The key's shard write-locked (here, by this thread): the hint is skipped.
    let held = db.entry(b"k", 0);
    let hash = db.prefetch_slots(b"k");
    db.prefetch_entry(hash);
    drop(held);
}

#[test]
fn expired_entries_read_as_absent_and_are_removed() {
    let db = Db::new(1);
    db.insert(b"k", entry_with_deadline(Some(100)));
    assert!(db.get(b"k", 100).is_some());
    assert!(db.get(b"k", 101).is_none());
    assert_eq!(db.len(), 0);
}

#[test]
fn sweep_reclaims_expired_keys_only() {
    let db = Db::new(1);
    for i in 0..1000u32 {
        let d = if i % 2 == 0 { Some(10) } else { None };
        db.insert(&i.to_be_bytes(), entry_with_deadline(d));
    }
    assert_eq!(db.sweep(11), 500);
    assert_eq!(db.len(), 500);
}

#[test]
fn deadlines_set_through_guards_are_indexed() {
    let db = Db::new(3);
    db.insert(b"a", entry_with_deadline(None));
    db.get_mut(b"a", 0).unwrap().set_deadline(Some(50));
    match db.entry(b"b", 0) {
        Slot::Vacant(v) => v.insert(entry_with_deadline(Some(70))),
        Slot::Occupied(_) => unreachable!(),
    }
    // Extended before its first deadline: the old index entry finds nothing due.
    db.insert(b"c", entry_with_deadline(Some(40)));
    db.get_mut(b"c", 0).unwrap().set_deadline(Some(1000));
    assert_eq!(db.sweep(100), 2);
    assert_eq!(db.len(), 1);
    assert!(db.get(b"c", 100).is_some());
    assert_eq!(db.sweep(1001), 1);
    assert!(db.is_empty());
}

#[test]
fn nothing_due_means_no_work_and_mass_expiry_shrinks_tables() {
    let db = Db::new(5);
    for i in 0..100_000u32 {
        let d = if i % 10 == 0 { 1_000_000 } else { 500 };
        db.insert(&i.to_be_bytes(), entry_with_deadline(Some(d)));
    }
    assert_eq!(db.sweep(400), 0);
    assert_eq!(db.len(), 100_000);
    let full = db.table_bytes();
    assert_eq!(db.sweep(600), 90_000);
    assert_eq!(db.len(), 10_000);
    assert!(
        db.table_bytes() * 3 < full,
        "{full} -> {}",
        db.table_bytes()
    );
}

#[test]
fn mass_expiry_gives_the_slab_pages_back_in_bounded_holds() {
    let db = Db::new(11);
    for i in 0..20_000u32 {
        db.insert(format!("live:{i}").as_bytes(), entry_with_deadline(None));
    }
    let live = db.slab_bytes();
    for i in 0..20_000u32 {
        let d = Some(1_000 + u64::from(i % 7));
        db.insert(format!("lock:{i}").as_bytes(), entry_with_deadline(d));
    }
    let full = db.slab_bytes();
    assert!(full > live * 18 / 10, "{live} -> {full}");
    // Nothing due: nothing read.
    assert_eq!(db.reclaim_due(1_000, usize::MAX), (0, false));
    // A budget stops a pass early; the next passes go on where it stopped.
    assert_eq!(db.reclaim_due(2_000, 300), (300, true));
    assert_eq!(db.len(), 39_700);
    let mut passes = 0;
    while db.reclaim_due(2_000, 1_000).1 {
        passes += 1;
    }
    assert!(passes >= 19, "{passes}");
    assert_eq!(db.len(), 20_000);
    assert_eq!(db.count_expiring(), 0);
    // The expired keys' pages went back (they were filled after the others').
    assert!(
        db.slab_bytes() < live * 11 / 10,
        "{live} -> {}",
        db.slab_bytes()
    );
    assert!(db.get(b"live:19999", 2_000).is_some());
    assert_eq!(db.sweep(u64::MAX), 0);
}

#[test]
fn reads_and_writes_stamp_the_access_clock_and_peek_does_not() {
    let db = Db::new(9);
    let t = 5_000_000u64;
    let idle = |key: &[u8], now: u64| db.peek(key, now).unwrap().idle_seconds(now);
    if let Slot::Vacant(v) = db.entry(b"k", t) {
        v.insert(entry_with_deadline(None));
    }
    assert_eq!(idle(b"k", t + 7_500), 7);
    assert_eq!(idle(b"k", t + 9_000), 9);
    drop(db.get(b"k", t + 10_000));
    assert_eq!(idle(b"k", t + 12_999), 2);
    drop(db.entry(b"k", t + 13_000));
    assert_eq!(idle(b"k", t + 14_000), 1);
    db.get_mut(b"k", t + 20_000)
        .unwrap()
        .set_idle_seconds(3600, t + 20_000);
    assert_eq!(idle(b"k", t + 20_000), 3600);
    // A change that moves the entry to a bigger slot keeps its clock.
    {
        let mut e = db.get_mut(b"k", t + 30_000).unwrap();
        e.set_idle_seconds(50, t + 30_000);
        e.set_str(&[b'x'; 1000]);
        e.set_deadline(Some(u64::MAX));
    }
    assert_eq!(idle(b"k", t + 30_000), 50);
    db.get_mut(b"k", t).unwrap().set_idle_seconds(u64::MAX, t);
    assert_eq!(idle(b"k", t), u64::from(CLOCK_MASK));
    // `insert` stamps the latest lookup's clock.
    db.insert(b"n", entry_with_deadline(None));
    assert_eq!(idle(b"n", t + 3_000), 3);
    // The clock wraps at 2^24 seconds; idle times read right across the wrap.
    let wrap = u64::from(CLOCK_MASK + 1) * 1000;
    drop(db.get(b"k", wrap - 2_000));
    assert_eq!(idle(b"k", wrap + 3_000), 5);
}

#[test]
fn compaction_gives_back_the_pages_deletions_left_sparse() {
    let db = Db::new(13);
    let value = |i: u32| format!("token-{i:016}");
    for i in 0..40_000u32 {
        let e = Entry {
            value: Value::Str(Bytes::from(value(i))),
            deadline_ms: Some(10_000 + u64::from(i / 4 % 2)),
        };
        db.insert(format!("lock:{i}").as_bytes(), e);
    }
    let full = db.slab_bytes();
    for i in (0..40_000u32).filter(|i| i % 4 != 0) {
        assert!(db.remove(format!("lock:{i}").as_bytes(), 0));
    }
    assert!(
        db.slab_bytes() > full * 9 / 10,
        "deletions alone free few pages"
    );
    assert_eq!(db.compact_sparse_shards(1_000), 1_000);
    while db.compact_sparse_shards(1_000) > 0 {}
    // A quarter of the entries are left; the pages are left at least half full.
    assert!(
        db.slab_bytes() < full * 6 / 10,
        "{full} -> {}",
        db.slab_bytes()
    );
    for i in (0..40_000u32).step_by(4) {
        let e = db.get(format!("lock:{i}").as_bytes(), 0).expect("kept");
        assert!(matches!(e.value(), ValueRef::Str(s) if s == value(i).as_bytes()));
        assert_eq!(e.deadline_ms(), Some(10_000 + u64::from(i / 4 % 2)));
    }
    // The moved entries' deadlines still reach the sweeper.
    assert_eq!(db.sweep(10_001), 5_000);
    assert_eq!(db.sweep(10_002), 5_000);
    assert!(db.is_empty());
}

#[test]
fn scan_returns_every_key_once() {
    let db = Db::new(7);
    for i in 0..500u32 {
        db.insert(format!("k{i}").as_bytes(), entry_with_deadline(None));
    }
    let mut seen = std::collections::HashSet::new();
    let mut cursor = 0;
    loop {
        let (next, keys) = db.scan(cursor, 10, 0);
        for k in keys {
            assert!(seen.insert(k));
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), 500);
}

/// Inserts `key` as a lock (`store/lock.rs`) expiring at `deadline`.
fn insert_lock(db: &Db, key: &[u8], deadline: u64) {
    let Slot::Vacant(v) = db.entry(key, 0) else {
        panic!("a new key");
    };
    v.insert_marked(entry_with_deadline(Some(deadline)), true);
}

#[test]
fn a_delayed_lock_reads_as_absent_stays_until_its_delay_ends_and_is_swept_then() {
    let db = Db::new(1);
    db.delay.set(50, Vec::new());
    insert_lock(&db, b"lock", 100);
    db.insert(b"plain", entry_with_deadline(Some(100)));
    assert!(db.get(b"lock", 101).is_none());
    assert!(db.get_mut(b"lock", 101).is_none());
    assert!(db.take(b"lock", 101).is_none());
    assert_eq!(db.lock_delay_left(b"lock", 101), Some(50));
    assert_eq!(db.lock_delay_left(b"plain", 101), None);
    assert_eq!(db.sweep(101), 1, "the plain key only");
    assert_eq!(db.count_delayed(101), 1);
    assert_eq!(db.lock_delay_left(b"lock", 150), Some(1));
    assert_eq!(db.sweep(150), 0);
    assert_eq!(db.lock_delay_left(b"lock", 151), None);
    assert_eq!(db.sweep(151), 1);
    assert_eq!(db.len(), 0);
}

#[test]
fn an_insert_replaces_a_delayed_lock_and_remove_ends_its_delay() {
    let db = Db::new(1);
    db.delay.set(50, Vec::new());
    insert_lock(&db, b"a", 100);
    insert_lock(&db, b"b", 100);
    let Slot::Vacant(v) = db.entry(b"a", 101) else {
        panic!("a delayed lock is vacant");
    };
    v.insert(entry_with_deadline(Some(500)));
    assert_eq!(db.len(), 2);
    assert_eq!(db.get(b"a", 101).map(|e| e.is_lock()), Some(false));
    assert!(!db.remove(b"b", 101), "a delayed lock is not live");
    assert_eq!(db.lock_delay_left(b"b", 101), None);
    assert_eq!(db.len(), 1);
}

#[test]
fn the_lock_mark_survives_a_move_and_prefixes_pick_the_delayed_keys() {
    let db = Db::new(1);
    db.delay.set(50, vec![Bytes::from("lock:")]);
    insert_lock(&db, b"lock:a", 100);
    insert_lock(&db, b"other", 100);
    // A longer value moves the entry to a bigger slot; a far deadline to the long form.
    if let Slot::Occupied(mut e) = db.entry(b"lock:a", 0) {
        e.set_str(&[b'x'; 200]);
        e.set_deadline(Some(1 << 50));
        e.set_deadline(Some(100));
    }
    assert_eq!(db.get(b"lock:a", 0).map(|e| e.is_lock()), Some(true));
    assert_eq!(db.lock_delay_left(b"lock:a", 101), Some(50));
    assert_eq!(db.lock_delay_left(b"other", 101), None);
    assert!(db.get(b"other", 101).is_none());
    assert_eq!(
        db.len(),
        1,
        "the lock outside the prefixes expired as usual"
    );
}
