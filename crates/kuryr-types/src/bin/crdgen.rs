//! `kuryr-crdgen`: prints the four CRDs as YAML, or with `--write [DIR]` writes them to
//! `deploy/crds/` (default: the repository's, found from this crate's location).

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
            let dir = args
                .next()
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds"));
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            for (file, yaml) in &docs {
                let path = dir.join(file);
                std::fs::write(&path, yaml).with_context(|| format!("writing {}", path.display()))?;
                eprintln!("wrote {}", path.display());
            }
        }
        Some(other) => {
            anyhow::bail!("unknown argument {other:?}; usage: kuryr-crdgen [--write [DIR]]")
        }
    }
    Ok(())
}
