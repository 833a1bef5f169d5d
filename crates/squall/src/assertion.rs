//! `squall run --assert EXPR`: thresholds on the figures of a run's results, for CI
//! pipelines. An assertion is one comparison of two arithmetic expressions
//! (`ttfb.p99 < 2ms`, `cps >= 0.95 * target`, `errors == 0`); names are short aliases
//! (see [`ALIASES`]) or dotted paths of the `--json` document (`client.tcp.tcps_rexmttimeo`,
//! `groups.http.latency_us.first_byte.p99`: groups by name or index); numbers take a unit
//! (latency `ns`/`us`/`ms`/`s`, counted in microseconds; rates `bps`/`Kbps`/`Mbps`/`Gbps`,
//! in Gbit/s) or a multiplier (`K`, `M`, `G`). A small parser of our own (no dependency).

use serde_json::Value;

/// Short names: (alias, what it reads, meaning). A measurement window (`--warmup`,
/// `--cooldown`) makes the rate and latency aliases read the window's figures.
pub const ALIASES: &[(&str, &str, &str)] = &[
    (
        "cps",
        "rates.cps | window.cps",
        "client flows opened per second",
    ),
    (
        "target",
        "target_cps",
        "the profile's scheduled CPS (sum of the templates' cps x mult)",
    ),
    (
        "wire_gbps",
        "rates.wire_gbps | window.wire_gbps",
        "wire Gbit/s, both sides",
    ),
    (
        "l7_gbps",
        "rates.l7_gbps",
        "TCP/UDP payload Gbit/s, both sides",
    ),
    (
        "mpps",
        "rates.mpps | window.mpps",
        "million frames per second, both sides",
    ),
    (
        "errors",
        "errors",
        "error counters of both sides (whole run)",
    ),
    (
        "retransmits",
        "retransmits | window.retransmits",
        "TCP segments retransmitted, both sides",
    ),
    (
        "completed",
        "client.flows.completed",
        "client flows completed",
    ),
    ("started", "client.flows.started", "client flows opened"),
    (
        "peak_active",
        "client.peak_active",
        "most client flows running at once",
    ),
    (
        "cpu_us_per_flow",
        "cpu_us_per_flow",
        "CPU us per completed flow",
    ),
    (
        "connect.P",
        "latency_us.connect.P | window.latency_us.connect.P",
        "connect latency (us), P = p50, p90, p99, p99_9, max, count",
    ),
    (
        "ttfb.P",
        "latency_us.first_byte.P | window...",
        "time to first byte (us), every group",
    ),
    (
        "ttlb.P",
        "latency_us.last_byte.P | window...",
        "time to last byte (us), every group",
    ),
    (
        "rps",
        "rates.rps",
        "squall serve: requests answered per second",
    ),
    (
        "request.P",
        "latency_us.request.P",
        "squall serve: request latency (us), read to answer acknowledged",
    ),
];

#[derive(Clone, Debug, PartialEq)]
enum Expr {
    Num(f64),
    Name(String),
    Neg(Box<Expr>),
    Bin(char, Box<Expr>, Box<Expr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Cmp::Eq => a == b,
            Cmp::Ne => a != b,
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
        }
    }
}

/// A parsed `--assert` expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Assertion {
    pub text: String,
    left: Expr,
    cmp: Cmp,
    right: Expr,
}

/// The outcome of one assertion on a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub text: String,
    pub ok: bool,
    pub left: f64,
    pub right: f64,
    /// `ok` or why not, with the values read.
    pub message: String,
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    text: &'a str,
    /// Parentheses and signs open (bounded: no deep recursion on odd input).
    depth: usize,
    /// Binary operators read so far (each makes the tree one level deeper).
    ops: usize,
}

/// Most nested parentheses and unary signs.
const MAX_DEPTH: usize = 32;
/// Most binary operators in one expression: evaluating and dropping its tree recurse
/// once per operator (a chain of 500,000 `+` would overflow the stack).
const MAX_OPS: usize = 256;

fn unit_factor(u: &str) -> Option<f64> {
    Some(match u {
        "" => 1.0,
        "ns" => 1e-3,
        "us" | "µs" | "μs" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "K" | "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "bps" => 1e-9,
        "Kbps" | "kbps" => 1e-6,
        "Mbps" => 1e-3,
        "Gbps" => 1.0,
        "%" => 0.01,
        _ => return None,
    })
}

fn is_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'.'
}

impl<'a> Parser<'a> {
    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!(
            "--assert '{}': {what} at column {} (form: FIGURE OP VALUE, OP one of == != < <= > >=, e.g. 'ttfb.p99 < 2ms', 'cps >= 0.95 * target', 'errors == 0')",
            self.text,
            self.i + 1
        ))
    }
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }
    fn sum(&mut self) -> Result<Expr, String> {
        let mut e = self.term()?;
        while let Some(c @ (b'+' | b'-')) = self.peek() {
            self.op()?;
            e = Expr::Bin(c as char, Box::new(e), Box::new(self.term()?));
        }
        Ok(e)
    }
    fn term(&mut self) -> Result<Expr, String> {
        let mut e = self.factor()?;
        while let Some(c @ (b'*' | b'/')) = self.peek() {
            self.op()?;
            e = Expr::Bin(c as char, Box::new(e), Box::new(self.factor()?));
        }
        Ok(e)
    }
    /// Takes a binary operator (at most MAX_OPS in all).
    fn op(&mut self) -> Result<(), String> {
        self.ops += 1;
        if self.ops > MAX_OPS {
            return self.err("too many operators (at most 256)");
        }
        self.i += 1;
        Ok(())
    }
    fn factor(&mut self) -> Result<Expr, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err("too many nested parentheses or signs");
        }
        let e = self.factor_inner();
        self.depth -= 1;
        e
    }
    fn factor_inner(&mut self) -> Result<Expr, String> {
        match self.peek() {
            None => self.err("a value is missing"),
            Some(b'-') => {
                self.i += 1;
                Ok(Expr::Neg(Box::new(self.factor()?)))
            }
            Some(b'(') => {
                self.i += 1;
                let e = self.sum()?;
                if self.peek() != Some(b')') {
                    return self.err("')' expected");
                }
                self.i += 1;
                Ok(e)
            }
            Some(c) if c.is_ascii_digit() || c == b'.' => {
                let start = self.i;
                while self.i < self.s.len()
                    && (self.s[self.i].is_ascii_digit()
                        || self.s[self.i] == b'.'
                        || self.s[self.i] == b'_')
                {
                    self.i += 1;
                }
                let num: String = self.text[start..self.i].replace('_', "");
                let Ok(v) = num.parse::<f64>() else {
                    self.i = start;
                    return self.err(&format!("'{num}' is not a number"));
                };
                let us = self.i;
                for c in self.text[us..].chars() {
                    if !(c.is_alphabetic() || c == '%') {
                        break;
                    }
                    self.i += c.len_utf8();
                }
                let unit = &self.text[us..self.i];
                match unit_factor(unit) {
                    Some(f) => Ok(Expr::Num(v * f)),
                    None => {
                        self.i = us;
                        self.err(&format!(
                            "unknown unit '{unit}' (units: ns us ms s; bps Kbps Mbps Gbps; K M G; %)"
                        ))
                    }
                }
            }
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let start = self.i;
                while self.i < self.s.len() && is_name_char(self.s[self.i]) {
                    self.i += 1;
                }
                Ok(Expr::Name(self.text[start..self.i].to_string()))
            }
            Some(_) => {
                let c = self.text[self.i..].chars().next().unwrap_or(' ');
                self.err(&format!("unexpected '{c}'"))
            }
        }
    }
    fn cmp(&mut self) -> Result<Cmp, String> {
        self.ws();
        let rest = &self.text[self.i..];
        for (op, c) in [
            ("==", Cmp::Eq),
            ("!=", Cmp::Ne),
            ("<=", Cmp::Le),
            (">=", Cmp::Ge),
            ("<", Cmp::Lt),
            (">", Cmp::Gt),
        ] {
            if rest.starts_with(op) {
                self.i += op.len();
                return Ok(c);
            }
        }
        if rest.starts_with('=') {
            return self.err("'=' is not a comparison (use '==')");
        }
        self.err("a comparison (== != < <= > >=) expected")
    }
}

impl Assertion {
    /// Parses `text`; the error says what is wrong and where.
    pub fn parse(text: &str) -> Result<Assertion, String> {
        let mut p = Parser {
            s: text.as_bytes(),
            i: 0,
            text,
            depth: 0,
            ops: 0,
        };
        let left = p.sum()?;
        let cmp = p.cmp()?;
        let right = p.sum()?;
        if p.peek().is_some() {
            return p.err("unexpected text after the expression");
        }
        Ok(Assertion {
            text: text.to_string(),
            left,
            cmp,
            right,
        })
    }

    /// Every name the assertion reads.
    pub fn names(&self) -> Vec<&str> {
        fn walk<'e>(e: &'e Expr, out: &mut Vec<&'e str>) {
            match e {
                Expr::Num(_) => {}
                Expr::Name(n) => out.push(n),
                Expr::Neg(a) => walk(a, out),
                Expr::Bin(_, a, b) => {
                    walk(a, out);
                    walk(b, out);
                }
            }
        }
        let mut v = Vec::new();
        walk(&self.left, &mut v);
        walk(&self.right, &mut v);
        v
    }

    /// Checks that every name can be read from `doc` (a results document of the run's
    /// shape); the error names the figure and what to write instead.
    pub fn check_names(&self, doc: &Value) -> Result<(), String> {
        for n in self.names() {
            let checked = match find(doc, n) {
                // A figure with nothing measured yet (a latency's percentiles) is named
                // right: only the run decides whether it gets a value.
                Ok(Value::Null) => Ok(()),
                Ok(v) => number(v, n).map(|_| ()),
                Err(e) => Err(e),
            };
            checked.map_err(|e| format!("--assert '{}': {e}", self.text))?;
        }
        Ok(())
    }

    /// Evaluates the assertion on a results document.
    pub fn eval(&self, doc: &Value) -> Result<Outcome, String> {
        // A figure the run gave no value (a latency with nothing measured) fails the
        // assertion: it is the run's outcome, not a mistake in the expression.
        if let Some(n) = self
            .names()
            .into_iter()
            .find(|n| matches!(find(doc, n), Ok(Value::Null)))
        {
            return Ok(Outcome {
                text: self.text.clone(),
                ok: false,
                left: f64::NAN,
                right: f64::NAN,
                message: format!(
                    "FAILED: {}: '{n}' has no value in this run (nothing measured)",
                    self.text
                ),
            });
        }
        let l = eval(&self.left, doc).map_err(|e| format!("--assert '{}': {e}", self.text))?;
        let r = eval(&self.right, doc).map_err(|e| format!("--assert '{}': {e}", self.text))?;
        let ok = self.cmp.holds(l, r);
        let vals: Vec<String> = self
            .names()
            .iter()
            .filter_map(|n| lookup(doc, n).ok().map(|v| format!("{n} = {}", fmt(v))))
            .collect();
        let message = if ok {
            format!("ok: {} ({})", self.text, vals.join(", "))
        } else {
            format!(
                "FAILED: {}: left {}, right {} ({})",
                self.text,
                fmt(l),
                fmt(r),
                if vals.is_empty() {
                    "constants".to_string()
                } else {
                    vals.join(", ")
                }
            )
        };
        Ok(Outcome {
            text: self.text.clone(),
            ok,
            left: l,
            right: r,
            message,
        })
    }
}

fn fmt(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.4}")
    }
}

fn eval(e: &Expr, doc: &Value) -> Result<f64, String> {
    Ok(match e {
        Expr::Num(v) => *v,
        Expr::Name(n) => lookup(doc, n)?,
        Expr::Neg(a) => -eval(a, doc)?,
        Expr::Bin(op, a, b) => {
            let (x, y) = (eval(a, doc)?, eval(b, doc)?);
            match op {
                '+' => x + y,
                '-' => x - y,
                '*' => x * y,
                _ => {
                    if y == 0.0 {
                        return Err("division by zero".into());
                    }
                    x / y
                }
            }
        }
    })
}

/// The path an alias reads in `doc` (the window's figures when the document has one).
fn resolve(doc: &Value, name: &str) -> String {
    let win = doc.get("window").is_some_and(|w| !w.is_null());
    let (head, rest) = match name.split_once('.') {
        Some((h, r)) => (h, Some(r)),
        None => (name, None),
    };
    let lat = match head {
        "connect" => Some("connect"),
        "ttfb" | "first_byte" => Some("first_byte"),
        "ttlb" | "last_byte" => Some("last_byte"),
        "request" => Some("request"),
        _ => None,
    };
    if let (Some(l), Some(p)) = (lat, rest) {
        return if win {
            format!("window.latency_us.{l}.{p}")
        } else {
            format!("latency_us.{l}.{p}")
        };
    }
    if rest.is_some() {
        return name.to_string();
    }
    match name {
        "cps" | "wire_gbps" | "mpps" if win => format!("window.{name}"),
        "cps" | "wire_gbps" | "mpps" | "l7_gbps" | "rps" => format!("rates.{name}"),
        "retransmits" if win => "window.retransmits".into(),
        "target" => "target_cps".into(),
        "completed" | "started" => format!("client.flows.{name}"),
        "peak_active" => "client.peak_active".into(),
        _ => name.to_string(),
    }
}

/// Reads figure `name` (an alias or a dotted path; array elements by index or `name`).
pub fn lookup(doc: &Value, name: &str) -> Result<f64, String> {
    number(find(doc, name)?, name)
}

/// The value at figure `name` (see [`lookup`]): a missing name is an error.
fn find<'d>(doc: &'d Value, name: &str) -> Result<&'d Value, String> {
    walk(doc, &resolve(doc, name)).map_err(|(part, v)| {
        let hint = match v {
            Value::Object(m) => {
                let keys: Vec<&str> = m.keys().map(String::as_str).take(24).collect();
                format!("; at this point: {}", keys.join(", "))
            }
            _ => String::new(),
        };
        format!(
            "unknown figure '{name}' (no '{part}' in the results{hint}; short names: {})",
            ALIASES.iter().map(|a| a.0).collect::<Vec<_>>().join(", ")
        )
    })
}

/// Walks a dotted path through a results document: object keys, and list elements by
/// their exact `name` first (a name may hold dots, `api.v1`: the longest name that
/// matches the parts ahead is taken), else by index (so a group named `1` is that group,
/// not the list's second). `Err`: the first part not found and the value it was looked
/// for in.
pub fn walk<'d>(doc: &'d Value, path: &str) -> Result<&'d Value, (String, &'d Value)> {
    let parts: Vec<&str> = path.split('.').collect();
    let mut v = doc;
    let mut i = 0;
    while i < parts.len() {
        let next = match v {
            Value::Object(m) => m.get(parts[i]).map(|n| (n, 1)),
            Value::Array(a) => (1..=parts.len() - i)
                .rev()
                .find_map(|k| {
                    let name = parts[i..i + k].join(".");
                    a.iter()
                        .find(|e| e.get("name").and_then(Value::as_str) == Some(name.as_str()))
                        .map(|e| (e, k))
                })
                .or_else(|| {
                    let x = parts[i].parse::<usize>().ok()?;
                    a.get(x).map(|e| (e, 1))
                }),
            _ => None,
        };
        match next {
            Some((n, k)) => {
                v = n;
                i += k;
            }
            None => return Err((parts[i].to_string(), v)),
        }
    }
    Ok(v)
}

/// Figure `name`'s value `v` as a number (a boolean as 0 or 1).
fn number(v: &Value, name: &str) -> Result<f64, String> {
    match v {
        Value::Number(n) => n
            .as_f64()
            .ok_or_else(|| format!("'{name}' is not a number")),
        Value::Bool(b) => Ok(f64::from(u8::from(*b))),
        Value::Null => Err(format!(
            "'{name}' has no value in this run (e.g. no latency measured in the window)"
        )),
        _ => Err(format!(
            "'{name}' is not a number but an object or list: name one of its fields"
        )),
    }
}

/// A results document of the run's shape (every figure zero) to check the names of
/// assertions against before the run starts. `window`: with a measurement window.
pub fn skeleton(p: &squall_astf::Profile, info: &crate::report::RunInfo, window: bool) -> Value {
    let n = p.tg_names.len();
    let mut r = crate::run::RunResult::default();
    r.client.app = crate::stats::SideStats::new(n);
    r.server.app = crate::stats::SideStats::new(n);
    let mut d = crate::report::to_json(p, info, &r, &[]);
    if window {
        let s = crate::series::Sample {
            latency: Some(Default::default()),
            retransmits: Some(0),
            groups: (0..n.max(1))
                .map(|g| crate::series::GroupSample {
                    name: crate::series::group_name(&p.tg_names, g),
                    first_byte: Some(Default::default()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        d["window"] = crate::series::window_json(&s, 0.0, 0.0);
    }
    d
}

/// Evaluates every assertion; the outcomes in order.
pub fn check_all(asserts: &[Assertion], doc: &Value) -> Result<Vec<Outcome>, String> {
    asserts.iter().map(|a| a.eval(doc)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_long_chain_of_operators_is_refused_not_a_stack_overflow() {
        let chain = |n: usize| format!("{} == 1", vec!["1"; n + 1].join("+"));
        assert!(Assertion::parse(&chain(MAX_OPS - 1)).is_ok());
        let e = Assertion::parse(&chain(500_000)).unwrap_err();
        assert!(
            e.contains("too many operators"),
            "{}",
            &e[..200.min(e.len())]
        );
        let e = Assertion::parse(&format!("cps > {}", vec!["2"; 300].join("*"))).unwrap_err();
        assert!(e.contains("too many operators"));
    }

    #[test]
    fn groups_are_found_by_their_exact_name_before_an_index() {
        let doc = json!({"groups": [
            {"name": "", "n": 0},
            {"name": "api.v1", "n": 1},
            {"name": "1", "n": 2},
            {"name": "api", "n": 3, "sub": {"v1": 9}}
        ]});
        let n = |p: &str| walk(&doc, p).ok().and_then(|v| v.as_i64());
        // A name holding dots is one group (the longest name that matches).
        assert_eq!(n("groups.api.v1.n"), Some(1));
        assert_eq!(n("groups.api.n"), Some(3));
        assert_eq!(n("groups.api.sub.v1"), Some(9));
        // A group named "1" is that group, not the list's second element.
        assert_eq!(n("groups.1.n"), Some(2));
        // An index still reaches an element no name matches.
        assert_eq!(n("groups.0.n"), Some(0));
        assert_eq!(n("groups.3.n"), Some(3));
        let (part, _) = walk(&doc, "groups.nope.n").unwrap_err();
        assert_eq!(part, "nope");
    }

    fn doc() -> Value {
        json!({
            "errors": 0,
            "target_cps": 1000.0,
            "rates": {"cps": 980.0, "wire_gbps": 4.2, "mpps": 0.5, "l7_gbps": 3.0},
            "latency_us": {"first_byte": {"p99": 1500, "count": 10}, "connect": {"p99": null}},
            "groups": [{"name": "http", "latency_us": {"first_byte": {"p50": 7}}}],
            "client": {"flows": {"completed": 100}, "tcp": {"tcps_rexmttimeo": 3}},
        })
    }

    fn ok(e: &str, d: &Value) -> bool {
        Assertion::parse(e).unwrap().eval(d).unwrap().ok
    }

    #[test]
    fn units_aliases_and_paths() {
        let d = doc();
        assert!(ok("errors == 0", &d));
        assert!(!ok("errors != 0", &d));
        assert!(ok("ttfb.p99 < 2ms", &d));
        assert!(!ok("ttfb.p99 < 1.5ms", &d));
        assert!(ok("ttfb.p99 <= 1500us", &d));
        assert!(ok("cps >= 0.95 * target", &d));
        assert!(!ok("cps >= 0.99 * target", &d));
        assert!(ok("wire_gbps > 4000Mbps", &d));
        assert!(ok("mpps * 1M == 500K", &d));
        assert!(ok("groups.http.latency_us.first_byte.p50 == 7", &d));
        assert!(ok("groups.0.latency_us.first_byte.p50 == 7", &d));
        assert!(ok("client.tcp.tcps_rexmttimeo <= 3", &d));
        assert!(ok("completed / (1 + 1) == 50", &d));
        assert!(ok("-errors >= -(1)", &d));
        assert!(ok("cps > 90%  * target", &d));
        assert!(ok("ttfb.p99 == 1500µs", &d));
        let deep = format!("{}1{} > 0", "(".repeat(10_000), ")".repeat(10_000));
        assert!(Assertion::parse(&deep)
            .unwrap_err()
            .contains("too many nested"));
    }

    #[test]
    fn a_window_changes_what_aliases_read() {
        let mut d = doc();
        d["window"] = json!({"cps": 1000.0, "latency_us": {"first_byte": {"p99": 900}}});
        assert!(ok("cps == target", &d));
        assert!(ok("ttfb.p99 < 1ms", &d));
        assert!(ok("rates.cps == 980", &d), "explicit paths are kept");
    }

    #[test]
    fn failures_say_what_was_read() {
        let o = Assertion::parse("ttfb.p99 < 1ms")
            .unwrap()
            .eval(&doc())
            .unwrap();
        assert!(!o.ok);
        assert_eq!((o.left, o.right), (1500.0, 1000.0));
        assert!(
            o.message.contains("FAILED") && o.message.contains("ttfb.p99 = 1500"),
            "{}",
            o.message
        );
    }

    #[test]
    fn bad_expressions_and_names_give_clear_errors() {
        for (e, want) in [
            ("cps", "comparison"),
            ("cps = 5", "use '=='"),
            ("cps > 5 parsecs", "unexpected text"),
            ("cps > 5xs", "unknown unit 'xs'"),
            ("cps > (5", "')' expected"),
            ("> 5", "unexpected '>'"),
            ("cps >", "missing"),
            ("1.2.3 > 1", "not a number"),
            ("µ > 1", "unexpected 'µ'"),
            ("cps > 5µm", "unknown unit 'µm'"),
        ] {
            let err = Assertion::parse(e).unwrap_err();
            assert!(err.contains(want), "{e}: {err}");
            assert!(err.contains("e.g."), "{err}");
        }
        let a = Assertion::parse("cpss > 1").unwrap();
        let err = a.check_names(&doc()).unwrap_err();
        assert!(
            err.contains("unknown figure 'cpss'") && err.contains("short names"),
            "{err}"
        );
        // A figure with no value in the run fails the assertion (not an error).
        let o = Assertion::parse("connect.p99 < 1")
            .unwrap()
            .eval(&doc())
            .unwrap();
        assert!(!o.ok && o.message.contains("no value"), "{}", o.message);
        let err = Assertion::parse("rates > 1")
            .unwrap()
            .eval(&doc())
            .unwrap_err();
        assert!(err.contains("object"), "{err}");
        let err = Assertion::parse("cps / errors > 1")
            .unwrap()
            .eval(&doc())
            .unwrap_err();
        assert!(err.contains("division by zero"), "{err}");
    }
}
