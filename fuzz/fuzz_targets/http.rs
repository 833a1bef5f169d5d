//! squall-http: request and response heads, then their bodies, from arbitrary bytes fed
//! whole and split at a point given by the first byte: never panics, never reports more
//! bytes consumed than given, and agrees with itself across the split.
#![no_main]

use libfuzzer_sys::fuzz_target;
use squall_http::{parse_request, parse_response, BodyDecoder, Header, Limits};

/// Decodes the body after a head of `kind`, with the input split at `cut`.
fn body(kind: squall_http::BodyKind, rest: &[u8], cut: usize, lim: &Limits) -> Option<Vec<u8>> {
    let mut d = BodyDecoder::new(kind, lim);
    let mut out = Vec::new();
    let mut pos = 0;
    for end in [cut.min(rest.len()), rest.len()] {
        while pos < end && !d.is_done() {
            let r = d.decode(&rest[pos..end]).ok()?;
            assert!(r.consumed <= end - pos);
            assert!(r.consumed > 0 || r.done || end == pos);
            out.extend_from_slice(r.data);
            pos += r.consumed;
        }
    }
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&k, data)) = data.split_first() else {
        return;
    };
    let lim = Limits {
        max_body: 4096,
        ..Limits::default()
    };
    let cut = usize::from(k) * data.len() / 256;
    let mut h = [Header::EMPTY; 32];
    if let Ok(Some(r)) = parse_request(data, &mut h, &lim) {
        assert!(r.head_len <= data.len());
        let rest = &data[r.head_len..];
        assert_eq!(body(r.body, rest, cut, &lim), body(r.body, rest, rest.len(), &lim));
    }
    let mut h = [Header::EMPTY; 32];
    if let Ok(Some(r)) = parse_response(data, &mut h, &lim, k & 1 == 1) {
        assert!(r.head_len <= data.len());
        let rest = &data[r.head_len..];
        assert_eq!(body(r.body, rest, cut, &lim), body(r.body, rest, rest.len(), &lim));
    }
    // An incomplete prefix is never an error that the whole turns out not to have.
    let mut h = [Header::EMPTY; 32];
    let whole = parse_request(data, &mut h, &lim).is_ok();
    let mut h = [Header::EMPTY; 32];
    if whole {
        assert!(parse_request(&data[..cut], &mut h, &lim).is_ok());
    }
});
