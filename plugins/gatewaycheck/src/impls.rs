//! What gatewaycheck knows of each Gateway API implementation: the GatewayClass
//! `controllerName` it answers to, how to recognise its controller's Deployment (image), the
//! labels it puts on the data-plane Service and pods it makes for a Gateway, and the way out of
//! `AddressNotAssigned` its documentation gives.

/// One implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Implementation {
    /// Its name in messages.
    pub name: &'static str,
    /// GatewayClass `spec.controllerName`.
    pub controller_name: &'static str,
    /// Substrings of the controller container's image (repository part).
    pub images: &'static [&'static str],
    /// Label keys on the data-plane Service and pods naming the Gateway (name, namespace).
    pub gateway_labels: Option<(&'static str, &'static str)>,
    /// The way out when no load balancer assigns an address (with the doc it comes from).
    pub no_lb_way_out: &'static str,
}

/// Envoy Gateway (envoyproxy/gateway): controllerName `api/v1alpha1` `GatewayControllerName`;
/// labels internal/gatewayapi/translator.go `OwningGatewayNameLabel` and
/// `OwningGatewayNamespaceLabel`.
pub const ENVOY_GATEWAY: Implementation = Implementation {
    name: "Envoy Gateway",
    controller_name: "gateway.envoyproxy.io/gatewayclass-controller",
    images: &["envoyproxy/gateway"],
    gateway_labels: Some((
        "gateway.envoyproxy.io/owning-gateway-name",
        "gateway.envoyproxy.io/owning-gateway-namespace",
    )),
    no_lb_way_out: "reference an EnvoyProxy with spec.provider.kubernetes.envoyService.type: NodePort \
from the GatewayClass spec.parametersRef (or the Gateway's spec.infrastructure.parametersRef) \
(gateway.envoyproxy.io/docs/tasks/operations/customize-envoyproxy), or install a load balancer \
with a pool (MetalLB IPAddressPool, Cilium LB-IPAM CiliumLoadBalancerIPPool)",
};

/// Traefik (traefik/traefik v3, kubernetesGateway provider): controllerName
/// `traefik.io/gateway-controller` (pkg/provider/kubernetes/gateway `controllerName`).
pub const TRAEFIK: Implementation = Implementation {
    name: "Traefik",
    controller_name: "traefik.io/gateway-controller",
    images: &["traefik"],
    gateway_labels: None,
    no_lb_way_out: "expose Traefik's Service as NodePort (doc.traefik.io/traefik/providers/kubernetes-gateway), \
or install a load balancer with a pool (MetalLB IPAddressPool, Cilium LB-IPAM)",
};

/// Cilium's Gateway API (cilium-operator): controllerName `io.cilium/gateway-controller`.
pub const CILIUM: Implementation = Implementation {
    name: "Cilium",
    controller_name: "io.cilium/gateway-controller",
    images: &["cilium/operator"],
    gateway_labels: Some(("io.cilium.gateway/owning-gateway", "")),
    no_lb_way_out: "enable LB-IPAM with a CiliumLoadBalancerIPPool (docs.cilium.io network/lb-ipam) \
or set gatewayAPI.hostNetwork",
};

/// Every implementation known here.
pub const KNOWN: &[Implementation] = &[ENVOY_GATEWAY, TRAEFIK, CILIUM];

/// The implementation answering to `controller_name`, if known.
pub fn by_controller(controller_name: &str) -> Option<&'static Implementation> {
    KNOWN.iter().find(|i| i.controller_name == controller_name)
}

/// Whether a container image is one of `imp`'s controller images.
pub fn is_controller_image(imp: &Implementation, image: &str) -> bool {
    // The repository part: after the registry, before the tag or digest.
    let repo = image.split('@').next().unwrap_or(image);
    let repo = match repo.rfind(':') {
        Some(i) if !repo[i..].contains('/') => &repo[..i],
        _ => repo,
    };
    imp.images
        .iter()
        .any(|m| repo == *m || repo.ends_with(&format!("/{m}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images() {
        assert!(is_controller_image(
            &ENVOY_GATEWAY,
            "docker.io/envoyproxy/gateway:v1.9.1"
        ));
        assert!(!is_controller_image(
            &ENVOY_GATEWAY,
            "docker.io/envoyproxy/envoy:distroless-v1.36.2"
        ));
        assert!(is_controller_image(&TRAEFIK, "traefik:v3.7.13"));
        assert!(is_controller_image(
            &TRAEFIK,
            "docker.io/library/traefik:v3.7"
        ));
    }
}
