//! Content-defined chunking: a file is cut where a rolling hash of its last 64 bytes has its
//! top 21 bits zero, at least 2 MiB and at most 8 MiB from the previous cut (about 4 MiB on
//! average, like kopia's default `DYNAMIC-4M-BUZHASH`). An insertion early in a file moves
//! only the cuts near it, so the rest of the file's contents keep their IDs and are not
//! uploaded again. The hash is a gear hash (each byte shifts the hash left and adds a random
//! constant for its value; a byte falls out after 64 shifts), not kopia's buzhash: kopia reads
//! contents cut anywhere, and only deduplication between a kopia snapshot and a hawser one of
//! the same large file is lost.

/// No cut before this many bytes.
const MIN: usize = 2 << 20;
/// A cut at this many bytes at the latest.
const MAX: usize = 8 << 20;
/// A cut where these top bits of the hash are zero (2^21 bytes past `MIN` on average).
const MASK: u64 = !(u64::MAX >> 21);

/// 256 constants from splitmix64 (fixed: the same file always cuts the same way).
const GEAR: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut state: u64 = 0x6b6f_7069_615f_6364;
    let mut i = 0;
    while i < 256 {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        table[i] = z ^ (z >> 31);
        i += 1;
    }
    table
};

/// Cuts a stream into chunks; holds at most [`MAX`] bytes. Each byte is hashed once: the scan
/// goes on where the previous [`Chunker::push`] stopped.
#[derive(Default)]
pub(crate) struct Chunker {
    buffer: Vec<u8>,
    /// The next byte of `buffer` to hash.
    scanned: usize,
    hash: u64,
}

impl Chunker {
    /// Where the next cut of the buffer is, once it is known.
    fn cut(&mut self) -> Option<usize> {
        if self.buffer.len() <= MIN {
            return None;
        }
        // The hash depends on the last 64 bytes only: start 64 bytes before the first candidate.
        self.scanned = self.scanned.max(MIN - 64);
        let end = self.buffer.len().min(MAX);
        while self.scanned < end {
            let byte = self.buffer[self.scanned];
            self.hash = (self.hash << 1).wrapping_add(GEAR[usize::from(byte)]);
            self.scanned += 1;
            if self.scanned >= MIN && self.hash & MASK == 0 {
                return Some(self.scanned);
            }
        }
        (end == MAX).then_some(MAX)
    }

    /// Takes `data`; returns the chunks now complete (all that is left at the `end`).
    pub(crate) fn push(&mut self, data: &[u8], end: bool) -> Vec<Vec<u8>> {
        self.buffer.extend_from_slice(data);
        let mut out = Vec::new();
        while let Some(at) = self.cut() {
            let rest = self.buffer.split_off(at);
            out.push(std::mem::replace(&mut self.buffer, rest));
            (self.scanned, self.hash) = (0, 0);
        }
        if end && !self.buffer.is_empty() {
            out.push(std::mem::take(&mut self.buffer));
            (self.scanned, self.hash) = (0, 0);
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use super::*;

    fn noise(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x.to_le_bytes()[0]
            })
            .collect()
    }

    fn chunks(data: &[u8]) -> Vec<Vec<u8>> {
        let mut chunker = Chunker::default();
        let mut out = Vec::new();
        for piece in data.chunks(1 << 20) {
            out.extend(chunker.push(piece, false));
        }
        out.extend(chunker.push(&[], true));
        out
    }

    #[test]
    fn chunks_are_between_the_bounds_and_add_up_to_the_stream() {
        let data = noise(40 << 20, 3);
        let out = chunks(&data);
        assert!(out.len() >= 4, "{} chunks", out.len());
        for chunk in &out[..out.len() - 1] {
            assert!((MIN..=MAX).contains(&chunk.len()), "{}", chunk.len());
        }
        assert_eq!(out.concat(), data);
        // Zeros never match the cut condition: cut at the maximum.
        assert!(
            chunks(&vec![0u8; 20 << 20])
                .iter()
                .take(2)
                .all(|c| c.len() == MAX)
        );
    }

    #[test]
    fn an_insertion_moves_only_the_cuts_near_it() {
        let data = noise(40 << 20, 5);
        let mut edited = data[..1000].to_vec();
        edited.extend(b"inserted");
        edited.extend(&data[1000..]);
        let (a, b) = (chunks(&data), chunks(&edited));
        let shared = a.iter().filter(|c| b.contains(c)).count();
        assert!(shared + 1 >= a.len(), "{shared} of {} chunks kept", a.len());
    }
}
