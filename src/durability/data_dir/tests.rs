//! The data directory: identity, state slots, locking, init and adopt, old versions.

use super::*;

fn temp_dir(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "redlockd-unit-{name}-{}-{}",
        std::process::id(),
        rand::random::<u64>()
    ))
}

#[test]
fn state_survives_reopen_and_a_torn_slot() {
    let p = temp_dir("state");
    let id = {
        let d = NodeDir::open(&p).unwrap();
        d.update(|s| s.token_reserved = 10).unwrap();
        d.update(|s| s.token_reserved = 20).unwrap();
        d.state().node_id
    };
    // Tear the newest slot (seq 3 lives in slot 1): the older one (10) is used. The
    // file is put back as if this node had just written it: a real tear comes with a
    // crash in the middle of the node's own write, whose ctime either did not reach
    // the disk (the older slot's stands) or did (refused as changed: see
    // `not_as_written`), and the time this test takes must not decide which.
    let mut raw = std::fs::read(p.join(STATE_FILE)).unwrap();
    raw[SLOT_LEN + 40..SLOT_LEN + 48].fill(0xff);
    put_back_state_as_written(&p, &raw);
    let d = NodeDir::open(&p).unwrap();
    assert_eq!(d.state().node_id, id);
    assert_eq!(d.state().token_reserved, 10);
    drop(d);
    std::fs::remove_dir_all(&p).unwrap();
}

#[test]
fn a_lock_let_go_while_waiting_is_taken_and_one_held_throughout_is_refused() {
    let p = temp_dir("lockwait");
    let first = lock_dir(&p).unwrap();
    // Held throughout: exactly `steps` waits, then "in use".
    let mut waits = 0;
    let err = lock_dir_waiting(&p, 3, || {
        waits += 1;
        assert!(waits <= 3, "waited past its steps");
    })
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AddrInUse, "{err}");
    assert_eq!(waits, 3);
    // Let go during the second wait: taken then, after two waits.
    let mut first = Some(first);
    let mut waits = 0;
    let taken = lock_dir_waiting(&p, 3, || {
        waits += 1;
        if waits == 2 {
            drop(first.take());
        }
    });
    assert!(taken.is_ok(), "{:?}", taken.err());
    assert_eq!(waits, 2);
    // Free: taken at once, no wait.
    drop(taken);
    let taken = lock_dir_waiting(&p, 3, || panic!("waited for a free lock"));
    assert!(taken.is_ok());
    drop(taken);
    std::fs::remove_dir_all(&p).unwrap();
}

#[test]
fn a_locked_directory_is_refused() {
    let p = temp_dir("lock");
    let first = NodeDir::open(&p).unwrap();
    let err = NodeDir::open(&p).unwrap_err();
    assert!(
        err.to_string().contains("in use by another redlockd node"),
        "{err}"
    );
    drop(first);
    assert!(NodeDir::open(&p).is_ok());
    std::fs::remove_dir_all(&p).unwrap();
}

#[test]
fn a_state_file_with_no_valid_slot_is_refused() {
    let p = temp_dir("corrupt");
    NodeDir::open(&p).unwrap().update(|s| s.boot = 5).unwrap();
    std::fs::write(p.join(STATE_FILE), [7u8; 2 * SLOT_LEN]).unwrap();
    let err = NodeDir::open(&p).unwrap_err();
    assert!(err.to_string().contains("corrupt"), "{err}");
    std::fs::remove_dir_all(&p).unwrap();
}

#[test]
fn the_directory_is_private() {
    let p = temp_dir("modes");
    let d = NodeDir::open(&p).unwrap();
    d.write_snapshot(b"x").unwrap();
    let mode = |f: &Path| std::fs::metadata(f).unwrap().mode() & 0o777;
    assert_eq!(mode(&p), 0o700);
    assert_eq!(mode(&p.join(STATE_FILE)), 0o600);
    assert_eq!(mode(&p.join(SNAPSHOT_FILE)), 0o600);
    assert_eq!(mode(&p.join(LOCK_FILE)), 0o600);
    drop(d);
    std::fs::remove_dir_all(&p).unwrap();
}

#[test]
fn init_declares_a_new_node_once_and_a_copy_needs_adopting() {
    let p = temp_dir("init");
    assert!(NodeDir::init(&p, false).unwrap().contains("declared"));
    let err = NodeDir::init(&p, false).unwrap_err();
    assert!(
        err.to_string().contains("already belongs to a node"),
        "{err}"
    );
    let d = NodeDir::open(&p).unwrap();
    assert!(d.state().declared_new);
    assert!(!d.created());
    d.update(|s| {
        s.token_reserved = 20_000;
        s.history = Some(History {
            epoch: [1; 16],
            reach_ms: 5,
            ttl_ms: 6,
        })
    })
    .unwrap();
    d.write_snapshot(b"old").unwrap();
    drop(d);
    // A copy (a new inode: written while the original still holds its own) put back
    // in place, as a restore from a backup does.
    let bytes = std::fs::read(p.join(STATE_FILE)).unwrap();
    let copy = p.join("node.state.restored");
    std::fs::write(&copy, bytes).unwrap();
    std::fs::rename(&copy, p.join(STATE_FILE)).unwrap();
    let err = NodeDir::open(&p).unwrap_err();
    assert!(err.to_string().contains("is a copy"), "{err}");
    assert!(err.to_string().contains("--adopt"), "{err}");
    let said = NodeDir::init(&p, true).unwrap();
    assert!(said.contains("adopted"), "{said}");
    let d = NodeDir::open(&p).unwrap();
    let jumped = crate::durability::tokens::after_restore(20_000, unix_ns());
    let reserved = d.state().token_reserved;
    assert!(
        reserved > 20_000 && reserved <= jumped && jumped - reserved < 1_000_000,
        "the reservation jumps past the microsecond clock: {reserved}"
    );
    assert!(
        said.contains(&format!("from 20000 to {reserved}")),
        "{said}"
    );
    assert_eq!(d.state().history, None, "the record is not trusted");
    assert!(
        !d.state().declared_new,
        "an adopted node is not new: it is fenced"
    );
    assert!(!p.join(SNAPSHOT_FILE).exists());
    drop(d);
    std::fs::remove_dir_all(&p).unwrap();
}

#[test]
fn an_older_versions_state_is_read_and_rewritten() {
    let p = temp_dir("v1");
    std::fs::create_dir_all(&p).unwrap();
    let mut slot = [0u8; SLOT_V1_LEN];
    slot[..8].copy_from_slice(SLOT_MAGIC);
    slot[8..12].copy_from_slice(&SLOT_V1.to_le_bytes());
    slot[12..20].copy_from_slice(&1u64.to_le_bytes());
    slot[20..36].copy_from_slice(&[4; 16]);
    slot[36..44].copy_from_slice(&9u64.to_le_bytes());
    slot[44..52].copy_from_slice(&30_001u64.to_le_bytes());
    let crc = crc32(&slot[..SLOT_V1_BODY]);
    slot[SLOT_V1_BODY..SLOT_V1_BODY + 4].copy_from_slice(&crc.to_le_bytes());
    let mut file = vec![0u8; 2 * SLOT_V1_LEN];
    file[SLOT_V1_LEN..].copy_from_slice(&slot);
    std::fs::write(p.join(STATE_FILE), file).unwrap();
    let d = NodeDir::open(&p).unwrap();
    let s = d.state();
    assert_eq!((s.node_id, s.boot, s.token_reserved), ([4; 16], 9, 30_001));
    assert_eq!(s.history, None);
    drop(d);
    assert_eq!(
        std::fs::metadata(p.join(STATE_FILE)).unwrap().len(),
        2 * SLOT_LEN as u64
    );
    assert_eq!(NodeDir::open(&p).unwrap().state().token_reserved, 30_001);
    std::fs::remove_dir_all(&p).unwrap();
}

#[test]
fn a_new_directory_is_made_with_an_identity_and_keeps_its_history() {
    let p = temp_dir("new");
    let d = NodeDir::open(&p).unwrap();
    assert!(d.created());
    assert_eq!(d.path(), p.as_path());
    assert_eq!(format!("{d:?}"), format!("NodeDir({})", p.display()));
    let s = d.state();
    assert_eq!(
        (s.boot, s.token_reserved, s.history, s.declared_new),
        (0, 0, None, false)
    );
    let history = History {
        epoch: [3; 16],
        reach_ms: 123_456,
        ttl_ms: 7000,
    };
    d.update(|s| {
        s.history = Some(history);
        s.boot = 4;
    })
    .unwrap();
    drop(d);
    let d = NodeDir::open(&p).unwrap();
    assert!(!d.created());
    assert_eq!(d.state().node_id, s.node_id);
    assert_eq!(d.state().history, Some(history));
    assert_eq!(d.state().boot, 4);
    drop(d);
    std::fs::remove_dir_all(&p).unwrap();
}

#[test]
fn unlock_lets_another_node_open_the_directory() {
    let p = temp_dir("unlock");
    let first = NodeDir::open(&p).unwrap();
    first.unlock();
    let second = NodeDir::open(&p).unwrap();
    assert_eq!(second.state().node_id, first.state().node_id);
    drop((first, second));
    std::fs::remove_dir_all(&p).unwrap();
}

#[test]
fn a_failed_write_changes_nothing_and_the_next_one_works() {
    let p = temp_dir("eio");
    let d = NodeDir::open(&p).unwrap();
    d.fail_next_write();
    let err = d.update(|s| s.token_reserved = 5).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO));
    assert_eq!(d.state().token_reserved, 0);
    assert_eq!(
        d.update(|s| s.token_reserved = 6).unwrap().token_reserved,
        6
    );
    drop(d);
    assert_eq!(NodeDir::open(&p).unwrap().state().token_reserved, 6);
    std::fs::remove_dir_all(&p).unwrap();
}

#[test]
fn wipe_forgets_the_identity_the_reservation_and_the_snapshot() {
    let p = temp_dir("wipe");
    let d = NodeDir::open(&p).unwrap();
    let id = d.state().node_id;
    d.update(|s| s.token_reserved = 10_000).unwrap();
    d.write_snapshot(b"x").unwrap();
    d.wipe().unwrap();
    let s = d.state();
    assert_ne!(s.node_id, id);
    assert_eq!((s.token_reserved, s.boot, s.history), (0, 0, None));
    assert_eq!(d.read_snapshot().unwrap(), None);
    drop(d);
    assert_eq!(NodeDir::open(&p).unwrap().state().node_id, s.node_id);
    std::fs::remove_dir_all(&p).unwrap();
}

/// A snapshot that cannot be read or removed is an error, not "no snapshot": the
/// boot then refuses it (fence) or does not serve.
#[test]
fn an_unreadable_snapshot_is_an_error() {
    let p = temp_dir("snapdir");
    let d = NodeDir::open(&p).unwrap();
    assert_eq!(d.read_snapshot().unwrap(), None);
    d.remove_snapshot().unwrap();
    d.write_snapshot(b"abc").unwrap();
    assert_eq!(d.read_snapshot().unwrap(), Some(b"abc".to_vec()));
    d.remove_snapshot().unwrap();
    std::fs::create_dir(p.join(SNAPSHOT_FILE)).unwrap();
    std::fs::write(p.join(SNAPSHOT_FILE).join("inside"), b"").unwrap();
    assert!(d.read_snapshot().is_err());
    assert!(d.remove_snapshot().is_err());
    drop(d);
    std::fs::remove_dir_all(&p).unwrap();
}

/// A slot of a version this build does not know (a newer one) is not misread as
/// one it knows, even with checksums valid at both known layouts' places.
#[test]
fn a_slot_of_an_unknown_version_is_refused() {
    let p = temp_dir("v4");
    std::fs::create_dir_all(&p).unwrap();
    let mut slot = [0u8; SLOT_LEN];
    slot[..8].copy_from_slice(SLOT_MAGIC);
    slot[8..12].copy_from_slice(&4u32.to_le_bytes());
    slot[12..20].copy_from_slice(&1u64.to_le_bytes());
    slot[20..36].copy_from_slice(&[4; 16]);
    let v1_crc = crc32(&slot[..SLOT_V1_BODY]);
    slot[SLOT_V1_BODY..SLOT_V1_BODY + 4].copy_from_slice(&v1_crc.to_le_bytes());
    let v2_crc = crc32(&slot[..SLOT_V2_BODY]);
    slot[SLOT_V2_BODY..SLOT_V2_BODY + 4].copy_from_slice(&v2_crc.to_le_bytes());
    let v3_crc = crc32(&slot[..SLOT_BODY]);
    slot[SLOT_BODY..SLOT_BODY + 4].copy_from_slice(&v3_crc.to_le_bytes());
    let mut file = vec![0u8; 2 * SLOT_LEN];
    file[..SLOT_LEN].copy_from_slice(&slot);
    std::fs::write(p.join(STATE_FILE), file).unwrap();
    let err = NodeDir::open(&p).unwrap_err();
    assert!(
        err.to_string()
            .contains("is corrupt (no slot passes its checksum)"),
        "{err}"
    );
    std::fs::remove_dir_all(&p).unwrap();
}

/// The kernel stamps inodes from its coarse clock, up to a tick (1-10 ms) behind the
/// wall clock read here: a test waits this much longer to be past a window.
const COARSE_TICK_NS: i64 = 20_000_000;

/// A backup put back over `node.state` in place (`cp -a backup/. dir/`, `cat >`: the
/// inode is kept) is recognised by the inode change time the write left, whatever
/// wrote it; so is a chmod. Adopting it jumps the token mark.
#[test]
fn a_state_rewritten_in_place_by_another_program_is_refused_until_adopted() {
    let p = temp_dir("inplace");
    NodeDir::init(&p, false).unwrap();
    let backup = std::fs::read(p.join(STATE_FILE)).unwrap();
    let d = NodeDir::open(&p).unwrap();
    d.update(|s| s.token_reserved = 20_002).unwrap();
    drop(d);
    // The backup's last write is more than CTIME_AFTER_NS old when it is put back (a
    // restore comes after the node ran on: far later than that in practice).
    let written = [&backup[..SLOT_LEN], &backup[SLOT_LEN..]]
        .into_iter()
        .filter_map(|raw| decode_slot(raw)?.written_ns)
        .max()
        .unwrap();
    while unix_ns() <= written + CTIME_AFTER_NS + COARSE_TICK_NS {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let ino = std::fs::metadata(p.join(STATE_FILE)).unwrap().ino();
    std::fs::write(p.join(STATE_FILE), &backup).unwrap();
    assert_eq!(std::fs::metadata(p.join(STATE_FILE)).unwrap().ino(), ino);
    let err = NodeDir::open(&p).unwrap_err().to_string();
    assert!(
        err.contains("was changed by something other than this node after its last write"),
        "{err}"
    );
    assert!(err.contains("--adopt"), "{err}");
    NodeDir::init(&p, true).unwrap();
    let d = NodeDir::open(&p).unwrap();
    assert!(d.state().token_reserved > 20_002 + (1 << 32));
    assert_eq!(d.state().history, None);
    drop(d);

    // A chmod moves the ctime too: refused the same way (the safe side).
    let d = NodeDir::open(&p).unwrap();
    d.update(|s| s.token_reserved += 1).unwrap();
    drop(d);
    assert!(NodeDir::open(&p).is_ok(), "untouched: accepted");
    let written = unix_ns();
    while unix_ns() <= written + CTIME_AFTER_NS + COARSE_TICK_NS {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    std::fs::set_permissions(
        p.join(STATE_FILE),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let err = NodeDir::open(&p).unwrap_err().to_string();
    assert!(err.contains("was changed by something other"), "{err}");
    std::fs::remove_dir_all(&p).unwrap();
}

/// The check itself: the ctime may trail the recorded time (coarse clocks, whole
/// seconds) and lead it by at most CTIME_AFTER_NS; the other slot's time counts too
/// (a power loss between the newest slot reaching the disk and its ctime); a slot
/// left unchecked or of version 2 is not checked.
#[test]
fn which_inode_change_times_match_a_write() {
    let state = NodeState {
        node_id: [1; 16],
        boot: 1,
        token_reserved: 0,
        history: None,
        declared_new: false,
    };
    let slot = |seq, written_ns| Slot {
        seq,
        state,
        ino: 9,
        written_ns,
    };
    let s = 1_000_000_000i64;
    let latest = slot(2, Some(100 * s));
    let older = slot(1, Some(50 * s));
    let check =
        |latest: &Slot, ctime| not_as_written(latest, &[latest.clone(), older.clone()], 9, ctime);
    assert_eq!(check(&latest, 100 * s), None);
    assert_eq!(check(&latest, 100 * s + CTIME_AFTER_NS), None);
    assert_eq!(check(&latest, 98 * s), None);
    assert!(check(&latest, 100 * s + CTIME_AFTER_NS + 1).is_some());
    assert!(check(&latest, 98 * s - 1).is_some());
    assert_eq!(check(&latest, 50 * s), None, "the older write's ctime");
    assert!(check(&latest, 75 * s).is_some());
    assert_eq!(check(&slot(2, Some(UNCHECKED)), 75 * s), None);
    assert_eq!(check(&slot(2, None), 75 * s), None);
    let moved = not_as_written(&latest, std::slice::from_ref(&latest), 10, 100 * s);
    assert!(moved.unwrap().starts_with("is a copy"));
}

/// A version 2 file (no write times) is read, its inode checked, and rewritten as
/// version 3, whose write time then matches its ctime.
#[test]
fn a_version_2_state_is_read_and_rewritten_with_write_times() {
    let p = temp_dir("v2");
    let d = NodeDir::open(&p).unwrap();
    d.update(|s| s.token_reserved = 777).unwrap();
    let ino = std::fs::metadata(p.join(STATE_FILE)).unwrap().ino();
    drop(d);
    let mut raw = std::fs::read(p.join(STATE_FILE)).unwrap();
    for slot in raw.chunks_exact_mut(SLOT_LEN) {
        slot[8..12].copy_from_slice(&SLOT_V2.to_le_bytes());
        slot[96..SLOT_LEN].fill(0);
        let crc = crc32(&slot[..SLOT_V2_BODY]);
        slot[SLOT_V2_BODY..SLOT_V2_BODY + 4].copy_from_slice(&crc.to_le_bytes());
    }
    std::fs::write(p.join(STATE_FILE), &raw).unwrap();
    assert_eq!(std::fs::metadata(p.join(STATE_FILE)).unwrap().ino(), ino);
    let d = NodeDir::open(&p).unwrap();
    assert_eq!(d.state().token_reserved, 777);
    drop(d);
    let raw = std::fs::read(p.join(STATE_FILE)).unwrap();
    let newest = [decode_slot(&raw[..SLOT_LEN]), decode_slot(&raw[SLOT_LEN..])]
        .into_iter()
        .flatten()
        .max_by_key(|s| s.seq)
        .unwrap();
    let meta = std::fs::metadata(p.join(STATE_FILE)).unwrap();
    assert!(ctime_matches(newest.written_ns.unwrap(), ctime_ns(&meta)));
    assert_eq!(NodeDir::open(&p).unwrap().state().token_reserved, 777);
    std::fs::remove_dir_all(&p).unwrap();
}
