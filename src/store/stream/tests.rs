use super::*;

fn id(ms: u64, seq: u64) -> StreamId {
    StreamId::new(ms, seq)
}

fn ids(v: &[EntryRef<'_>]) -> Vec<StreamId> {
    v.iter().map(|(i, _)| *i).collect()
}

fn filled(n: u64, limits: NodeLimits) -> Stream {
    let mut s = Stream::new();
    for i in 1..=n {
        let v = i.to_string();
        let f: &[u8] = if i % 3 == 0 { b"other" } else { b"f" };
        s.append(id(i, 0), &[(f, v.as_bytes())], limits);
    }
    s
}

#[test]
fn entries_come_back_in_order_with_their_fields() {
    let limits = NodeLimits {
        max_entries: 4,
        max_bytes: 0,
    };
    let s = filled(10, limits);
    assert_eq!(s.length(), 10);
    assert_eq!(s.node_count(), 3);
    let all = s.range(StreamId::MIN, StreamId::MAX, 0, false);
    assert_eq!(all.len(), 10);
    assert_eq!(all[2], (id(3, 0), vec![(&b"other"[..], &b"3"[..])]));
    assert_eq!(all[3], (id(4, 0), vec![(&b"f"[..], &b"4"[..])]));
    let rev = s.range(id(3, 0), id(7, 5), 0, true);
    assert_eq!(ids(&rev), [7, 6, 5, 4, 3].map(|m| id(m, 0)));
    assert_eq!(
        ids(&s.range(id(2, 1), StreamId::MAX, 2, false)),
        [id(3, 0), id(4, 0)]
    );
    assert_eq!(s.get(id(5, 0)), Some(vec![(&b"f"[..], &b"5"[..])]));
    assert_eq!(s.get(id(5, 1)), None);
}

#[test]
fn deletes_keep_first_id_and_free_empty_nodes() {
    let limits = NodeLimits {
        max_entries: 2,
        max_bytes: 0,
    };
    let mut s = filled(5, limits);
    assert!(s.delete(id(1, 0)));
    assert!(!s.delete(id(1, 0)));
    assert_eq!(s.first_id, id(2, 0));
    assert!(s.delete(id(2, 0)));
    assert_eq!(s.node_count(), 2);
    assert_eq!(s.max_deleted_id, id(2, 0));
    assert_eq!(s.length(), 3);
    assert_eq!(s.edge_id(true), Some(id(3, 0)));
}

#[test]
fn trims_whole_nodes_when_approximate() {
    let limits = NodeLimits {
        max_entries: 10,
        max_bytes: 0,
    };
    let mut s = filled(100, limits);
    assert_eq!(s.trim(Trim::MaxLen(55), true, 0), 40);
    assert_eq!(s.length(), 60);
    assert_eq!(s.trim(Trim::MaxLen(55), false, 0), 5);
    assert_eq!(s.length(), 55);
    assert_eq!(s.first_id, id(46, 0));
    assert_eq!(s.trim(Trim::MinId(id(60, 0)), false, 0), 14);
    assert_eq!(s.first_id, id(60, 0));
}

#[test]
fn generated_ids_follow_the_clock_and_never_go_back() {
    let mut s = Stream::new();
    assert_eq!(s.next_id(None, false, 5), Some(id(5, 0)));
    s.append(id(5, 0), &[(b"f", b"v")], NodeLimits::default());
    assert_eq!(s.next_id(None, false, 3), Some(id(5, 1)));
    assert_eq!(s.next_id(Some(id(5, 0)), false, 0), Some(id(5, 1)));
    assert_eq!(s.next_id(Some(id(4, 0)), false, 0), None);
    assert_eq!(s.next_id(Some(id(5, 0)), true, 0), None);
    assert_eq!(s.next_id(Some(id(9, 0)), false, 0), Some(id(9, 0)));
}
