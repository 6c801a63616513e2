//! One load of a static directory as the responses that serve it, built once
//! per load, and the choice among them for a request: the full file, a 304
//! (`If-None-Match`, else `If-Modified-Since`), one byte range (`Range`,
//! guarded by `If-Range`), a 416, or the 301 that adds the `/` a directory's
//! path lacks. Lookups and choices allocate nothing.
//!
//! A file with a gzip copy (`gzip`) has two representations, each
//! with its own strong entity tag (RFC 9110 §8.8.3: a strong tag names one
//! sequence of bytes, and the copy's bytes differ), and every response of
//! such a file says `Vary: Accept-Encoding`, so that caches keep them apart.
//! A request that prefers gzip ([`crate::http::accept_encoding`]) gets the
//! copy, in full or as a 304 against the copy's tag, unless it sends a
//! `Range`: ranges, and so the 206 and 416, are of the file as it is, and the
//! copy's 200 leaves out `Accept-Ranges`.

use std::collections::HashMap;
use std::time::SystemTime;

use bytes::{Bytes, BytesMut};

use crate::http::date::{format_imf_fixdate, unix_seconds};
use crate::http::error_body::{error_body, ErrorHook, ServerError};
use crate::http::head::ResponseOut;
use crate::http::percent::{needs_normalizing, normalize_path, AboveRoot};
use crate::http::request::{Method, RequestHead, MAX_HEAD_LEN};
use crate::http::response::CannedResponse;
use crate::http::response_fields::{put_header, write_response};
use crate::http::status::ErrorStatus;
use crate::static_files::conditional::{
    if_range_matches, not_modified_since, parse_range, scan_headers, target_query, RangeRequest,
};
use crate::static_files::etag::{if_none_match, strong_etag};
use crate::static_files::loaded::{LoadedDir, LoadedFile};
use crate::static_files::response::{PartialResponse, RedirectResponse};

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
    Part {
        first: usize,
        last: usize,
    },
    Unsatisfiable,
    Redirect,
    /// The gzip copy, whole, or a 304 against its tag.
    GzipFull,
    GzipNotModified,
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
    /// The responses of the gzip copy, when the file has one.
    gzip: Option<GzipResponses>,
}

/// The gzip copy's 200, and its tag and 304.
struct GzipResponses {
    full: CannedResponse,
    revalidation: Revalidation,
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
    /// A 416's body is the application's if it chose error bodies
    /// (`errors`).
    pub(crate) fn write(
        &self,
        reply: StaticReply,
        raw_head: &[u8],
        to: &mut ResponseOut<'_>,
        errors: Option<&ErrorHook>,
    ) {
        if reply.kind == StaticKind::Redirect {
            let redirect = &self.directories[reply.target];
            return redirect.write(to, target_query(raw_head));
        }
        let file = &self.files[reply.target];
        let canned = match (reply.kind, &file.gzip) {
            (StaticKind::GzipFull, Some(gzip)) => &gzip.full,
            (StaticKind::GzipNotModified, Some(gzip)) => &gzip.revalidation.not_modified,
            // The gzip kinds are only chosen for a file with a copy.
            (StaticKind::Full | StaticKind::Redirect | StaticKind::GzipFull, _) => &file.full,
            (StaticKind::NotModified | StaticKind::GzipNotModified, _) => {
                &file.revalidation.not_modified
            }
            (StaticKind::Unsatisfiable, _) => match errors {
                Some(hook) => return file.write_unsatisfiable(hook, to),
                None => &file.unsatisfiable,
            },
            (StaticKind::Part { first, last }, _) => {
                return file.partial.write(to, &file.content, first, last);
            }
        };
        canned.write(to);
    }
}

impl GzipResponses {
    /// The copy `compressed` of a file of `content_type` last modified at
    /// `last_modified` (formatted), with its own tag.
    fn new(compressed: Bytes, content_type: &str, last_modified: &str) -> GzipResponses {
        let etag = strong_etag(&compressed);
        let validators = [
            ("Last-Modified", last_modified),
            ("ETag", &*etag),
            ("Vary", "Accept-Encoding"),
        ];
        let headers = [
            ("Content-Type", content_type),
            ("Content-Encoding", "gzip"),
            ("Last-Modified", last_modified),
            ("ETag", &*etag),
            ("Vary", "Accept-Encoding"),
        ];
        GzipResponses {
            full: CannedResponse::new(200, "OK", &headers, compressed),
            revalidation: Revalidation {
                etag: etag.as_bytes().into(),
                not_modified: CannedResponse::not_modified(&validators),
            },
        }
    }
}

impl FileResponses {
    /// The 416 with the application's error body, and the fields of the
    /// canned one.
    fn write_unsatisfiable(&self, hook: &ErrorHook, to: &mut ResponseOut<'_>) {
        let mut fields = BytesMut::new();
        put_header(&mut fields, "Accept-Ranges", "bytes");
        let content_range = format!("bytes */{}", self.content.len());
        put_header(&mut fields, "Content-Range", &content_range);
        if self.gzip.is_some() {
            put_header(&mut fields, "Vary", "Accept-Encoding");
        }
        let error = ServerError::new(416, None);
        let (content_type, body) = error_body(Some(hook), &error);
        write_response(to, 416, Some(content_type), &fields, &body);
    }

    fn new(file: LoadedFile) -> FileResponses {
        let etag = strong_etag(&file.content);
        let last_modified =
            String::from_utf8_lossy(&format_imf_fixdate(file.last_modified)).into_owned();
        // Every response of a file with two representations says so.
        let vary: &[(&str, &str)] = match file.gzip {
            Some(_) => &[("Vary", "Accept-Encoding")],
            None => &[],
        };
        let mut validators = vec![("Last-Modified", &*last_modified), ("ETag", &*etag)];
        validators.extend_from_slice(vary);
        let mut headers = vec![
            ("Content-Type", file.content_type),
            ("Last-Modified", &*last_modified),
            ("ETag", &*etag),
            ("Accept-Ranges", "bytes"),
        ];
        headers.extend_from_slice(vary);
        let content_range = format!("bytes */{}", file.content.len());
        let mut unsatisfiable_headers = vec![
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Accept-Ranges", "bytes"),
            ("Content-Range", &content_range),
        ];
        unsatisfiable_headers.extend_from_slice(vary);
        let unsatisfiable = CannedResponse::new(
            416,
            "Range Not Satisfiable",
            &unsatisfiable_headers,
            Bytes::from_static(b"416 Range Not Satisfiable\n"),
        );
        let gzip = file
            .gzip
            .map(|copy| GzipResponses::new(copy, file.content_type, &last_modified));
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
            gzip,
        }
    }

    /// The response a GET or HEAD gets, by RFC 9110 §13.2.2's order: a
    /// matching `If-None-Match` (against the tag of the representation
    /// chosen: the gzip copy for a request that prefers it and sends no
    /// `Range`), or without one a satisfied `If-Modified-Since`, gets 304;
    /// then a `Range` whose `If-Range` (if any) matches gets its part or
    /// 416; everything else the whole file, or its gzip copy.
    fn choose(&self, head: &RequestHead, raw_head: &[u8]) -> StaticKind {
        let headers = scan_headers(raw_head);
        // Read only when a date needs it.
        let now = || unix_seconds(SystemTime::now());
        let gzip = self
            .gzip
            .as_ref()
            .filter(|_| headers.range.is_none() && headers.accept_encoding.prefers_gzip());
        let etag = match gzip {
            Some(gzip) => &gzip.revalidation.etag,
            None => &self.revalidation.etag,
        };
        let not_modified = match (head.if_none_match, headers.if_modified_since) {
            (Some(tags), _) => if_none_match(tags, etag),
            (None, Some(date)) => not_modified_since(date, self.last_modified, now()),
            (None, None) => false,
        };
        match (not_modified, gzip.is_some()) {
            (true, true) => return StaticKind::GzipNotModified,
            (false, true) => return StaticKind::GzipFull,
            (true, false) => return StaticKind::NotModified,
            (false, false) => {}
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
