//! Fails when `deploy/crds/*.yaml` or the Helm chart's `charts/kuryr-rs/crds/*.yaml` differ from
//! what the Rust types generate.

use std::path::PathBuf;

#[test]
fn deploy_and_chart_crds_are_up_to_date() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut stale = Vec::new();
    for sub in ["deploy/crds", "charts/kuryr-rs/crds"] {
        for (file, yaml) in kuryr_types::crds::render_all().expect("render CRDs") {
            let path = repo.join(sub).join(file);
            match std::fs::read_to_string(&path) {
                Ok(on_disk) if on_disk == yaml => {}
                Ok(_) => stale.push(format!("{sub}/{file} is out of date")),
                Err(e) => stale.push(format!("{sub}/{file} cannot be read ({e})")),
            }
        }
    }
    assert!(
        stale.is_empty(),
        "{}: run `cargo run -p kuryr-types --bin kuryr-crdgen -- --write`",
        stale.join("; ")
    );
}
