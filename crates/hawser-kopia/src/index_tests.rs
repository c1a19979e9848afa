#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use super::*;

/// An entry to build: key, timestamp, deleted, offset, original length, packed length, format.
type Row = (Vec<u8>, u32, bool, u32, u32, u32, u8);

/// A v2 index of `entries`, all in pack `pack`, with the given formats; entry size 17.
fn v2(pack: &str, formats: &[(u32, u8)], entries: &[Row]) -> Vec<u8> {
    let key_size = entries[0].0.len();
    let mut out = vec![2, u8::try_from(key_size).unwrap()];
    out.extend(17u16.to_be_bytes());
    out.extend(u32::try_from(entries.len()).unwrap().to_be_bytes());
    out.extend(1u32.to_be_bytes());
    out.push(u8::try_from(formats.len()).unwrap());
    out.extend(0u32.to_be_bytes());
    for (key, timestamp, deleted, offset, original, packed, format) in entries {
        out.extend(key);
        out.extend(timestamp.to_be_bytes());
        out.extend((offset | if *deleted { 1 << 31 } else { 0 }).to_be_bytes());
        out.extend(&original.to_be_bytes()[1..]);
        out.extend(&packed.to_be_bytes()[1..]);
        out.extend(0u16.to_be_bytes());
        out.push(*format);
    }
    let names_at = out.len() + 5 + 6 * formats.len();
    out.push(u8::try_from(pack.len()).unwrap());
    out.extend(u32::try_from(names_at).unwrap().to_be_bytes());
    for (compression, version) in formats {
        out.extend(compression.to_be_bytes());
        out.push(*version);
        out.push(0);
    }
    out.extend(pack.as_bytes());
    out
}

#[test]
fn a_v2_index_gives_each_content_its_pack_place_and_format() {
    let file = ContentId::parse("0123456789abcdef0123456789abcdef").unwrap();
    let dir = ContentId::parse("k0123456789abcdef0123456789abcdef").unwrap();
    let data = v2(
        "q0011-s22",
        &[(0, 3), (0x1101, 3)],
        &[
            (file.0.to_vec(), 1_700_000_000, false, 32, 100, 128, 0),
            (dir.0.to_vec(), 1_700_000_001, true, 160, 900, 300, 1),
        ],
    );
    let entries = parse(&data, "test index").unwrap();
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
    let id = ContentId::parse("0123456789abcdef0123456789abcdef").unwrap();
    let data = v2("p1", &[(0, 3)], &[(id.0.to_vec(), 1, false, 0, 1, 29, 0)]);
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
    let id = ContentId::parse("0123456789abcdef0123456789abcdef").unwrap();
    let entry = |deleted, pack: &str| Entry {
        id: id.clone(),
        pack: Arc::from(pack),
        offset: 0,
        packed_length: 0,
        original_length: 0,
        timestamp: 5,
        deleted,
        compression: 0,
        format_version: 3,
        key_id: 0,
    };
    assert!(wins(&entry(false, "p1"), &entry(true, "p2")));
    assert!(wins(&entry(false, "p2"), &entry(false, "p1")));
}
