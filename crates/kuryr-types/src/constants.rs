//! Names upstream Kuryr-Kubernetes puts on Kubernetes objects — finalizers, labels,
//! annotations — exactly as upstream spells them (`kuryr_kubernetes/constants.py` and the
//! handlers), so a cluster can switch between upstream and kuryr-rs.

/// API group of the CRDs.
pub const GROUP: &str = "openstack.org";
/// API version of the CRDs.
pub const VERSION: &str = "v1";
/// `apiVersion` of the CRDs.
pub const API_VERSION: &str = "openstack.org/v1";
/// Prefix of kuryr's finalizers and labels.
pub const KURYR_FQDN: &str = "kuryr.openstack.org";

// ---- finalizers
/// On Pods: added by the VIF handler, removed by the KuryrPort handler.
pub const POD_FINALIZER: &str = "kuryr.openstack.org/pod-finalizer";
/// On KuryrPorts.
pub const KURYRPORT_FINALIZER: &str = "kuryr.openstack.org/kuryrport-finalizer";
/// On KuryrNetworks.
pub const KURYRNETWORK_FINALIZER: &str = "kuryrnetwork.finalizers.kuryr.openstack.org";
/// On KuryrLoadBalancers.
pub const KURYRLB_FINALIZER: &str = "kuryr.openstack.org/kuryrloadbalancer-finalizers";
/// On Services.
pub const SERVICE_FINALIZER: &str = "kuryr.openstack.org/service-finalizer";
/// On NetworkPolicies and KuryrNetworkPolicies.
pub const NETWORKPOLICY_FINALIZER: &str = "kuryr.openstack.org/networkpolicy-finalizer";

// ---- labels
/// On KuryrPorts: the pod's node (the CNI daemon watches with this selector).
pub const KURYRPORT_LABEL: &str = "kuryr.openstack.org/nodeName";
/// On Nodes: per-node pod VIF driver for the multi pool driver.
pub const NODE_POD_VIF_LABEL: &str = "pod_vif";
/// On Endpoints: headless services are ignored.
pub const HEADLESS_SERVICE_LABEL: &str = "service.kubernetes.io/headless";

// ---- annotations
/// Prefix of kuryr's annotations.
pub const ANNOTATION_PREFIX: &str = "openstack.org/kuryr";
/// Legacy VIF annotation on Pods (read by the status command and kubectl plugin only).
pub const ANNOTATION_VIF: &str = "openstack.org/kuryr-vif";
/// Pod labels as last applied to the pod's ports (pod_label handler).
pub const ANNOTATION_LABEL: &str = "openstack.org/kuryr-pod-label";
/// Pod IP as last applied (pod_label handler).
pub const ANNOTATION_IP: &str = "openstack.org/kuryr-pod-ip";
/// Legacy, unused upstream.
pub const ANNOTATION_NAMESPACE_LABEL: &str = "openstack.org/kuryr-namespace-label";
/// Legacy service annotation; its presence means the service is skipped.
pub const ANNOTATION_LBAAS_SPEC: &str = "openstack.org/kuryr-lbaas-spec";
/// Legacy, unused upstream.
pub const ANNOTATION_LBAAS_STATE: &str = "openstack.org/kuryr-lbaas-state";
/// Legacy, unused upstream.
pub const ANNOTATION_NET_CRD: &str = "openstack.org/kuryr-net-crd";
/// Legacy, unused upstream.
pub const ANNOTATION_NETPOLICY_CRD: &str = "openstack.org/kuryr-netpolicy-crd";
/// On NetworkPolicies: bumped (uuid) to force recomputation.
pub const ANNOTATION_POLICY: &str = "openstack.org/kuryr-counter";
/// On Namespaces: OpenStack project of the namespace (annotation project driver).
pub const ANNOTATION_PROJECT: &str = "openstack.org/kuryr-project";
/// On Services: listener client timeout (ms).
pub const ANNOTATION_CLIENT_TIMEOUT: &str = "openstack.org/kuryr-timeout-client-data";
/// On Services: listener member timeout (ms).
pub const ANNOTATION_MEMBER_TIMEOUT: &str = "openstack.org/kuryr-timeout-member-data";

/// cloud-provider-openstack's Service annotations for health monitors (kuryr-rs reads them too):
/// `"true"` creates one per pool.
pub const ANNOTATION_HM_ENABLE: &str = "loadbalancer.openstack.org/enable-health-monitor";
/// Seconds between probes (default 5).
pub const ANNOTATION_HM_DELAY: &str = "loadbalancer.openstack.org/health-monitor-delay";
/// Seconds a probe may take (default 3).
pub const ANNOTATION_HM_TIMEOUT: &str = "loadbalancer.openstack.org/health-monitor-timeout";
/// Successes before a member is ONLINE (default 1).
pub const ANNOTATION_HM_MAX_RETRIES: &str = "loadbalancer.openstack.org/health-monitor-max-retries";
/// Failures before a member is ERROR (default 3).
pub const ANNOTATION_HM_MAX_RETRIES_DOWN: &str = "loadbalancer.openstack.org/health-monitor-max-retries-down";
/// On KuryrNetworkPolicies: the NetworkPolicy they implement.
pub const ANNOTATION_NETWORK_POLICY_LINK: &str = "networkPolicyLink";
/// On Namespaces and KuryrPorts: a uuid written to force a new watch event.
pub const ANNOTATION_KURYR_TRIGGER: &str = "KuryrTrigger";
/// On NetworkAttachmentDefinitions: JSON `{subnetId, driverType}`.
pub const ANNOTATION_NAD_CONFIG: &str = "openstack.org/kuryr-config";
/// Key of the subnet ID in [`ANNOTATION_NAD_CONFIG`].
pub const NAD_CONFIG_SUBNET_ID: &str = "subnetId";
/// Key of the driver type in [`ANNOTATION_NAD_CONFIG`].
pub const NAD_CONFIG_DRIVER_TYPE: &str = "driverType";
/// On Pods: additional networks (NPWG multi-VIF driver).
pub const ANNOTATION_NPWG_NETWORK: &str = "k8s.v1.cni.cncf.io/networks";
/// On Pods: static pod detection.
pub const ANNOTATION_CONFIG_SOURCE: &str = "kubernetes.io/config.source";

// ---- other upstream constants other components need
/// Name of the default interface in `status.vifs`.
pub const DEFAULT_IFNAME: &str = "eth0";
/// Name of pool ports when `[kubernetes] port_debug` is set.
pub const KURYR_PORT_NAME: &str = "kuryr-pool-port";
/// Neutron `device_owner` of pod ports (kuryr-lib).
pub const DEVICE_OWNER: &str = "compute:kuryr";
/// os-vif plugin name of nested VIFs.
pub const OS_VIF_NOOP_PLUGIN: &str = "noop";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_names_match_upstream_composition() {
        assert_eq!(POD_FINALIZER, format!("{KURYR_FQDN}/pod-finalizer"));
        assert_eq!(KURYRPORT_FINALIZER, format!("{KURYR_FQDN}/kuryrport-finalizer"));
        assert_eq!(KURYRPORT_LABEL, format!("{KURYR_FQDN}/nodeName"));
        assert_eq!(API_VERSION, format!("{GROUP}/{VERSION}"));
        for a in [
            ANNOTATION_VIF,
            ANNOTATION_LABEL,
            ANNOTATION_IP,
            ANNOTATION_POLICY,
            ANNOTATION_PROJECT,
            ANNOTATION_CLIENT_TIMEOUT,
            ANNOTATION_MEMBER_TIMEOUT,
            ANNOTATION_LBAAS_SPEC,
        ] {
            assert!(a.starts_with(ANNOTATION_PREFIX), "{a}");
        }
    }
}
