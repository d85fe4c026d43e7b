//! [`SortedFamily`]: a metric family whose series are encoded in the order
//! of their labels, so that an exposition lists its series in the same order
//! on every run (`prometheus_client`'s `Family` keeps them in a `HashMap`,
//! whose order changes from process to process).
//!
//! The series are kept in a vector sorted by their labels: these families
//! have a few series each (per target, per kind, per pod), and a B-tree's
//! smallest node holds room for eleven (364 bytes for one `{target}` series;
//! `serve` keeps five such families for each probed target).

use std::sync::{Arc, RwLock};

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// A family of metrics of type `M` (a gauge or a counter, whose clones share
/// one value) by label set `S`, encoded in `S`'s order. Clones share the
/// family.
#[derive(Debug)]
pub(crate) struct SortedFamily<S, M> {
    metrics: Arc<RwLock<Vec<(S, M)>>>,
}

impl<S, M> Clone for SortedFamily<S, M> {
    fn clone(&self) -> Self {
        Self {
            metrics: self.metrics.clone(),
        }
    }
}

impl<S, M> Default for SortedFamily<S, M> {
    fn default() -> Self {
        Self {
            metrics: Arc::default(),
        }
    }
}

impl<S: Ord + Clone, M: Default + Clone> SortedFamily<S, M> {
    /// The metric of `labels`, created (at zero) if new: a handle sharing
    /// its value.
    pub(crate) fn get_or_create(&self, labels: &S) -> M {
        let mut v = self.metrics.write().unwrap_or_else(|e| e.into_inner());
        match v.binary_search_by(|(s, _)| s.cmp(labels)) {
            Ok(i) => v[i].1.clone(),
            Err(i) => {
                let m = M::default();
                v.insert(i, (labels.clone(), m.clone()));
                m
            }
        }
    }

    /// Removes every metric.
    pub(crate) fn clear(&self) {
        let mut v = self.metrics.write().unwrap_or_else(|e| e.into_inner());
        v.clear();
    }

    /// Removes every metric and the room they took.
    pub(crate) fn free(&self) {
        let mut v = self.metrics.write().unwrap_or_else(|e| e.into_inner());
        *v = Vec::new();
    }
}

impl<S, M: TypedMetric> TypedMetric for SortedFamily<S, M> {
    const TYPE: MetricType = <M as TypedMetric>::TYPE;
}

impl<S, M> EncodeMetric for SortedFamily<S, M>
where
    S: Ord + EncodeLabelSet + std::fmt::Debug + Send + Sync,
    M: EncodeMetric + TypedMetric + std::fmt::Debug + Send + Sync,
{
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let v = self.metrics.read().unwrap_or_else(|e| e.into_inner());
        for (labels, m) in v.iter() {
            m.encode(encoder.encode_family(labels)?)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        M::TYPE
    }

    fn is_empty(&self) -> bool {
        self.metrics
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }
}
