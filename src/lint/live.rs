//! Live rules (docs/design.md#lints): what only the cluster can tell, read
//! once in apply's preflight ([`gather`]) and judged by pure functions.

use std::net::Ipv4Addr;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Node;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::cilium::cilium_releases;
use super::locate::locate;
use super::mesh::{cidr, contains};
use super::{Hit, text};
use crate::plan::Plan;
use crate::release::Release;

pub(crate) const NATIVE_ROUTING_CIDR_MISMATCH: &str = "native-routing-cidr-mismatch";
pub(crate) const API_HOST_UNREACHABLE: &str = "api-host-unreachable";
pub(crate) const KUBE_PROXY_PRESENT_WITH_KPR: &str = "kube-proxy-present-with-kpr";

/// How long the API host probe may take (connect and first answer).
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// What the live rules look at, read once.
#[derive(Debug, Clone, Default)]
pub(crate) struct LiveState {
    /// Each Node's name and `spec.podCIDRs` (or `spec.podCIDR`).
    pub nodes: Vec<(String, Vec<String>)>,
    /// Whether DaemonSet kube-system/kube-proxy exists.
    pub kube_proxy: bool,
    /// The probe of `k8sServiceHost:k8sServicePort`, when one was made:
    /// `host:port` and why it failed (`None`: it answered TLS).
    pub api_probe: Option<(String, Option<TlsProbeError>)>,
}

/// The Cilium release replacing kube-proxy, if any.
fn kpr(plan: &Plan) -> Option<&Release> {
    cilium_releases(plan).find(|r| {
        matches!(
            text(r.values().get("kubeProxyReplacement")).as_deref(),
            Some("true" | "strict")
        )
    })
}

/// `host:port` Cilium is told to reach the API server at, with kube-proxy replaced.
pub(crate) fn api_target(plan: &Plan) -> Option<String> {
    let release = kpr(plan)?;
    let host = text(release.values().get("k8sServiceHost")).filter(|h| !h.is_empty())?;
    let port = text(release.values().get("k8sServicePort")).filter(|p| !p.is_empty())?;
    Some(if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    })
}

/// Reads what the live rules need. A read that fails leaves its part empty
/// (the rule then has nothing to say); the API server was reachable moments
/// ago, so this only loses information, never a run.
pub(crate) async fn gather(plan: &Plan, client: &::kube::Client) -> LiveState {
    let mut state = LiveState::default();
    if cilium_releases(plan).next().is_none() {
        return state;
    }
    let nodes: ::kube::Api<Node> = ::kube::Api::all(client.clone());
    if let Ok(list) = nodes.list(&Default::default()).await {
        for node in list.items {
            let spec = node.spec.unwrap_or_default();
            let cidrs = spec
                .pod_cidrs
                .filter(|c| !c.is_empty())
                .or(spec.pod_cidr.map(|c| vec![c]))
                .unwrap_or_default();
            state
                .nodes
                .push((node.metadata.name.unwrap_or_default(), cidrs));
        }
    }
    if kpr(plan).is_some() {
        let daemonsets: ::kube::Api<DaemonSet> =
            ::kube::Api::namespaced(client.clone(), "kube-system");
        state.kube_proxy = matches!(daemonsets.get_opt("kube-proxy").await, Ok(Some(_)));
        if let Some(target) = api_target(plan) {
            let why = probe_tls(&target, PROBE_TIMEOUT).await.err();
            state.api_probe = Some((target, why));
        }
    }
    state
}

/// A minimal TLS ClientHello (TLS 1.2 record, TLS 1.2/1.3 AES-GCM suites).
const CLIENT_HELLO: &[u8] = &[
    0x16, 0x03, 0x01, 0x00, 0x2f, // handshake record, 47 bytes
    0x01, 0x00, 0x00, 0x2b, // ClientHello, 43 bytes
    0x03, 0x03, // TLS 1.2
    0x62, 0x6f, 0x6f, 0x74, 0x73, 0x74, 0x72, 0x61, 0x70, 0x2d, 0x6c, 0x69, 0x6e, 0x74, 0x2d, 0x70,
    0x72, 0x6f, 0x62, 0x65, 0x2d, 0x72, 0x61, 0x6e, 0x64, 0x6f, 0x6d, 0x2d, 0x33, 0x32, 0x62, 0x21,
    0x00, // no session id
    0x00, 0x04, 0xc0, 0x2f, 0x13, 0x01, // two cipher suites
    0x01, 0x00, // null compression
];

/// Connects and sends a ClientHello; any TLS record back (a handshake or an
/// alert) means a TLS server answers there.
pub(crate) async fn probe_tls(target: &str, timeout: Duration) -> Result<(), TlsProbeError> {
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(target)
            .await
            .map_err(|e| TlsProbeError::Connect(e.to_string()))?;
        stream
            .write_all(CLIENT_HELLO)
            .await
            .map_err(|e| TlsProbeError::Send(e.to_string()))?;
        let mut first = [0u8; 1];
        match stream.read(&mut first).await {
            Ok(1) if first[0] == 0x16 || first[0] == 0x15 => Ok(()),
            Ok(1) => Err(TlsProbeError::NotTls),
            Ok(_) => Err(TlsProbeError::Closed),
            Err(e) => Err(TlsProbeError::NoAnswer(e.to_string())),
        }
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(result) => result,
        Err(_) => Err(TlsProbeError::Timeout(timeout)),
    }
}

/// Why no TLS server answered at an address; the I/O errors in words (the
/// state that holds it is cloned and compared).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TlsProbeError {
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("cannot send a TLS hello: {0}")]
    Send(String),
    #[error("it answers, but not with TLS")]
    NotTls,
    #[error("it closed the connection without a TLS answer")]
    Closed,
    #[error("no TLS answer: {0}")]
    NoAnswer(String),
    #[error("no answer within {}", crate::duration::span(*.0))]
    Timeout(Duration),
}

/// Every Node's pod CIDRs inside Cilium's `ipv4NativeRoutingCIDR`.
pub(crate) fn native_routing_cidr_mismatch(plan: &Plan, state: &LiveState) -> Vec<Hit> {
    let mut hits = Vec::new();
    for release in cilium_releases(plan) {
        let Some(routing) = text(release.values().get("ipv4NativeRoutingCIDR")) else {
            continue;
        };
        let Some(outer) = cidr(&routing) else {
            continue;
        };
        let outside: Vec<String> = state
            .nodes
            .iter()
            .flat_map(|(node, cidrs)| {
                cidrs
                    .iter()
                    .filter(|c| c.parse::<Ipv4Addr>().is_err()) // a CIDR, not an address
                    .filter_map(|c| cidr(c).map(|inner| (c, inner)))
                    .filter(|(_, inner)| !contains(outer, *inner))
                    .map(move |(c, _)| format!("{node} ({c})"))
            })
            .collect();
        if outside.is_empty() {
            continue;
        }
        hits.push(Hit {
            release: Some(release.id.clone()),
            at: Some(locate(release, &["ipv4NativeRoutingCIDR"])),
            message: format!(
                "Nodes' pod CIDRs lie outside Cilium's `ipv4NativeRoutingCIDR: {routing}`: {}; with native routing, pod traffic to those addresses would be masqueraded or not routed",
                outside.join(", ")
            ),
            fix: "set `ipv4NativeRoutingCIDR` to the range the nodes' podCIDRs come from (the cluster's pod CIDR)".into(),
        });
    }
    hits
}

/// `k8sServiceHost:k8sServicePort` does not answer TLS from here.
pub(crate) fn api_host_unreachable(plan: &Plan, state: &LiveState) -> Vec<Hit> {
    let (Some(release), Some((target, Some(why)))) = (kpr(plan), &state.api_probe) else {
        return Vec::new();
    };
    vec![Hit {
        release: Some(release.id.clone()),
        at: Some(locate(release, &["k8sServiceHost"])),
        message: format!(
            "`k8sServiceHost:k8sServicePort` ({target}) does not answer TLS from where bootstrap runs ({why}); Cilium replaces kube-proxy and reaches the API server only there (nodes may see a different network than this machine)"
        ),
        fix: "point `k8sServiceHost`/`k8sServicePort` at an address of the API server the nodes reach (a control-plane address or load balancer, usually port 6443)".into(),
    }]
}

/// A kube-proxy DaemonSet while Cilium replaces it.
pub(crate) fn kube_proxy_present_with_kpr(plan: &Plan, state: &LiveState) -> Vec<Hit> {
    let Some(release) = kpr(plan).filter(|_| state.kube_proxy) else {
        return Vec::new();
    };
    vec![Hit {
        release: Some(release.id.clone()),
        at: Some(locate(release, &["kubeProxyReplacement"])),
        message: "DaemonSet kube-system/kube-proxy exists while Cilium replaces kube-proxy; both would program Services".into(),
        fix: "delete the kube-proxy DaemonSet (and its iptables rules, e.g. by rebooting the nodes), or create the cluster without kube-proxy".into(),
    }]
}
