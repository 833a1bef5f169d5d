//! The `http_request` instruction: checks the method, URLs, headers, weights and body,
//! and cuts the request into parts whose alternatives become interned buffers of the
//! profile (see [`crate::http`]).

use std::collections::HashMap;

use crate::error::Errors;
use crate::http::{HttpReq, Part, Pick, MAX_HTTP_CHOICES, MAX_HTTP_PARTS};

/// Most combinations of a request's head parts kept as whole heads (see `HttpBuild::heads`).
const MAX_HEAD_COMBOS: usize = 256;
/// Most bytes of one request's table of whole heads.
const MAX_HEAD_TABLE: usize = 256 * 1024;
use crate::model::BufIdx;
use crate::raw::{RawHeader, RawPick};

/// Requests and the buffers they add, collected over all programs.
#[derive(Default)]
pub(super) struct HttpBuild {
    /// Buffers of the raw profile (new buffers are numbered after them).
    pub(super) base: usize,
    pub(super) bufs: Vec<Vec<u8>>,
    pub(super) interned: HashMap<Vec<u8>, u32>,
    pub(super) reqs: Vec<HttpReq>,
    pub(super) cursors: u32,
}

/// The fields of one `http_request` command.
pub(super) struct RawRequest<'a> {
    pub(super) method: Option<&'a str>,
    pub(super) url: Option<&'a str>,
    pub(super) urls: Option<&'a [String]>,
    pub(super) pick: Option<RawPick>,
    pub(super) weights: Option<&'a [u64]>,
    pub(super) headers: &'a [RawHeader],
    /// The body buffer (index) and its length, already resolved.
    pub(super) body: Option<(usize, usize)>,
    pub(super) version: Option<&'a str>,
}

fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(is_tchar)
}

impl HttpBuild {
    fn intern(&mut self, bytes: Vec<u8>) -> BufIdx {
        if let Some(&i) = self.interned.get(&bytes) {
            return BufIdx(i);
        }
        let i = (self.base + self.bufs.len()) as u32;
        self.interned.insert(bytes.clone(), i);
        self.bufs.push(bytes);
        BufIdx(i)
    }

    /// A part choosing among `alts` (already formatted bytes).
    fn part(
        &mut self,
        alts: Vec<Vec<u8>>,
        pick: Option<RawPick>,
        weights: Option<&[u64]>,
        p: &str,
        errs: &mut Errors,
    ) -> Part {
        let pick = match (alts.len(), pick, weights) {
            (_, Some(RawPick::Weighted), None) => {
                errs.push(format!("{p}.weights"), "pick \"weighted\" needs weights");
                Pick::Fixed
            }
            (_, Some(k), Some(_)) if k != RawPick::Weighted => {
                errs.push(
                    format!("{p}.weights"),
                    "weights are only for pick \"weighted\"",
                );
                Pick::Fixed
            }
            (_, _, Some(_)) => Pick::Weighted,
            (1, _, None) => Pick::Fixed,
            (_, None | Some(RawPick::RoundRobin), None) => Pick::RoundRobin,
            (_, Some(RawPick::Random), None) => Pick::Random,
            (_, Some(RawPick::Flow), None) => Pick::Flow,
        };
        let mut cum = Vec::new();
        if let (Pick::Weighted, Some(w)) = (pick, weights) {
            if w.len() != alts.len() {
                errs.push(
                    format!("{p}.weights"),
                    format!("{} weights for {} alternatives", w.len(), alts.len()),
                );
            }
            let mut total = 0u64;
            for &x in w {
                total = total.saturating_add(x);
                cum.push(total.min(u64::from(u32::MAX)) as u32);
            }
            if total == 0 || total >= 1 << 32 {
                errs.push(
                    format!("{p}.weights"),
                    format!("weights must add up to 1..2^32, not {total}"),
                );
            }
        }
        let cursor = if pick == Pick::RoundRobin {
            self.cursors += 1;
            self.cursors - 1
        } else {
            0
        };
        Part {
            bufs: alts.into_iter().map(|a| self.intern(a)).collect(),
            pick,
            cum: cum.into(),
            cursor,
        }
    }

    /// Every whole head of a request whose parts have at most [`MAX_HEAD_COMBOS`]
    /// combinations (and at most [`MAX_HEAD_TABLE`] bytes in all), one interned buffer
    /// each: a request is then sent as one buffer. `None` for a single fixed part (its
    /// buffer is already whole) or too many combinations (then the parts go out one by one).
    fn heads(&mut self, parts: &[Part]) -> Option<Box<[BufIdx]>> {
        let combos = parts
            .iter()
            .try_fold(1usize, |n, p| n.checked_mul(p.bufs.len()))?;
        let len = |b: &BufIdx| self.bufs[b.0 as usize - self.base].len();
        let bytes: usize = parts
            .iter()
            .map(|p| p.bufs.iter().map(len).max().unwrap_or(0))
            .sum();
        if parts.len() < 2 || combos > MAX_HEAD_COMBOS || combos * bytes > MAX_HEAD_TABLE {
            return None;
        }
        let mut out = Vec::with_capacity(combos);
        for mut c in 0..combos {
            // Index of each part's alternative, the last part varying fastest.
            let mut ks = vec![0; parts.len()];
            for (k, p) in ks.iter_mut().zip(parts).rev() {
                *k = c % p.bufs.len();
                c /= p.bufs.len();
            }
            let mut whole = Vec::with_capacity(bytes);
            for (p, &k) in parts.iter().zip(&ks) {
                whole.extend_from_slice(&self.bufs[p.bufs[k].0 as usize - self.base]);
            }
            out.push(self.intern(whole));
        }
        Some(out.into())
    }

    /// Compiles one request; its index in [`HttpBuild::reqs`].
    pub(super) fn request(&mut self, r: &RawRequest, p: &str, errs: &mut Errors) -> u16 {
        let start = errs.list.len();
        let method = r.method.unwrap_or("GET");
        if !is_token(method) {
            errs.push(
                format!("{p}.method"),
                format!("{method:?} is not an HTTP method token"),
            );
        }
        let version = match r.version.unwrap_or("1.1") {
            "1.1" => "HTTP/1.1",
            "1.0" => "HTTP/1.0",
            v => {
                errs.push(
                    format!("{p}.version"),
                    format!("{v:?}: HTTP version \"1.1\" or \"1.0\""),
                );
                "HTTP/1.1"
            }
        };
        let urls: Vec<&str> = match (r.url, r.urls) {
            (Some(u), None) => vec![u],
            (None, Some(l)) if !l.is_empty() => l.iter().map(String::as_str).collect(),
            (None, Some(_)) => {
                errs.push(format!("{p}.urls"), "an empty URL list");
                vec![]
            }
            (Some(_), Some(_)) => {
                errs.push(p, "give url or urls, not both");
                vec![]
            }
            (None, None) => {
                errs.push(p, "an http_request needs url or urls");
                vec![]
            }
        };
        if urls.len() > MAX_HTTP_CHOICES {
            errs.push(
                format!("{p}.urls"),
                format!("{} URLs, more than {MAX_HTTP_CHOICES}", urls.len()),
            );
        }
        for (k, u) in urls.iter().enumerate() {
            if u.is_empty() || !u.bytes().all(|c| (0x21..=0x7e).contains(&c)) {
                errs.push(
                    format!("{p}.urls[{k}]"),
                    format!("{u:?} is not a request target (visible ASCII, no spaces)"),
                );
            }
        }
        if r.url.is_some() && (r.pick.is_some() || r.weights.is_some()) {
            errs.push(p, "pick and weights choose among urls, not one url");
        }
        let mut has_host = false;
        for (k, h) in r.headers.iter().enumerate() {
            let hp = format!("{p}.headers[{k}]");
            if !is_token(&h.name) {
                errs.push(
                    format!("{hp}.name"),
                    format!("{:?} is not a header name", h.name),
                );
            }
            let n = h.name.to_ascii_lowercase();
            has_host |= n == "host";
            if n == "content-length" || n == "transfer-encoding" {
                errs.push(
                    format!("{hp}.name"),
                    "the body's framing is the generator's (Content-Length from the body buffer)",
                );
            }
            let vals: Vec<&String> = match (&h.value, &h.values) {
                (Some(v), None) => vec![v],
                (None, Some(l)) if !l.is_empty() => l.iter().collect(),
                _ => {
                    errs.push(
                        hp.clone(),
                        "a header needs value or a non-empty values list",
                    );
                    vec![]
                }
            };
            if vals.len() > MAX_HTTP_CHOICES {
                errs.push(
                    format!("{hp}.values"),
                    format!("more than {MAX_HTTP_CHOICES} values"),
                );
            }
            for v in vals {
                if !v.bytes().all(|c| c == b'\t' || (0x20..=0x7e).contains(&c)) {
                    errs.push(
                        hp.clone(),
                        format!("{v:?}: header values are visible ASCII, spaces and tabs"),
                    );
                }
            }
        }
        if version == "HTTP/1.1" && !has_host {
            errs.push(
                format!("{p}.headers"),
                "an HTTP/1.1 request needs a Host header (RFC 9112 §3.2)",
            );
        }
        if errs.list.len() > start {
            return 0;
        }
        let mut parts = Vec::new();
        let lines = urls
            .iter()
            .map(|u| format!("{method} {u} {version}\r\n").into_bytes())
            .collect();
        parts.push(self.part(lines, r.pick, r.weights, p, errs));
        let mut fixed = Vec::new();
        for (k, h) in r.headers.iter().enumerate() {
            let line = |v: &str| format!("{}: {v}\r\n", h.name).into_bytes();
            match (&h.value, &h.values) {
                (Some(v), _) => fixed.extend(line(v)),
                (None, Some(l)) if l.len() == 1 => fixed.extend(line(&l[0])),
                (None, Some(l)) => {
                    if !fixed.is_empty() {
                        let f = std::mem::take(&mut fixed);
                        parts.push(self.part(vec![f], None, None, p, errs));
                    }
                    let alts = l.iter().map(|v| line(v)).collect();
                    let hp = format!("{p}.headers[{k}]");
                    // Header lists vary per flow unless told otherwise.
                    let pick = h.pick.or(h.weights.is_none().then_some(RawPick::Flow));
                    parts.push(self.part(alts, pick, h.weights.as_deref(), &hp, errs));
                }
                (None, None) => {}
            }
        }
        if let Some((_, len)) = r.body {
            fixed.extend(format!("Content-Length: {len}\r\n").into_bytes());
        }
        fixed.extend(b"\r\n");
        parts.push(self.part(vec![fixed], None, None, p, errs));
        if parts.len() > MAX_HTTP_PARTS {
            errs.push(
                format!("{p}.headers"),
                format!(
                    "{} parts (each varying header and each run of fixed ones is one), more than {MAX_HTTP_PARTS}",
                    parts.len()
                ),
            );
        }
        if self.reqs.len() >= usize::from(u16::MAX) {
            errs.push(p, "too many http_request instructions in the profile");
            return 0;
        }
        let heads = self.heads(&parts);
        self.reqs.push(HttpReq {
            head: method == "HEAD",
            method: method.to_string(),
            parts,
            heads,
            body: r
                .body
                .filter(|&(_, len)| len > 0)
                .map(|(b, _)| BufIdx(b as u32)),
        });
        (self.reqs.len() - 1) as u16
    }
}

#[cfg(test)]
mod tests {
    use crate::http::Pick;
    use crate::{load_profile_value, Insn, LoadError, Profile};
    use serde_json::{json, Value};

    fn load(cmds: Value) -> Result<Profile, LoadError> {
        load_profile_value(json!({
            "version": 1,
            "buffers": [{"name": "form", "text": "a=1&b=2"}],
            "ip_gens": [{"name": "g", "clients": {"range": ["16.0.0.1", "16.0.0.9"]},
                "servers": {"range": ["48.0.0.1", "48.0.0.1"]}}],
            "programs": [{"name": "c", "commands": cmds},
                {"name": "s", "commands": [{"op": "recv", "bytes": 1}]}],
            "templates": [{"client_program": "c", "server_program": "s"}]
        }))
    }

    fn text(p: &Profile, b: crate::BufIdx) -> String {
        String::from_utf8(p.buffer(b).to_vec()).unwrap()
    }

    #[test]
    fn request_is_cut_into_shared_pieces() {
        let p = load(json!([
            {"op": "http_request", "method": "POST", "urls": ["/a", "/b?x=1"],
             "pick": "weighted", "weights": [3, 1],
             "headers": [{"name": "Host", "value": "h"},
                         {"name": "User-Agent", "values": ["u1", "u2", "u3"], "pick": "flow"},
                         {"name": "Accept", "value": "*/*"}],
             "body": "form"},
            {"op": "http_wait_response"},
            {"op": "http_request", "url": "/a", "method": "HEAD",
             "headers": [{"name": "Host", "value": "h"}]},
            {"op": "http_wait_response"}
        ]))
        .unwrap();
        assert!(p.programs[0].has_http && !p.programs[1].has_http);
        assert_eq!(
            p.programs[0].insns[..2],
            [Insn::HttpRequest { req: 0 }, Insn::HttpWaitResponse]
        );
        let r = &p.http[0];
        assert!(!r.head && p.http[1].head);
        let picks: Vec<Pick> = r.parts.iter().map(|x| x.pick).collect();
        assert_eq!(
            picks,
            [Pick::Weighted, Pick::Fixed, Pick::Flow, Pick::Fixed]
        );
        assert_eq!(&*r.parts[0].cum, [3, 4]);
        assert_eq!(text(&p, r.parts[0].bufs[1]), "POST /b?x=1 HTTP/1.1\r\n");
        assert_eq!(text(&p, r.parts[1].bufs[0]), "Host: h\r\n");
        assert_eq!(text(&p, r.parts[2].bufs[2]), "User-Agent: u3\r\n");
        assert_eq!(
            text(&p, r.parts[3].bufs[0]),
            "Accept: */*\r\nContent-Length: 7\r\n\r\n"
        );
        assert_eq!(p.buffers[r.body.unwrap().0 as usize].name, "form");
        // 2 URLs x 3 agents: six whole heads, the URL varying slowest.
        let heads = r.heads.as_deref().unwrap();
        assert_eq!(heads.len(), 6);
        assert_eq!(
            text(&p, heads[4]),
            "POST /b?x=1 HTTP/1.1\r\nHost: h\r\nUser-Agent: u2\r\nAccept: */*\r\nContent-Length: 7\r\n\r\n"
        );
        // Identical pieces are one buffer: "Host: h\r\n" of the HEAD request is not.
        let head_tail = p.http[1].parts[1].bufs[0];
        assert_eq!(text(&p, head_tail), "Host: h\r\n\r\n");
        assert_eq!(p.http_cursors, 0);
        // The whole request, as a peer receives it: the same bytes from the table of
        // heads and from the parts one by one.
        for table in [true, false] {
            let mut r = r.clone();
            if !table {
                r.heads = None;
            }
            let mut all = Vec::new();
            r.pieces(&mut [], || 0, 5, |b| all.push(text(&p, b)));
            assert_eq!(all.len(), if table { 2 } else { 5 });
            let all = all.concat();
            assert!(all.starts_with("POST /a HTTP/1.1\r\nHost: h\r\nUser-Agent: u"));
            assert!(all.ends_with("Content-Length: 7\r\n\r\na=1&b=2"), "{all}");
        }
        // Too many combinations: the parts go out one by one.
        let urls: Vec<String> = (0..300).map(|i| format!("/{i}")).collect();
        let p2 = load(json!([{"op": "http_request", "urls": urls,
            "headers": [{"name": "Host", "value": "h"}]}, {"op": "http_wait_response"}]))
        .unwrap();
        assert!(p2.http[0].heads.is_none());
    }

    #[test]
    fn round_robin_for_url_lists_flow_for_header_lists_by_default() {
        let p = load(json!([
            {"op": "http_request", "urls": ["/1", "/2"], "version": "1.0",
             "headers": [{"name": "X", "values": ["a", "b"]}]},
            {"op": "http_wait_response"}
        ]))
        .unwrap();
        let r = &p.http[0];
        assert_eq!(
            (r.parts[0].pick, r.parts[1].pick),
            (Pick::RoundRobin, Pick::Flow)
        );
        assert_eq!((r.parts[0].cursor, p.http_cursors), (0, 1));
        assert_eq!(text(&p, r.parts[0].bufs[0]), "GET /1 HTTP/1.0\r\n");
    }

    #[test]
    fn bad_requests_are_reported_with_their_paths() {
        let e = load(json!([
            {"op": "http_request", "method": "G T", "urls": ["/ok", "/with space"],
             "pick": "weighted",
             "headers": [{"name": "Bad:Name", "value": "v"}, {"name": "Content-Length", "value": "3"},
                         {"name": "X", "values": []}, {"name": "Y", "value": "line\r\nbreak"}],
             "body": "nope", "version": "2"},
            {"op": "http_request", "url": "/", "pick": "random"},
            {"op": "http_request", "urls": ["/a", "/b"], "weights": [0, 0],
             "headers": [{"name": "Host", "value": "h"}]},
            {"op": "http_wait_response"}
        ]))
        .unwrap_err()
        .to_string();
        for want in [
            "commands[0].method: \"G T\" is not an HTTP method token",
            "commands[0].urls[1]: \"/with space\" is not a request target",
            "commands[0].headers[0].name: \"Bad:Name\" is not a header name",
            "commands[0].headers[1].name: the body's framing is the generator's",
            "commands[0].headers[2]: a header needs value or a non-empty values list",
            "commands[0].headers[3]: \"line\\r\\nbreak\": header values are visible ASCII",
            "commands[0].body: unknown buffer \"nope\"",
            "commands[0].version: \"2\": HTTP version",
            "commands[1]: pick and weights choose among urls, not one url",
            "commands[1].headers: an HTTP/1.1 request needs a Host header",
            "commands[2].weights: weights must add up to 1..2^32, not 0",
        ] {
            assert!(e.contains(want), "missing {want:?} in\n{e}");
        }
        let e = load(json!([{"op": "http_request", "headers": []}]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs url or urls"), "{e}");
    }

    #[test]
    fn http_instructions_are_tcp_only_and_wait() {
        let e = load_profile_value(json!({
            "version": 1, "buffers": [],
            "ip_gens": [{"name": "g", "clients": {"range": ["16.0.0.1", "16.0.0.1"]},
                "servers": {"range": ["48.0.0.1", "48.0.0.1"]}}],
            "programs": [{"name": "c", "commands": [{"op": "http_wait_response"},
                {"op": "set_keepalive_msg", "msec": 10}]}],
            "templates": [{"client_program": "c", "server_program": "c"}]
        }))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("mixes TCP instruction \"http_wait_response\""),
            "{e}"
        );
        // A loop of requests is accepted: http_wait_response waits.
        load(json!([
            {"op": "set_var", "id": 0, "val": 10}, {"op": "set_label", "label": "a"},
            {"op": "http_request", "url": "/", "headers": [{"name": "Host", "value": "h"}]},
            {"op": "http_wait_response"}, {"op": "jmp_nz", "id": 0, "label": "a"}
        ]))
        .unwrap();
    }
}
