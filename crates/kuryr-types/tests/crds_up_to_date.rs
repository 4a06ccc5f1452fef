//! Fails when `deploy/crds/*.yaml` differ from what the Rust types generate.

use std::path::PathBuf;

#[test]
fn deploy_crds_are_up_to_date() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds");
    let mut stale = Vec::new();
    for (file, yaml) in kuryr_types::crds::render_all().expect("render CRDs") {
        let path = dir.join(file);
        match std::fs::read_to_string(&path) {
            Ok(on_disk) if on_disk == yaml => {}
            Ok(_) => stale.push(format!("deploy/crds/{file} is out of date")),
            Err(e) => stale.push(format!("deploy/crds/{file} cannot be read ({e})")),
        }
    }
    assert!(
        stale.is_empty(),
        "{}: run `cargo run -p kuryr-types --bin kuryr-crdgen -- --write`",
        stale.join("; ")
    );
}
