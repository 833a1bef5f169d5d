//! The checked-in JSON Schema and the Rust loader agree: the same instruction names, the
//! same tunables with the same defaults and ranges; and the loader never panics on mangled
//! input (random mutations of the shipped examples).

use serde_json::{json, Value};
use squall_astf::*;

fn read(rel: &str) -> Value {
    let path = format!("{}/../../{rel}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn w1() -> Value {
    read("examples/w1-astf-http.json")
}

#[test]
fn schema_lists_the_loaders_instructions() {
    let schema = read("schema/profile-v1.schema.json");
    let ops: Vec<String> = schema["$defs"]["command"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["properties"]["op"]["const"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ops.len(), 20);
    // Every schema instruction is known to the loader (an unknown one would be reported
    // as "unknown instruction"; a command alone may also be valid).
    for op in &ops {
        let mut v = w1();
        v["programs"][0]["commands"] = json!([{"op": op}]);
        if let Err(errs) = load_profile_value(v) {
            assert!(
                !errs.to_string().contains("unknown instruction"),
                "{op}: {errs}"
            );
        }
    }
    let mut v = w1();
    v["programs"][0]["commands"] = json!([{"op": "bogus"}]);
    assert!(load_profile_value(v)
        .unwrap_err()
        .to_string()
        .contains("unknown instruction"));
}

#[test]
fn schema_tunables_match_loader_defaults_and_ranges() {
    let schema = read("schema/profile-v1.schema.json");
    let d = SideTunables::default();
    let s = SchedulerTunables::default();
    let sections = [
        ("tcp", "tcp_tunables"),
        ("ip", "ip_tunables"),
        ("scheduler", "scheduler"),
    ];
    let mut n = 0;
    for (sec, def) in sections {
        for (name, spec) in schema["$defs"][def]["properties"].as_object().unwrap() {
            n += 1;
            // The default from the schema, set explicitly, gives the built-in default.
            let default = spec["default"].clone();
            assert!(
                !default.is_null(),
                "{sec}.{name} has no default in the schema"
            );
            let mut v = w1();
            v["global"] = json!({ sec: { name: default } });
            let p = load_profile_value(v).unwrap_or_else(|e| panic!("{sec}.{name}: {e}"));
            assert_eq!(p.templates[0].client, d, "{sec}.{name}");
            assert_eq!(p.scheduler, s, "{sec}.{name}");
            // Bounds: the schema's maximum + 1 is refused by the loader.
            if let Some(max) = spec["maximum"].as_u64() {
                if max < u64::MAX {
                    let mut v = w1();
                    v["global"] = json!({ sec: { name: max + 1 } });
                    let e = load_profile_value(v).unwrap_err();
                    assert!(
                        e.errors()
                            .iter()
                            .any(|e| e.path == format!("global.{sec}.{name}")),
                        "{sec}.{name}: {e}"
                    );
                }
            }
            if let Some(min) = spec["minimum"].as_u64().filter(|&m| m > 0) {
                let mut v = w1();
                v["global"] = json!({ sec: { name: min - 1 } });
                let e = load_profile_value(v).unwrap_err();
                assert!(
                    e.errors()
                        .iter()
                        .any(|e| e.path == format!("global.{sec}.{name}")),
                    "{sec}.{name}: {e}"
                );
            }
        }
    }
    assert_eq!(n, 24);
}

#[test]
fn total_buffer_size_is_capped() {
    let mut v = w1();
    let big: Vec<Value> = (0..17)
        .map(|i| json!({"name": format!("big{i}"), "size": 64 << 20}))
        .collect();
    v["buffers"].as_array_mut().unwrap().extend(big);
    let e = load_profile_value(v).unwrap_err();
    assert!(
        e.errors()
            .iter()
            .any(|e| e.path == "buffers" && e.message.contains("in all")),
        "{e}"
    );
}

/// Small deterministic generator for the mutation test.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

fn random_value(r: &mut Lcg) -> Value {
    match r.next() % 12 {
        0 => Value::Null,
        1 => json!(true),
        2 => json!(-1),
        3 => json!(0),
        4 => json!(u64::MAX),
        5 => json!(1.5e300),
        6 => json!(""),
        7 => json!("x"),
        8 => json!([]),
        9 => json!({}),
        10 => json!({"op": "jmp_nz", "id": 0, "offset": -100000}),
        _ => json!(["255.255.255.255", "0.0.0.0"]),
    }
}

/// Replaces a random node of `v` with a random value (or removes an object member).
fn mutate(v: &mut Value, r: &mut Lcg) {
    let stop = r.next() & 3 == 0;
    match v {
        Value::Object(m) if !m.is_empty() && !stop => {
            let k = m.keys().nth((r.next() as usize) % m.len()).unwrap().clone();
            if r.next() & 7 == 0 {
                m.remove(&k);
            } else {
                mutate(m.get_mut(&k).unwrap(), r);
            }
        }
        Value::Array(a) if !a.is_empty() && !stop => {
            let i = (r.next() as usize) % a.len();
            mutate(&mut a[i], r);
        }
        _ => *v = random_value(r),
    }
}

#[test]
fn mangled_profiles_never_panic() {
    let dir = format!("{}/../../examples", env!("CARGO_MANIFEST_DIR"));
    let mut seeds: Vec<Value> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().and_then(|x| x.to_str()) == Some("json"))
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect();
    seeds.sort_by_key(|v| v.to_string());
    let mut r = Lcg(12345);
    let (mut ok, mut bad) = (0, 0);
    for i in 0..3000 {
        let mut v = seeds[i % seeds.len()].clone();
        for _ in 0..1 + r.next() % 3 {
            mutate(&mut v, &mut r);
        }
        match load_profile_value(v) {
            Ok(_) => ok += 1,
            Err(e) => {
                assert!(!e.errors().is_empty());
                assert!(e
                    .errors()
                    .iter()
                    .all(|e| !e.path.is_empty() && !e.message.is_empty()));
                bad += 1;
            }
        }
    }
    assert!(bad > 1000 && ok > 10, "ok {ok} bad {bad}");
}

#[test]
fn truncated_text_never_panics() {
    let text = std::fs::read_to_string(format!(
        "{}/../../examples/http-dns-mix.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    for cut in (0..text.len()).step_by(7) {
        if text.is_char_boundary(cut) {
            assert!(load_profile_str(&text[..cut]).is_err());
        }
    }
}
