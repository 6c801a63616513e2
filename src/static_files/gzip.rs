//! Precompressed copies of static files, as nginx's `gzip_static` serves
//! them: built once per load, so a request that accepts gzip costs no more
//! than one that does not.
//!
//! A file's gzip copy is, in this order:
//!
//! - a sibling `NAME.gz` loaded from the same directory, whatever the type
//!   of `NAME` (the operator compressed it, perhaps harder than here); the
//!   sibling is also served at its own path, as a file like any other, as
//!   nginx serves it;
//! - else, for a text type (html, css, js, json, svg, xml, txt) over 1 KiB,
//!   the file compressed here with the `flate2` crate (a well-kept DEFLATE
//!   implementation; this server writes no compression of its own), at its
//!   default level, which gets close to the best ratio at a fraction of the
//!   best level's time (a reload recompresses the whole directory), and
//!   kept only when it is smaller than the file. Smaller files gain
//!   little over a packet, and other types are compressed already (images,
//!   fonts, WebAssembly) or unknown.
//!
//! The copies are not counted against `--static-max-total`: each is
//! smaller than its file, or an operator's file counted on its own.

use std::collections::HashMap;
use std::io::Write;

use bytes::Bytes;
use flate2::write::GzEncoder;
use flate2::Compression;

use crate::static_files::loaded::LoadedFile;

/// Files this size or smaller are not compressed here.
const MIN_COMPRESSED: usize = 1024;

/// Gives each file its gzip copy, where it has one (see the module doc).
pub(crate) fn add_gzip_copies(files: &mut [LoadedFile]) {
    let by_path: HashMap<Vec<u8>, usize> = files
        .iter()
        .enumerate()
        .map(|(index, file)| (file.url_paths[0].clone(), index))
        .collect();
    for index in 0..files.len() {
        let sibling = [&files[index].url_paths[0][..], b".gz"].concat();
        files[index].gzip = match by_path.get(&sibling) {
            Some(&gz) => Some(files[gz].content.clone()),
            None if is_compressible(&files[index]) => compress(&files[index].content),
            None => None,
        };
    }
}

/// A text type over the size worth compressing.
fn is_compressible(file: &LoadedFile) -> bool {
    let text = file.content_type.starts_with("text/")
        || matches!(
            file.content_type,
            "application/json" | "application/xml" | "image/svg+xml"
        );
    text && file.content.len() > MIN_COMPRESSED
}

/// `content` gzip-compressed, if that makes it smaller.
fn compress(content: &[u8]) -> Option<Bytes> {
    let mut encoder = GzEncoder::new(
        Vec::with_capacity(content.len() / 2),
        Compression::default(),
    );
    // Writing to a Vec cannot fail.
    encoder.write_all(content).ok()?;
    let compressed = encoder.finish().ok()?;
    (compressed.len() < content.len()).then(|| Bytes::from(compressed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::read::GzDecoder;
    use std::io::Read;

    fn file(path: &str, content_type: &'static str, content: &[u8]) -> LoadedFile {
        LoadedFile {
            url_paths: vec![path.as_bytes().to_vec()],
            content: Bytes::copy_from_slice(content),
            content_type,
            last_modified: 0,
            modified_before_load: true,
            gzip: None,
        }
    }

    fn gunzip(compressed: &[u8]) -> Vec<u8> {
        let mut plain = Vec::new();
        GzDecoder::new(compressed)
            .read_to_end(&mut plain)
            .expect("valid gzip");
        plain
    }

    #[test]
    fn compresses_text_over_1_kib_and_takes_siblings_as_they_are() {
        let text = "hello, compressible world\n".repeat(100);
        let mut files = vec![
            file("/a.css", "text/css; charset=utf-8", text.as_bytes()),
            file("/small.txt", "text/plain; charset=utf-8", &[b'x'; 1024]),
            file("/photo.png", "image/png", text.as_bytes()),
            file("/b.js", "text/javascript; charset=utf-8", b"short"),
            file("/b.js.gz", "application/octet-stream", b"operator's gzip"),
            file("/image.svg", "image/svg+xml", text.as_bytes()),
        ];
        add_gzip_copies(&mut files);
        let copy = files[0].gzip.as_ref().expect("compressed");
        assert!(copy.len() < text.len() / 10);
        assert_eq!(gunzip(copy), text.as_bytes());
        assert_eq!(files[1].gzip, None, "1 KiB is not over 1 KiB");
        assert_eq!(files[2].gzip, None, "not a text type");
        assert_eq!(files[3].gzip.as_deref(), Some(&b"operator's gzip"[..]));
        assert_eq!(files[4].gzip, None);
        assert!(files[5].gzip.is_some());
    }

    #[test]
    fn keeps_no_copy_larger_than_the_file() {
        // Bytes that do not compress: a PRNG's output, as text type.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let mut files = vec![file("/noise.txt", "text/plain; charset=utf-8", &noise)];
        add_gzip_copies(&mut files);
        assert_eq!(files[0].gzip, None);
    }
}
