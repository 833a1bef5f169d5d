//! The access log of `squall serve` (off unless `--access-log FILE`): the app appends
//! one line per answer to an in-memory buffer; full buffers (64 KiB) and, every second,
//! partial ones go to a writer thread over a channel, so the polling core never waits on
//! the file. Lines are nginx's `combined` format.

use std::io::Write;
use std::path::Path;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;

/// Bytes buffered before a hand-over to the writer.
const FLUSH_AT: usize = 64 * 1024;

/// The app's side of the log.
pub struct AccessLog {
    buf: Vec<u8>,
    /// Lines in `buf`.
    lines: u64,
    tx: Option<SyncSender<Vec<u8>>>,
    writer: Option<JoinHandle<std::io::Result<()>>>,
    /// Lines lost because the writer fell 64 buffers behind.
    pub dropped: u64,
}

impl AccessLog {
    /// Opens (appends to) `path` and starts the writer thread.
    pub fn open(path: &Path) -> Result<AccessLog, String> {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("--access-log {}: {e}", path.display()))?;
        let (tx, rx) = sync_channel::<Vec<u8>>(64);
        let writer = std::thread::Builder::new()
            .name("squall-access-log".into())
            .spawn(move || {
                for b in rx {
                    f.write_all(&b)?;
                }
                f.flush()
            })
            .map_err(|e| format!("access log thread: {e}"))?;
        Ok(AccessLog {
            buf: Vec::with_capacity(FLUSH_AT + 1024),
            lines: 0,
            tx: Some(tx),
            writer: Some(writer),
            dropped: 0,
        })
    }

    /// Appends one line: `ip - - [time] "request line" status bytes "-" "user agent"`.
    #[allow(clippy::too_many_arguments)]
    pub fn line(
        &mut self,
        ip: std::net::IpAddr,
        time: &str,
        method: &[u8],
        target: &[u8],
        version: &str,
        status: u16,
        bytes: usize,
        ua: &[u8],
    ) {
        let b = &mut self.buf;
        let _ = write!(b, "{ip} - - [{time}] \"");
        escaped(b, method);
        b.push(b' ');
        escaped(b, target);
        let _ = writeln!(b, " {version}\" {status} {bytes} \"-\" \"{}\"", Esc(ua));
        self.lines += 1;
        if self.buf.len() >= FLUSH_AT {
            self.flush();
        }
    }

    /// Hands the buffered lines to the writer (never blocks: a full channel drops them,
    /// counted line by line).
    pub fn flush(&mut self) {
        self.hand_over(false);
    }

    /// [`flush`](Self::flush); `wait`: until the writer takes them (nothing is lost).
    fn hand_over(&mut self, wait: bool) {
        if self.buf.is_empty() {
            return;
        }
        let b = std::mem::replace(&mut self.buf, Vec::with_capacity(FLUSH_AT + 1024));
        let lines = std::mem::take(&mut self.lines);
        if let Some(tx) = &self.tx {
            let sent = if wait {
                tx.send(b).is_ok()
            } else {
                tx.try_send(b).is_ok()
            };
            if !sent {
                self.dropped += lines;
            }
        }
    }

    /// Hands the last lines over (waiting for the writer: serving is over), stops the
    /// writer and waits for it.
    pub fn close(&mut self) -> Result<(), String> {
        self.hand_over(true);
        self.tx = None;
        match self.writer.take().map(|w| w.join()) {
            Some(Ok(Err(e))) => Err(format!("access log: {e}")),
            Some(Err(_)) => Err("access log writer panicked".into()),
            _ => Ok(()),
        }
    }
}

/// Bytes as they are, with `"`, `\` and non-printable bytes escaped as `\xHH`.
fn escaped(out: &mut Vec<u8>, s: &[u8]) {
    for &c in s {
        if c == b'"' || c == b'\\' || !(0x20..0x7f).contains(&c) {
            let _ = write!(out, "\\x{c:02X}");
        } else {
            out.push(c);
        }
    }
}

struct Esc<'a>(&'a [u8]);
impl std::fmt::Display for Esc<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut v = Vec::new();
        escaped(&mut v, self.0);
        f.write_str(&String::from_utf8_lossy(&v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that falls behind (a FIFO nobody reads yet) loses lines, counted one by
    /// one; the last buffer, handed over at the close, waits for it and is not lost.
    #[test]
    fn lost_lines_are_counted_and_the_last_ones_kept() {
        let dir = std::env::temp_dir().join(format!("squall-log-fifo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let p = dir.join("log");
        let st = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap();
        assert!(st.success());
        // The reader starts only after every line was written (the writer blocks on the
        // FIFO meanwhile); it counts the lines that came.
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let rp = p.clone();
        let reader = std::thread::spawn(move || {
            let f = std::fs::File::open(&rp).unwrap();
            wait.recv().unwrap();
            std::io::BufRead::lines(std::io::BufReader::new(f)).count() as u64
        });
        let mut l = AccessLog::open(&p).unwrap();
        let n = 200_000u64;
        for _ in 0..n {
            l.line(
                [198, 18, 0, 1].into(),
                "t",
                b"GET",
                b"/",
                "HTTP/1.1",
                200,
                5,
                b"x",
            );
        }
        go.send(()).unwrap();
        let pending = l.lines;
        assert!(pending > 0, "the last buffer is handed over at the close");
        let dropped_before = l.dropped;
        l.close().unwrap();
        assert_eq!(l.dropped, dropped_before, "the close waits for the writer");
        let got = reader.join().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(l.dropped > 0, "the writer fell behind");
        assert_eq!(got + l.dropped, n, "every line written or counted lost");
    }

    #[test]
    fn lines_reach_the_file() {
        let p = std::env::temp_dir().join(format!("squall-log-{}.log", std::process::id()));
        let _ = std::fs::remove_file(&p);
        let mut l = AccessLog::open(&p).unwrap();
        l.line(
            [198, 18, 0, 1].into(),
            "24/Nov/2026:16:00:00 +0000",
            b"GET",
            b"/a\"b",
            "HTTP/1.1",
            200,
            5,
            b"curl/8",
        );
        let v6: std::net::Ipv6Addr = "2001:db8::2".parse().unwrap();
        l.line(
            v6.into(),
            "24/Nov/2026:16:00:01 +0000",
            b"HEAD",
            b"/",
            "HTTP/1.1",
            200,
            0,
            b"ab",
        );
        l.close().unwrap();
        let s = std::fs::read_to_string(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        assert_eq!(
            s,
            "198.18.0.1 - - [24/Nov/2026:16:00:00 +0000] \"GET /a\\x22b HTTP/1.1\" 200 5 \"-\" \"curl/8\"\n\
             2001:db8::2 - - [24/Nov/2026:16:00:01 +0000] \"HEAD / HTTP/1.1\" 200 0 \"-\" \"ab\"\n"
        );
    }
}
