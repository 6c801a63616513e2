//! What one load of a static directory found: each file's bytes, type,
//! dates and request paths (and its gzip copy), and the directories walked.
//! The loader (`load`) fills it, `gzip` adds the copies, and
//! `table` builds the responses from it.

use bytes::Bytes;

/// A loaded file.
pub(crate) struct LoadedFile {
    /// The request paths it answers at: its path under the directory, and for
    /// an `index.html` the path of its directory, ending in `/`.
    pub url_paths: Vec<Vec<u8>>,
    pub content: Bytes,
    pub content_type: &'static str,
    /// Its mtime in seconds, but never later than the load.
    pub last_modified: u64,
    /// The mtime lies in a second before the load, so before the `Date` of
    /// any response: only then is `Last-Modified` a strong validator
    /// (RFC 9110 §8.8.2.2), which `If-Range` may compare.
    pub modified_before_load: bool,
    /// The content gzip-compressed, for requests that accept it
    /// (`gzip`).
    pub gzip: Option<Bytes>,
}

/// Everything one load found.
pub(crate) struct LoadedDir {
    pub files: Vec<LoadedFile>,
    /// The request path of every directory walked below the root, without
    /// its final `/`.
    pub dirs: Vec<Vec<u8>>,
    /// Dotfiles and dot-directories left out (their contents not counted).
    pub skipped_dotfiles: usize,
    /// Bytes loaded.
    pub total: u64,
}
