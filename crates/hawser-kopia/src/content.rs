//! Content IDs and content-level compression.
//!
//! A content ID is an optional prefix letter (`g`–`z`: `k` directories, `x` indirect lists,
//! `m` manifests) followed by the hex of the content's hash. Index blobs hold it as one prefix
//! byte (0 when there is none) followed by the hash's bytes, which is also how it sorts. A
//! compressed content starts with the 4-byte big-endian ID of its compressor, which the index
//! entry records too.

use std::fmt;
use std::io::Read;

use crate::KopiaError;

/// A content's ID, as index blobs hold it: the prefix byte (0 for none) then the hash (up to
/// 32 bytes, kopia's longest), held inline: a repository's index holds one per content.
#[derive(Clone)]
pub struct ContentId {
    len: u8,
    bytes: [u8; MAX_KEY],
}

/// The longest content ID in bytes: a prefix and a 256-bit hash.
pub(crate) const MAX_KEY: usize = 33;

impl PartialEq for ContentId {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for ContentId {}

impl std::hash::Hash for ContentId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl PartialOrd for ContentId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// By the bytes of the key, as index blobs sort them.
impl Ord for ContentId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(other.key())
    }
}

impl ContentId {
    /// The ID of an index key (prefix byte, then hash); none when it is empty but for the
    /// prefix or longer than any kopia writes.
    pub(crate) fn from_key(key: &[u8]) -> Option<Self> {
        if key.len() < 2 || key.len() > MAX_KEY {
            return None;
        }
        let mut bytes = [0; MAX_KEY];
        bytes[..key.len()].copy_from_slice(key);
        Some(Self {
            len: u8::try_from(key.len()).ok()?,
            bytes,
        })
    }

    /// The ID of a hash (the first 32 bytes: no hash here is longer) with `prefix` (0: none).
    pub(crate) fn of(prefix: u8, hash: &[u8]) -> Self {
        let hash = &hash[..hash.len().min(MAX_KEY - 1)];
        let mut bytes = [0; MAX_KEY];
        bytes[0] = prefix;
        bytes[1..=hash.len()].copy_from_slice(hash);
        Self {
            len: u8::try_from(1 + hash.len()).unwrap_or(1),
            bytes,
        }
    }

    /// The key as index blobs hold it.
    pub(crate) fn key(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// Parses the text form (`k0123…`, `0123…`).
    ///
    /// # Errors
    /// [`KopiaError::Malformed`] for anything else.
    pub fn parse(text: &str) -> Result<Self, KopiaError> {
        let bad = |why: &str| KopiaError::malformed(format!("content ID {text:?}"), why);
        let (prefix, hex_part) = if text.len() % 2 == 1 {
            let prefix = text.as_bytes()[0];
            if !(b'g'..=b'z').contains(&prefix) {
                return Err(bad("its prefix is not a letter from g to z"));
            }
            (prefix, &text[1..])
        } else {
            (0, text)
        };
        let hash = hex::decode(hex_part).map_err(|_| bad("not hex"))?;
        if hash.is_empty() {
            return Err(bad("empty"));
        }
        if hash.len() >= MAX_KEY {
            return Err(bad("longer than a 256-bit hash"));
        }
        Ok(Self::of(prefix, &hash))
    }

    /// The prefix letter, if any.
    #[must_use]
    pub fn prefix(&self) -> Option<char> {
        (self.bytes[0] != 0).then(|| char::from(self.bytes[0]))
    }

    /// The hash's bytes.
    #[must_use]
    pub fn hash(&self) -> &[u8] {
        &self.key()[1..]
    }

    /// The IV the content was encrypted with: the last 16 bytes of its hash.
    pub(crate) fn iv(&self) -> &[u8] {
        let hash = self.hash();
        &hash[hash.len().saturating_sub(16)..]
    }
}

impl fmt::Display for ContentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(prefix) = self.prefix() {
            write!(f, "{prefix}")?;
        }
        write!(f, "{}", hex::encode(self.hash()))
    }
}

impl fmt::Debug for ContentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// kopia's compressor IDs this reader decompresses.
const GZIP: std::ops::RangeInclusive<u32> = 0x1000..=0x1002;
const ZSTD: std::ops::RangeInclusive<u32> = 0x1100..=0x1103;
const PGZIP: std::ops::RangeInclusive<u32> = 0x1300..=0x1302;
const DEFLATE: std::ops::RangeInclusive<u32> = 0x1500..=0x1502;

/// Decompresses `data`, which starts with the 4-byte ID of its compressor; `expected` is the ID
/// the index recorded (0: none, for object-level compression, where the header alone says).
/// At most `limit` bytes come out: a stream that would give more is refused, so a small
/// compressed bomb costs no memory.
pub(crate) fn decompress(
    data: &[u8],
    expected: u32,
    limit: u64,
    what: &str,
) -> Result<Vec<u8>, KopiaError> {
    let Some((header, body)) = data.split_first_chunk::<4>() else {
        return Err(KopiaError::malformed(
            what,
            "shorter than its compression header",
        ));
    };
    let id = u32::from_be_bytes(*header);
    if expected != 0 && id != expected {
        return Err(KopiaError::malformed(
            what,
            format!("compressed with {id:#x}, the index says {expected:#x}"),
        ));
    }
    let mut out = Vec::new();
    let bound = limit.saturating_add(1);
    let read = if ZSTD.contains(&id) {
        zstd::stream::read::Decoder::new(body).and_then(|d| d.take(bound).read_to_end(&mut out))
    } else if GZIP.contains(&id) || PGZIP.contains(&id) {
        flate2::read::MultiGzDecoder::new(body)
            .take(bound)
            .read_to_end(&mut out)
    } else if DEFLATE.contains(&id) {
        flate2::read::DeflateDecoder::new(body)
            .take(bound)
            .read_to_end(&mut out)
    } else {
        return Err(KopiaError::Unsupported {
            what: "compression",
            value: format!("{id:#x} (of {what})"),
        });
    };
    read.map_err(|e| KopiaError::malformed(what, format!("does not decompress: {e}")))?;
    if out.len() as u64 > limit {
        return Err(KopiaError::malformed(
            what,
            format!("decompresses to more than {limit} bytes"),
        ));
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    #[test]
    fn content_ids_round_trip_and_sort_unprefixed_first() {
        let plain = ContentId::parse("38b0b35250633a94170e49c481cc100d").unwrap();
        let dir = ContentId::parse("k38b0b35250633a94170e49c481cc100d").unwrap();
        assert_eq!(plain.prefix(), None);
        assert_eq!(dir.prefix(), Some('k'));
        assert_eq!(dir.to_string(), "k38b0b35250633a94170e49c481cc100d");
        assert_eq!(dir.iv(), plain.hash());
        assert!(plain < dir);
        for bad in ["", "a38b0", "k", "kzz", "G38b0b0"] {
            assert!(ContentId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn compressed_data_names_its_compressor() {
        let mut data = 0x1101u32.to_be_bytes().to_vec();
        data.extend(zstd::encode_all(&b"directory listing"[..], 1).unwrap());
        assert_eq!(
            decompress(&data, 0x1101, 17, "t").unwrap(),
            b"directory listing"
        );
        assert!(
            decompress(&data, 0x1100, 17, "t").is_err(),
            "the index disagrees"
        );
        assert!(
            decompress(&data, 0x1101, 16, "t").is_err(),
            "more than the limit"
        );
        let mut s2 = 0x1200u32.to_be_bytes().to_vec();
        s2.push(0);
        assert!(matches!(
            decompress(&s2, 0, 1, "t"),
            Err(KopiaError::Unsupported { .. })
        ));
    }
}
