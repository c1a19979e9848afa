//! The writer streams: bytes reach the underlying writer while items are still being written,
//! and 10 000 items come back from the reader, in order, one at a time.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::cell::Cell;
use std::io::{self, Write};
use std::rc::Rc;

use hawser_core::archive::{ArchiveReader, ArchiveWriter, ItemId, ReaderOptions, WriterOptions};
use serde_json::json;

/// A writer that keeps the bytes and publishes how many it has received.
struct Observed {
    bytes: Vec<u8>,
    seen: Rc<Cell<usize>>,
}

impl Write for Observed {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes.extend_from_slice(buf);
        self.seen.set(self.bytes.len());
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

const ITEMS: usize = 10_000;

fn config_map(i: usize) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": format!("cm-{i:05}"), "namespace": format!("ns-{}", i % 7), "uid": format!("uid-{i}")},
        // Varied data so that the stream does not compress to nothing.
        "data": {"value": format!("{:x}", (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))}
    })
}

#[test]
fn ten_thousand_items_stream_out_and_back() {
    let seen = Rc::new(Cell::new(0));
    let sink = Observed {
        bytes: Vec::new(),
        seen: seen.clone(),
    };
    let mut writer = ArchiveWriter::new(sink, WriterOptions::default()).unwrap();
    let mut seen_at_half = 0;
    for i in 0..ITEMS {
        let id = ItemId::namespaced(
            "configmaps",
            &format!("ns-{}", i % 7),
            &format!("cm-{i:05}"),
        );
        writer.write_item(&id, "v1", &config_map(i)).unwrap();
        if i == ITEMS / 2 {
            seen_at_half = seen.get();
        }
    }
    assert!(
        seen_at_half > 0,
        "compressed bytes reach the sink before the archive is finished"
    );
    let (sink, stats) = writer.finish().unwrap();
    assert_eq!(stats.items, ITEMS as u64);
    assert_eq!(stats.entries, 1 + 2 * ITEMS as u64);
    assert!(sink.bytes.len() > seen_at_half);

    let mut reader = ArchiveReader::new(&sink.bytes[..], ReaderOptions::default());
    let mut count = 0;
    for (i, item) in reader.items().unwrap().enumerate() {
        let item = item.unwrap();
        assert_eq!(item.location.name, format!("cm-{i:05}"));
        assert_eq!(
            item.location.namespace.as_deref(),
            Some(format!("ns-{}", i % 7).as_str())
        );
        assert_eq!(item.object, config_map(i));
        count += 1;
    }
    assert_eq!(count, ITEMS);

    let mut reader = ArchiveReader::new(
        &sink.bytes[..],
        ReaderOptions {
            include_versioned_copies: true,
            ..ReaderOptions::default()
        },
    );
    assert_eq!(
        reader.items().unwrap().filter(Result::is_ok).count(),
        2 * ITEMS
    );
}
