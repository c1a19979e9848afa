//! Index blobs (decrypted): which pack holds each content, where, how long, and when it was
//! written. Version 2 (kopia's default since format 2) and version 1 are read; the layout is
//! kopia's writer's (big-endian throughout):
//!
//! - v2: a 17-byte header (version, key size, entry size, entry count, pack count, format
//!   count, base timestamp), the entries sorted by key (key ‖ value of 16–19 bytes), the pack
//!   table (5 bytes each: name length, name offset), the format table (6 bytes each:
//!   compression ID, format version, encryption key ID), then the pack names.
//! - v1: an 8-byte header (version, key size, entry size = 20, entry count), then entries
//!   whose value holds a 48-bit timestamp, the format version, the pack name's length and
//!   offset, the deleted flag with the pack offset, and the packed length.

use std::sync::Arc;

use crate::KopiaError;
use crate::content::ContentId;
use crate::crypto::OVERHEAD;

/// Where one content is, and its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The content.
    pub id: ContentId,
    /// The pack blob holding it.
    pub pack: Arc<str>,
    /// Its offset in the pack.
    pub offset: u32,
    /// Its stored (encrypted, maybe compressed) length.
    pub packed_length: u32,
    /// Its plaintext length.
    pub original_length: u32,
    /// When this entry was written (seconds since the epoch).
    pub timestamp: i64,
    /// Marked deleted (still readable until the deletion watermark passes it).
    pub deleted: bool,
    /// The compressor's ID (0: stored as is).
    pub compression: u32,
    /// The repository format version it was written under.
    pub format_version: u8,
    /// The encryption key ID (kopia writes 0 only).
    pub key_id: u8,
}

/// Reads a big-endian integer of `N` bytes at `at`.
fn be<const N: usize>(data: &[u8], at: usize) -> Option<u64> {
    let bytes = data.get(at..at.checked_add(N)?)?;
    Some(bytes.iter().fold(0u64, |n, b| (n << 8) | u64::from(*b)))
}

fn narrow<T: TryFrom<u64>>(n: u64, what: &str) -> Result<T, KopiaError> {
    T::try_from(n).map_err(|_| KopiaError::malformed(what, format!("{n} is out of range")))
}

/// The content ID of an index key.
fn content_id(key: &[u8], what: &str) -> Result<ContentId, KopiaError> {
    ContentId::from_key(key)
        .ok_or_else(|| KopiaError::malformed(what, format!("a content ID of {} bytes", key.len())))
}

/// Every entry of the decrypted index blob `data` (named `what` in errors).
///
/// # Errors
/// [`KopiaError::Unsupported`] for an unknown version, [`KopiaError::Malformed`] when a
/// table or entry lies outside the data.
pub fn parse(data: &[u8], what: &str) -> Result<Vec<Entry>, KopiaError> {
    let mut entries = Vec::new();
    parse_each(data, what, |entry| entries.push(entry))?;
    Ok(entries)
}

/// Hands each entry of the decrypted index blob `data` to `each` as it is read (nothing but
/// the entry is held); errors as [`parse`]'s.
pub(crate) fn parse_each(
    data: &[u8],
    what: &str,
    mut each: impl FnMut(Entry),
) -> Result<(), KopiaError> {
    match data.first() {
        Some(2) => parse_v2(data, what, &mut each),
        Some(1) => parse_v1(data, what, &mut each),
        Some(v) => Err(KopiaError::Unsupported {
            what: "index version",
            value: format!("{v} (in {what})"),
        }),
        None => Err(KopiaError::malformed(what, "empty index")),
    }
}

fn parse_v2(data: &[u8], what: &str, each: &mut dyn FnMut(Entry)) -> Result<(), KopiaError> {
    let short = || KopiaError::malformed(what, "shorter than its tables say");
    let key_size = usize::from(data.get(1).copied().ok_or_else(short)?);
    if key_size == 0xff {
        return Ok(());
    }
    let entry_size: usize = narrow(be::<2>(data, 2).ok_or_else(short)?, what)?;
    let count: usize = narrow(be::<4>(data, 4).ok_or_else(short)?, what)?;
    let pack_count: usize = narrow(be::<4>(data, 8).ok_or_else(short)?, what)?;
    let format_count = usize::from(data.get(12).copied().ok_or_else(short)?);
    let base_timestamp = be::<4>(data, 13).ok_or_else(short)?;
    if key_size <= 1 || !(16..=19).contains(&entry_size) || key_size + entry_size > 256 {
        return Err(KopiaError::malformed(
            what,
            format!("key size {key_size} and entry size {entry_size}"),
        ));
    }
    let stride = key_size + entry_size;
    let packs_at = count
        .checked_mul(stride)
        .and_then(|n| n.checked_add(17))
        .ok_or_else(short)?;
    let formats_at = pack_count
        .checked_mul(5)
        .and_then(|n| n.checked_add(packs_at))
        .ok_or_else(short)?;
    let formats_end = formats_at.checked_add(format_count * 6).ok_or_else(short)?;
    if formats_end > data.len() {
        return Err(short());
    }
    let mut packs = Vec::with_capacity(pack_count);
    for i in 0..pack_count {
        let at = packs_at + 5 * i;
        let len: usize = narrow(be::<1>(data, at).ok_or_else(short)?, what)?;
        let offset: usize = narrow(be::<4>(data, at + 1).ok_or_else(short)?, what)?;
        let name = data.get(offset..offset + len).ok_or_else(short)?;
        let name = std::str::from_utf8(name)
            .map_err(|_| KopiaError::malformed(what, "a pack name is not text"))?;
        packs.push(Arc::<str>::from(name));
    }
    let formats: Vec<(u32, u8, u8)> = (0..format_count)
        .map(|i| {
            let at = formats_at + 6 * i;
            let compression =
                u32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
            (compression, data[at + 4], data[at + 5])
        })
        .collect();
    for i in 0..count {
        let at = 17 + i * stride;
        let key = &data[at..at + key_size];
        let value = &data[at + key_size..at + stride];
        // Bytes past the entry size count as 0.
        let byte = |n: usize| u64::from(value.get(n).copied().unwrap_or(0));
        let timestamp = be::<4>(value, 0).unwrap_or(0) + base_timestamp;
        let offset_word = be::<4>(value, 4).unwrap_or(0);
        let original = be::<3>(value, 8).unwrap_or(0) | ((byte(18) >> 4) << 24);
        let packed = be::<3>(value, 11).unwrap_or(0) | ((byte(18) & 0x0f) << 24);
        let pack_index = be::<2>(value, 14).unwrap_or(0) | (byte(17) << 16);
        let format_index: usize = narrow(byte(16), what)?;
        let pack = packs
            .get(narrow::<usize>(pack_index, what)?)
            .cloned()
            .ok_or_else(|| {
                KopiaError::malformed(what, format!("entry {i} names pack {pack_index}"))
            })?;
        let (compression, format_version, key_id) = match formats.get(format_index) {
            Some(format) => *format,
            // A v2 index without formats: every entry is stored as is.
            None if format_count == 0 => (0, 0, 0),
            None => {
                return Err(KopiaError::malformed(
                    what,
                    format!("entry {i} names format {format_index}"),
                ));
            }
        };
        each(Entry {
            id: content_id(key, what)?,
            pack,
            offset: narrow(offset_word & 0x7fff_ffff, what)?,
            packed_length: narrow(packed, what)?,
            original_length: narrow(original, what)?,
            timestamp: narrow(timestamp, what)?,
            deleted: offset_word & 0x8000_0000 != 0,
            compression,
            format_version,
            key_id,
        });
    }
    Ok(())
}

fn parse_v1(data: &[u8], what: &str, each: &mut dyn FnMut(Entry)) -> Result<(), KopiaError> {
    let short = || KopiaError::malformed(what, "shorter than its header says");
    let key_size = usize::from(data.get(1).copied().ok_or_else(short)?);
    if key_size == 0xff {
        return Ok(());
    }
    let entry_size: usize = narrow(be::<2>(data, 2).ok_or_else(short)?, what)?;
    let count: usize = narrow(be::<4>(data, 4).ok_or_else(short)?, what)?;
    if entry_size != 20 || key_size <= 1 {
        return Err(KopiaError::malformed(
            what,
            format!("key size {key_size} and entry size {entry_size}"),
        ));
    }
    let stride = key_size + entry_size;
    // Checked before anything is allocated for them.
    let entries_end = count
        .checked_mul(stride)
        .and_then(|n| n.checked_add(8))
        .ok_or_else(short)?;
    if entries_end > data.len() {
        return Err(short());
    }
    for i in 0..count {
        let at = 8 + i * stride;
        let key = data.get(at..at + key_size).ok_or_else(short)?;
        let value = data.get(at + key_size..at + stride).ok_or_else(short)?;
        let head = be::<8>(value, 0).unwrap_or(0);
        let name_len: usize = narrow(head & 0xff, what)?;
        let name_at: usize = narrow(be::<4>(value, 8).unwrap_or(0), what)?;
        let name = data.get(name_at..name_at + name_len).ok_or_else(short)?;
        let name = std::str::from_utf8(name)
            .map_err(|_| KopiaError::malformed(what, "a pack name is not text"))?;
        let offset_word = be::<4>(value, 12).unwrap_or(0);
        let packed: u32 = narrow(be::<4>(value, 16).unwrap_or(0), what)?;
        each(Entry {
            id: content_id(key, what)?,
            pack: Arc::from(name),
            offset: narrow(offset_word & 0x7fff_ffff, what)?,
            packed_length: packed,
            // v1 stores no plaintext length: the packed one less the cipher's overhead.
            original_length: packed.saturating_sub(u32::try_from(OVERHEAD).unwrap_or(0)),
            timestamp: narrow(head >> 16, what)?,
            deleted: offset_word & 0x8000_0000 != 0,
            compression: 0,
            format_version: narrow((head >> 8) & 0xff, what)?,
            key_id: 0,
        });
    }
    Ok(())
}

/// A v2 index of `entries` as kopia's writer lays it out: sorted by content ID, the smallest
/// entry size that holds them (16 bytes; 17 with more than one format; 18 with more than 65,536
/// packs; 19 with a length of 2^24 or more), no base timestamp.
///
/// # Errors
/// [`KopiaError::Unsupported`] for a length of 2^28 or more, an offset of 2^31 or more, or more
/// than 255 formats, which the format cannot hold.
pub fn build<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> Result<Vec<u8>, KopiaError> {
    let too_big = |what: &str| KopiaError::Unsupported {
        what: "index entry",
        value: what.to_owned(),
    };
    let mut sorted: Vec<&Entry> = entries.into_iter().collect();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    let mut packs: Vec<&str> = sorted.iter().map(|e| &*e.pack).collect();
    packs.sort_unstable();
    packs.dedup();
    let mut formats: Vec<(u32, u8, u8)> = sorted
        .iter()
        .map(|e| (e.compression, e.format_version, e.key_id))
        .collect();
    formats.sort_unstable();
    formats.dedup();
    if formats.len() > 255 {
        return Err(too_big("more than 255 formats"));
    }
    let long = sorted
        .iter()
        .any(|e| e.original_length >= 1 << 24 || e.packed_length >= 1 << 24);
    let entry_size: usize = if long {
        19
    } else if packs.len() > 65_536 {
        18
    } else if formats.len() > 1 {
        17
    } else {
        16
    };
    let key_size = sorted.first().map_or(0xff, |e| e.id.key().len());
    let mut out = vec![2, u8::try_from(key_size).map_err(|_| too_big("key size"))?];
    out.extend(u16::try_from(entry_size).unwrap_or(16).to_be_bytes());
    let count = |n: usize, what: &str| u32::try_from(n).map_err(|_| too_big(what));
    out.extend(count(sorted.len(), "entry count")?.to_be_bytes());
    out.extend(count(packs.len(), "pack count")?.to_be_bytes());
    out.push(u8::try_from(formats.len()).unwrap_or(0));
    out.extend(0u32.to_be_bytes());
    for entry in &sorted {
        if entry.id.key().len() != key_size {
            return Err(too_big("content IDs of different lengths"));
        }
        if entry.original_length >= 1 << 28 || entry.packed_length >= 1 << 28 {
            return Err(too_big("a content of 256 MiB or more"));
        }
        if entry.offset >= 1 << 31 {
            return Err(too_big("a pack offset of 2 GiB or more"));
        }
        let pack = packs.binary_search(&&*entry.pack).unwrap_or(0);
        if pack >= 1 << 24 {
            return Err(too_big("more than 2^24 packs"));
        }
        let format = formats
            .binary_search(&(entry.compression, entry.format_version, entry.key_id))
            .unwrap_or(0);
        out.extend(entry.id.key());
        let timestamp =
            u32::try_from(entry.timestamp).map_err(|_| too_big("a timestamp outside 1970–2106"))?;
        let mut value = Vec::with_capacity(entry_size);
        value.extend(timestamp.to_be_bytes());
        value.extend((entry.offset | if entry.deleted { 1 << 31 } else { 0 }).to_be_bytes());
        value.extend(&entry.original_length.to_be_bytes()[1..]);
        value.extend(&entry.packed_length.to_be_bytes()[1..]);
        value.extend(&u32::try_from(pack).unwrap_or(0).to_be_bytes()[2..]);
        value.push(u8::try_from(format).unwrap_or(0));
        value.push(u8::try_from(pack >> 16).unwrap_or(0));
        value.push(
            u8::try_from(((entry.original_length >> 24) << 4) | (entry.packed_length >> 24))
                .unwrap_or(0),
        );
        value.truncate(entry_size);
        out.extend(value);
    }
    let mut name_at = out.len() + 5 * packs.len() + 6 * formats.len();
    for pack in &packs {
        out.push(u8::try_from(pack.len()).map_err(|_| too_big("a pack name over 255 bytes"))?);
        out.extend(count(name_at, "index size")?.to_be_bytes());
        name_at += pack.len();
    }
    for (compression, version, key_id) in &formats {
        out.extend(compression.to_be_bytes());
        out.push(*version);
        out.push(*key_id);
    }
    for pack in &packs {
        out.extend(pack.as_bytes());
    }
    Ok(out)
}

/// Whether entry `a` wins over `b` for the same content: the newer, then the one not deleted,
/// then the greater pack name (kopia's rule).
pub(crate) fn wins(a: &Entry, b: &Entry) -> bool {
    (a.timestamp, !a.deleted, &a.pack) > (b.timestamp, !b.deleted, &b.pack)
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
