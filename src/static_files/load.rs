//! Static files: every regular file under a directory, read into memory
//! within limits (at start, and again on each reload), with what its
//! responses need: its request paths, content type and modification time.
//! `table` turns a load into canned responses.
//!
//! Files are only ever served from the route table built from this load,
//! never opened per request, so no request path can reach outside the
//! directory: a path (normalized, `http::percent`) is a key of the table or a
//! 404, and one whose `..` climbs above the root is a 400. While loading, each
//! file is resolved with `canonicalize`, and one whose real path lies outside
//! the directory (a symlink pointing out) is left out. Symlinked directories
//! are not walked, so a link to an ancestor cannot make the walk loop.
//!
//! Dotfiles (any entry whose name starts with `.`, such as `.git/` or
//! `.env`) are skipped unless asked for: they are far more often a
//! repository's or a deployment's secrets than content meant to be served.

use std::ffi::OsStr;
use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use bytes::Bytes;
use log::{debug, info};

use crate::http::date::unix_seconds;
use crate::static_files::gzip::add_gzip_copies;
use crate::static_files::loaded::{LoadedDir, LoadedFile};

/// The default largest file: 16 MiB.
pub(crate) const DEFAULT_MAX_FILE: u64 = 16 << 20;
/// The default most bytes over all files: 256 MiB.
pub(crate) const DEFAULT_MAX_TOTAL: u64 = 256 << 20;

const OCTET_STREAM: &str = "application/octet-stream";

/// File extensions (compared case-insensitively) and their content types.
/// JSON, SVG, XML and WebAssembly take no charset parameter (RFC 8259
/// defines none for JSON; SVG and XML declare their own encoding).
const CONTENT_TYPES: [(&str, &str); 14] = [
    ("html", "text/html; charset=utf-8"),
    ("css", "text/css; charset=utf-8"),
    ("js", "text/javascript; charset=utf-8"),
    ("txt", "text/plain; charset=utf-8"),
    ("json", "application/json"),
    ("svg", "image/svg+xml"),
    ("xml", "application/xml"),
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("ico", "image/x-icon"),
    ("wasm", "application/wasm"),
    ("woff2", "font/woff2"),
];

/// Bounds on what a static directory may load into memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaticLimits {
    /// Largest file, in bytes.
    pub max_file: u64,
    /// Most bytes over all files.
    pub max_total: u64,
}

impl Default for StaticLimits {
    fn default() -> Self {
        StaticLimits {
            max_file: DEFAULT_MAX_FILE,
            max_total: DEFAULT_MAX_TOTAL,
        }
    }
}

/// Why a static directory could not be loaded; every case names its path.
#[derive(Debug)]
pub enum StaticFilesError {
    /// The directory, a directory under it, or a file could not be read.
    Read {
        /// What could not be read.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A file is larger than the per-file limit.
    FileTooLarge {
        /// The file.
        path: PathBuf,
        /// Its size in bytes.
        size: u64,
        /// The per-file limit in bytes.
        limit: u64,
    },
    /// This file would take the bytes loaded over the total limit.
    TotalTooLarge {
        /// The file that would pass the limit.
        path: PathBuf,
        /// The bytes loaded with it.
        total: u64,
        /// The total limit in bytes.
        limit: u64,
    },
}

impl fmt::Display for StaticFilesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StaticFilesError::Read { path, source } => {
                write!(f, "cannot read {}: {source}", path.display())
            }
            StaticFilesError::FileTooLarge { path, size, limit } => write!(
                f,
                "{} is {size} bytes, over the per-file limit of {limit} bytes",
                path.display()
            ),
            StaticFilesError::TotalTooLarge { path, total, limit } => write!(
                f,
                "{} brings the static files to {total} bytes, over the total limit of {limit} bytes",
                path.display()
            ),
        }
    }
}

impl std::error::Error for StaticFilesError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StaticFilesError::Read { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn read_error(path: &Path) -> impl FnOnce(io::Error) -> StaticFilesError + '_ {
    |source| StaticFilesError::Read {
        path: path.to_path_buf(),
        source,
    }
}

/// Loads every regular file under `dir` within `limits`; dotfiles too when
/// `dotfiles` is set.
pub(crate) fn load(
    dir: &Path,
    limits: StaticLimits,
    dotfiles: bool,
) -> Result<LoadedDir, StaticFilesError> {
    let mut loader = Loader {
        root: fs::canonicalize(dir).map_err(read_error(dir))?,
        limits,
        dotfiles,
        loaded_at: unix_seconds(SystemTime::now()),
        loaded: LoadedDir {
            files: Vec::new(),
            dirs: Vec::new(),
            skipped_dotfiles: 0,
            total: 0,
        },
    };
    loader.walk(dir, b"/")?;
    add_gzip_copies(&mut loader.loaded.files);
    let files = &loader.loaded.files;
    info!(
        "loaded {} static files, {} bytes, {} with a gzip copy, from {}",
        files.len(),
        loader.loaded.total,
        files.iter().filter(|file| file.gzip.is_some()).count(),
        dir.display()
    );
    Ok(loader.loaded)
}

struct Loader {
    /// The directory's canonical path: every file served resolves under it.
    root: PathBuf,
    limits: StaticLimits,
    dotfiles: bool,
    /// No `Last-Modified` may be later than the `Date` of its response
    /// (RFC 9110 §8.8.2.1); every `Date` is later than the load.
    loaded_at: u64,
    loaded: LoadedDir,
}

impl Loader {
    /// Loads every file under `dir`, whose request paths start with `url_dir`.
    fn walk(&mut self, dir: &Path, url_dir: &[u8]) -> Result<(), StaticFilesError> {
        let mut entries = fs::read_dir(dir)
            .and_then(Iterator::collect::<io::Result<Vec<_>>>)
            .map_err(read_error(dir))?;
        // In name order, so a limit stops at the same file on every start.
        entries.sort_by_key(fs::DirEntry::file_name);
        for entry in entries {
            let path = entry.path();
            let name = entry.file_name();
            if name.as_bytes().starts_with(b".") && !self.dotfiles {
                debug!("not serving {}: a dotfile", path.display());
                self.loaded.skipped_dotfiles += 1;
                continue;
            }
            let url_path = [url_dir, name.as_bytes()].concat();
            // The entry's own type: a symlink is resolved as a file, never walked.
            if entry.file_type().map_err(read_error(&path))?.is_dir() {
                self.walk(&path, &[&url_path[..], b"/"].concat())?;
                self.loaded.dirs.push(url_path);
                continue;
            }
            let mut url_paths = vec![url_path];
            if name == "index.html" {
                url_paths.push(url_dir.to_vec());
            }
            self.load_file(&path, url_paths)?;
        }
        Ok(())
    }

    fn load_file(&mut self, path: &Path, url_paths: Vec<Vec<u8>>) -> Result<(), StaticFilesError> {
        let Some(real_path) = self.resolve_inside_root(path)? else {
            return Ok(());
        };
        let metadata = fs::metadata(&real_path).map_err(read_error(path))?;
        if !metadata.is_file() {
            debug!("not serving {}: not a regular file", path.display());
            return Ok(());
        }
        let modified = metadata.modified().map_err(read_error(path))?;

        // Read at most one byte past the limit: enough to tell that a file is
        // too large (even one that grew since its metadata was read) without
        // reading all of it.
        let max_file = self.limits.max_file;
        let capacity = metadata.len().min(max_file.saturating_add(1));
        let mut content = Vec::with_capacity(usize::try_from(capacity).unwrap_or(0));
        File::open(&real_path)
            .and_then(|file| {
                file.take(max_file.saturating_add(1))
                    .read_to_end(&mut content)
            })
            .map_err(read_error(path))?;
        let size = content.len() as u64;
        if size > max_file {
            return Err(StaticFilesError::FileTooLarge {
                path: path.to_path_buf(),
                size: size.max(metadata.len()),
                limit: max_file,
            });
        }
        let total = self.loaded.total.saturating_add(size);
        if total > self.limits.max_total {
            return Err(StaticFilesError::TotalTooLarge {
                path: path.to_path_buf(),
                total,
                limit: self.limits.max_total,
            });
        }
        self.loaded.total = total;

        let modified = unix_seconds(modified);
        self.loaded.files.push(LoadedFile {
            url_paths,
            content: Bytes::from(content),
            content_type: content_type(path.extension()),
            last_modified: modified.min(self.loaded_at),
            modified_before_load: modified < self.loaded_at,
            gzip: None,
        });
        Ok(())
    }

    /// The real path of `path` if it lies under the root; `None`, logged,
    /// for a symlink that dangles or points outside.
    fn resolve_inside_root(&self, path: &Path) -> Result<Option<PathBuf>, StaticFilesError> {
        let real_path = match fs::canonicalize(path) {
            Ok(real_path) => real_path,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                debug!("not serving {}: a dangling symlink", path.display());
                return Ok(None);
            }
            Err(e) => return Err(read_error(path)(e)),
        };
        if !real_path.starts_with(&self.root) {
            debug!(
                "not serving {}: it resolves to {}, outside {}",
                path.display(),
                real_path.display(),
                self.root.display()
            );
            return Ok(None);
        }
        Ok(Some(real_path))
    }
}

/// The content type of a file with this extension.
fn content_type(extension: Option<&OsStr>) -> &'static str {
    let Some(extension) = extension else {
        return OCTET_STREAM;
    };
    CONTENT_TYPES
        .iter()
        .find(|(known, _)| extension.as_bytes().eq_ignore_ascii_case(known.as_bytes()))
        .map_or(OCTET_STREAM, |&(_, content_type)| content_type)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
    }

    fn type_of(file_name: &str) -> &'static str {
        content_type(Path::new(file_name).extension())
    }

    #[test]
    fn picks_the_content_type_by_extension() {
        assert_eq!(type_of("a.html"), "text/html; charset=utf-8");
        assert_eq!(type_of("a.min.JS"), "text/javascript; charset=utf-8");
        assert_eq!(type_of("photo.JPEG"), "image/jpeg");
        assert_eq!(type_of("font.woff2"), "font/woff2");
        assert_eq!(type_of("feed.XML"), "application/xml");
        for other in ["README", ".html", "a.tar.gz", "a.htm", "a."] {
            assert_eq!(type_of(other), OCTET_STREAM, "{other}");
        }
    }

    #[test]
    fn loads_a_directory_within_its_limits() {
        let loaded = load(&fixtures(), StaticLimits::default(), false).expect("fixtures load");
        assert_eq!(loaded.files.len(), 1);
        assert_eq!(loaded.files[0].url_paths, [b"/v1-user.json".to_vec()]);
        assert_eq!(loaded.total, 3696);
    }

    #[test]
    fn a_file_over_the_per_file_limit_stops_the_load() {
        let limits = StaticLimits {
            max_file: 3695,
            ..StaticLimits::default()
        };
        let error = load(&fixtures(), limits, false)
            .err()
            .expect("the fixture is too large");
        let expected = format!(
            "{} is 3696 bytes, over the per-file limit of 3695 bytes",
            fixtures().join("v1-user.json").display()
        );
        assert_eq!(error.to_string(), expected);
    }

    #[test]
    fn a_total_over_the_limit_stops_the_load() {
        let limits = StaticLimits {
            max_total: 1000,
            ..StaticLimits::default()
        };
        let error = load(&fixtures(), limits, false)
            .err()
            .expect("the total is too large");
        let expected = format!(
            "{} brings the static files to 3696 bytes, over the total limit of 1000 bytes",
            fixtures().join("v1-user.json").display()
        );
        assert_eq!(error.to_string(), expected);
    }

    #[test]
    fn a_missing_directory_is_named() {
        let missing = fixtures().join("missing");
        let error = load(&missing, StaticLimits::default(), false)
            .err()
            .expect("no such dir");
        assert!(error
            .to_string()
            .starts_with(&format!("cannot read {}: ", missing.display())));
    }
}
