//! The reader treats an archive as untrusted: hostile entries built with raw tar headers are
//! rejected one by one with a clear error, and good entries around them still come through;
//! a corrupt stream or a gzip bomb ends reading with a fatal error.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;
use hawser_core::archive::{
    ArchiveError, ArchiveItem, ArchiveReader, EntryErrorKind, ReadError, ReaderOptions,
};

/// A tar stream built entry by entry with raw headers (no path sanitising).
struct Hostile {
    tar: tar::Builder<Vec<u8>>,
}

impl Hostile {
    fn new() -> Self {
        Self {
            tar: tar::Builder::new(Vec::new()),
        }
    }

    fn raw(mut self, path: &[u8], kind: tar::EntryType, link: &[u8], data: &[u8]) -> Self {
        let mut h = tar::Header::new_ustar();
        h.as_old_mut().name[..path.len()].copy_from_slice(path);
        h.as_old_mut().linkname[..link.len()].copy_from_slice(link);
        h.set_entry_type(kind);
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        h.set_cksum();
        self.tar.append(&h, data).unwrap();
        self
    }

    fn file(self, path: &str, data: &[u8]) -> Self {
        self.raw(path.as_bytes(), tar::EntryType::Regular, b"", data)
    }

    /// A regular file through the safe API (long names become GNU long-name entries).
    fn long_file(mut self, path: &str, data: &[u8]) -> Self {
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        self.tar.append_data(&mut h, path, data).unwrap();
        self
    }

    /// A PAX extended header whose `path` record overrides the next entry's name.
    fn pax_path(mut self, path: &str) -> Self {
        self.tar
            .append_pax_extensions([("path", path.as_bytes())])
            .unwrap();
        self
    }

    /// An extension header (`L` GNU long name or `x` PAX) of `size` bytes of `byte`, streamed.
    fn extension(mut self, kind: tar::EntryType, byte: u8, size: u64) -> Self {
        let mut h = tar::Header::new_gnu();
        let name = b"././@LongLink";
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        h.set_entry_type(kind);
        h.set_mode(0o644);
        h.set_size(size);
        h.set_cksum();
        self.tar
            .append(&h, std::io::Read::take(std::io::repeat(byte), size))
            .unwrap();
        self
    }

    /// A PAX header with the given records.
    fn pax(mut self, records: &[(&str, &[u8])]) -> Self {
        self.tar
            .append_pax_extensions(records.iter().map(|(k, v)| (*k, *v)))
            .unwrap();
        self
    }

    fn tar_bytes(self) -> Vec<u8> {
        self.tar.into_inner().unwrap()
    }

    fn gz(self) -> Vec<u8> {
        gzip(&self.tar_bytes())
    }
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(data).unwrap();
    gz.finish().unwrap()
}

fn read_all(bytes: &[u8], options: ReaderOptions) -> Vec<Result<ArchiveItem, ReadError>> {
    let mut reader = ArchiveReader::new(bytes, options);
    reader.items().unwrap().collect()
}

const GOOD: &[u8] =
    br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ok","namespace":"web"}}"#;

#[test]
fn hostile_entries_are_rejected_one_by_one() {
    use tar::EntryType as T;
    let archive = Hostile::new()
        .file("metadata/version", b"1.1.0\n")
        .file("../evil.json", GOOD)
        .file("resources/pods/namespaces/../../../../etc/cron.json", GOOD)
        .file("/etc/passwd", b"root:x:0:0")
        .raw(
            b"resources/pods/namespaces/web/link.json",
            T::Symlink,
            b"/etc/shadow",
            b"",
        )
        .raw(
            b"resources/pods/namespaces/web/hard.json",
            T::Link,
            b"../../../../etc/shadow",
            b"",
        )
        .raw(b"resources/pods/namespaces/web/chr.json", T::Char, b"", b"")
        .raw(
            b"resources/pods/namespaces/web/blk.json",
            T::Block,
            b"",
            b"",
        )
        .raw(
            b"resources/pods/namespaces/web/fifo.json",
            T::Fifo,
            b"",
            b"",
        )
        .file(
            "resources/configmaps/namespaces/web/big.json",
            &vec![b' '; 4096],
        )
        .file(
            "resources/configmaps/namespaces/web/broken.json",
            b"{\"metadata\": ",
        )
        .file("resources/configmaps/namespaces/web/array.json", b"[1,2,3]")
        .file("resources/configmaps/weird.json", GOOD)
        .file("notes/readme.txt", b"hello")
        .raw(b"resources/configmaps/", T::Directory, b"", b"")
        .file("resources/configmaps/namespaces/web/ok.json", GOOD)
        .file("./resources/configmaps/namespaces/web/dotted.json", GOOD)
        .gz();
    let options = ReaderOptions {
        max_entry_bytes: 1024,
        ..ReaderOptions::default()
    };
    let results = read_all(&archive, options);

    let mut outcomes = Vec::new();
    for r in &results {
        match r {
            Ok(item) => outcomes.push(format!("ok {}", item.path)),
            Err(ReadError::Entry(e)) => {
                let what = match &e.kind {
                    EntryErrorKind::PathEscapes => "escape",
                    EntryErrorKind::Link => "link",
                    EntryErrorKind::Special => "special",
                    EntryErrorKind::TooLarge {
                        size: 4096,
                        limit: 1024,
                    } => "too-large",
                    EntryErrorKind::InvalidJson(_) => "invalid-json",
                    EntryErrorKind::NotAnObject => "not-object",
                    EntryErrorKind::UnexpectedPath(_) => "unexpected",
                    other => panic!("unexpected kind {other:?} for {}", e.path),
                };
                // Every message names the entry and the problem.
                assert!(e.to_string().contains(&e.path), "{e}");
                outcomes.push(format!("{what} {}", e.path));
            }
            Err(ReadError::Fatal(e)) => panic!("fatal error on a well-formed stream: {e}"),
        }
    }
    assert_eq!(
        outcomes,
        [
            "escape ../evil.json",
            "escape resources/pods/namespaces/../../../../etc/cron.json",
            "escape /etc/passwd",
            "link resources/pods/namespaces/web/link.json",
            "link resources/pods/namespaces/web/hard.json",
            "special resources/pods/namespaces/web/chr.json",
            "special resources/pods/namespaces/web/blk.json",
            "special resources/pods/namespaces/web/fifo.json",
            "too-large resources/configmaps/namespaces/web/big.json",
            "invalid-json resources/configmaps/namespaces/web/broken.json",
            "not-object resources/configmaps/namespaces/web/array.json",
            "unexpected resources/configmaps/weird.json",
            "unexpected notes/readme.txt",
            "ok resources/configmaps/namespaces/web/ok.json",
            "ok resources/configmaps/namespaces/web/dotted.json",
        ]
    );
}

#[test]
fn error_categories_are_stable() {
    let archive = Hostile::new()
        .file("../x.json", GOOD)
        .raw(
            b"resources/a/cluster/l.json",
            tar::EntryType::Symlink,
            b"x",
            b"",
        )
        .file("resources/a/cluster/bad.json", b"nope")
        .gz();
    let cats: Vec<&str> = read_all(&archive, ReaderOptions::default())
        .iter()
        .map(|r| r.as_ref().map_err(ReadError::category).unwrap_err())
        .collect();
    assert_eq!(
        cats,
        ["ArchivePathEscape", "ArchiveLink", "ArchiveInvalidItem"]
    );
}

#[test]
fn long_paths_are_read_through_gnu_long_names() {
    let name = "n".repeat(200);
    let path = format!("resources/widgets.example.com/namespaces/web/{name}.json");
    let archive = Hostile::new().long_file(&path, GOOD).gz();
    let results = read_all(&archive, ReaderOptions::default());
    assert_eq!(results.len(), 1);
    let item = results[0].as_ref().unwrap();
    assert_eq!(item.location.name, name);
}

#[test]
fn a_gzip_bomb_stops_reading_with_a_fatal_error() {
    // 16 MiB of zeros in one entry compresses to a few KiB.
    let zeros = vec![0u8; 16 << 20];
    let archive = Hostile::new()
        .file("resources/configmaps/namespaces/web/ok.json", GOOD)
        .file("resources/configmaps/namespaces/web/bomb.json", &zeros)
        .file("resources/configmaps/namespaces/web/after.json", GOOD)
        .gz();
    assert!(
        archive.len() < 1 << 20,
        "the bomb is small: {} bytes",
        archive.len()
    );
    let options = ReaderOptions {
        max_entry_bytes: 1 << 20,
        max_total_bytes: 2 << 20,
        ..ReaderOptions::default()
    };
    let results = read_all(&archive, options);
    assert!(results[0].is_ok());
    let fatal = results.iter().find_map(|r| match r {
        Err(ReadError::Fatal(e)) => Some(e),
        _ => None,
    });
    assert!(
        matches!(fatal, Some(ArchiveError::TooLarge { limit }) if *limit == 2 << 20),
        "{results:?}"
    );
    assert!(
        results
            .last()
            .unwrap()
            .as_ref()
            .is_err_and(ReadError::is_fatal),
        "nothing is read after the fatal error"
    );
    assert!(
        !results
            .iter()
            .any(|r| r.as_ref().is_ok_and(|i| i.path.ends_with("after.json")))
    );
}

#[test]
fn an_oversized_entry_is_skipped_and_reading_goes_on() {
    let archive = Hostile::new()
        .file(
            "resources/configmaps/namespaces/web/big.json",
            &vec![b' '; 64 << 10],
        )
        .file("resources/configmaps/namespaces/web/ok.json", GOOD)
        .gz();
    let options = ReaderOptions {
        max_entry_bytes: 1024,
        ..ReaderOptions::default()
    };
    let results = read_all(&archive, options);
    assert_eq!(results.len(), 2);
    assert!(
        matches!(&results[0], Err(ReadError::Entry(e)) if e.category() == "ArchiveEntryTooLarge")
    );
    assert!(results[1].is_ok());
}

#[test]
fn corrupt_streams_are_fatal() {
    // Not gzip at all.
    let results = read_all(
        b"this is not a gzip stream at all, just text......",
        ReaderOptions::default(),
    );
    assert_eq!(results.len(), 1);
    assert!(
        matches!(&results[0], Err(ReadError::Fatal(ArchiveError::Corrupt(_)))),
        "{results:?}"
    );

    // gzip of something that is not tar.
    let results = read_all(&gzip(&[0x41u8; 2048]), ReaderOptions::default());
    assert_eq!(results.len(), 1);
    assert!(
        results[0].as_ref().is_err_and(ReadError::is_fatal),
        "{results:?}"
    );

    // A truncated archive: the good entry may come through, then a fatal error.
    let full = Hostile::new()
        .file("resources/configmaps/namespaces/web/ok.json", GOOD)
        .file(
            "resources/configmaps/namespaces/web/second.json",
            &[b' '; 20_000],
        )
        .tar_bytes();
    let truncated = gzip(&full[..full.len() / 2]);
    let results = read_all(&truncated, ReaderOptions::default());
    assert!(results.first().unwrap().is_ok());
    let last = results.last().unwrap();
    assert!(
        matches!(last, Err(ReadError::Fatal(ArchiveError::Corrupt(_)))),
        "{results:?}"
    );
    assert_eq!(last.as_ref().unwrap_err().category(), "ArchiveCorrupt");

    // A cut gzip stream.
    let gz = Hostile::new()
        .file(
            "resources/configmaps/namespaces/web/ok.json",
            &[b'x'; 50_000],
        )
        .gz();
    let results = read_all(&gz[..gz.len() / 2], ReaderOptions::default());
    assert!(
        results
            .last()
            .unwrap()
            .as_ref()
            .is_err_and(ReadError::is_fatal),
        "{results:?}"
    );
}

#[test]
fn a_bad_format_version_is_an_entry_error() {
    let archive = Hostile::new()
        .file("metadata/version", b"<script>")
        .file("resources/a/cluster/x.json", GOOD)
        .gz();
    let mut reader = ArchiveReader::new(&archive[..], ReaderOptions::default());
    let mut items = reader.items().unwrap();
    let first = items.next().unwrap();
    assert!(
        matches!(first, Err(ReadError::Entry(ref e)) if matches!(e.kind, EntryErrorKind::BadVersion))
    );
    assert!(items.next().unwrap().is_ok());
    assert_eq!(items.format_version(), None);
}

#[test]
fn a_pax_path_record_cannot_smuggle_a_traversal() {
    let archive = Hostile::new()
        .pax_path("../../pax-evil.json")
        .file("resources/configmaps/namespaces/web/innocent.json", GOOD)
        .pax_path("resources/configmaps/namespaces/web/from-pax.json")
        .file("resources/configmaps/namespaces/web/short.json", GOOD)
        .gz();
    let results = read_all(&archive, ReaderOptions::default());
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        matches!(&results[0], Err(ReadError::Entry(e)) if matches!(e.kind, EntryErrorKind::PathEscapes) && e.path == "../../pax-evil.json"),
        "{results:?}"
    );
    assert_eq!(results[1].as_ref().unwrap().location.name, "from-pax");
}

#[test]
fn an_oversized_long_name_is_skipped_unread_and_its_entry_rejected() {
    let limit = ReaderOptions::default().max_extension_bytes;
    assert_eq!(limit, 64 << 10);
    let archive = Hostile::new()
        .extension(tar::EntryType::GNULongName, b'a', 8 << 20)
        .file("resources/configmaps/namespaces/web/short.json", GOOD)
        .file("resources/configmaps/namespaces/web/after.json", GOOD)
        .gz();
    let results = read_all(&archive, ReaderOptions::default());
    assert_eq!(results.len(), 2, "{results:?}");
    match &results[0] {
        Err(ReadError::Entry(e)) => {
            assert!(
                matches!(e.kind, EntryErrorKind::ExtensionTooLarge { size, limit: l } if size == 8 << 20 && l == limit),
                "{e:?}"
            );
            assert_eq!(e.path, "resources/configmaps/namespaces/web/short.json");
            assert_eq!(e.category(), "ArchiveExtensionTooLarge");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(results[1].as_ref().unwrap().location.name, "after");
}

#[test]
fn an_oversized_pax_header_is_skipped_unread_and_its_entry_rejected() {
    let big = vec![b'x'; 100 << 10];
    let archive = Hostile::new()
        .pax(&[("comment", &big)])
        .file("resources/configmaps/namespaces/web/short.json", GOOD)
        .pax(&[("comment", b"small")])
        .file("resources/configmaps/namespaces/web/after.json", GOOD)
        .gz();
    let results = read_all(&archive, ReaderOptions::default());
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        matches!(&results[0], Err(ReadError::Entry(e)) if matches!(e.kind, EntryErrorKind::ExtensionTooLarge { .. })),
        "{results:?}"
    );
    assert_eq!(results[1].as_ref().unwrap().location.name, "after");
}

#[test]
fn a_long_name_within_the_limit_names_the_entry() {
    let name = "n".repeat(300);
    let mut long = format!("resources/configmaps/namespaces/web/{name}.json").into_bytes();
    long.push(0);
    let mut h = tar::Header::new_gnu();
    h.as_old_mut().name[..13].copy_from_slice(b"././@LongLink");
    h.set_entry_type(tar::EntryType::GNULongName);
    h.set_size(long.len() as u64);
    h.set_cksum();
    let mut hostile = Hostile::new();
    hostile.tar.append(&h, long.as_slice()).unwrap();
    let archive = hostile
        .file("resources/configmaps/namespaces/web/short.json", GOOD)
        .gz();
    let results = read_all(&archive, ReaderOptions::default());
    assert_eq!(results[0].as_ref().unwrap().location.name, name);
}

#[test]
fn a_pax_size_that_disagrees_with_the_header_is_fatal() {
    let archive = Hostile::new()
        .pax(&[("size", b"4096")])
        .file("resources/configmaps/namespaces/web/short.json", GOOD)
        .gz();
    let results = read_all(&archive, ReaderOptions::default());
    assert!(
        matches!(
            &results[..],
            [Err(ReadError::Fatal(ArchiveError::Corrupt(_)))]
        ),
        "{results:?}"
    );
}

#[test]
fn an_extension_header_that_describes_nothing_is_fatal() {
    let archive = Hostile::new()
        .file("resources/configmaps/namespaces/web/ok.json", GOOD)
        .extension(tar::EntryType::GNULongName, b'a', 100)
        .gz();
    let results = read_all(&archive, ReaderOptions::default());
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[1].as_ref().is_err_and(ReadError::is_fatal));
}

#[test]
fn more_items_than_allowed_is_fatal() {
    let mut hostile = Hostile::new();
    for i in 0..4 {
        hostile = hostile.file(
            &format!("resources/configmaps/namespaces/web/c{i}.json"),
            GOOD,
        );
    }
    let options = ReaderOptions {
        max_items: 3,
        ..ReaderOptions::default()
    };
    let results = read_all(&hostile.gz(), options);
    assert_eq!(results.len(), 4);
    assert!(matches!(
        results[3],
        Err(ReadError::Fatal(ArchiveError::TooManyItems { limit: 3 }))
    ));
}

#[test]
fn the_default_entry_limit_is_the_api_servers_request_limit() {
    assert_eq!(ReaderOptions::default().max_entry_bytes, 3 << 20);
}
