//! The node view's families (`serve --node`, `-o prometheus --node`): the
//! pods by state, one series per pod (never per process) with its state, and
//! the verdicts raised in each pod. Labels: the pod's namespace, name and UID
//! (empty where unknown, all three empty for the processes outside pods), the
//! container (its id's first 12 digits) of the pod's holder or, without one,
//! of its process that must take the lock.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::family::SortedFamily;
use crate::text::sanitize;
use crate::writer::scan::{NodeView, PodState, Verdict};

/// `{state}` of the node view's tally.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub(crate) struct PodStateLabels {
    /// The pod state's snake_case name.
    pub state: String,
}

/// `{namespace, pod, uid, container, state}` of one pod of the node view:
/// one series per pod (never per process).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub(crate) struct NodePodLabels {
    /// The pod's namespace (empty when unknown, or outside pods).
    pub namespace: String,
    /// The pod's name (empty when unknown, or outside pods).
    pub pod: String,
    /// The pod's UID (empty for the processes outside pods).
    pub uid: String,
    /// The container (first 12 digits of its id) of the holder, else of the
    /// process that must take the lock; empty when none.
    pub container: String,
    /// The pod's state.
    pub state: String,
}

/// `{namespace, pod, uid, container, kind}` of a verdict raised in one pod.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub(crate) struct NodeVerdictLabels {
    /// As [`NodePodLabels::namespace`].
    pub namespace: String,
    /// As [`NodePodLabels::pod`].
    pub pod: String,
    /// As [`NodePodLabels::uid`].
    pub uid: String,
    /// As [`NodePodLabels::container`].
    pub container: String,
    /// The verdict's snake_case name.
    pub kind: String,
}

/// The node view's families, shared with the registry they are put in.
#[derive(Default)]
pub(super) struct NodeFamilies {
    pods: SortedFamily<PodStateLabels, Gauge>,
    pod_state: SortedFamily<NodePodLabels, Gauge>,
    pod_verdicts: SortedFamily<NodeVerdictLabels, Gauge>,
}

impl NodeFamilies {
    /// Registers the families in `registry` (under its prefix).
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "node_pods",
            "Pods of this node by writer-lease state (node view)",
            self.pods.clone(),
        );
        registry.register(
            "node_pod_state",
            "1 for each pod of this node, labelled with its writer-lease state: racing, holding_nothing, attention, waiting, unknown, healthy or no_lease (node view)",
            self.pod_state.clone(),
        );
        registry.register(
            "node_pod_verdicts",
            "Writer-lease verdicts currently raised in a pod of this node, by kind (node view; only the kinds raised)",
            self.pod_verdicts.clone(),
        );
    }

    /// Every series removed.
    pub(super) fn clear(&self) {
        self.pods.clear();
        self.pod_state.clear();
        self.pod_verdicts.clear();
    }

    /// The series of `view`, whose verdicts (each naming its pod) are `verdicts`.
    pub(super) fn update(&self, view: &NodeView, verdicts: &[Verdict]) {
        self.clear();
        for s in PodState::ALL {
            self.pods
                .get_or_create(&PodStateLabels {
                    state: s.as_str().to_owned(),
                })
                .set(view.summary.count(s) as i64);
        }
        let s = sanitize;
        for p in &view.pods {
            let k = p.kubernetes.as_ref();
            let namespace = k.and_then(|k| k.namespace.as_deref()).map(s);
            let pod = k.and_then(|k| k.name.as_deref()).map(s);
            let uid = k.map(|k| s(&k.uid));
            let container = p.container.as_deref().map(s).unwrap_or_default();
            let (namespace, pod, uid) = (
                namespace.unwrap_or_default(),
                pod.unwrap_or_default(),
                uid.unwrap_or_default(),
            );
            self.pod_state
                .get_or_create(&NodePodLabels {
                    namespace: namespace.clone(),
                    pod: pod.clone(),
                    uid: uid.clone(),
                    container: container.clone(),
                    state: p.state.as_str().to_owned(),
                })
                .set(1);
            for kind in &p.verdicts {
                let count = verdicts
                    .iter()
                    .filter(|v| v.kind == *kind && v.pod.as_deref() == Some(p.label.as_str()))
                    .count();
                self.pod_verdicts
                    .get_or_create(&NodeVerdictLabels {
                        namespace: namespace.clone(),
                        pod: pod.clone(),
                        uid: uid.clone(),
                        container: container.clone(),
                        kind: kind.as_str().to_owned(),
                    })
                    .set(count as i64);
            }
        }
    }
}
