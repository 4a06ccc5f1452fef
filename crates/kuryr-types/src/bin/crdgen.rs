//! `kuryr-crdgen`: prints the four CRDs as YAML, or with `--write [DIR]` writes them to DIR
//! (default: the repository's `deploy/crds/` and the Helm chart's `charts/kuryr-rs/crds/`, found
//! from this crate's location).

use anyhow::Context;
use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let docs = kuryr_types::crds::render_all()?;
    match args.next().as_deref() {
        None => {
            for (i, (_, yaml)) in docs.iter().enumerate() {
                if i > 0 {
                    println!("---");
                }
                print!("{yaml}");
            }
        }
        Some("--write") => {
            let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
            let dirs = match args.next() {
                Some(d) => vec![PathBuf::from(d)],
                None => vec![repo.join("deploy/crds"), repo.join("charts/kuryr-rs/crds")],
            };
            for dir in dirs {
                std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
                for (file, yaml) in &docs {
                    let path = dir.join(file);
                    std::fs::write(&path, yaml).with_context(|| format!("writing {}", path.display()))?;
                    eprintln!("wrote {}", path.display());
                }
            }
        }
        Some(other) => {
            anyhow::bail!("unknown argument {other:?}; usage: kuryr-crdgen [--write [DIR]]")
        }
    }
    Ok(())
}
