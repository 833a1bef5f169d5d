//! A test driver: parses every message of a byte stream (requests or responses), fed in
//! pieces of a given size as a connection would deliver them, the way a server or client
//! loop does (head, then body, then the next message from the leftover bytes).

use squall_http::{
    parse_request, parse_response, BodyDecoder, BodyKind, Error, Header, Limits, Method,
};

/// One message: its start-line fields and decoded body.
#[derive(Debug, PartialEq, Eq)]
pub struct Msg {
    pub method: Option<Method>,
    pub target: String,
    pub code: u16,
    pub keep_alive: bool,
    pub expect_continue: bool,
    pub body: Vec<u8>,
}

/// Every complete message of `input` fed `step` bytes at a time, then the error that
/// stopped the stream (if any) as the status a server would answer.
pub fn messages(
    input: &[u8],
    step: usize,
    lim: &Limits,
    responses: bool,
) -> (Vec<Msg>, Option<u16>) {
    let mut out = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut fed = 0;
    let mut cur: Option<(Msg, BodyDecoder, BodyKind)> = None;
    loop {
        let more = fed < input.len();
        if more {
            let end = (fed + step).min(input.len());
            buf.extend_from_slice(&input[fed..end]);
            fed = end;
        }
        match drain(&mut buf, &mut cur, &mut out, lim, responses) {
            Err(e) => return (out, Some(e.status())),
            Ok(()) if !more => {
                // End of stream: a close-delimited body ends here.
                if let Some((m, _, kind)) = cur.take() {
                    if kind == BodyKind::Close {
                        out.push(m);
                    }
                }
                return (out, None);
            }
            Ok(()) => {}
        }
    }
}

fn drain(
    buf: &mut Vec<u8>,
    cur: &mut Option<(Msg, BodyDecoder, BodyKind)>,
    out: &mut Vec<Msg>,
    lim: &Limits,
    responses: bool,
) -> Result<(), Error> {
    loop {
        if cur.is_none() {
            let mut h = [Header::EMPTY; 64];
            let (m, kind, used) = if responses {
                let Some(r) = parse_response(buf, &mut h, lim, false)? else {
                    return Ok(());
                };
                let m = Msg {
                    method: None,
                    target: String::new(),
                    code: r.code,
                    keep_alive: r.keep_alive,
                    expect_continue: false,
                    body: Vec::new(),
                };
                (m, r.body, r.head_len)
            } else {
                let Some(r) = parse_request(buf, &mut h, lim)? else {
                    return Ok(());
                };
                let m = Msg {
                    method: Some(r.method),
                    target: String::from_utf8_lossy(r.target).into_owned(),
                    code: 0,
                    keep_alive: r.keep_alive,
                    expect_continue: r.expect_continue,
                    body: Vec::new(),
                };
                (m, r.body, r.head_len)
            };
            buf.drain(..used);
            *cur = Some((m, BodyDecoder::new(kind, lim), kind));
        }
        let (m, d, _) = cur.as_mut().expect("set above");
        while !d.is_done() && !buf.is_empty() {
            let r = d.decode(buf)?;
            m.body.extend_from_slice(r.data);
            let n = r.consumed;
            buf.drain(..n);
        }
        if !d.is_done() {
            return Ok(());
        }
        out.push(cur.take().expect("set above").0);
    }
}

/// `messages` at every piece size from 1 to the input's length: all must agree.
pub fn messages_any_split(input: &[u8], lim: &Limits, responses: bool) -> (Vec<Msg>, Option<u16>) {
    let whole = messages(input, input.len().max(1), lim, responses);
    for step in 1..input.len() {
        let r = messages(input, step, lim, responses);
        assert_eq!(r, whole, "split into pieces of {step} bytes");
    }
    whole
}
