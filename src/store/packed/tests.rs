use super::*;

fn view(slab: &Slab, h: u32) -> Packed {
    // SAFETY: the tests pass live handles and change nothing while a view lives.
    unsafe { Packed::at(slab, h) }
}

#[test]
fn a_lock_takes_a_48_byte_slot_and_reads_back() {
    let mut slab = Slab::default();
    let h = create(
        &mut slab,
        b"lock:1234567",
        Value::Str(Bytes::from("0123456789abcdefghijkl")),
        Some(7),
    );
    let p = view(&slab, h);
    assert_eq!(p.footprint(), (48, 0));
    assert_eq!(slab.class_of(h), 48);
    assert_eq!(p.key(), b"lock:1234567");
    assert!(matches!(
        p.value(),
        ValueRef::Str(b"0123456789abcdefghijkl")
    ));
    assert_eq!(p.deadline_ms(), Some(7));
    assert!(p.is_expired(8) && !p.is_expired(7));
    assert_eq!(slab.min_deadline(), 7);
    // SAFETY: live, and not used after.
    drop(unsafe { release(&mut slab, h) });
}

#[test]
fn every_form_round_trips() {
    let mut slab = Slab::default();
    let big = vec![b'v'; 1000];
    let bigkey = vec![b'k'; 300];
    type Case<'a> = (&'a [u8], &'a [u8], Option<u64>, Form);
    let cases: Vec<Case<'_>> = vec![
        (b"k", b"v", None, Form::Short),
        (b"k", b"", Some(SHORT_DEADLINE_MAX), Form::Short),
        (b"k", b"v", Some(SHORT_DEADLINE_MAX + 1), Form::Long),
        (b"k", b"v", Some(u64::MAX), Form::Long),
        (b"k", &big[..200], Some(5), Form::Short),
        (b"k", &big[..200], Some(u64::MAX), Form::Long),
        (b"k", &big[..236], Some(u64::MAX), Form::Outline),
        (b"k", &big, Some(5), Form::Outline),
        (&bigkey, b"v", None, Form::Outline),
    ];
    let mut hs = Vec::new();
    for (k, v, d, form) in &cases {
        let h = create(&mut slab, k, Value::Str(Bytes::copy_from_slice(v)), *d);
        let p = view(&slab, h);
        assert_eq!(p.form(), *form, "{}+{} {d:?}", k.len(), v.len());
        assert_eq!((p.key(), p.deadline_ms()), (*k, *d));
        assert!(matches!(p.value(), ValueRef::Str(s) if s == *v));
        hs.push(h);
    }
    for (h, (_, v, d, _)) in hs.into_iter().zip(&cases) {
        // SAFETY: live, and not used after.
        let e = unsafe { take(&mut slab, h) };
        assert_eq!(
            e,
            Entry {
                value: Value::Str(Bytes::copy_from_slice(v)),
                deadline_ms: *d
            }
        );
    }
}

#[test]
fn collections_inline_and_out_of_line() {
    let mut slab = Slab::default();
    let list = Value::List(VecDeque::from([Bytes::from("a")]));
    let bigkey = vec![b'k'; 300];
    for key in [&b"l"[..], &bigkey] {
        let h = create(&mut slab, key, list.clone(), Some(9));
        let mut p = view(&slab, h);
        // SAFETY: this test is the only user of the slab.
        if let ValueMut::List(l) = unsafe { p.value_mut() } {
            l.push_back(Bytes::from("b"));
        }
        assert_eq!(p.key(), key);
        assert_eq!(p.value().type_name(), "list");
        // SAFETY: live, and not used after.
        let e = unsafe { take(&mut slab, h) };
        assert_eq!(
            e.value,
            Value::List(VecDeque::from([Bytes::from("a"), Bytes::from("b")]))
        );
        assert_eq!(e.deadline_ms, Some(9));
    }
    let h = create(&mut slab, b"h", Value::Hash(Box::default()), None);
    assert_eq!(view(&slab, h).value().type_name(), "hash");
    // SAFETY: live, and not used after: the hash is dropped with the leftover.
    drop(unsafe { release(&mut slab, h) });
    assert_eq!(slab.page_count(), 1);
}

#[test]
fn resizing_keeps_key_prefix_deadline_and_clock_across_forms() {
    let mut slab = Slab::default();
    let mut h = create(&mut slab, b"key", Value::Str(Bytes::from("abc")), Some(9));
    view(&slab, h).touch(12345);
    // Short in place, then growing through Long to Outline and back.
    for len in [5, 40, 200, 300, 5000, 100, 2] {
        // SAFETY: live; the test keeps no older view.
        let (nh, at) = unsafe { resize_str(&mut slab, h, len, Some(9)) };
        h = nh;
        let p = view(&slab, h);
        assert_eq!(
            (p.key(), p.deadline_ms(), p.access_clock()),
            (&b"key"[..], Some(9), 12345)
        );
        let ValueRef::Str(s) = p.value() else {
            panic!()
        };
        assert_eq!(s.len(), len);
        assert_eq!(s.as_ptr(), at.cast_const());
        assert_eq!(&s[..2], b"ab");
        // SAFETY: the value's bytes are `len` at `at`, owned by the entry.
        unsafe { ptr::write_bytes(at.add(2), b'x', len - 2) };
    }
    // A collection replaced by a string.
    let c = create(&mut slab, b"c", Value::List(VecDeque::new()), None);
    // SAFETY: live; the old handle is not used after.
    let (c, at) = unsafe { resize_str(&mut slab, c, 1, None) };
    // SAFETY: one byte at `at`.
    unsafe { *at = b'z' };
    assert!(matches!(view(&slab, c).value(), ValueRef::Str(b"z")));
    // A wide deadline moves a SHORT entry to the long form.
    // SAFETY: live; the old handle is not used after.
    let c = unsafe { set_deadline(&mut slab, c, Some(u64::MAX - 1)) };
    assert_eq!(view(&slab, c).form(), Form::Long);
    assert_eq!(view(&slab, c).deadline_ms(), Some(u64::MAX - 1));
    // SAFETY: live; not used after.
    unsafe {
        drop(release(&mut slab, c));
        drop(release(&mut slab, h));
    }
}

#[test]
fn the_access_clock_keeps_the_tag() {
    let mut slab = Slab::default();
    let h = create(&mut slab, b"k", Value::Str(Bytes::from("v")), Some(3));
    let p = view(&slab, h);
    p.touch(CLOCK_MASK + 5);
    assert_eq!(p.access_clock(), 4);
    assert_eq!(p.deadline_ms(), Some(3));
    assert!(matches!(p.value(), ValueRef::Str(b"v")));
    // SAFETY: live; not used after.
    drop(unsafe { release(&mut slab, h) });
}

#[test]
fn the_lock_mark_costs_no_byte_and_leaves_the_entry_as_it_was() {
    let mut slab = Slab::default();
    let h = create(
        &mut slab,
        b"lock:1234567",
        Value::Str(Bytes::from("0123456789abcdefghijkl")),
        Some(7),
    );
    let mut p = view(&slab, h);
    assert!(!p.is_lock());
    p.touch(123);
    p.set_lock(true);
    assert!(p.is_lock());
    assert_eq!(p.footprint(), (48, 0), "still a 48-byte slot");
    assert_eq!(p.key(), b"lock:1234567");
    assert!(matches!(
        p.value(),
        ValueRef::Str(b"0123456789abcdefghijkl")
    ));
    assert_eq!(p.deadline_ms(), Some(7));
    assert_eq!(p.access_clock(), 123);
    p.write_deadline(None);
    assert!(p.is_lock(), "a deadline change keeps the mark");
    p.set_lock(false);
    assert!(!p.is_lock());
    assert_eq!(p.deadline_ms(), None);
    // SAFETY: live, and not used after.
    drop(unsafe { release(&mut slab, h) });
}
