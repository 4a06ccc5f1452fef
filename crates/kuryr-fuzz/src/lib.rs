//! Bounded, seeded fuzzing for the parsers that take input from outside (issue "Chaos suite",
//! bad-input part). Each target is a function over bytes; [`run`] feeds it the target's
//! committed seed corpus (`corpus/<target>/`), then inputs mutated from it — byte-level (flips,
//! interesting values, deletions, insertions, duplications, splices with another seed,
//! truncation) and, for JSON, structure-aware (a node replaced by a value of another type, a
//! key dropped or added, deep nesting, huge numbers, long strings) — and plain random bytes.
//! A panic is a finding: the input is written to `target/fuzz-findings/<target>-<n>.bin` and
//! the run fails naming the file and the seed that reproduces it.
//!
//! Why not cargo-fuzz: it needs a nightly compiler and libFuzzer's runtime, neither of which this
//! project's machines have (stable toolchain, no network but the package registries); the
//! mutation engine here is small, deterministic (`KURYR_FUZZ_SEED`), bounded
//! (`KURYR_FUZZ_CASES`, default [`DEFAULT_CASES`]) and runs as an ordinary test.

pub mod mutate;

use std::{
    panic::{AssertUnwindSafe, catch_unwind},
    path::PathBuf,
    time::{Duration, Instant},
};

/// Inputs per target when `KURYR_FUZZ_CASES` is not set.
pub const DEFAULT_CASES: usize = 3000;
/// Seed when `KURYR_FUZZ_SEED` is not set (a fixed one: CI runs are reproducible).
pub const DEFAULT_SEED: u64 = 0x6b75_7279_722d_7273;
/// A target stops early after this long (a slow machine still ends).
pub const TIME_BUDGET: Duration = Duration::from_secs(60);

/// The seeds of `target`: every file under `corpus/<target>/`, sorted by name.
pub fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    files.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Inputs tried.
    pub cases: usize,
    /// Of which the target accepted (returned `true`).
    pub accepted: usize,
    /// Seed used.
    pub seed: u64,
}

fn env_number(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

/// Runs `target` (named `name`) over its corpus (plus `extra_seeds`) and mutations of it;
/// `target` returns whether it accepted the input (for the report). Panics — failing the test
/// — on the first input that made `target` panic, after saving it.
pub fn run(name: &str, extra_seeds: Vec<Vec<u8>>, target: impl Fn(&[u8]) -> bool) -> Report {
    let seed = env_number("KURYR_FUZZ_SEED").unwrap_or(DEFAULT_SEED);
    let cases = env_number("KURYR_FUZZ_CASES")
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(DEFAULT_CASES);
    let mut seeds = corpus(name);
    seeds.extend(extra_seeds);
    assert!(
        !seeds.is_empty(),
        "fuzz target {name}: no seed corpus in corpus/{name}/"
    );
    let mut rng = fastrand::Rng::with_seed(seed);
    let started = Instant::now();
    let mut report = Report {
        cases: 0,
        accepted: 0,
        seed,
    };
    // A panic's default message would flood the output for every case: silenced while running.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut finding = None;
    for i in 0..cases.max(seeds.len()) {
        if started.elapsed() > TIME_BUDGET {
            break;
        }
        let input = match seeds.get(i) {
            Some(s) => s.clone(),
            None => mutate::input(&mut rng, &seeds),
        };
        report.cases += 1;
        match catch_unwind(AssertUnwindSafe(|| target(&input))) {
            Ok(true) => report.accepted += 1,
            Ok(false) => {}
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                finding = Some((i, input, msg));
                break;
            }
        }
    }
    std::panic::set_hook(hook);
    if let Some((i, input, msg)) = finding {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/fuzz-findings");
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join(format!("{name}-{i}.bin"));
        let _ = std::fs::write(&path, &input);
        panic!(
            "fuzz target {name} panicked on case {i} (KURYR_FUZZ_SEED={seed:#x}): {msg}\ninput saved to {} ({} bytes): {:?}",
            path.display(),
            input.len(),
            String::from_utf8_lossy(&input[..input.len().min(400)])
        );
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_target_is_reported_with_its_input() {
        let r = catch_unwind(|| {
            run("cni_stdin", vec![], |b| {
                assert!(!b.contains(&b'\x07'), "bell");
                true
            })
        });
        let msg = r
            .err()
            .and_then(|p| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        assert!(
            msg.contains("fuzz target cni_stdin panicked") && msg.contains("bell"),
            "{msg}"
        );
    }

    #[test]
    fn runs_are_reproducible() {
        let collect = || {
            let seen = std::cell::RefCell::new(Vec::new());
            run("vif", vec![], |b| {
                seen.borrow_mut().push(b.len());
                true
            });
            seen.into_inner()
        };
        assert_eq!(collect(), collect());
    }
}
