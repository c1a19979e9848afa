//! Objects: a file's data, a directory listing or a symbolic link's target, as contents.
//!
//! An object ID is `I*` `Z`? `D`? then a content ID: each `I` is one level of indirection (the
//! content holds a JSON list of the parts, `{"stream":"kopia:indirect","entries":[{"s":start,
//! "l":length,"o":object}]}`, `s` and `l` left out when 0), `Z` marks object-level compression
//! (index v1 only), `D` is an old marker without meaning. A file's data becomes a flat list of
//! [`Chunk`]s, which the restore fetches several at a time.

use serde::{Deserialize, Serialize};

use crate::KopiaError;
use crate::content::{ContentId, decompress};
use crate::repo::Repository;

/// Levels of indirection followed at most (kopia writes one or two).
const MAX_INDIRECTION: usize = 8;

/// A parsed object ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectId {
    indirection: usize,
    compressed: bool,
    content: ContentId,
}

impl ObjectId {
    /// Parses the text form.
    ///
    /// # Errors
    /// [`KopiaError::Malformed`].
    pub fn parse(text: &str) -> Result<Self, KopiaError> {
        let indirection = text.bytes().take_while(|b| *b == b'I').count();
        let mut rest = &text[indirection..];
        let compressed = rest.starts_with('Z');
        if compressed {
            rest = &rest[1..];
        }
        if let Some(stripped) = rest.strip_prefix('D') {
            rest = stripped;
        }
        if indirection > MAX_INDIRECTION || (compressed && indirection > 0) {
            return Err(KopiaError::malformed(
                format!("object ID {text:?}"),
                "unexpected indirection or compression",
            ));
        }
        Ok(Self {
            indirection,
            compressed,
            content: ContentId::parse(rest)?,
        })
    }
}

impl ObjectId {
    /// The content it starts from (its data, or its top indirect list).
    #[must_use]
    pub fn content(&self) -> &ContentId {
        &self.content
    }

    /// The prefix of its content.
    #[must_use]
    pub fn prefix(&self) -> Option<char> {
        self.content.prefix()
    }
}

/// A piece of a file: the whole of one content, at `offset` in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Where the piece starts in the file.
    pub offset: u64,
    /// Its length.
    pub length: u64,
    /// The content holding it.
    pub content: ContentId,
    /// Object-level compression: the content holds a compressed stream.
    pub compressed: bool,
}

/// An indirect list; written with kopia's field order and omissions, so that the list of the
/// same parts is the same content (and the object the same ID) as kopia's.
#[derive(Serialize, Deserialize)]
pub(crate) struct IndirectList {
    pub(crate) stream: String,
    pub(crate) entries: Vec<IndirectEntry>,
}

#[derive(Serialize, Deserialize)]
pub(crate) struct IndirectEntry {
    #[serde(rename = "s", default, skip_serializing_if = "is_zero")]
    pub(crate) start: u64,
    #[serde(rename = "l", default, skip_serializing_if = "is_zero")]
    pub(crate) length: u64,
    #[serde(rename = "o")]
    pub(crate) object: String,
}

/// Whether `n` is zero (serde's `skip_serializing_if` passes a reference).
pub(crate) fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

impl Repository {
    /// The pieces of object `id`, in order, from offset 0.
    ///
    /// # Errors
    /// [`KopiaError::Malformed`] for a list that is not kopia's or whose pieces do not follow
    /// one another, and the errors of [`Repository::read_content`].
    pub async fn chunks(&self, id: &ObjectId) -> Result<Vec<Chunk>, KopiaError> {
        self.walk(id, &mut Vec::new()).await
    }

    /// Every content object `id` is made of: its pieces and the contents of its indirect
    /// lists.
    ///
    /// # Errors
    /// Those of [`Repository::chunks`].
    pub async fn object_contents(&self, id: &ObjectId) -> Result<Vec<ContentId>, KopiaError> {
        let mut lists = Vec::new();
        let chunks = self.walk(id, &mut lists).await?;
        lists.extend(chunks.into_iter().map(|c| c.content));
        Ok(lists)
    }

    /// [`Repository::chunks`], adding the contents of every indirect list read to `lists`.
    async fn walk(
        &self,
        id: &ObjectId,
        lists: &mut Vec<ContentId>,
    ) -> Result<Vec<Chunk>, KopiaError> {
        let mut out = Vec::new();
        // (object, where it starts, the length its list gave, if any)
        let mut pending = vec![(id.clone(), 0u64, None::<u64>)];
        while let Some((object, start, listed)) = pending.pop() {
            if object.indirection == 0 {
                let length = match listed {
                    Some(l) => l,
                    None => self
                        .entry(&object.content)
                        .map(|e| u64::from(e.original_length))
                        .ok_or_else(|| KopiaError::MissingContent(object.content.to_string()))?,
                };
                out.push(Chunk {
                    offset: start,
                    length,
                    content: object.content,
                    compressed: object.compressed,
                });
                continue;
            }
            let what = format!("indirect list {}", object.content);
            let list = ObjectId {
                indirection: object.indirection - 1,
                ..object.clone()
            };
            let list_chunks = Box::pin(self.walk(&list, lists)).await?;
            let mut bytes = Vec::new();
            for chunk in &list_chunks {
                bytes.extend(self.read_chunk(chunk).await?);
            }
            lists.extend(list_chunks.into_iter().map(|c| c.content));
            let list: IndirectList =
                serde_json::from_slice(&bytes).map_err(|e| KopiaError::malformed(&what, e))?;
            if list.stream != "kopia:indirect" {
                return Err(KopiaError::malformed(
                    what,
                    format!("stream {:?}", list.stream),
                ));
            }
            let mut expected = 0u64;
            let mut parts = Vec::with_capacity(list.entries.len());
            for entry in list.entries {
                if entry.start != expected {
                    return Err(KopiaError::malformed(
                        &what,
                        format!("a piece starts at {}, not {expected}", entry.start),
                    ));
                }
                let part = ObjectId::parse(&entry.object)?;
                // Each level lists objects of fewer levels: no list can list itself.
                if part.indirection >= object.indirection {
                    return Err(KopiaError::malformed(
                        &what,
                        format!("it lists {}, as indirect as itself", entry.object),
                    ));
                }
                let (Some(end), Some(at)) = (
                    entry.start.checked_add(entry.length),
                    start.checked_add(entry.start),
                ) else {
                    return Err(KopiaError::malformed(&what, "its pieces overflow 64 bits"));
                };
                expected = end;
                parts.push((part, at, Some(entry.length)));
            }
            if let Some(total) = listed
                && total != expected
            {
                return Err(KopiaError::malformed(
                    what,
                    format!("{expected} bytes, its parent says {total}"),
                ));
            }
            // Popped last first: push in reverse so that pieces come out in order.
            pending.extend(parts.into_iter().rev());
        }
        Ok(out)
    }

    /// The bytes of one chunk.
    ///
    /// # Errors
    /// Those of [`Repository::read_content`]; [`KopiaError::Malformed`] when the length is not
    /// the one listed.
    pub async fn read_chunk(&self, chunk: &Chunk) -> Result<Vec<u8>, KopiaError> {
        let mut data = self.read_content(&chunk.content).await?;
        if chunk.compressed {
            data = decompress(
                &data,
                0,
                chunk.length,
                &format!("object Z{}", chunk.content),
            )?;
        }
        if data.len() as u64 != chunk.length {
            return Err(KopiaError::malformed(
                format!("content {}", chunk.content),
                format!("{} bytes, its list says {}", data.len(), chunk.length),
            ));
        }
        Ok(data)
    }

    /// A whole object in memory (directory listings, indirect lists, symbolic links).
    ///
    /// # Errors
    /// Those of [`Repository::chunks`] and [`Repository::read_chunk`].
    pub async fn read_object(&self, id: &ObjectId) -> Result<Vec<u8>, KopiaError> {
        let chunks = self.chunks(id).await?;
        let mut out = Vec::new();
        for chunk in &chunks {
            out.extend(self.read_chunk(chunk).await?);
        }
        Ok(out)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    #[test]
    fn object_ids_say_their_indirection_and_compression() {
        let id = ObjectId::parse("Ix0123456789abcdef0123456789abcdef").unwrap();
        assert_eq!((id.indirection, id.compressed), (1, false));
        assert_eq!(id.content.prefix(), Some('x'));
        let id = ObjectId::parse("ZD0123456789abcdef0123456789abcdef").unwrap();
        assert_eq!(
            (id.indirection, id.compressed, id.content.prefix()),
            (0, true, None)
        );
        assert!(ObjectId::parse("IZ0123456789abcdef0123456789abcdef").is_err());
        assert!(ObjectId::parse(&format!("{}k01", "I".repeat(9))).is_err());
    }
}
