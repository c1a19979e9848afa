//! Archive encryption: a backup's `<name>.tar.gz` sealed with a key held in the cluster, so
//! that whoever can read the bucket sees no Secret (or any other item) of the backup. Off
//! unless the location names a key; an archive without the header below is read as it is.
//!
//! **Format** (all integers big-endian):
//!
//! | bytes | what |
//! |---|---|
//! | 8 | `HWSRAE01` |
//! | 16 | the key id: the first 8 bytes of SHA-256 of the key, in hex |
//! | 32 | a random salt, new for each archive |
//! | 4 | the plaintext chunk size, [`CHUNK`] |
//! | … | the chunks: each the AES-256-GCM sealing of [`CHUNK`] plaintext bytes (the last one of up to [`CHUNK`], possibly none) followed by its 16-byte tag |
//!
//! Each archive has a key of its own, HKDF-SHA256 of the location's key with the salt, so the
//! nonces (the chunk's index, from 0) never repeat under one key. A chunk's associated data
//! says whether it is the last: a stream cut at a chunk boundary, reordered chunks or chunks
//! from another archive do not authenticate, and reading fails instead of returning a shorter
//! archive. Encryption streams: a writer holds one chunk, a reader one chunk and one byte.
//!
//! Written with `aws-lc-rs` (AES-GCM, HKDF), which the TLS stack already builds; no crate
//! offers this chunked stream format over `std::io` for it.

use std::fmt;
use std::io::{self, Read, Write};

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use aws_lc_rs::hkdf::{HKDF_SHA256, Salt};
use sha2::{Digest, Sha256};

/// The first bytes of an encrypted archive.
pub const MAGIC: &[u8; 8] = b"HWSRAE01";
/// Plaintext bytes per chunk.
pub const CHUNK: usize = 1 << 20;
const TAG: usize = 16;
const ID_LEN: usize = 16;
const SALT_LEN: usize = 32;
const INFO: &[u8] = b"hawser archive encryption v1";

/// A location's archive key: 32 bytes, and its id.
#[derive(Clone)]
pub struct ArchiveKey {
    bytes: [u8; 32],
    id: String,
}

impl fmt::Debug for ArchiveKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ArchiveKey({})", self.id)
    }
}

impl ArchiveKey {
    /// The key in a Secret's value: 32 bytes, or their base64 (whitespace around it ignored).
    ///
    /// # Errors
    /// What the value is instead, without the value.
    pub fn from_secret(value: &[u8]) -> Result<Self, String> {
        use base64::Engine as _;
        let bytes: Vec<u8> = if value.len() == 32 {
            value.to_vec()
        } else {
            let text = std::str::from_utf8(value)
                .map_err(|_| format!("it is {} bytes, not 32 and not base64", value.len()))?;
            base64::engine::general_purpose::STANDARD
                .decode(text.trim())
                .map_err(|_| format!("it is {} bytes, not 32 and not base64", value.len()))?
        };
        let bytes: [u8; 32] = bytes
            .try_into()
            .map_err(|b: Vec<u8>| format!("it holds {} bytes; an AES-256 key is 32", b.len()))?;
        let digest = Sha256::digest(bytes);
        let id = digest[..ID_LEN / 2]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(Self { bytes, id })
    }

    /// The key's id, as archive headers and records carry it.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The key of one archive, from its salt.
    fn for_archive(&self, salt: &[u8]) -> io::Result<LessSafeKey> {
        let failed = |_| io::Error::other("deriving the archive's key failed");
        let prk = Salt::new(HKDF_SHA256, salt).extract(&self.bytes);
        let okm = prk.expand(&[INFO], &AES_256_GCM).map_err(failed)?;
        Ok(LessSafeKey::new(UnboundKey::from(okm)))
    }
}

fn nonce(index: u64) -> Nonce {
    let mut bytes = [0u8; 12];
    bytes[4..].copy_from_slice(&index.to_be_bytes());
    Nonce::assume_unique_for_key(bytes)
}

fn aad(last: bool) -> Aad<[u8; 1]> {
    Aad::from([u8::from(last)])
}

/// Seals what is written into `inner`; [`Sealer::finish`] seals the last chunk.
pub struct Sealer<W: Write> {
    inner: W,
    key: LessSafeKey,
    buffer: Vec<u8>,
    index: u64,
}

impl<W: Write> Sealer<W> {
    /// Writes the header for `key` to `inner`.
    ///
    /// # Errors
    /// Writing to `inner` failed.
    pub fn new(mut inner: W, key: &ArchiveKey) -> io::Result<Self> {
        let mut salt = [0u8; SALT_LEN];
        rand::fill(&mut salt);
        let mut header = Vec::with_capacity(MAGIC.len() + ID_LEN + SALT_LEN + 4);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(key.id().as_bytes());
        header.extend_from_slice(&salt);
        header.extend_from_slice(&u32::try_from(CHUNK).unwrap_or(u32::MAX).to_be_bytes());
        inner.write_all(&header)?;
        Ok(Self {
            inner,
            key: key.for_archive(&salt)?,
            buffer: Vec::with_capacity(CHUNK + TAG),
            index: 0,
        })
    }

    /// Seals the first `len` buffered bytes as chunk `index` and writes it.
    fn seal(&mut self, len: usize, last: bool) -> io::Result<()> {
        let mut chunk: Vec<u8> = self.buffer.drain(..len).collect();
        self.key
            .seal_in_place_append_tag(nonce(self.index), aad(last), &mut chunk)
            .map_err(|_| io::Error::other("sealing a chunk of the archive failed"))?;
        self.index += 1;
        self.inner.write_all(&chunk)
    }

    /// Seals the last chunk (what is buffered, possibly nothing) and flushes.
    ///
    /// # Errors
    /// Writing to the inner writer failed.
    pub fn finish(&mut self) -> io::Result<()> {
        self.seal(self.buffer.len(), true)?;
        self.inner.flush()
    }

    /// The inner writer.
    pub fn into_inner(self) -> W {
        self.inner
    }

    /// The inner writer.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }
}

impl<W: Write> Write for Sealer<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buffer.extend_from_slice(bytes);
        // A full chunk is sealed once more follows it: the last one is known only at finish.
        while self.buffer.len() > CHUNK {
            self.seal(CHUNK, false)?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Opens what [`Sealer`] wrote, reading from `inner` (which starts at [`MAGIC`]).
pub struct Opener<R: Read> {
    inner: R,
    key: LessSafeKey,
    index: u64,
    /// Sealed bytes read ahead of the current chunk.
    ahead: Vec<u8>,
    plain: Vec<u8>,
    at: usize,
    done: bool,
}

fn damaged(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

impl<R: Read> Opener<R> {
    /// Reads the header and checks it names `key`.
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidData`]: not an encrypted archive, another key, another chunk
    /// size; or reading failed.
    pub fn new(mut inner: R, key: &ArchiveKey) -> io::Result<Self> {
        let mut header = [0u8; 8 + ID_LEN + SALT_LEN + 4];
        inner.read_exact(&mut header)?;
        if &header[..8] != MAGIC {
            return Err(damaged("not an encrypted archive".to_owned()));
        }
        let id = String::from_utf8_lossy(&header[8..8 + ID_LEN]).into_owned();
        if id != key.id() {
            return Err(damaged(format!(
                "the archive is encrypted with key {id}, and the location's key is {}",
                key.id()
            )));
        }
        let salt = &header[8 + ID_LEN..8 + ID_LEN + SALT_LEN];
        let mut size = [0u8; 4];
        size.copy_from_slice(&header[8 + ID_LEN + SALT_LEN..]);
        if usize::try_from(u32::from_be_bytes(size)).ok() != Some(CHUNK) {
            return Err(damaged(format!(
                "the archive's chunk size is {}, not {CHUNK}",
                u32::from_be_bytes(size)
            )));
        }
        Ok(Self {
            key: key.for_archive(salt)?,
            inner,
            index: 0,
            ahead: Vec::with_capacity(CHUNK + TAG + 1),
            plain: Vec::new(),
            at: 0,
            done: false,
        })
    }

    /// Reads and opens the next chunk into `plain`.
    fn next_chunk(&mut self) -> io::Result<()> {
        // One byte beyond the chunk tells whether it is the last.
        let want = CHUNK + TAG + 1;
        let mut eof = false;
        while self.ahead.len() < want {
            let start = self.ahead.len();
            self.ahead.resize(want, 0);
            let n = self.inner.read(&mut self.ahead[start..])?;
            self.ahead.truncate(start + n);
            if n == 0 {
                eof = true;
                break;
            }
        }
        let last = eof;
        let len = if last { self.ahead.len() } else { CHUNK + TAG };
        if len < TAG {
            return Err(damaged(format!(
                "the encrypted archive ends inside chunk {}",
                self.index
            )));
        }
        let mut chunk: Vec<u8> = self.ahead.drain(..len).collect();
        let opened = self
            .key
            .open_in_place(nonce(self.index), aad(last), &mut chunk)
            .map_err(|_| {
                damaged(format!(
                    "chunk {} of the encrypted archive does not authenticate: the archive is damaged, cut short or was changed",
                    self.index
                ))
            })?
            .len();
        chunk.truncate(opened);
        self.plain = chunk;
        self.at = 0;
        self.index += 1;
        self.done = last;
        Ok(())
    }
}

impl<R: Read> Read for Opener<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.at == self.plain.len() {
            if self.done {
                return Ok(0);
            }
            self.next_chunk()?;
        }
        let n = out.len().min(self.plain.len() - self.at);
        out[..n].copy_from_slice(&self.plain[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    fn key(byte: u8) -> ArchiveKey {
        ArchiveKey::from_secret(&[byte; 32]).unwrap()
    }

    fn seal(key: &ArchiveKey, data: &[u8], piece: usize) -> Vec<u8> {
        let mut sealer = Sealer::new(Vec::new(), key).unwrap();
        for part in data.chunks(piece.max(1)) {
            sealer.write_all(part).unwrap();
        }
        sealer.finish().unwrap();
        sealer.into_inner()
    }

    fn open(key: &ArchiveKey, sealed: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        Opener::new(sealed, key)?.read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn keys_come_raw_or_in_base64_and_are_known_by_their_id() {
        use base64::Engine as _;
        let raw = [7u8; 32];
        let text = base64::engine::general_purpose::STANDARD.encode(raw);
        let a = ArchiveKey::from_secret(&raw).unwrap();
        let b = ArchiveKey::from_secret(format!(" {text}\n").as_bytes()).unwrap();
        assert_eq!(a.id(), b.id());
        assert_eq!(a.id().len(), 16);
        assert_ne!(a.id(), key(8).id());
        assert!(
            ArchiveKey::from_secret(b"short")
                .unwrap_err()
                .contains("not 32")
        );
        assert!(format!("{a:?}").contains(a.id()));
    }

    #[test]
    fn what_is_sealed_opens_to_the_same_bytes_whatever_its_size() {
        let k = key(1);
        for size in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, 2 * CHUNK + 17] {
            let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            let sealed = seal(&k, &data, 70_000);
            assert_eq!(&sealed[..8], MAGIC);
            let chunks = size.div_ceil(CHUNK).max(1);
            assert_eq!(sealed.len(), 60 + size + chunks * TAG, "size {size}");
            assert_eq!(open(&k, &sealed).unwrap(), data, "size {size}");
            // No plaintext run of the data shows through.
            if size >= 64 {
                assert!(!sealed.windows(32).any(|w| w == &data[..32]));
            }
        }
    }

    #[test]
    fn another_key_a_cut_or_a_change_is_an_error_not_a_shorter_archive() {
        let k = key(1);
        let data: Vec<u8> = (0..(2 * CHUNK + 5)).map(|i| (i % 13) as u8).collect();
        let sealed = seal(&k, &data, CHUNK);
        let other = open(&key(2), &sealed).unwrap_err();
        assert!(other.to_string().contains("encrypted with key"), "{other}");
        // Cut at the end of the first chunk: that chunk was not sealed as the last.
        let cut = &sealed[..60 + CHUNK + TAG];
        assert!(open(&k, cut).unwrap_err().to_string().contains("chunk 0"));
        // The last chunk dropped.
        let dropped = &sealed[..60 + 2 * (CHUNK + TAG)];
        assert!(
            open(&k, dropped)
                .unwrap_err()
                .to_string()
                .contains("chunk 1")
        );
        // One byte changed.
        let mut changed = sealed.clone();
        changed[60 + CHUNK + TAG + 3] ^= 1;
        assert!(
            open(&k, &changed)
                .unwrap_err()
                .to_string()
                .contains("chunk 1")
        );
        // The same data sealed twice differs (a salt per archive).
        assert_ne!(seal(&k, &data[..100], 100), seal(&k, &data[..100], 100));
    }
}
