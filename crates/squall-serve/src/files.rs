//! The static files of `squall serve`: every regular file under `--root`, read into
//! memory at start, with what its answers need precomputed (Content-Type by extension,
//! ETag, Last-Modified, and the 200 header block) so that a response is made of shared
//! immutable buffers and no file byte is copied per flow.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// One file in memory.
pub struct File {
    /// Its bytes.
    pub data: Arc<[u8]>,
    /// `"MTIME-LEN"` in hex (quoted), as nginx forms it.
    pub etag: String,
    /// Modification time, seconds since the epoch.
    pub mtime: u64,
    /// The Last-Modified value (IMF-fixdate).
    pub last_modified: String,
    /// Content-Type.
    pub content_type: String,
}

impl File {
    /// The file `name` (its Content-Type by extension) holding `data`, last modified at
    /// `mtime` (seconds since the epoch): ETag and Last-Modified made from them.
    pub fn new(name: &str, data: Arc<[u8]>, mtime: u64) -> File {
        File {
            etag: format!("\"{mtime:x}-{:x}\"", data.len()),
            mtime,
            last_modified: httpdate::fmt_http_date(
                UNIX_EPOCH + std::time::Duration::from_secs(mtime),
            ),
            content_type: content_type(name),
            data,
        }
    }
}

/// The files, and their index by URL path (`/dir/name`; `/dir/` maps to
/// `/dir/index.html`).
#[derive(Default)]
pub struct Files {
    pub list: Vec<File>,
    pub by_path: HashMap<Vec<u8>, usize>,
    /// Bytes loaded.
    pub bytes: u64,
}

/// Most bytes `--root` may hold (everything is kept in memory).
pub const MAX_TOTAL: u64 = 4 << 30;

/// Most bytes of one file: a connection's send queue holds at most 2 GiB (TCP's sequence
/// space), and an answer must fit behind the pipelining backlog
/// ([`crate::app::PIPELINE_BACKLOG`]) with its head (64 KiB of room).
pub const MAX_FILE: u64 = i32::MAX as u64 - crate::app::PIPELINE_BACKLOG - (64 << 10);

/// Is `root` a directory whose files can be read? The error names the path and what to
/// do (checked before the server opens its port).
pub fn check_root(root: &Path) -> Result<(), String> {
    let r = root.display();
    let todo = "give the directory that holds the files to serve (it must exist and be readable), or leave --root out and answer fixed --route paths only";
    match std::fs::metadata(root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(format!("--root {r}: no such directory; {todo}"))
        }
        Err(e) => Err(format!("--root {r}: cannot read it: {e}; {todo}")),
        Ok(m) if !m.is_dir() => Err(format!("--root {r}: not a directory; {todo}")),
        Ok(_) => std::fs::read_dir(root)
            .map(drop)
            .map_err(|e| format!("--root {r}: cannot list the directory: {e}; {todo}")),
    }
}

impl Files {
    /// Loads every regular file under `root` (symbolic links followed; hidden names,
    /// starting with `.`, skipped).
    pub fn load(root: &Path) -> Result<Files, String> {
        check_root(root)?;
        let mut f = Files::default();
        f.walk(root, "")?;
        Ok(f)
    }

    fn walk(&mut self, dir: &Path, url: &str) -> Result<(), String> {
        let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for e in rd {
            let e = e.map_err(|e| format!("{}: {e}", dir.display()))?;
            let name = e.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            if name.starts_with('.') {
                continue;
            }
            let path = e.path();
            let meta = std::fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let u = format!("{url}/{name}");
            if meta.is_dir() {
                self.walk(&path, &u)?;
            } else if meta.is_file() {
                if meta.len() > MAX_FILE {
                    return Err(format!(
                        "{}: {} bytes; a file served may have at most {MAX_FILE} bytes (1.94 GiB: an answer must fit a connection's 2 GiB send queue)",
                        path.display(),
                        meta.len()
                    ));
                }
                if self.bytes + meta.len() > MAX_TOTAL {
                    return Err(format!(
                        "--root: more than {} GiB of files (all are held in memory)",
                        MAX_TOTAL >> 30
                    ));
                }
                let data = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                if data.len() as u64 > MAX_FILE || self.bytes + data.len() as u64 > MAX_TOTAL {
                    return Err(format!("{}: grew while it was read", path.display()));
                }
                // A Last-Modified may not be later than the answer (RFC 9110 §8.8.2.1): a
                // file dated in the future is taken as modified at the load.
                let mtime = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_secs())
                    .min(unix_now());
                self.insert(&u, File::new(name, data.into(), mtime));
            }
        }
        Ok(())
    }

    /// Files held in memory from the start, by URL path (`/a.html`, `/dir/b.bin`), all
    /// last modified at `mtime` (seconds since the epoch): for an application that embeds
    /// the server without a directory, and for tests.
    pub fn from_memory<'a>(
        entries: impl IntoIterator<Item = (&'a str, &'a [u8])>,
        mtime: u64,
    ) -> Files {
        let mut f = Files::default();
        for (path, data) in entries {
            let name = path.rsplit('/').next().unwrap_or(path);
            f.insert(path, File::new(name, data.into(), mtime));
        }
        f
    }

    /// Adds `file` at URL path `path` (a later file at the same path replaces it) and
    /// counts its bytes in [`Files::bytes`].
    fn insert(&mut self, path: &str, file: File) {
        self.bytes += file.data.len() as u64;
        match self.by_path.get(path.as_bytes()) {
            Some(&i) => {
                let old = std::mem::replace(&mut self.list[i], file);
                self.bytes -= old.data.len() as u64;
            }
            None => {
                self.by_path
                    .insert(path.as_bytes().to_vec(), self.list.len());
                self.list.push(file);
            }
        }
    }

    /// The file for a request path (percent-decoded, `..` refused): `None` if there is
    /// none or the path is not acceptable.
    pub fn lookup(&self, path: &[u8]) -> Option<(usize, &File)> {
        let plain = path.first() == Some(&b'/')
            && path.last() != Some(&b'/')
            && !path.iter().any(|&c| c == b'%' || c == 0)
            && !path.split(|&c| c == b'/').any(|s| s == b"..");
        let i = if plain {
            *self.by_path.get(path)?
        } else {
            let mut key = decode_path(path)?;
            if key.last() == Some(&b'/') {
                key.extend_from_slice(b"index.html");
            }
            *self.by_path.get(&key)?
        };
        Some((i, &self.list[i]))
    }
}

/// The Content-Type of a file name by its extension (application/octet-stream when
/// unknown; text types as the mime table has them).
pub fn content_type(name: &str) -> String {
    mime_guess::from_path(name)
        .first_or_octet_stream()
        .essence_str()
        .to_string()
}

/// Percent-decodes an origin-form path; `None` for a malformed escape, a NUL, a path not
/// starting with `/`, or a `..` segment.
pub fn decode_path(p: &[u8]) -> Option<Vec<u8>> {
    if p.first() != Some(&b'/') {
        return None;
    }
    let mut out = Vec::with_capacity(p.len());
    let mut i = 0;
    while i < p.len() {
        let c = p[i];
        if c == b'%' {
            let h = p.get(i + 1..i + 3)?;
            let v = u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()?;
            out.push(v);
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    if out.contains(&0) || out.split(|&c| c == b'/').any(|s| s == b"..") {
        return None;
    }
    Some(out)
}

/// Seconds since the epoch now.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_decode_and_refuse_traversal() {
        assert_eq!(decode_path(b"/a%20b").unwrap(), b"/a b");
        assert!(decode_path(b"/../etc/passwd").is_none());
        assert!(decode_path(b"/a/%2e%2e/b").is_none());
        assert!(decode_path(b"/a%0").is_none());
        assert!(decode_path(b"/a%00").is_none());
        assert!(decode_path(b"a").is_none());
        assert_eq!(content_type("x.html"), "text/html");
        assert_eq!(content_type("x.unknownext"), "application/octet-stream");
    }

    #[test]
    fn files_from_memory_are_indexed_as_loaded_ones() {
        let f = Files::from_memory(
            [
                ("/a.html", &b"<p>a</p>"[..]),
                ("/d/b.bin", &[1u8; 300][..]),
                ("/a.html", &b"again"[..]),
            ],
            0x10,
        );
        assert_eq!(f.list.len(), 2, "the later /a.html replaced the first");
        assert_eq!(f.bytes, 300 + 5, "the bytes held");
        let (_, a) = f.lookup(b"/a.html").unwrap();
        assert_eq!(
            (&*a.data, a.content_type.as_str()),
            (&b"again"[..], "text/html")
        );
        assert_eq!(a.etag, "\"10-5\"");
        assert_eq!(a.last_modified, "Thu, 01 Jan 1970 00:00:16 GMT");
        let (_, b) = f.lookup(b"/d/b.bin").unwrap();
        assert_eq!(
            (b.data.len(), b.content_type.as_str()),
            (300, "application/octet-stream")
        );
        assert!(f.lookup(b"/d/../a.html").is_none());
    }

    #[test]
    fn loads_a_tree() {
        let d = std::env::temp_dir().join(format!("squall-files-{}", std::process::id()));
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("index.html"), b"<p>hi</p>").unwrap();
        std::fs::write(d.join("sub/a.css"), b"a{}").unwrap();
        std::fs::write(d.join(".hidden"), b"x").unwrap();
        let f = Files::load(&d).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
        assert_eq!(f.by_path.len(), 2);
        assert_eq!(&*f.lookup(b"/").unwrap().1.data, b"<p>hi</p>");
        assert_eq!(f.lookup(b"/sub/a.css").unwrap().1.content_type, "text/css");
        assert!(f.lookup(b"/.hidden").is_none());
        assert!(Files::load(&d).is_err());
    }

    /// A file over the limit (sparse: nothing is read) is refused at the start, not served
    /// with an empty body; a file dated in the future is taken as modified at the load.
    #[test]
    fn files_over_the_limit_are_refused_and_future_dates_clamped() {
        let d = std::env::temp_dir().join(format!("squall-files-big-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let big = std::fs::File::create(d.join("big.bin")).unwrap();
        big.set_len(MAX_FILE + 1).unwrap();
        let err = Files::load(&d).err().unwrap();
        assert!(err.contains("at most 2080309247 bytes"), "{err}");
        std::fs::remove_file(d.join("big.bin")).unwrap();
        let later = std::fs::File::create(d.join("later.txt")).unwrap();
        let future = SystemTime::now() + std::time::Duration::from_secs(86_400 * 365);
        later.set_modified(future).unwrap();
        let before = unix_now();
        let f = Files::load(&d).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
        let m = f.lookup(b"/later.txt").unwrap().1.mtime;
        assert!(m >= before && m <= unix_now(), "{m}");
    }
}
