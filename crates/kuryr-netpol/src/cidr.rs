//! `ipBlock` arithmetic: a CIDR minus its `except` list as the fewest CIDRs that cover exactly the
//! rest (Neutron rules take one prefix each). Upstream Kuryr subtracted each `except` from the
//! CIDR separately and kept the union of the results, so with two excepts each one's range was
//! allowed again by the other's remainder; here all excepts are taken out of one remainder.

use ipnet::IpNet;

/// `cidr` without every address in `excepts` (excepts outside `cidr`, or of the other family,
/// change nothing).
pub fn subtract(cidr: IpNet, excepts: &[IpNet]) -> Vec<IpNet> {
    let mut rest = vec![cidr.trunc()];
    for e in excepts {
        let e = e.trunc();
        rest = rest.into_iter().flat_map(|c| remove(c, e)).collect();
    }
    rest.sort();
    rest
}

/// `c` without `e`.
fn remove(c: IpNet, e: IpNet) -> Vec<IpNet> {
    if e.contains(&c) {
        return Vec::new();
    }
    if !c.contains(&e) {
        return vec![c];
    }
    // `c` strictly contains `e`: keep the half without `e`, split the half with it.
    let Ok(halves) = c.subnets(c.prefix_len() + 1) else {
        return vec![c];
    };
    halves.flat_map(|h| remove(h, e)).collect()
}

/// Whether `ip` lies in `cidr` minus `excepts` (the definition [`subtract`] is held to).
pub fn block_contains(cidr: IpNet, excepts: &[IpNet], ip: std::net::IpAddr) -> bool {
    cidr.contains(&ip) && !excepts.iter().any(|e| e.contains(&ip))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    fn net(s: &str) -> IpNet {
        s.parse().expect("test CIDR")
    }

    #[test]
    fn one_except_leaves_one_prefix_per_bit() {
        let got = subtract(net("10.0.0.0/16"), &[net("10.0.1.0/24")]);
        assert_eq!(got.len(), 8);
        assert!(
            !got.iter()
                .any(|n| n.contains(&"10.0.1.7".parse::<IpAddr>().expect("ip")))
        );
        assert!(
            got.iter()
                .any(|n| n.contains(&"10.0.2.7".parse::<IpAddr>().expect("ip")))
        );
    }

    #[test]
    fn several_excepts_are_all_taken_out() {
        let excepts = [net("10.0.1.0/24"), net("10.0.2.0/24"), net("192.168.0.0/16")];
        let got = subtract(net("10.0.0.0/16"), &excepts);
        for i in 0..=255u8 {
            for j in [0u8, 9, 200] {
                let ip: IpAddr = format!("10.0.{i}.{j}").parse().expect("ip");
                let covered = got.iter().filter(|n| n.contains(&ip)).count();
                let want = usize::from(block_contains(net("10.0.0.0/16"), &excepts, ip));
                assert_eq!(
                    covered, want,
                    "{ip}: the result must cover each address at most once"
                );
            }
        }
    }

    #[test]
    fn except_covering_everything_or_other_family() {
        assert!(subtract(net("10.0.0.0/24"), &[net("10.0.0.0/8")]).is_empty());
        assert_eq!(
            subtract(net("10.0.0.0/24"), &[net("fd00::/8")]),
            vec![net("10.0.0.0/24")]
        );
        assert_eq!(
            subtract(net("10.0.0.5/24"), &[]),
            vec![net("10.0.0.0/24")],
            "host bits dropped"
        );
    }
}
