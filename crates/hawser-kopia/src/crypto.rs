//! kopia's cryptography, over `aws-lc-rs` (AES-256-GCM, HKDF-SHA256, HMAC-SHA256, PBKDF2) and
//! the `scrypt` crate:
//! - the password's key: scrypt (`scrypt-65536-8-1`, kopia's default) or PBKDF2-SHA256
//!   (`pbkdf2-sha256-600000`) of the password, salted with the repository's unique ID;
//! - the format blob's config: AES-256-GCM under HKDF(password key, salt = unique ID, info
//!   `AES`), with HKDF(…, info `CHECKSUM`) as associated data;
//! - contents and index blobs (`AES256-GCM-HMAC-SHA256`): a key derived once from the master
//!   key (HKDF, salt `encryption`, no info), then per item HMAC-SHA256(that key, IV) as the
//!   AES-256-GCM key, with the IV as associated data. Sealed bytes are nonce (12) ‖ ciphertext ‖
//!   tag (16).

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::{hkdf, hmac, pbkdf2};

use crate::KopiaError;

/// Length of every key here.
const KEY_LEN: usize = 32;
/// Bytes AES-GCM adds: the nonce before, the tag after.
pub(crate) const OVERHEAD: usize = NONCE_LEN + 16;

/// The key the password gives for the repository with `unique_id`, by `key_algo`.
pub(crate) fn password_key(
    password: &str,
    unique_id: &[u8],
    key_algo: &str,
) -> Result<[u8; KEY_LEN], KopiaError> {
    let mut key = [0u8; KEY_LEN];
    match key_algo {
        // kopia writes the field; an absent one means its default.
        "" | "scrypt-65536-8-1" => {
            let params = scrypt::Params::new(16, 8, 1, KEY_LEN)
                .map_err(|e| KopiaError::malformed("scrypt parameters", e))?;
            scrypt::scrypt(password.as_bytes(), unique_id, &params, &mut key)
                .map_err(|e| KopiaError::malformed("scrypt output", e))?;
        }
        "pbkdf2-sha256-600000" => {
            let rounds = std::num::NonZeroU32::new(600_000).unwrap_or(std::num::NonZeroU32::MIN);
            pbkdf2::derive(
                pbkdf2::PBKDF2_HMAC_SHA256,
                rounds,
                unique_id,
                password.as_bytes(),
                &mut key,
            );
        }
        other => {
            return Err(KopiaError::Unsupported {
                what: "password key derivation (keyAlgo)",
                value: other.to_owned(),
            });
        }
    }
    Ok(key)
}

/// An output length for `aws-lc-rs`'s HKDF.
struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

/// RFC 5869 HKDF-SHA256 of `ikm` with `salt` and `info`, 32 bytes.
pub(crate) fn hkdf_sha256(ikm: &[u8], salt: &[u8], info: &[u8]) -> [u8; KEY_LEN] {
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, salt).extract(ikm);
    let mut out = [0u8; KEY_LEN];
    // Expanding to 32 bytes of SHA-256 cannot fail (the limit is 255 blocks).
    if let Ok(okm) = prk.expand(&[info], Len(KEY_LEN)) {
        let _ = okm.fill(&mut out);
    }
    out
}

/// Opens AES-256-GCM `sealed` (nonce ‖ ciphertext ‖ tag) under `key` with `aad`; `None` when
/// it does not authenticate.
pub(crate) fn open(key: &[u8; KEY_LEN], aad: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
    if sealed.len() < OVERHEAD {
        return None;
    }
    let (nonce, body) = sealed.split_at(NONCE_LEN);
    let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).ok()?);
    let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
    let mut buffer = body.to_vec();
    let plain_len = key
        .open_in_place(nonce, Aad::from(aad), &mut buffer)
        .ok()?
        .len();
    buffer.truncate(plain_len);
    Some(buffer)
}

/// Seals `plain` with AES-256-GCM under `key` with `aad` and a random nonce (nonce ‖
/// ciphertext ‖ tag).
pub(crate) fn seal(key: &[u8; KEY_LEN], aad: &[u8], plain: &[u8]) -> Result<Vec<u8>, KopiaError> {
    let failed = |_| KopiaError::malformed("data to encrypt", "AES-256-GCM refused it");
    let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).map_err(failed)?);
    let mut nonce = [0u8; NONCE_LEN];
    rand::fill(&mut nonce);
    // One buffer, one copy of the plaintext: sealed in place after the nonce.
    let mut out = Vec::with_capacity(plain.len() + OVERHEAD);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(plain);
    let tag = key
        .seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(aad),
            &mut out[NONCE_LEN..],
        )
        .map_err(failed)?;
    out.extend_from_slice(tag.as_ref());
    Ok(out)
}

/// Decrypts the format blob's `encryptedBlockFormat` with the password's key.
pub(crate) fn open_format(
    password_key: &[u8; KEY_LEN],
    unique_id: &[u8],
    sealed: &[u8],
) -> Result<Vec<u8>, KopiaError> {
    let key = hkdf_sha256(password_key, unique_id, b"AES");
    let aad = hkdf_sha256(password_key, unique_id, b"CHECKSUM");
    open(&key, &aad, sealed).ok_or(KopiaError::WrongPassword)
}

/// `AES256-GCM-HMAC-SHA256`, the only content cipher kopia writes by default.
#[derive(Clone)]
pub(crate) struct ContentCipher {
    derived: hmac::Key,
}

impl ContentCipher {
    /// The cipher named `name` with the repository's `master_key`.
    pub(crate) fn new(name: &str, master_key: &[u8]) -> Result<Self, KopiaError> {
        if name != "AES256-GCM-HMAC-SHA256" {
            return Err(KopiaError::Unsupported {
                what: "content encryption",
                value: name.to_owned(),
            });
        }
        let derived = hkdf_sha256(master_key, b"encryption", b"");
        Ok(Self {
            derived: hmac::Key::new(hmac::HMAC_SHA256, &derived),
        })
    }

    /// Opens `sealed`, written with initialisation vector `iv`; `what` names it in the error.
    pub(crate) fn decrypt(
        &self,
        iv: &[u8],
        sealed: &[u8],
        what: &str,
    ) -> Result<Vec<u8>, KopiaError> {
        open(&self.item_key(iv), iv, sealed).ok_or_else(|| KopiaError::Authentication {
            what: what.to_owned(),
        })
    }

    /// Seals `plain` with initialisation vector `iv` and a random nonce.
    pub(crate) fn encrypt(&self, iv: &[u8], plain: &[u8]) -> Result<Vec<u8>, KopiaError> {
        seal(&self.item_key(iv), iv, plain)
    }

    /// The AES-256-GCM key of the item with initialisation vector `iv`.
    fn item_key(&self, iv: &[u8]) -> [u8; KEY_LEN] {
        let mut key = [0u8; KEY_LEN];
        key.copy_from_slice(hmac::sign(&self.derived, iv).as_ref());
        key
    }
}

/// The content hash: kopia's default `BLAKE2B-256-128` (BLAKE2b keyed with the repository's
/// secret, a 32-byte digest of which the first 16 bytes are the content ID), or
/// `BLAKE3-256-128` (keyed BLAKE3, the first 16 bytes; kopia stretches a key shorter than 32
/// bytes, and the secrets it and hawser draw are 32).
#[derive(Clone)]
pub(crate) enum ContentHash {
    Blake2b(Vec<u8>),
    Blake3([u8; 32]),
}

/// The content hashes this crate implements, kopia's default first.
pub const HASHES: &[&str] = &["BLAKE2B-256-128", "BLAKE3-256-128"];

impl ContentHash {
    /// The hash named `name` with the repository's `secret`.
    pub(crate) fn new(name: &str, secret: &[u8]) -> Result<Self, KopiaError> {
        let unsupported = || KopiaError::Unsupported {
            what: "content hash",
            value: name.to_owned(),
        };
        match name {
            // BLAKE2b takes a key of at most 64 bytes.
            "BLAKE2B-256-128" if secret.len() <= 64 => Ok(Self::Blake2b(secret.to_vec())),
            "BLAKE3-256-128" => Ok(Self::Blake3(secret.try_into().map_err(|_| unsupported())?)),
            _ => Err(unsupported()),
        }
    }

    /// The 16-byte hash of `data`.
    pub(crate) fn hash(&self, data: &[u8]) -> [u8; 16] {
        let mut out = [0u8; 16];
        match self {
            Self::Blake2b(key) => {
                let hash = blake2b_simd::Params::new()
                    .hash_length(32)
                    .key(key)
                    .hash(data);
                out.copy_from_slice(&hash.as_bytes()[..16]);
            }
            Self::Blake3(key) => {
                out.copy_from_slice(&blake3::keyed_hash(key, data).as_bytes()[..16])
            }
        }
        out
    }
}

/// The initialisation vector of an encrypted blob (index blobs): the 32 hex digits before the
/// first `-` of its ID.
pub(crate) fn blob_iv(blob_id: &str) -> Result<Vec<u8>, KopiaError> {
    let head = blob_id.split('-').next().unwrap_or(blob_id);
    let digits = head
        .len()
        .checked_sub(32)
        .and_then(|start| head.get(start..))
        .ok_or_else(|| {
            KopiaError::malformed(format!("blob ID {blob_id}"), "too short for an IV")
        })?;
    hex::decode(digits)
        .ok()
        .ok_or_else(|| KopiaError::malformed(format!("blob ID {blob_id}"), "its IV is not hex"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    #[test]
    fn hkdf_matches_rfc_5869_test_case_1() {
        let ikm = [0x0b; 22];
        let salt: Vec<u8> = (0x00..=0x0c).collect();
        let info: Vec<u8> = (0xf0..=0xf9).collect();
        let okm = hkdf_sha256(&ikm, &salt, &info);
        assert_eq!(
            hex::encode(okm),
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
        );
    }

    #[test]
    fn the_iv_of_a_blob_is_the_hash_before_its_first_dash() {
        let iv = blob_iv("xn0_38b0b35250633a94170e49c481cc100d-sb6ecb2d042872714147-c1").unwrap();
        assert_eq!(hex::encode(&iv), "38b0b35250633a94170e49c481cc100d");
        assert!(blob_iv("xn0_abc").is_err());
    }
}
