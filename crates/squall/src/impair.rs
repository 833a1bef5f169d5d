//! Parser of `--impair key=value,...` into the mem wire's [`Impairment`] (both
//! directions get the same settings, each with its own seed).

use squall_port::mem::Impairment;

/// Parses e.g. `loss=0.01,delay_us=50,jitter_us=10,dup=0.001,reorder=0.01,corrupt=0.001`.
pub fn parse_impair(s: &str) -> Result<Impairment, String> {
    let mut imp = Impairment::default();
    let mut seen: Vec<&str> = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("impairment `{part}`: expected key=value"))?;
        let key = if k == "duplicate" { "dup" } else { k };
        if seen.contains(&key) {
            return Err(format!("impairment `{k}` given twice"));
        }
        seen.push(key);
        let prob = |v: &str| -> Result<f64, String> {
            let x: f64 = v
                .parse()
                .map_err(|_| format!("impairment `{k}`: `{v}` is not a number"))?;
            if (0.0..=1.0).contains(&x) {
                Ok(x)
            } else {
                Err(format!(
                    "impairment `{k}`: {x} is not a probability in [0, 1]"
                ))
            }
        };
        let int = |v: &str| -> Result<u64, String> {
            v.parse()
                .map_err(|_| format!("impairment `{k}`: `{v}` is not a non-negative integer"))
        };
        match k {
            "loss" => imp.loss = prob(v)?,
            "dup" | "duplicate" => imp.duplicate = prob(v)?,
            "reorder" => imp.reorder = prob(v)?,
            "corrupt" => imp.corrupt = prob(v)?,
            "delay_us" => imp.delay_ns = int(v)?.saturating_mul(1000),
            "jitter_us" => imp.jitter_ns = int(v)?.saturating_mul(1000),
            "rate_mbps" => imp.rate_bps = int(v)?.saturating_mul(1_000_000),
            _ => {
                return Err(format!(
                    "unknown impairment `{k}` (known: loss, dup, reorder, corrupt, delay_us, jitter_us, rate_mbps)"
                ))
            }
        }
    }
    Ok(imp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let i = parse_impair("loss=0.01, delay_us=50,dup=0.5").unwrap();
        assert_eq!(i.loss, 0.01);
        assert_eq!(i.delay_ns, 50_000);
        assert_eq!(i.duplicate, 0.5);
        assert!(i.is_active());
        assert!(parse_impair("loss=2").is_err());
        assert!(parse_impair("foo=1").is_err());
        assert!(parse_impair("loss").is_err());
        assert!(parse_impair("delay_us=-1").is_err());
        assert!(!parse_impair("").unwrap().is_active());
        assert!(parse_impair("loss=0.5,loss=0.1")
            .unwrap_err()
            .contains("twice"));
        assert!(parse_impair("dup=0.5,duplicate=0.1")
            .unwrap_err()
            .contains("twice"));
    }
}
