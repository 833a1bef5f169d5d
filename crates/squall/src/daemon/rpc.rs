//! JSON-RPC 2.0 framing for `squall daemon`: one JSON value per line (newline-delimited),
//! request validation, batches, notifications and the error codes.

use serde_json::{json, Map, Value};

/// Invalid JSON.
pub const PARSE_ERROR: i64 = -32700;
/// Not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Wrong parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// Internal error.
pub const INTERNAL_ERROR: i64 = -32603;
/// `start`/`get_stats` before any profile was loaded.
pub const NO_PROFILE: i64 = -32000;
/// `load_profile`/`start`/`clear_stats` while a run is in progress.
pub const ALREADY_RUNNING: i64 = -32001;
/// The profile does not load: `data.errors` lists `{path, message}`.
pub const INVALID_PROFILE: i64 = -32002;
/// `update`/`stop` with no run in progress.
pub const NOT_RUNNING: i64 = -32003;
/// The run could not be started or failed (`data.message`).
pub const RUN_FAILED: i64 = -32004;

/// A method's failure.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
    pub fn params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }
    fn to_value(&self) -> Value {
        let mut e = json!({"code": self.code, "message": self.message});
        if let Some(d) = &self.data {
            e["data"] = d.clone();
        }
        e
    }
}

fn response(id: Value, r: Result<Value, RpcError>) -> Value {
    match r {
        Ok(v) => json!({"jsonrpc": "2.0", "id": id, "result": v}),
        Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": e.to_value()}),
    }
}

/// One request, validated.
pub struct Request {
    pub method: String,
    pub params: Map<String, Value>,
    /// `None`: a notification (no response).
    pub id: Option<Value>,
}

fn parse_request(v: Value) -> Result<Request, (Value, RpcError)> {
    let Value::Object(mut o) = v else {
        return Err((
            Value::Null,
            RpcError::new(INVALID_REQUEST, "a request must be a JSON object"),
        ));
    };
    let id = o.remove("id");
    let rid = id.clone().unwrap_or(Value::Null);
    let bad = |m: &str| Err((rid.clone(), RpcError::new(INVALID_REQUEST, m)));
    if let Some(i) = &id {
        if !(i.is_string() || i.is_number() || i.is_null()) {
            return Err((
                Value::Null,
                RpcError::new(INVALID_REQUEST, "id must be a string, number or null"),
            ));
        }
    }
    if o.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return bad("\"jsonrpc\" must be \"2.0\"");
    }
    let method = match o.remove("method") {
        Some(Value::String(m)) => m,
        _ => return bad("\"method\" must be a string"),
    };
    let params = match o.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(Value::Array(a)) if a.is_empty() => Map::new(),
        Some(_) => {
            return Err((
                rid,
                RpcError::params("params must be an object (named parameters)"),
            ))
        }
    };
    Ok(Request { method, params, id })
}

/// Most requests in one batch (a longer one is refused whole: a 16 MiB line of tiny items
/// would otherwise make millions of answers).
pub const MAX_BATCH: usize = 256;

/// What to do with one line of input.
#[derive(Debug, PartialEq)]
pub struct Reply {
    /// The response text (without the newline); `None` when nothing is to be answered
    /// (notifications only).
    pub text: Option<String>,
    /// The line was not JSON: the connection ends after the error. A peer that does not
    /// speak this protocol (an HTTP request a web page sent to the daemon's port, say) is
    /// not read any further, so nothing later in its stream runs as a request.
    pub close: bool,
}

/// Handles one line of input: a request or a batch.
pub fn handle_line(line: &str, call: &mut dyn FnMut(&Request) -> Result<Value, RpcError>) -> Reply {
    let v: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            let r = response(
                Value::Null,
                Err(RpcError::new(
                    PARSE_ERROR,
                    format!("parse error: {e} (the connection is closed)"),
                )),
            );
            return Reply {
                text: Some(r.to_string()),
                close: true,
            };
        }
    };
    Reply {
        text: handle_value(v, call),
        close: false,
    }
}

/// A parsed line: a request or a batch.
fn handle_value(
    v: Value,
    call: &mut dyn FnMut(&Request) -> Result<Value, RpcError>,
) -> Option<String> {
    let mut one = |v: Value| -> Option<Value> {
        match parse_request(v) {
            Err((id, e)) => Some(response(id, Err(e))),
            Ok(req) => {
                let r = call(&req);
                req.id.map(|id| response(id, r))
            }
        }
    };
    match v {
        Value::Array(items) if items.is_empty() => Some(
            response(
                Value::Null,
                Err(RpcError::new(INVALID_REQUEST, "empty batch")),
            )
            .to_string(),
        ),
        Value::Array(items) if items.len() > MAX_BATCH => Some(
            response(
                Value::Null,
                Err(RpcError::new(
                    INVALID_REQUEST,
                    format!(
                        "a batch of {} requests: at most {MAX_BATCH} (none was run)",
                        items.len()
                    ),
                )),
            )
            .to_string(),
        ),
        Value::Array(items) => {
            let out: Vec<Value> = items.into_iter().filter_map(&mut one).collect();
            (!out.is_empty()).then(|| Value::Array(out).to_string())
        }
        v => one(v).map(|r| r.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo(r: &Request) -> Result<Value, RpcError> {
        match r.method.as_str() {
            "echo" => Ok(Value::Object(r.params.clone())),
            _ => Err(RpcError::new(METHOD_NOT_FOUND, "no")),
        }
    }

    fn run(line: &str) -> Option<Value> {
        handle_line(line, &mut echo)
            .text
            .map(|s| serde_json::from_str(&s).unwrap())
    }

    #[test]
    fn a_line_that_is_not_json_ends_the_connection() {
        for line in ["{nope", "POST / HTTP/1.1", "Host: 127.0.0.1:4501"] {
            let r = handle_line(line, &mut echo);
            assert!(r.close, "{line}");
            let v: Value = serde_json::from_str(r.text.as_deref().unwrap()).unwrap();
            assert_eq!(v["error"]["code"], PARSE_ERROR);
        }
        let ok = handle_line(r#"{"jsonrpc":"2.0","id":1,"method":"echo"}"#, &mut echo);
        assert!(!ok.close);
        // A request that is JSON but wrong keeps the connection.
        assert!(!handle_line("42", &mut echo).close);
    }

    #[test]
    fn a_batch_is_bounded() {
        let item = r#"{"jsonrpc":"2.0","id":1,"method":"echo"}"#;
        let batch = |n: usize| format!("[{}]", vec![item; n].join(","));
        assert_eq!(
            run(&batch(MAX_BATCH)).unwrap().as_array().unwrap().len(),
            MAX_BATCH
        );
        let mut calls = 0;
        let r = handle_line(&batch(MAX_BATCH + 1), &mut |_| {
            calls += 1;
            Ok(Value::Null)
        });
        let v: Value = serde_json::from_str(r.text.as_deref().unwrap()).unwrap();
        assert_eq!(v["error"]["code"], INVALID_REQUEST);
        assert_eq!(calls, 0, "none of an oversized batch runs");
        // 8 million tiny items (what fits a 16 MiB line): one error, not millions.
        let r = handle_line(&format!("[{}1]", "1,".repeat(1 << 20)), &mut echo);
        assert!(r.text.unwrap().len() < 200);
    }

    #[test]
    fn ok_and_errors() {
        let r = run(r#"{"jsonrpc":"2.0","id":7,"method":"echo","params":{"a":1}}"#).unwrap();
        assert_eq!(r["id"], 7);
        assert_eq!(r["result"]["a"], 1);
        assert_eq!(run("{nope").unwrap()["error"]["code"], PARSE_ERROR);
        assert_eq!(run("[]").unwrap()["error"]["code"], INVALID_REQUEST);
        assert_eq!(run("42").unwrap()["error"]["code"], INVALID_REQUEST);
        let r = run(r#"{"jsonrpc":"1.0","id":"x","method":"echo"}"#).unwrap();
        assert_eq!(
            (r["id"].as_str(), r["error"]["code"].as_i64()),
            (Some("x"), Some(INVALID_REQUEST))
        );
        let r = run(r#"{"jsonrpc":"2.0","id":1,"method":"nope"}"#).unwrap();
        assert_eq!(r["error"]["code"], METHOD_NOT_FOUND);
        let r = run(r#"{"jsonrpc":"2.0","id":1,"method":"echo","params":[1]}"#).unwrap();
        assert_eq!(r["error"]["code"], INVALID_PARAMS);
        let r = run(r#"{"jsonrpc":"2.0","id":{},"method":"echo"}"#).unwrap();
        assert_eq!(r["error"]["code"], INVALID_REQUEST);
    }

    #[test]
    fn notifications_and_batches() {
        assert!(run(r#"{"jsonrpc":"2.0","method":"echo"}"#).is_none());
        let r = run(
            r#"[{"jsonrpc":"2.0","method":"echo"},{"jsonrpc":"2.0","id":2,"method":"echo"},5]"#,
        )
        .unwrap();
        let a = r.as_array().unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(a[0]["id"], 2);
        assert_eq!(a[1]["error"]["code"], INVALID_REQUEST);
    }
}
