//! The fake's trunks, as Neutron's trunk plugin keeps them: a parent port carries at most one
//! trunk and shows it in `trunk_details`; a port is the subport of at most one trunk; VLAN IDs
//! are unique per trunk; `add_subports` is all or nothing; neither a trunk's parent nor a
//! subport's port can be deleted (error kinds as the sandbox's Neutron answers them).

use super::*;
use crate::trunk::{SubPort, Trunk, TrunkCreate};

fn conflict(op: &'static str, kind: &str, message: String) -> Error {
    Error::Conflict {
        op,
        kind: kind.into(),
        message,
    }
}

/// Copies the trunk into its parent port's `trunk_details`, as Neutron shows it.
fn sync_parent(st: &mut State, trunk: &Trunk) {
    let subs: Vec<Value> = trunk
        .sub_ports
        .iter()
        .map(|s| {
            let mac = st
                .ports
                .get(&s.port_id)
                .map(|p| p.mac_address.clone())
                .unwrap_or_default();
            json!({"port_id": s.port_id, "segmentation_type": s.segmentation_type,
                   "segmentation_id": s.segmentation_id, "mac_address": mac})
        })
        .collect();
    if let Some(p) = st.ports.get_mut(&trunk.port_id) {
        p.extra.insert(
            "trunk_details".into(),
            json!({"trunk_id": trunk.id, "sub_ports": subs}),
        );
    }
}

fn check_subports(st: &State, op: &'static str, trunk: &Trunk, subs: &[SubPort]) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for s in subs {
        if !st.ports.contains_key(&s.port_id) {
            return Err(not_found(op, "PortNotFound", &s.port_id));
        }
        if s.port_id == trunk.port_id || st.trunks.values().any(|t| t.port_id == s.port_id) {
            return Err(conflict(
                op,
                "PortInUse",
                format!("port {} is a trunk's parent", s.port_id),
            ));
        }
        if st
            .trunks
            .values()
            .any(|t| t.sub_ports.iter().any(|x| x.port_id == s.port_id))
        {
            return Err(conflict(
                op,
                "PortInUse",
                format!("port {} is already a subport", s.port_id),
            ));
        }
        let taken = trunk
            .sub_ports
            .iter()
            .any(|x| x.segmentation_id == s.segmentation_id);
        if !(1..=4094).contains(&s.segmentation_id) || taken || !seen.insert(s.segmentation_id) {
            return Err(conflict(
                op,
                "DuplicateSubPort",
                format!(
                    "segmentation_id {} is not available on trunk {}",
                    s.segmentation_id, trunk.id
                ),
            ));
        }
    }
    Ok(())
}

pub(super) fn create(st: &mut State, req: &TrunkCreate) -> Result<Trunk> {
    let op = ops::TRUNK_CREATE;
    let parent = st
        .ports
        .get(&req.port_id)
        .cloned()
        .ok_or_else(|| not_found(op, "PortNotFound", &req.port_id))?;
    if st.trunks.values().any(|t| t.port_id == req.port_id) {
        return Err(conflict(
            op,
            "TrunkPortInUse",
            format!("port {} already has a trunk", req.port_id),
        ));
    }
    let mut trunk = Trunk {
        id: st.new_id(),
        name: req.name.clone().unwrap_or_default(),
        port_id: req.port_id.clone(),
        status: "DOWN".into(),
        project_id: req.project_id.clone().unwrap_or(parent.project_id),
        sub_ports: Vec::new(),
        tags: req.tags.clone(),
    };
    check_subports(st, op, &trunk, &req.sub_ports)?;
    trunk.sub_ports = req.sub_ports.clone();
    st.trunks.insert(trunk.id.clone(), trunk.clone());
    sync_parent(st, &trunk);
    Ok(trunk)
}

pub(super) fn get(st: &State, op: &'static str, id: &str) -> Result<Trunk> {
    st.trunks
        .get(id)
        .cloned()
        .ok_or_else(|| not_found(op, "TrunkNotFound", id))
}

pub(super) fn list(st: &State, f: &ResourceFilter) -> Vec<Trunk> {
    st.trunks
        .values()
        .filter(|t| f.ids.is_empty() || f.ids.contains(&t.id))
        .filter(|t| eq_opt(&f.name, &t.name) && eq_opt(&f.project_id, &t.project_id))
        .filter(|t| tags_match(&t.tags, &f.tags, &f.tags_any, &[]))
        .cloned()
        .collect()
}

pub(super) fn add(st: &mut State, id: &str, subs: &[SubPort]) -> Result<Trunk> {
    let op = ops::TRUNK_ADD_SUBPORTS;
    let trunk = get(st, op, id)?;
    check_subports(st, op, &trunk, subs)?;
    let t = st
        .trunks
        .get_mut(id)
        .ok_or_else(|| not_found(op, "TrunkNotFound", id))?;
    t.sub_ports.extend(subs.iter().cloned());
    let t = t.clone();
    // As ML2/OVN's trunk driver does: the port becomes a `trunk:subport`, bound as OVS.
    for s in subs {
        if let Some(p) = st.ports.get_mut(&s.port_id) {
            p.device_owner = "trunk:subport".into();
            p.binding_vif_type = "ovs".into();
        }
    }
    sync_parent(st, &t);
    Ok(t)
}

pub(super) fn remove(st: &mut State, id: &str, port_ids: &[String]) -> Result<Trunk> {
    let op = ops::TRUNK_REMOVE_SUBPORTS;
    let trunk = get(st, op, id)?;
    if let Some(p) = port_ids
        .iter()
        .find(|p| !trunk.sub_ports.iter().any(|s| &s.port_id == *p))
    {
        return Err(not_found(op, "SubPortNotFound", p));
    }
    let t = st
        .trunks
        .get_mut(id)
        .ok_or_else(|| not_found(op, "TrunkNotFound", id))?;
    t.sub_ports.retain(|s| !port_ids.contains(&s.port_id));
    let t = t.clone();
    // ML2/OVN's trunk driver clears the owner and unbinds.
    for id in port_ids {
        if let Some(p) = st.ports.get_mut(id) {
            p.device_owner.clear();
            p.binding_vif_type = "unbound".into();
        }
    }
    sync_parent(st, &t);
    Ok(t)
}

pub(super) fn delete(st: &mut State, id: &str) {
    if let Some(t) = st.trunks.remove(id)
        && let Some(p) = st.ports.get_mut(&t.port_id)
    {
        p.extra.remove("trunk_details");
    }
}

/// Neutron refuses to delete a trunk's parent port, or a port that is a subport.
pub(super) fn check_port_delete(st: &State, port_id: &str) -> Result<()> {
    if let Some(t) = st.trunks.values().find(|t| t.port_id == port_id) {
        return Err(conflict(
            ops::PORT_DELETE,
            "PortInUseAsTrunkParent",
            format!("Port {port_id} is currently a parent port for trunk {}.", t.id),
        ));
    }
    if let Some(t) = st
        .trunks
        .values()
        .find(|t| t.sub_ports.iter().any(|s| s.port_id == port_id))
    {
        return Err(conflict(
            ops::PORT_DELETE,
            "PortInUseAsSubPort",
            format!("Port {port_id} is currently a subport for trunk {}.", t.id),
        ));
    }
    Ok(())
}
