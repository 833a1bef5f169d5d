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

/// Handles one line of input: a request or a batch. Returns the response text (without
/// the newline), or `None` when nothing is to be answered (notifications only).
pub fn handle_line(
    line: &str,
    call: &mut dyn FnMut(&Request) -> Result<Value, RpcError>,
) -> Option<String> {
    let v: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            let r = response(
                Value::Null,
                Err(RpcError::new(PARSE_ERROR, format!("parse error: {e}"))),
            );
            return Some(r.to_string());
        }
    };
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
        handle_line(line, &mut echo).map(|s| serde_json::from_str(&s).unwrap())
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
