#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use super::*;
use crate::merged::Index;

/// Where an entry is: offset, plaintext length, stored length.
type Place = (u32, u32, u32);

/// An entry of content `id` in `pack`, written at `timestamp`, not compressed.
fn entry(
    id: &str,
    pack: &str,
    timestamp: i64,
    deleted: bool,
    (offset, original, packed): Place,
) -> Entry {
    Entry {
        id: ContentId::parse(id).unwrap(),
        pack: Arc::from(pack),
        offset,
        packed_length: packed,
        original_length: original,
        timestamp,
        deleted,
        compression: 0,
        format_version: 3,
        key_id: 0,
    }
}

#[test]
fn a_v2_index_gives_each_content_its_pack_place_and_format() {
    let file = ContentId::parse("0123456789abcdef0123456789abcdef").unwrap();
    let dir = ContentId::parse("k0123456789abcdef0123456789abcdef").unwrap();
    let written = [
        Entry {
            compression: 0x1101,
            ..entry(
                "k0123456789abcdef0123456789abcdef",
                "q0011-s22",
                1_700_000_001,
                true,
                (160, 900, 300),
            )
        },
        entry(
            "0123456789abcdef0123456789abcdef",
            "q0011-s22",
            1_700_000_000,
            false,
            (32, 100, 128),
        ),
    ];
    let data = build(&written).unwrap();
    assert_eq!(
        u16::from_be_bytes([data[2], data[3]]),
        17,
        "two formats: entry size 17"
    );
    let entries = parse(&data, "test index").unwrap();
    assert_eq!(
        entries,
        [written[1].clone(), written[0].clone()],
        "sorted by content ID"
    );
    assert_eq!(entries.len(), 2);
    let (a, b) = (&entries[0], &entries[1]);
    assert_eq!(
        (
            a.id.clone(),
            &*a.pack,
            a.offset,
            a.original_length,
            a.packed_length
        ),
        (file, "q0011-s22", 32, 100, 128)
    );
    assert_eq!(
        (a.compression, a.format_version, a.deleted, a.timestamp),
        (0, 3, false, 1_700_000_000)
    );
    assert_eq!(
        (b.id.clone(), b.compression, b.deleted, b.offset),
        (dir, 0x1101, true, 160)
    );
    assert!(wins(b, a), "the newer entry wins");
}

#[test]
fn a_truncated_or_unknown_index_is_refused_by_name() {
    let data = build(&[entry(
        "0123456789abcdef0123456789abcdef",
        "p1",
        1,
        false,
        (0, 1, 29),
    )])
    .unwrap();
    for cut in [1, 10, 17, 30, data.len() - 1] {
        assert!(parse(&data[..cut], "cut").is_err(), "cut at {cut}");
    }
    assert!(matches!(
        parse(&[3, 0], "v3"),
        Err(KopiaError::Unsupported { .. })
    ));
    assert!(parse(&[2, 0xff], "empty").unwrap().is_empty());
}

#[test]
fn a_deleted_entry_loses_to_a_live_one_of_the_same_second() {
    let at = |deleted, pack| {
        entry(
            "0123456789abcdef0123456789abcdef",
            pack,
            5,
            deleted,
            (0, 0, 0),
        )
    };
    assert!(wins(&at(false, "p1"), &at(true, "p2")));
    assert!(wins(&at(false, "p2"), &at(false, "p1")));
}

#[test]
fn long_contents_and_many_packs_widen_the_entries() {
    let mut entries: Vec<Entry> = (0..3u32)
        .map(|i| {
            entry(
                &format!("{i:032x}"),
                &format!("p{i}"),
                9,
                false,
                (i * 100, 20 << 20, (20 << 20) + 28),
            )
        })
        .collect();
    let data = build(&entries).unwrap();
    assert_eq!(
        u16::from_be_bytes([data[2], data[3]]),
        19,
        "a length of 2^24 or more"
    );
    assert_eq!(parse(&data, "t").unwrap(), entries);
    entries[0].original_length = 1 << 28;
    assert!(build(&entries).is_err());
}

/// The pack of the entry `index` holds for content `id`.
fn pack_of(index: &Index, id: &str) -> String {
    let held = index.get(&ContentId::parse(id).unwrap()).unwrap();
    held.pack.to_string()
}

#[test]
fn the_index_holds_each_content_once_the_winning_entry() {
    let id = "0123456789abcdef0123456789abcdef";
    let mut index = Index::default();
    index.merge(entry(id, "p1", 5, false, (0, 1, 1)));
    index.merge(entry(id, "p2", 4, false, (0, 2, 2)));
    assert_eq!(pack_of(&index, id), "p1");
    index.merge(entry(id, "p3", 6, true, (0, 3, 3)));
    index.merge(entry(&format!("k{id}"), "p4", 1, false, (0, 4, 4)));
    assert_eq!(index.len(), 2);
    let held = index.get(&ContentId::parse(id).unwrap()).unwrap();
    assert!(held.deleted && held.pack.as_ref() == "p3");
    // Many more: sorted into the list as they come, found there, the winners kept.
    let many: Vec<String> = (0..10_000).map(|i| format!("{i:032x}")).collect();
    for (i, id) in many.iter().enumerate() {
        index.merge(entry(id, "old", 1, false, (0, 1, 1)));
        if i % 2 == 0 {
            index.merge(entry(id, "new", 2, false, (0, 1, 1)));
        }
    }
    index.absorb(Index::from_entries(vec![entry(
        &many[1],
        "later",
        3,
        false,
        (0, 1, 1),
    )]));
    index.merge(entry(&many[3], "older", 0, false, (0, 1, 1)));
    assert_eq!(index.len(), 10_002);
    assert_eq!(index.values().count(), 10_002);
    let held: Vec<String> = many[..4].iter().map(|id| pack_of(&index, id)).collect();
    assert_eq!(held, ["new", "later", "new", "old"]);
    assert_eq!(pack_of(&index, id), "p3");
    index.retain(|e| e.id.prefix() == Some('k'));
    let left: Vec<_> = index.values().map(|e| e.pack.to_string()).collect();
    assert_eq!(left, ["p4"]);
}

#[test]
fn a_content_id_longer_than_kopia_s_is_refused() {
    assert!(ContentId::parse(&"ab".repeat(33)).is_err());
    assert!(ContentId::parse(&"ab".repeat(32)).is_ok());
    assert!(ContentId::from_key(&[b'k'; 34]).is_none());
    assert!(ContentId::from_key(&[0]).is_none());
}
