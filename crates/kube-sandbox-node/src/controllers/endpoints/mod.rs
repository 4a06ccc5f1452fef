//! The endpoints controller: keeps `Endpoints` and `discovery.k8s.io/v1` EndpointSlices of every
//! Service with a selector in sync with the selected pods that have an IP. Services without a
//! selector are never touched. Writes happen only when something changed.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::Arc,
    time::Duration,
};

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, PostParams},
    runtime::watcher,
};
use tokio::sync::Notify;
use tracing::{info, warn};

use super::{AbortOnDrop, Error, spawn_reflector};

mod compute;

pub use compute::{
    PodEndpoint, SliceContent, desired_slices, desired_subsets, managed, pod_endpoints, slices_from,
    subsets_from,
};
use compute::{labels_for, owner, slice_port_key};

/// `endpointslice.kubernetes.io/managed-by` value of slices this controller owns.
pub const MANAGED_BY: &str = "endpointslice-controller.k8s.io";
/// Label naming a slice's service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// Endpoints carrying this annotation are leader-election records, never deleted.
const LEADER_ANNOTATION: &str = "control-plane.alpha.kubernetes.io/leader";
/// Label naming a slice's manager.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";

fn key(ns: Option<String>, name: String) -> (String, String) {
    (ns.unwrap_or_default(), name)
}

/// Runs the endpoints controller forever.
pub(crate) async fn run(client: Client, caches: super::Caches) -> Result<(), Error> {
    let notify = Arc::new(Notify::new());
    let (services, h1) = spawn_reflector(
        Api::<Service>::all(client.clone()),
        watcher::Config::default(),
        notify.clone(),
    );
    let pods = caches.pods.subscribe(&notify);
    let (endpoints, h3) = spawn_reflector(
        Api::<Endpoints>::all(client.clone()),
        watcher::Config::default(),
        notify.clone(),
    );
    let (slices, h4) = spawn_reflector(
        Api::<EndpointSlice>::all(client.clone()),
        watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}")),
        notify.clone(),
    );
    let _guard = AbortOnDrop(vec![h1, h3, h4]);
    services
        .wait_until_ready()
        .await
        .map_err(|_| Error::CacheSync("services"))?;
    endpoints
        .wait_until_ready()
        .await
        .map_err(|_| Error::CacheSync("endpoints"))?;
    slices
        .wait_until_ready()
        .await
        .map_err(|_| Error::CacheSync("endpointslices"))?;
    info!("endpoints controller running");
    // Services whose Endpoints we wrote: when such a service goes, its Endpoints go too.
    // Seeded with every existing Endpoints object, so that leftovers of services deleted while
    // the controller was down are removed too (except leader-election records, like upstream).
    let mut written: HashSet<(String, String)> = endpoints
        .state()
        .iter()
        .filter(|e| !e.annotations().contains_key(LEADER_ANNOTATION))
        .map(|e| key(e.namespace(), e.name_any()))
        .collect();
    // Slices we created or updated that the cache may not show yet.
    let mut recent: HashMap<(String, String), Arc<EndpointSlice>> = HashMap::new();
    loop {
        let pass_started = std::time::Instant::now();
        let all_pods = pods.state();
        let all_services = services.state();
        let mut failed = false;
        let mut live: HashSet<(String, String)> = HashSet::new();
        // Pods by namespace once per pass, so each service scans only its own namespace.
        let mut pods_by_ns: HashMap<Option<String>, Vec<Arc<Pod>>> = HashMap::new();
        for p in &all_pods {
            pods_by_ns.entry(p.namespace()).or_default().push(p.clone());
        }
        for svc in all_services.iter().filter(|s| managed(s)) {
            let k = key(svc.namespace(), svc.name_any());
            live.insert(k.clone());
            let ns_pods = pods_by_ns
                .get(&svc.namespace())
                .map(Vec::as_slice)
                .unwrap_or_default();
            // Selection and port resolution once, rendered as both Endpoints and EndpointSlices.
            let eps = pod_endpoints(svc, ns_pods);
            if let Err(e) = sync_endpoints(&client, svc, &eps, &endpoints).await {
                warn!(service = %k.1, namespace = %k.0, error = %e, "cannot sync endpoints");
                failed = true;
            } else {
                written.insert(k.clone());
            }
            if let Err(e) = sync_slices(&client, svc, &eps, &slices, &mut recent).await {
                warn!(service = %k.1, namespace = %k.0, error = %e, "cannot sync endpointslices");
                failed = true;
            }
        }
        // Cleanup for services that are gone.
        let existing: HashSet<(String, String)> = all_services
            .iter()
            .map(|s| key(s.namespace(), s.name_any()))
            .collect();
        for k in written.clone() {
            if !existing.contains(&k) {
                let api: Api<Endpoints> = Api::namespaced(client.clone(), &k.0);
                match api.delete(&k.1, &DeleteParams::default()).await {
                    Ok(_) | Err(kube::Error::Api(_)) => {
                        written.remove(&k);
                    }
                    Err(e) => {
                        warn!(error = %e, "cannot delete endpoints");
                        failed = true;
                    }
                }
            }
        }
        for s in slices.state() {
            let svc_name = s.labels().get(SERVICE_NAME_LABEL).cloned().unwrap_or_default();
            if !live.contains(&key(s.namespace(), svc_name)) {
                let api: Api<EndpointSlice> =
                    Api::namespaced(client.clone(), &s.namespace().unwrap_or_default());
                if let Err(e) = api.delete(&s.name_any(), &DeleteParams::default()).await
                    && !matches!(e, kube::Error::Api(ref st) if st.code == 404)
                {
                    warn!(error = %e, "cannot delete endpointslice");
                    failed = true;
                }
            }
        }
        recent.retain(|(ns, _), s| {
            live.contains(&key(
                Some(ns.clone()),
                s.labels().get(SERVICE_NAME_LABEL).cloned().unwrap_or_default(),
            ))
        });
        let took = pass_started.elapsed();
        if failed {
            tokio::select! {
                _ = notify.notified() => {}
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        } else {
            notify.notified().await;
        }
        tokio::time::sleep(super::settle(took)).await;
    }
}

async fn sync_endpoints(
    client: &Client,
    svc: &Service,
    eps: &[PodEndpoint],
    store: &kube::runtime::reflector::Store<Endpoints>,
) -> Result<(), kube::Error> {
    let ns = svc.namespace().unwrap_or_default();
    let name = svc.name_any();
    let subsets = subsets_from(svc, eps);
    let labels = labels_for(svc);
    let api: Api<Endpoints> = Api::namespaced(client.clone(), &ns);
    let current = store.get(&kube::runtime::reflector::ObjectRef::new(&name).within(&ns));
    let want = Endpoints {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.clone()),
            labels: Some(labels.clone()).filter(|l| !l.is_empty()),
            ..Default::default()
        },
        subsets: Some(subsets.clone()).filter(|s| !s.is_empty()),
    };
    match current {
        None => match api.create(&PostParams::default(), &want).await {
            Ok(_) => {
                info!(service = %name, namespace = %ns, "endpoints created");
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(e),
        },
        Some(cur) => {
            let same = cur.subsets.clone().unwrap_or_default() == subsets && cur.labels() == &labels;
            if same {
                return Ok(());
            }
            let mut next = (*cur).clone();
            next.subsets = want.subsets;
            next.metadata.labels = want.metadata.labels;
            api.replace(&name, &PostParams::default(), &next).await?;
            info!(service = %name, namespace = %ns, "endpoints updated");
            Ok(())
        }
    }
}

async fn sync_slices(
    client: &Client,
    svc: &Service,
    eps: &[PodEndpoint],
    store: &kube::runtime::reflector::Store<EndpointSlice>,
    recent: &mut HashMap<(String, String), Arc<EndpointSlice>>,
) -> Result<(), kube::Error> {
    let ns = svc.namespace().unwrap_or_default();
    let name = svc.name_any();
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), &ns);
    let mut labels = labels_for(svc);
    labels.insert(SERVICE_NAME_LABEL.into(), name.clone());
    labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    let mut by_name: BTreeMap<String, Arc<EndpointSlice>> = store
        .state()
        .into_iter()
        .filter(|s| {
            s.namespace().as_deref() == Some(ns.as_str()) && s.labels().get(SERVICE_NAME_LABEL) == Some(&name)
        })
        .map(|s| (s.name_any(), s))
        .collect();
    // Merge in our own recent writes unless the cache already has them (or newer).
    let rv = |s: &EndpointSlice| {
        s.resource_version()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    recent.retain(|(rns, rname), mine| {
        if rns != &ns || mine.labels().get(SERVICE_NAME_LABEL) != Some(&name) {
            return true;
        }
        match by_name.get(rname) {
            Some(cached) if rv(cached) >= rv(mine) => false,
            _ => {
                by_name.insert(rname.clone(), mine.clone());
                true
            }
        }
    });
    let mut existing: Vec<Arc<EndpointSlice>> = by_name.into_values().collect();
    existing.sort_by_key(|s| s.name_any());
    let mut desired = slices_from(eps);
    // Pair desired groups with existing slices of the same port set first.
    let mut pairs: Vec<(Option<Arc<EndpointSlice>>, SliceContent)> = Vec::new();
    desired.retain(|d| {
        let k = slice_port_key(&d.0);
        match existing
            .iter()
            .position(|s| slice_port_key(s.ports.as_deref().unwrap_or_default()) == k)
        {
            Some(i) => {
                pairs.push((Some(existing.remove(i)), d.clone()));
                false
            }
            None => true,
        }
    });
    for d in desired {
        let reuse = if existing.is_empty() {
            None
        } else {
            Some(existing.remove(0))
        };
        pairs.push((reuse, d));
    }
    for (cur, (ports, eps)) in pairs {
        let ports_opt = Some(ports).filter(|p| !p.is_empty());
        match cur {
            Some(cur) => {
                let same = cur.endpoints == eps
                    && cur.ports.clone().filter(|p| !p.is_empty()) == ports_opt
                    && cur.labels() == &labels
                    && cur.address_type == "IPv4";
                if same {
                    continue;
                }
                let mut next = (*cur).clone();
                next.endpoints = eps;
                next.ports = ports_opt;
                next.metadata.labels = Some(labels.clone());
                next.metadata.owner_references = Some(vec![owner(svc)]);
                let written = api
                    .replace(&cur.name_any(), &PostParams::default(), &next)
                    .await?;
                recent.insert((ns.clone(), written.name_any()), Arc::new(written));
                info!(service = %name, namespace = %ns, slice = %cur.name_any(), "endpointslice updated");
            }
            None => {
                let slice = EndpointSlice {
                    metadata: ObjectMeta {
                        generate_name: Some(format!("{name}-")),
                        namespace: Some(ns.clone()),
                        labels: Some(labels.clone()),
                        owner_references: Some(vec![owner(svc)]),
                        ..Default::default()
                    },
                    address_type: "IPv4".into(),
                    endpoints: eps,
                    ports: ports_opt,
                };
                let created = api.create(&PostParams::default(), &slice).await?;
                recent.insert((ns.clone(), created.name_any()), Arc::new(created.clone()));
                info!(service = %name, namespace = %ns, slice = %created.name_any(), "endpointslice created");
            }
        }
    }
    for extra in existing {
        recent.remove(&(ns.clone(), extra.name_any()));
        match api.delete(&extra.name_any(), &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
