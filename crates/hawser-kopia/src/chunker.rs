//! Cutting files into contents as kopia's splitters do (a repository names its own; Velero's
//! are kopia's default, `DYNAMIC-4M-BUZHASH`). Cutting where kopia cuts gives a file the
//! contents kopia gives it (and, but for the longest files, the object ID): a file that kopia
//! (Velero) stored is not stored again by hawser, and the other way round.
//!
//! - `DYNAMIC-<size>-BUZHASH` and `DYNAMIC-<size>-RABINKARP` (and the legacy `DYNAMIC`,
//!   buzhash of 4 MiB): content-defined. A file is cut after the first byte at least half the
//!   size and at most twice it from the previous cut where a rolling hash of the last 64 bytes
//!   has its low bits zero (the size less one as a mask), at twice the size when none has. An
//!   insertion early in a file moves only the cuts near it, so the rest of the file's contents
//!   keep their IDs and are not uploaded again.
//! - `FIXED-<size>` (and the legacy `FIXED`, 4 MiB): a cut every size bytes.
//! - Names unknown here are cut as `DYNAMIC-4M-BUZHASH`, said so in the log: kopia reads
//!   contents cut anywhere, so only deduplication against kopia's own copies of the same large
//!   files is lost.
//!
//! The buzhash (a cyclic polynomial) of a window is the XOR of a table value per byte, each
//! rotated left by the byte's distance from the window's end; with a 64-byte window and 32-bit
//! values a byte's rotation is back to zero when it leaves, so it leaves by one XOR. The table
//! is the one kopia's rolling-hash library uses: the first 256 distinct values of Go's
//! `math/rand` seeded with 1, each the low 32 bits of `Int63()`.
//!
//! The Rabin-Karp hash of a window is its bytes read as a polynomial over GF(2) (the first
//! byte the highest), modulo an irreducible polynomial of degree 53: the one kopia's library
//! derives from Go's `math/rand` seeded with 1 ([`RABIN_POLYNOMIAL`]). A byte leaves by adding
//! its term (a table by byte); one enters by shifting in 8 bits and reducing by the 8 bits
//! above the degree (a second table).

/// The bytes the hash covers.
const WINDOW: usize = 64;

#[rustfmt::skip]
const TABLE: [u32; 256] = [
    0x07fcfd52, 0x5f3f164f, 0x6695721d, 0x7b4d7c03, 0x49c6e2d1, 0x0d1d68d8, 0x7916001e, 0x22c4d294,
    0x392907a0, 0x189deb99, 0xf3875d04, 0x95e94627, 0xba517936, 0x83c471d4, 0x7cb3ad0b, 0xa42655d9,
    0x7c4e0b68, 0xd4491d1b, 0x25632186, 0xa9d78d73, 0x169c1121, 0xbb158644, 0xb68e6a3f, 0x759805f5,
    0x2cdf5b8a, 0x57d29245, 0xc5d6d268, 0x6b83d0e2, 0x7674cb74, 0xb068d9db, 0xbb9457d8, 0xa15d523b,
    0x794209ff, 0x9da1d7eb, 0x5a25e0cb, 0xf840ec4b, 0x36d4ff9b, 0xf4a5ee3b, 0x5ad145f4, 0xf6740304,
    0x3f71f8cb, 0x91018d7c, 0xfccae224, 0xb186b51f, 0x7d9e8fbc, 0x93f93f33, 0xf63a5b6f, 0x19476c36,
    0xbc897d06, 0x169873f5, 0x724c7af1, 0x581eeb39, 0x2257bb7d, 0x6f269a28, 0xbe8e9981, 0x7039374b,
    0x25416fed, 0xded7e411, 0x6678e7aa, 0x244fcd36, 0x56aa6b86, 0xde4561ad, 0x3e99b0a8, 0xbed80a3a,
    0xe58348b0, 0xaf63e58d, 0x406aec9d, 0xc233f007, 0xa5ead0bd, 0x050143a6, 0x738b6829, 0x3699caf3,
    0x967cd710, 0x06f665a6, 0x25fd3d7f, 0x0fd6e479, 0x26fbf29b, 0x16de4c35, 0x2bf3394b, 0x4af864ba,
    0x1cb9e6c6, 0x41439089, 0x69a39144, 0xc34f182d, 0x421657ff, 0xf9fc6568, 0x8b02c917, 0x6c9c64b7,
    0x83d17909, 0xea3d4ca5, 0xaf635d47, 0x7fc78769, 0xbe14186f, 0x3539b1ea, 0xe9174548, 0xc051e18a,
    0x07b73658, 0x29ec300c, 0xa250bf34, 0xa7ed5d97, 0xfe3dea79, 0xb8b352f7, 0xc9b344e9, 0x8e5f0475,
    0x1941e52a, 0x2694763d, 0x6b40eabc, 0x8485d68b, 0x336eacca, 0x4399a363, 0x67149b9c, 0xae10a901,
    0x5a5ffefb, 0x563b26de, 0x6f00f02b, 0x9f06397d, 0x545836c4, 0x31d6416b, 0x12f4128d, 0x752f33ff,
    0x4a305605, 0x0c8dc214, 0x72521a90, 0x8eb3e4a1, 0x83efc6c6, 0x090ec04f, 0xc1540864, 0xec2c8aaa,
    0x70ab53ba, 0x38d3b494, 0x878d4063, 0xa317ae3f, 0x3cb62f07, 0xf360412c, 0x4ffbf3a9, 0x22d554b4,
    0x3f190476, 0x0796a710, 0xf5c353cf, 0x04f59bb7, 0x2d230176, 0xe2d6a9ce, 0x3f1d7427, 0xafd915bb,
    0xb01aa47d, 0xcde2c269, 0x7417bf38, 0x1e094f9a, 0x55ece0ea, 0xcb94539b, 0x13d346b5, 0x54e0c0c1,
    0x6db30e37, 0xdc02b390, 0xa6e222f5, 0xe2f8c1fe, 0x2e166bdf, 0x67588a74, 0x21898f34, 0x4c330f1d,
    0x19af53ba, 0x70658b94, 0x133c9673, 0x4efeeadd, 0x0f212551, 0x070f0914, 0x6f241c57, 0xf13e41b7,
    0x3be70cb0, 0xf4b6f47f, 0x20f31127, 0x6551cb89, 0x289cbd2c, 0x8946f23d, 0x40a79c3b, 0x03c6d982,
    0x0365790c, 0x0cf52517, 0x0bb131e8, 0x3da5475c, 0x139efcca, 0xbcd44eb4, 0xa54af747, 0xb73c32ed,
    0x9f6c47ac, 0xe8ba8f22, 0x54043a66, 0x3b0a7f20, 0xb4926431, 0xe17c02d5, 0x8f0d2558, 0x014fbff2,
    0x7f803594, 0x79b76fbe, 0x33fe2656, 0x792c8ee8, 0x6b41292d, 0xfdff9c32, 0x82093298, 0x59483870,
    0xb2d5a113, 0x2dd96e5a, 0x5b8e56a9, 0xebd9dda9, 0x04f9ce92, 0xcb440950, 0xa67e52b1, 0x49f6d261,
    0x92417fc3, 0x1c3b6bd9, 0xb027b7e0, 0x1f765a41, 0x44c9ab40, 0x45d99121, 0xfd7a84af, 0x99b75788,
    0xe3abff4a, 0xa88aa67f, 0x736e41cc, 0x9cbcbe5e, 0x7b3ccebc, 0xe1b7fa93, 0x315ae6af, 0x9cced2e2,
    0x19ea0f2f, 0xa9770722, 0x84a6bfdc, 0x88f03f07, 0xa44a03a4, 0x27a6b885, 0xb580c8ba, 0x018153da,
    0xb648e604, 0x51180278, 0x893a310f, 0x728f5f4c, 0x37f5198b, 0x3cc0ea9b, 0xe39d02db, 0x13883142,
    0xca599392, 0xc12d154e, 0xc176163d, 0x5c92e2b8, 0xf9f95ede, 0xb802bdfc, 0x8a928585, 0xdca6e10b,
    0x887953e8, 0x48b9e962, 0xe533e9a3, 0x5e0ce6e5, 0x1dba77ae, 0xc8214b8a, 0x53b428d7, 0x4cf20a65,
];

/// The polynomial of kopia's `DYNAMIC-*-RABINKARP` splitters (`RandomPolynomial(1)` of its
/// library, as kopia's splitters call it).
const RABIN_POLYNOMIAL: u64 = 0x002e_3e3e_4a30_5605;

/// Degree of a polynomial over GF(2) held in the bits of a `u64` (none for zero).
fn degree(p: u64) -> u32 {
    63 - p.leading_zeros()
}

/// `x` modulo `p`, as polynomials over GF(2).
fn modulo(mut x: u64, p: u64) -> u64 {
    while x != 0 && degree(x) >= degree(p) {
        x ^= p << (degree(x) - degree(p));
    }
    x
}

/// The Rabin-Karp tables of [`RABIN_POLYNOMIAL`] for a 64-byte window: the term to add for
/// the byte leaving, and the reduction by the 8 bits shifted above the degree.
struct RabinTables {
    leave: [u64; 256],
    reduce: [u64; 256],
}

static RABIN: std::sync::LazyLock<RabinTables> = std::sync::LazyLock::new(|| {
    let p = RABIN_POLYNOMIAL;
    let mut tables = RabinTables {
        leave: [0; 256],
        reduce: [0; 256],
    };
    for b in 0..256u64 {
        // The byte followed by 63 zero bytes.
        tables.leave[b as usize] = (1..WINDOW).fold(modulo(b, p), |h, _| modulo(h << 8, p));
        // XORed in after the shift: the high byte's remainder, and the high byte cleared.
        tables.reduce[b as usize] = modulo(b << degree(p), p) | (b << degree(p));
    }
    tables
});

/// The buzhash after `entering` enters and `leaving` (none while the window fills) leaves.
fn buzhash_roll(hash: u64, leaving: Option<u8>, entering: u8) -> u64 {
    let leaving = leaving.map_or(0, |b| TABLE[usize::from(b)]);
    let hash = (hash as u32).rotate_left(1) ^ leaving ^ TABLE[usize::from(entering)];
    u64::from(hash)
}

/// The Rabin-Karp hash after `entering` enters and `leaving` (none while the window fills
/// from zeros) leaves.
fn rabin_roll(hash: u64, leaving: Option<u8>, entering: u8) -> u64 {
    let tables = &*RABIN;
    let hash = hash ^ leaving.map_or(0, |b| tables.leave[usize::from(b)]);
    let high = (hash >> (degree(RABIN_POLYNOMIAL) - 8)) as u8;
    ((hash << 8) | u64::from(entering)) ^ tables.reduce[usize::from(high)]
}

/// How files are cut: one of kopia's splitters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Splitter {
    /// Content-defined by a buzhash, `average` bytes apart on average.
    Buzhash { average: usize },
    /// Content-defined by a Rabin-Karp hash, `average` bytes apart on average.
    RabinKarp { average: usize },
    /// Every `size` bytes.
    Fixed { size: usize },
}

/// The rolling hash of a content-defined splitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rolling {
    Buzhash,
    RabinKarp,
}

impl Splitter {
    /// kopia's default, Velero's.
    pub(crate) const DEFAULT: Self = Self::Buzhash { average: 4 << 20 };

    /// The largest piece it cuts.
    pub(crate) fn largest(self) -> usize {
        match self {
            Self::Buzhash { average } | Self::RabinKarp { average } => average * 2,
            Self::Fixed { size } => size,
        }
    }

    /// The splitter a repository's config names, `None` for one not built here.
    pub(crate) fn named(name: &str) -> Option<Self> {
        let size = |text: &str| match text {
            "128K" => Some(128 << 10),
            "256K" => Some(256 << 10),
            "512K" => Some(512 << 10),
            "1M" => Some(1 << 20),
            "2M" => Some(2 << 20),
            "4M" => Some(4 << 20),
            "8M" => Some(8 << 20),
            _ => None,
        };
        match name {
            "DYNAMIC" => Some(Self::DEFAULT),
            "FIXED" => Some(Self::Fixed { size: 4 << 20 }),
            _ => {
                if let Some(rest) = name.strip_prefix("FIXED-") {
                    size(rest).map(|size| Self::Fixed { size })
                } else if let Some(rest) = name.strip_suffix("-RABINKARP") {
                    size(rest.strip_prefix("DYNAMIC-")?).map(|average| Self::RabinKarp { average })
                } else {
                    let rest = name.strip_prefix("DYNAMIC-")?.strip_suffix("-BUZHASH")?;
                    size(rest).map(|average| Self::Buzhash { average })
                }
            }
        }
    }
}

/// Cuts a stream into chunks; holds at most one chunk's worth of bytes. Each byte is hashed
/// once: the scan goes on where the previous [`Chunker::push`] stopped.
pub(crate) struct Chunker {
    /// No cut before this many bytes (a fixed splitter's size).
    min: usize,
    /// A cut at this many bytes at the latest.
    max: usize,
    /// The hash, and a cut where these bits of it are zero; none for a fixed splitter.
    rolling: Option<(Rolling, u64)>,
    buffer: Vec<u8>,
    /// The next byte of `buffer` to hash.
    scanned: usize,
    hash: u64,
}

impl Chunker {
    pub(crate) fn new(splitter: Splitter) -> Self {
        let dynamic = |rolling, average: usize| {
            (
                average / 2,
                average * 2,
                Some((rolling, average as u64 - 1)),
            )
        };
        let (min, max, rolling) = match splitter {
            Splitter::Buzhash { average } => dynamic(Rolling::Buzhash, average),
            Splitter::RabinKarp { average } => dynamic(Rolling::RabinKarp, average),
            Splitter::Fixed { size } => (size, size, None),
        };
        Self {
            min,
            max,
            rolling,
            buffer: Vec::new(),
            scanned: 0,
            hash: 0,
        }
    }

    /// Where the next cut of the buffer is, once it is known.
    fn cut(&mut self) -> Option<usize> {
        let Some((rolling, mask)) = self.rolling else {
            return (self.buffer.len() >= self.max).then_some(self.max);
        };
        if self.buffer.len() <= self.min {
            return None;
        }
        // The hash depends on the last 64 bytes only: start 64 bytes before the first candidate.
        self.scanned = self.scanned.max(self.min - WINDOW);
        let found = match rolling {
            Rolling::Buzhash => self.scan(mask, buzhash_roll),
            Rolling::RabinKarp => self.scan(mask, rabin_roll),
        };
        found.or_else(|| (self.buffer.len() >= self.max).then_some(self.max))
    }

    /// Rolls the hash over the buffer up to the largest cut; the first cut found. `roll` takes
    /// the hash, the byte leaving the window (none until it is full: the window starts as
    /// zeros) and the byte entering it.
    fn scan(&mut self, mask: u64, roll: impl Fn(u64, Option<u8>, u8) -> u64) -> Option<usize> {
        let end = self.buffer.len().min(self.max);
        while self.scanned < end {
            let at = self.scanned;
            let leaving = (at >= self.min).then(|| self.buffer[at - WINDOW]);
            self.hash = roll(self.hash, leaving, self.buffer[at]);
            self.scanned += 1;
            if self.scanned >= self.min && self.hash & mask == 0 {
                return Some(self.scanned);
            }
        }
        None
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

    const MIN: usize = 2 << 20;
    const MAX: usize = 8 << 20;

    fn chunks(data: &[u8], piece: usize) -> Vec<Vec<u8>> {
        chunks_with(Splitter::DEFAULT, data, piece)
    }

    fn chunks_with(splitter: Splitter, data: &[u8], piece: usize) -> Vec<Vec<u8>> {
        let mut chunker = Chunker::new(splitter);
        let mut out = Vec::new();
        for piece in data.chunks(piece) {
            out.extend(chunker.push(piece, false));
        }
        out.extend(chunker.push(&[], true));
        out
    }

    fn lengths(chunks: &[Vec<u8>]) -> Vec<usize> {
        chunks.iter().map(Vec::len).collect()
    }

    /// The cuts kopia's own `DYNAMIC-4M-BUZHASH` splitter (Velero v1.18.3's kopia) makes in the
    /// same streams, fed in pieces of any size.
    #[test]
    fn cuts_where_kopia_cuts() {
        let data = noise(40 << 20, 3);
        let kopia = [
            6_811_916, 5_391_959, 6_755_237, 8_224_243, 3_857_683, 7_687_058, 3_214_944,
        ];
        for piece in [1 << 20, 65_536, 4097] {
            let out = chunks(&data, piece);
            assert_eq!(lengths(&out), kopia, "pieces of {piece}");
            assert_eq!(out.concat(), data);
        }
        // The hash of 64 equal bytes is zero (each rotation comes twice): zeros cut at the minimum.
        assert_eq!(lengths(&chunks(&vec![0u8; 20 << 20], 1 << 20)), [MIN; 10]);
        // Exactly the minimum, a byte at a time: one chunk.
        assert_eq!(lengths(&chunks(&vec![0u8; MIN], 1)), [MIN]);
    }

    /// Other splitters a repository may name, against kopia's own cuts of the same streams.
    #[test]
    fn other_splitters_cut_where_kopia_s_do() {
        let data = noise(3 << 20, 5);
        let cases: [(&str, &[u8], &[usize]); 7] = [
            (
                "DYNAMIC-1M-BUZHASH",
                &data,
                &[814_847, 1_024_984, 1_015_780, 290_117],
            ),
            (
                "DYNAMIC-128K-BUZHASH",
                &data[..1 << 20],
                &[
                    95_132, 184_173, 123_572, 115_257, 91_213, 159_111, 81_890, 119_750, 78_478,
                ],
            ),
            (
                "DYNAMIC-1M-RABINKARP",
                &data,
                &[1_105_449, 1_056_700, 983_579],
            ),
            (
                "DYNAMIC-128K-RABINKARP",
                &data[..1 << 20],
                &[262_144, 252_496, 99_038, 116_450, 125_743, 192_705],
            ),
            // The hash of zeros is zero: cut at the minimum.
            ("DYNAMIC-128K-RABINKARP", &[0; 1 << 20], &[64 << 10; 16]),
            ("FIXED-1M", &data, &[1 << 20; 3]),
            ("FIXED", &noise(9 << 20, 5), &[4 << 20, 4 << 20, 1 << 20]),
        ];
        for (name, data, kopia) in cases {
            let splitter = Splitter::named(name).unwrap();
            assert_eq!(lengths(&chunks_with(splitter, data, 4097)), kopia, "{name}");
        }
        assert_eq!(Splitter::named("DYNAMIC"), Some(Splitter::DEFAULT));
        assert_eq!(
            Splitter::named("DYNAMIC-4M-BUZHASH"),
            Some(Splitter::DEFAULT)
        );
        assert_eq!(
            Splitter::named("DYNAMIC-4M-RABINKARP"),
            Some(Splitter::RabinKarp { average: 4 << 20 })
        );
        assert_eq!(Splitter::named("DYNAMIC-4M-RABIN"), None);
        assert_eq!(Splitter::named("DYNAMIC-3M-BUZHASH"), None);
    }

    /// The Rabin-Karp hash against kopia's library (`rabinkarp64`, from a window of 64 zeros)
    /// rolled over the same bytes.
    #[test]
    fn the_rabin_karp_hash_is_kopia_s() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut hash = 0;
        let mut sums = Vec::new();
        for (at, entering) in data.iter().enumerate() {
            let leaving = at.checked_sub(WINDOW).map(|back| data[back]);
            hash = rabin_roll(hash, leaving, *entering);
            if [63, 64, 999].contains(&at) {
                sums.push(hash);
            }
        }
        assert_eq!(
            sums,
            [
                0x0003_6dfe_887c_3997,
                0x001b_681b_321f_b3a3,
                0x0000_59be_dc00_fedd
            ]
        );
    }

    #[test]
    fn chunks_are_between_the_bounds() {
        let out = chunks(&noise(60 << 20, 7), 1 << 20);
        assert!(out.len() >= 6, "{} chunks", out.len());
        for chunk in &out[..out.len() - 1] {
            assert!((MIN..=MAX).contains(&chunk.len()), "{}", chunk.len());
        }
    }

    #[test]
    fn an_insertion_moves_only_the_cuts_near_it() {
        let data = noise(40 << 20, 5);
        let mut edited = data[..1000].to_vec();
        edited.extend(b"inserted");
        edited.extend(&data[1000..]);
        let (a, b) = (chunks(&data, 1 << 20), chunks(&edited, 1 << 20));
        let shared = a.iter().filter(|c| b.contains(c)).count();
        assert!(shared + 1 >= a.len(), "{shared} of {} chunks kept", a.len());
    }
}
