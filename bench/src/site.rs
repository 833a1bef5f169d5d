//! The site `squall serve` answers in the benchmarks, one definition for every topology
//! (T-mem1 through its app, T-veth and T-memif through the `squall serve` command): the
//! W1 file, sized so that the whole answer to W1's HTTP/1.1 keep-alive request (status
//! line, headers, body) is exactly 32,768 bytes, the 2,649-byte W4 file, and W2 as the
//! `/testu` route (`return 200 "<80 bytes>"`, as nginx is configured). The files are
//! written to a directory and measured with `squall serve`'s own loader and header
//! blocks (`Files::load`, `respond::file_head`, `respond::tail`).

use std::path::{Path, PathBuf};

#[cfg(feature = "squall")]
use squall_http::Version;
#[cfg(feature = "squall")]
use squall_serve::files::Files;
#[cfg(feature = "squall")]
use squall_serve::respond::{file_head, tail};

#[cfg(feature = "squall")]
use crate::http::{self, W1_RESP_LEN};

/// URL paths of the workloads' files.
pub const W1_PATH: &str = "/w1";
pub const W4_PATH: &str = "/w4";

/// An IMF-fixdate (always 29 characters): the Date header's length, for sizing.
pub const SOME_DATE: &str = "Thu, 01 Jan 1970 00:00:00 GMT";

/// A written site.
#[derive(Clone, Debug)]
pub struct Site {
    /// `--root` of `squall serve`.
    pub dir: PathBuf,
    /// The W1 file's length (its answer is 32,768 bytes in all).
    pub w1_body: usize,
}

/// The W1 file's bytes: a pattern, so a misplaced byte shows.
#[cfg(feature = "squall")]
fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| b'A' + (i % 26) as u8).collect()
}

/// Writes the site into `dir` (created if needed).
#[cfg(feature = "squall")]
pub fn write(dir: &Path) -> Result<Site, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let put = |name: &str, data: &[u8]| {
        let p = dir.join(name.trim_start_matches('/'));
        std::fs::write(&p, data).map_err(|e| format!("{}: {e}", p.display()))
    };
    put(W4_PATH, &http::w4_body())?;
    // The head's length depends only on the digits of the length and of the mtime, so
    // the second pass settles it; four at most.
    let mut body = W1_RESP_LEN - 300;
    for _ in 0..4 {
        put(W1_PATH, &pattern(body))?;
        let files = Files::load(dir)?;
        let (_, f) = files
            .lookup(W1_PATH.as_bytes())
            .ok_or_else(|| format!("{}: the W1 file did not load", dir.display()))?;
        let head = file_head(f).len() + tail(SOME_DATE, true, Version::Http11).len();
        let want = W1_RESP_LEN
            .checked_sub(head)
            .ok_or("the W1 head is longer than 32,768 bytes")?;
        if want == body {
            return Ok(Site {
                dir: dir.to_path_buf(),
                w1_body: body,
            });
        }
        body = want;
    }
    Err("the W1 file's size did not settle".into())
}

/// Without `squall serve`'s crate there is no site to size.
#[cfg(not(feature = "squall"))]
pub fn write(_dir: &Path) -> Result<Site, String> {
    Err("built without the `squall` feature (squall-serve)".into())
}

/// The W2 route as `--route` takes it (`/testu return 200 "BODY"`); `body` must hold no
/// `"` or `\`.
pub fn w2_route(body: &str) -> String {
    format!("/testu return 200 \"{body}\"")
}

#[cfg(all(test, feature = "squall"))]
mod tests {
    use super::*;

    #[test]
    fn w1_answer_is_32768_bytes_and_w4_file_is_2649() {
        let dir = std::env::temp_dir().join(format!("sqb-site-test-{}", std::process::id()));
        let site = write(&dir).unwrap();
        let files = Files::load(&dir).unwrap();
        let (_, f) = files.lookup(b"/w1").unwrap();
        assert_eq!(f.data.len(), site.w1_body);
        let total =
            file_head(f).len() + tail(SOME_DATE, true, Version::Http11).len() + f.data.len();
        assert_eq!(total, 32_768);
        assert_eq!(files.lookup(b"/w4").unwrap().1.data.len(), 2_649);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(w2_route("ab"), "/testu return 200 \"ab\"");
    }
}
