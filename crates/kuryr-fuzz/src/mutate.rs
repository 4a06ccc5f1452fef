//! Input generation: a seed mutated at the byte level or, when it is JSON, in its structure;
//! sometimes plain random bytes.

use serde_json::{Map, Value};

/// Bytes that break parsers more often than random ones do.
const INTERESTING: &[u8] = b"\0\xff\x7f\x80\"\\{}[]:,=;\n\r\t %.-0123456789eE/";

/// Values a JSON node may be replaced with.
fn odd_value(rng: &mut fastrand::Rng) -> Value {
    match rng.u8(0..12) {
        0 => Value::Null,
        1 => Value::Bool(rng.bool()),
        2 => Value::from(rng.i64(..)),
        3 => Value::from(u64::MAX),
        4 => serde_json::Number::from_f64(rng.f64() * 1e300).map_or(Value::Null, Value::Number),
        5 => Value::from(-1),
        6 => Value::String(String::new()),
        7 => Value::String("x".repeat(rng.usize(1..70_000))),
        8 => Value::String("\u{0}\u{202e}é\u{10ffff}../../etc/passwd".into()),
        9 => Value::Array(vec![Value::Null; rng.usize(0..4)]),
        10 => Value::Object(Map::new()),
        _ => {
            // Deep nesting (parsers with recursion limits must refuse, not overflow).
            let mut v = Value::Null;
            for _ in 0..rng.usize(1..200) {
                v = Value::Array(vec![v]);
            }
            v
        }
    }
}

/// Mutates a random node of `v`, reached by walking down at random (depth: the value's own).
fn mutate_json(rng: &mut fastrand::Rng, v: &mut Value) {
    let descend = rng.u8(0..4) != 0;
    match v {
        Value::Object(m) if descend && !m.is_empty() => {
            let i = rng.usize(0..m.len());
            if let Some(k) = m.keys().nth(i).cloned() {
                if rng.u8(0..8) == 0 {
                    m.remove(&k);
                } else if let Some(child) = m.get_mut(&k) {
                    mutate_json(rng, child);
                }
            }
            return;
        }
        Value::Array(a) if descend && !a.is_empty() => {
            let i = rng.usize(0..a.len());
            if let Some(child) = a.get_mut(i) {
                mutate_json(rng, child);
            }
            return;
        }
        _ => {}
    }
    match v {
        Value::Object(m) if rng.bool() => {
            let key = [
                "versioned_object.data",
                "cniVersion",
                "CNI_COMMAND",
                "vlan_id",
                "ips",
                "",
            ][rng.usize(0..6)];
            m.insert(key.to_string(), odd_value(rng));
        }
        _ => *v = odd_value(rng),
    }
}

fn mutate_bytes(rng: &mut fastrand::Rng, b: &mut Vec<u8>, other: &[u8]) {
    for _ in 0..rng.usize(1..5) {
        let len = b.len();
        match rng.u8(0..8) {
            0 if len > 0 => {
                let i = rng.usize(0..len);
                b[i] ^= 1 << rng.u8(0..8);
            }
            1 if len > 0 => {
                let i = rng.usize(0..len);
                b[i] = INTERESTING[rng.usize(0..INTERESTING.len())];
            }
            2 if len > 0 => {
                let from = rng.usize(0..len);
                let to = (from + rng.usize(1..16)).min(len);
                b.drain(from..to);
            }
            3 => {
                let at = rng.usize(0..=len);
                let n = rng.usize(1..16);
                let ins: Vec<u8> = (0..n).map(|_| rng.u8(..)).collect();
                b.splice(at..at, ins);
            }
            4 if len > 0 => {
                let from = rng.usize(0..len);
                let to = (from + rng.usize(1..64)).min(len);
                let chunk = b[from..to].to_vec();
                let at = rng.usize(0..=b.len());
                b.splice(at..at, chunk);
            }
            5 if !other.is_empty() => {
                let cut = rng.usize(0..=len);
                let from = rng.usize(0..other.len());
                b.truncate(cut);
                b.extend_from_slice(&other[from..]);
            }
            6 if len > 0 => b.truncate(rng.usize(0..len)),
            _ => {
                let at = rng.usize(0..=len);
                let c = INTERESTING[rng.usize(0..INTERESTING.len())];
                b.insert(at, c);
            }
        }
    }
}

/// One input: a mutated seed (structure-aware for JSON seeds half of the time) or, rarely,
/// random bytes.
pub fn input(rng: &mut fastrand::Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    if rng.u8(0..20) == 0 || seeds.is_empty() {
        let n = rng.usize(0..512);
        return (0..n).map(|_| rng.u8(..)).collect();
    }
    let seed = &seeds[rng.usize(0..seeds.len())];
    let other = &seeds[rng.usize(0..seeds.len())];
    if rng.bool()
        && let Ok(mut v) = serde_json::from_slice::<Value>(seed)
    {
        for _ in 0..rng.usize(1..4) {
            mutate_json(rng, &mut v);
        }
        return serde_json::to_vec(&v).unwrap_or_default();
    }
    let mut b = seed.clone();
    mutate_bytes(rng, &mut b, other);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_differ_from_their_seeds_and_stay_bounded() {
        let seeds = vec![
            br#"{"a":[1,2,{"b":"c"}],"d":true}"#.to_vec(),
            b"key = value\n".to_vec(),
        ];
        let mut rng = fastrand::Rng::with_seed(7);
        let inputs: Vec<Vec<u8>> = (0..500).map(|_| input(&mut rng, &seeds)).collect();
        let changed = inputs.iter().filter(|i| !seeds.contains(i)).count();
        assert!(changed > 450, "{changed}");
        assert!(inputs.iter().all(|i| i.len() < 200_000));
    }
}
