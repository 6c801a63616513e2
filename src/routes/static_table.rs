//! One load of a static directory as the responses that serve it, built once
//! per load, and the choice among them for a request: the full file, a 304
//! (`If-None-Match`, else `If-Modified-Since`), one byte range (`Range`,
//! guarded by `If-Range`), a 416, or the 301 that adds the `/` a directory's
//! path lacks. Lookups and choices allocate nothing.

use std::collections::HashMap;
use std::time::SystemTime;

use bytes::{Bytes, BytesMut};

use crate::http::date::{format_imf_fixdate, unix_seconds, DATE_LEN};
use crate::http::request::{Method, RequestHead, MAX_HEAD_LEN};
use crate::http::response::{CannedResponse, Persistence};
use crate::http::status::ErrorStatus;
use crate::routes::conditional::{
    if_range_matches, not_modified_since, parse_range, scan_headers, target_query, RangeRequest,
};
use crate::routes::etag::{if_none_match, strong_etag};
use crate::routes::percent::{needs_normalizing, normalize_path, AboveRoot};
use crate::routes::static_files::{LoadedDir, LoadedFile};
use crate::routes::static_response::{PartialResponse, RedirectResponse};

/// How a route with an entity tag answers a conditional request.
#[derive(Debug, Clone)]
pub(crate) struct Revalidation {
    /// The strong entity tag of the route's response, with its quotes.
    pub etag: Box<[u8]>,
    pub not_modified: CannedResponse,
}

/// Which static response answers a request, and from which load. It is
/// `Copy`, so it can wait in the exchange while a request body arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StaticReply {
    pub(crate) generation: u64,
    target: usize,
    kind: StaticKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StaticKind {
    Full,
    NotModified,
    Part { first: usize, last: usize },
    Unsatisfiable,
    Redirect,
}

#[derive(Debug, Clone, Copy)]
enum Target {
    File(usize),
    Directory(usize),
}

/// The responses of one load, by request path.
pub(crate) struct StaticTable {
    /// Which load this is: 0 at start, one more at each reload.
    pub generation: u64,
    by_path: HashMap<Box<[u8]>, Target>,
    files: Vec<FileResponses>,
    directories: Vec<RedirectResponse>,
    pub skipped_dotfiles: usize,
    pub total: u64,
}

/// A file's responses, and what choosing among them needs.
struct FileResponses {
    content: Bytes,
    full: CannedResponse,
    revalidation: Revalidation,
    partial: PartialResponse,
    unsatisfiable: CannedResponse,
    last_modified: u64,
    /// `Last-Modified` is a strong validator, which `If-Range` may compare.
    date_is_strong: bool,
}

impl StaticTable {
    pub(crate) fn new(loaded: LoadedDir, generation: u64) -> StaticTable {
        let mut by_path = HashMap::new();
        let mut files = Vec::with_capacity(loaded.files.len());
        for file in loaded.files {
            for path in &file.url_paths {
                by_path.insert(path[..].into(), Target::File(files.len()));
            }
            files.push(FileResponses::new(file));
        }
        let mut directories = Vec::with_capacity(loaded.dirs.len());
        for path in loaded.dirs {
            let location = [&path[..], b"/"].concat();
            by_path.insert(path.into(), Target::Directory(directories.len()));
            directories.push(RedirectResponse::new(&location));
        }
        StaticTable {
            generation,
            by_path,
            files,
            directories,
            skipped_dotfiles: loaded.skipped_dotfiles,
            total: loaded.total,
        }
    }

    pub(crate) fn file_count(&self) -> usize {
        self.files.len()
    }

    /// The answer to `head` (whose raw bytes are `raw_head`), or `None` when
    /// its path names no file or directory here. The path is looked up
    /// percent-decoded with runs of `/` merged and dot segments removed; one
    /// that climbs above the root is a 400.
    pub(crate) fn answer(
        &self,
        head: &RequestHead,
        raw_head: &[u8],
    ) -> Option<Result<StaticReply, ErrorStatus>> {
        let target = if needs_normalizing(head.path, true) {
            // A path fits in the request head, so it fits here decoded.
            let mut buf = [0u8; MAX_HEAD_LEN];
            match normalize_path(head.path, &mut buf) {
                Ok(path) => *self.by_path.get(path?)?,
                Err(AboveRoot) => return Some(Err(ErrorStatus::BadRequest)),
            }
        } else {
            *self.by_path.get(head.path)?
        };
        if !matches!(head.method, Method::Get | Method::Head) {
            return Some(Err(ErrorStatus::MethodNotAllowed));
        }
        let (target, kind) = match target {
            Target::Directory(index) => (index, StaticKind::Redirect),
            Target::File(index) => (index, self.files[index].choose(head, raw_head)),
        };
        Some(Ok(StaticReply {
            generation: self.generation,
            target,
            kind,
        }))
    }

    /// Writes the response `reply` chose; `reply` comes from this table.
    pub(crate) fn write(
        &self,
        reply: StaticReply,
        raw_head: &[u8],
        out: &mut BytesMut,
        date: &[u8; DATE_LEN],
        persistence: Persistence,
        head_only: bool,
    ) {
        if reply.kind == StaticKind::Redirect {
            let redirect = &self.directories[reply.target];
            return redirect.write(out, target_query(raw_head), date, persistence, head_only);
        }
        let file = &self.files[reply.target];
        let canned = match reply.kind {
            StaticKind::Full | StaticKind::Redirect => &file.full,
            StaticKind::NotModified => &file.revalidation.not_modified,
            StaticKind::Unsatisfiable => &file.unsatisfiable,
            StaticKind::Part { first, last } => {
                let content = &file.content;
                return file
                    .partial
                    .write(out, content, first, last, date, persistence, head_only);
            }
        };
        canned.write(out, date, persistence, head_only);
    }
}

impl FileResponses {
    fn new(file: LoadedFile) -> FileResponses {
        let etag = strong_etag(&file.content);
        let last_modified =
            String::from_utf8_lossy(&format_imf_fixdate(file.last_modified)).into_owned();
        let validators = [("Last-Modified", &*last_modified), ("ETag", &*etag)];
        let mut headers = vec![("Content-Type", file.content_type)];
        headers.extend(validators);
        headers.push(("Accept-Ranges", "bytes"));
        let content_range = format!("bytes */{}", file.content.len());
        let unsatisfiable = CannedResponse::new(
            416,
            "Range Not Satisfiable",
            &[
                ("Content-Type", "text/plain; charset=utf-8"),
                ("Accept-Ranges", "bytes"),
                ("Content-Range", &content_range),
            ],
            Bytes::from_static(b"416 Range Not Satisfiable\n"),
        );
        FileResponses {
            full: CannedResponse::new(200, "OK", &headers, file.content.clone()),
            partial: PartialResponse::new(&headers),
            revalidation: Revalidation {
                etag: etag.as_bytes().into(),
                not_modified: CannedResponse::not_modified(&validators),
            },
            unsatisfiable,
            content: file.content,
            last_modified: file.last_modified,
            date_is_strong: file.modified_before_load,
        }
    }

    /// The response a GET or HEAD gets, by RFC 9110 §13.2.2's order: a
    /// matching `If-None-Match`, or without one a satisfied
    /// `If-Modified-Since`, gets 304; then a `Range` whose `If-Range` (if
    /// any) matches gets its part or 416; everything else the whole file.
    fn choose(&self, head: &RequestHead, raw_head: &[u8]) -> StaticKind {
        let headers = scan_headers(raw_head);
        // Read only when a date needs it.
        let now = || unix_seconds(SystemTime::now());
        let not_modified = match (head.if_none_match, headers.if_modified_since) {
            (Some(tags), _) => if_none_match(tags, &self.revalidation.etag),
            (None, Some(date)) => not_modified_since(date, self.last_modified, now()),
            (None, None) => false,
        };
        if not_modified {
            return StaticKind::NotModified;
        }
        let Some(range) = headers.range else {
            return StaticKind::Full;
        };
        if let Some(validator) = headers.if_range {
            let etag = &self.revalidation.etag;
            let (modified, strong) = (self.last_modified, self.date_is_strong);
            if !if_range_matches(validator, etag, modified, strong, now()) {
                return StaticKind::Full;
            }
        }
        // Both positions lie within the content, whose length is a usize.
        match parse_range(range, self.content.len() as u64) {
            RangeRequest::Whole => StaticKind::Full,
            RangeRequest::Unsatisfiable => StaticKind::Unsatisfiable,
            RangeRequest::Part { first, last } => StaticKind::Part {
                first: first as usize,
                last: last as usize,
            },
        }
    }
}
