//! What the repository tests share: data that does not repeat, and a view of a tree that two
//! equal trees share.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

/// `len` bytes that do not repeat (xorshift from `seed`).
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
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

/// Every path under `root` with what identifies it: type, mode, size, mtime (ns), content
/// digest or link target.
pub fn describe(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let name = path.strip_prefix(root).unwrap().display().to_string();
            let what = if meta.file_type().is_symlink() {
                format!("link -> {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                pending.push(path.clone());
                format!("dir {:o}", meta.mode() & 0o7777)
            } else {
                let data = std::fs::read(&path).unwrap();
                let sum = data
                    .iter()
                    .fold(0u64, |h, b| h.rotate_left(5) ^ u64::from(*b));
                format!(
                    "file {:o} {} bytes sum {sum:x}",
                    meta.mode() & 0o7777,
                    meta.len()
                )
            };
            // A link's own time is kept too; directories' times change as kopia reads them
            // on some systems, so only files' and links' are compared.
            let time = if meta.is_dir() {
                String::new()
            } else {
                format!(" mtime {}.{:09}", meta.mtime(), meta.mtime_nsec())
            };
            out.insert(name, format!("{what}{time}"));
        }
    }
    out
}

/// `describe`'s view without links' times (Velero's restore does not set them).
pub fn without_link_times(view: BTreeMap<String, String>) -> BTreeMap<String, String> {
    view.into_iter()
        .map(|(path, what)| match what.split_once(" mtime ") {
            Some((link, _)) if link.starts_with("link") => (path, link.to_owned()),
            _ => (path, what),
        })
        .collect()
}
