//! A commented sample `kuryr.conf` generated from the registry (what oslo-config-generator
//! produces upstream): every group and option with its help, type and default, all commented out.

use crate::registry::{OPTIONS, OptSource};
use std::fmt::Write;

/// Renders the sample. Secret options and options of other projects are included, like
/// upstream's generator does; unused upstream options say so in their help.
pub fn sample_config() -> String {
    let mut out = String::from(
        "# kuryr.conf sample generated from kuryr-config's option registry.\n\
         # Every option is shown with its default, commented out.\n",
    );
    let mut groups: Vec<&str> = Vec::new();
    for o in OPTIONS {
        if !groups.contains(&o.group) {
            groups.push(o.group);
        }
    }
    for g in groups {
        let _ = write!(out, "\n[{g}]\n");
        for o in OPTIONS.iter().filter(|o| o.group == g) {
            let from = match o.source {
                OptSource::KuryrKubernetes => "",
                OptSource::KuryrLib => " (kuryr-lib)",
                OptSource::Keystoneauth => " (keystoneauth)",
                OptSource::OsloLog => " (oslo.log)",
                OptSource::KuryrRs => " (kuryr-rs addition, not in upstream)",
            };
            let _ = write!(out, "\n# {}{from}\n# Type: {}\n", o.help, o.kind.expected());
            if !o.deprecated_names.is_empty() {
                let _ = writeln!(out, "# Deprecated names: {}", o.deprecated_names.join(", "));
            }
            if o.deprecated_for_removal {
                let _ = writeln!(out, "# DEPRECATED for removal.");
            }
            match o.default {
                Some(d) => {
                    let _ = writeln!(out, "#{} = {d}", o.name);
                }
                None => {
                    let _ = writeln!(out, "#{} = <None>", o.name);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_uncommented_defaults_parse_back_to_the_defaults() {
        let sample = sample_config();
        // Uncomment every option that has a default: the result must equal the defaults.
        let mut text = String::new();
        for line in sample.lines() {
            match line.strip_prefix('#') {
                Some(rest) if rest.contains(" = ") && !rest.ends_with("<None>") => {
                    text.push_str(rest);
                }
                _ => text.push_str(line),
            }
            text.push('\n');
        }
        let (c, w) =
            crate::from_strs(&[("sample.conf", &text)], crate::Role::Any, &|_| None).expect("sample parses");
        assert!(
            w.iter()
                .all(|w| w.kind == crate::WarningKind::DeprecatedOption && w.option == "pools_vif_drivers"),
            "{w:?}"
        );
        assert_eq!(c.groups, crate::Config::defaults().groups);
        assert!(sample.contains("[vif_pool]"));
        assert!(sample.contains("#ports_pool_min = 5"));
    }
}
