//! The files this binary carries for `wasm-informer new`: project templates,
//! the WIT package and the SDK sources, embedded at build time by `build.rs`.
//!
//! Invariant: paths are relative to the repository root with `/` separators
//! and sorted, and each file's bytes are those of the checkout the binary was
//! built from.

include!(concat!(env!("OUT_DIR"), "/embedded.rs"));

/// The bytes of one embedded file.
pub fn file(path: &str) -> Option<&'static [u8]> {
    FILES
        .binary_search_by(|(p, _)| (*p).cmp(path))
        .ok()
        .map(|i| FILES[i].1)
}

/// Every embedded file under `dir` (no trailing slash), as (path relative to
/// `dir`, bytes), in sorted order.
pub fn under(dir: &str) -> Vec<(&'static str, &'static [u8])> {
    let prefix = format!("{dir}/");
    FILES
        .iter()
        .filter_map(|(p, b)| p.strip_prefix(prefix.as_str()).map(|rel| (rel, *b)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_files_are_the_checkout_s() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        assert!(!FILES.is_empty());
        for (p, bytes) in FILES {
            let on_disk = std::fs::read(root.join(p)).unwrap();
            assert_eq!(&on_disk[..], *bytes, "{p}");
        }
        assert!(file("wit/world.wit").is_some());
        assert!(!under("sdk/rust/src").is_empty());
        assert!(FILES.windows(2).all(|w| w[0].0 < w[1].0), "sorted");
    }
}
