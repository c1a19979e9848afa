//! Records kept per kind until they are read back kind by kind: in memory within a byte budget,
//! in an unnamed temporary file beyond it.
//!
//! - A restore keeps the items of the archive between its checking pass and their type's turn
//!   in the walk (the JSON text read from the archive, its path and the keyed hash of its
//!   path), so that the archive is decompressed once, whatever its size and the order of its
//!   entries.
//! - A backup keeps the entries of its resource list (per `apiVersion/Kind`), so that its
//!   memory does not grow with its items.
//!
//! A record is a 64-bit key, a path and a JSON text, kept per kind in the order pushed. A kind's
//! records gather in a buffer; the buffer is appended to the file as one chunk when it reaches
//! [`CHUNK_BYTES`] or when the buffers together pass the budget. Reading a kind back reads its chunks in order, then what is left
//! in its buffer. The file is created on the first chunk (what fits in the budget never
//! touches the disk), in the system's temporary directory (`TMPDIR`), and the system removes
//! it when it is closed.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// Size at which a kind's buffer goes to the file.
pub(crate) const CHUNK_BYTES: usize = 256 << 10;

/// The records of one kind: its chunks in the file (offset, length), then its buffer.
#[derive(Debug, Default)]
struct TypeItems {
    chunks: Vec<(u64, usize)>,
    buffer: Vec<u8>,
}

/// Records kept per kind (a restore's types, a resource list's `apiVersion/Kind`s).
#[derive(Debug)]
pub(crate) struct Waiting {
    budget: u64,
    held: u64,
    file: Option<Arc<File>>,
    end: u64,
    types: HashMap<String, TypeItems>,
}

impl Waiting {
    /// Keeps at most `budget` bytes of records in memory.
    pub(crate) fn new(budget: u64) -> Self {
        Self {
            budget,
            held: 0,
            file: None,
            end: 0,
            types: HashMap::new(),
        }
    }

    /// Keeps one record of kind `gr`.
    ///
    /// # Errors
    /// Creating or writing the temporary file failed.
    pub(crate) fn push(&mut self, gr: &str, key: u64, path: &str, json: &[u8]) -> io::Result<()> {
        if !self.types.contains_key(gr) {
            self.types.insert(gr.to_owned(), TypeItems::default());
        }
        let Some(items) = self.types.get_mut(gr) else {
            return Ok(());
        };
        let before = items.buffer.len();
        encode(&mut items.buffer, key, path, json)?;
        self.held += (items.buffer.len() - before) as u64;
        if items.buffer.len() >= CHUNK_BYTES || self.held > self.budget {
            let file = match &self.file {
                Some(file) => file,
                None => self.file.insert(Arc::new(tempfile::tempfile()?)),
            };
            let len = items.buffer.len();
            file.write_all_at(&items.buffer, self.end)?;
            items.chunks.push((self.end, len));
            self.end += len as u64;
            self.held -= len as u64;
            // Freed, not cleared: the budget counts what is held.
            items.buffer = Vec::new();
        }
        Ok(())
    }

    /// Bytes written to the temporary file.
    pub(crate) fn spilled_bytes(&self) -> u64 {
        self.end
    }

    /// The kinds with records, sorted.
    pub(crate) fn kinds(&self) -> Vec<String> {
        let mut kinds: Vec<String> = self.types.keys().cloned().collect();
        kinds.sort_unstable();
        kinds
    }

    /// Takes the records of kind `gr` out, to be read back with [`TypeReader::read`].
    pub(crate) fn take(&mut self, gr: &str) -> TypeReader {
        let items = self.types.remove(gr).unwrap_or_default();
        self.held = self.held.saturating_sub(items.buffer.len() as u64);
        TypeReader {
            file: self.file.clone(),
            items,
        }
    }
}

/// The kept records of one kind.
#[derive(Debug)]
pub(crate) struct TypeReader {
    file: Option<Arc<File>>,
    items: TypeItems,
}

/// One kept record, as [`TypeReader::read`] hands it over.
pub(crate) struct Record<'a> {
    pub key: u64,
    pub path: &'a str,
    pub json: &'a [u8],
}

impl TypeReader {
    /// Calls `each` with every record, in the order they were kept, until it returns `false`.
    ///
    /// # Errors
    /// Reading the temporary file failed, or what it holds is not what was written.
    pub(crate) fn read(&self, mut each: impl FnMut(Record<'_>) -> bool) -> io::Result<()> {
        let mut chunk = Vec::new();
        for (offset, len) in &self.items.chunks {
            let Some(file) = &self.file else {
                return Err(io::Error::other("a chunk without a file"));
            };
            chunk.resize(*len, 0);
            file.read_exact_at(&mut chunk, *offset)?;
            if !decode_all(&chunk, &mut each)? {
                return Ok(());
            }
        }
        decode_all(&self.items.buffer, &mut each).map(|_| ())
    }
}

/// Appends one record: the key, the path's length and the path, the JSON's length and the
/// JSON (lengths as little-endian `u32`).
fn encode(buffer: &mut Vec<u8>, key: u64, path: &str, json: &[u8]) -> io::Result<()> {
    let too_long = |_| io::Error::other("an item longer than 4 GiB");
    buffer.write_all(&key.to_le_bytes())?;
    buffer.write_all(&u32::try_from(path.len()).map_err(too_long)?.to_le_bytes())?;
    buffer.write_all(path.as_bytes())?;
    buffer.write_all(&u32::try_from(json.len()).map_err(too_long)?.to_le_bytes())?;
    buffer.write_all(json)
}

/// Hands every record of `bytes` to `each`; `false` when `each` asked to stop.
fn decode_all(mut bytes: &[u8], each: &mut impl FnMut(Record<'_>) -> bool) -> io::Result<bool> {
    while !bytes.is_empty() {
        let key = u64::from_le_bytes(fixed(&mut bytes)?);
        let path_len = u32::from_le_bytes(fixed(&mut bytes)?) as usize;
        let path = std::str::from_utf8(split(&mut bytes, path_len)?).map_err(|_| corrupt())?;
        let json_len = u32::from_le_bytes(fixed(&mut bytes)?) as usize;
        let json = split(&mut bytes, json_len)?;
        if !each(Record { key, path, json }) {
            return Ok(false);
        }
    }
    Ok(true)
}

fn corrupt() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "the kept items are corrupt")
}

fn split<'a>(bytes: &mut &'a [u8], n: usize) -> io::Result<&'a [u8]> {
    let (head, rest) = bytes.split_at_checked(n).ok_or_else(corrupt)?;
    *bytes = rest;
    Ok(head)
}

fn fixed<const N: usize>(bytes: &mut &[u8]) -> io::Result<[u8; N]> {
    split(bytes, N)?.try_into().map_err(|_| corrupt())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    /// A kept item: key, path, JSON.
    type Kept = (u64, String, Vec<u8>);

    fn read_all(reader: TypeReader) -> Vec<Kept> {
        let mut seen = Vec::new();
        reader
            .read(|r| {
                seen.push((r.key, r.path.to_owned(), r.json.to_vec()));
                true
            })
            .unwrap();
        seen
    }

    #[test]
    fn items_come_back_per_type_in_order_from_memory_and_file_alike() {
        for budget in [0, 1 << 10, u64::MAX] {
            let mut waiting = Waiting::new(budget);
            let mut expected: HashMap<&str, Vec<Kept>> = HashMap::new();
            for i in 0..2000u64 {
                let gr = ["configmaps", "secrets", "widgets.example.com"][(i % 3) as usize];
                let path = format!("resources/{gr}/namespaces/ns/item-{i}.json");
                let json = format!(
                    "{{\"i\":{i},\"pad\":\"{}\"}}",
                    "x".repeat((i % 300) as usize)
                );
                waiting.push(gr, i, &path, json.as_bytes()).unwrap();
                expected
                    .entry(gr)
                    .or_default()
                    .push((i, path, json.into_bytes()));
            }
            assert_eq!(
                waiting.spilled_bytes() > 0,
                budget != u64::MAX,
                "budget {budget}"
            );
            assert!(
                waiting.held <= budget,
                "budget {budget}: {} held",
                waiting.held
            );
            for gr in ["secrets", "configmaps", "widgets.example.com"] {
                assert_eq!(
                    read_all(waiting.take(gr)),
                    expected[gr],
                    "budget {budget}, {gr}"
                );
            }
            assert!(read_all(waiting.take("pods")).is_empty());
            assert_eq!(waiting.held, 0);
        }
    }

    #[test]
    fn reading_stops_when_asked() {
        let mut waiting = Waiting::new(0);
        for i in 0..10 {
            waiting.push("configmaps", i, "p", b"{}").unwrap();
        }
        let mut n = 0;
        waiting
            .take("configmaps")
            .read(|_| {
                n += 1;
                n < 3
            })
            .unwrap();
        assert_eq!(n, 3);
    }

    #[test]
    fn a_cut_record_is_an_error() {
        let mut buffer = Vec::new();
        encode(&mut buffer, 7, "p", b"{}").unwrap();
        buffer.pop();
        let err = decode_all(&buffer, &mut |_| true).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
