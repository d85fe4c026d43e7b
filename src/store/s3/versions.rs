//! `ListObjectVersions` of one key in the service's own order.
//!
//! The service lists a key's versions and delete markers newest first, and
//! that order is the truth of which write replaced which. The SDK hands a
//! page's versions and its delete markers over as two lists (moto, for one,
//! also writes them so in its XML), each newest first: merging them back
//! needs a key, and `Last-Modified` has whole seconds on several services
//! (moto, Ceph RGW), so a version and a delete marker written in the same
//! second tie. Where they tie (or one has no `Last-Modified`), the service
//! is asked which comes first: a one-entry listing that starts right after
//! the last entry placed (`max-keys=1` with the key and version-id markers,
//! as the next page would be asked for). Pages are consecutive runs of the
//! service's order, so a page boundary needs nothing more.
//!
//! Cost: one request per tie between a version and a delete marker (a
//! release by delete and the next holder's write in one second), none
//! otherwise.

use chrono::{DateTime, Utc};

use super::{normalize_etag, to_chrono, S3Store};
use crate::store::{KeyVersions, ListBound, ObjectVersion, StoreError, Versioning};

/// One page of the listing, the entries of exactly one key.
struct Page {
    /// Its versions, newest first, as listed.
    versions: Vec<ObjectVersion>,
    /// Its delete markers, newest first, as listed.
    markers: Vec<ObjectVersion>,
    /// The markers of the next page, when the page is truncated.
    next: Option<(Option<String>, Option<String>)>,
    /// How many entries the page listed, of any key.
    listed: usize,
}

impl S3Store {
    /// [`crate::store::ObjectRead::list_versions`]: every page, merged in the
    /// service's order, oldest first.
    pub(super) async fn key_versions(&self, key: &str) -> Result<KeyVersions, StoreError> {
        // The status as the service states it; a service whose answer does
        // not parse (moto names its root element differently) is judged by
        // the versions it lists: ids other than "null" exist only where
        // versioning is or was on.
        let stated = self
            .client
            .get_bucket_versioning()
            .bucket(&self.bucket)
            .send()
            .await
            .ok()
            .map(|s| match s.status() {
                Some(aws_sdk_s3::types::BucketVersioningStatus::Enabled) => Versioning::Enabled,
                Some(aws_sdk_s3::types::BucketVersioningStatus::Suspended) => Versioning::Suspended,
                _ => Versioning::Off,
            });
        let mut out = KeyVersions {
            versioning: Versioning::Off,
            versions: Vec::new(),
            requests: 1,
            unordered: 0,
        };
        // Newest first until the end.
        let mut markers: (Option<String>, Option<String>) = (None, None);
        let mut bound = ListBound::new(
            format!(
                "the listing of the versions of \"{}\"",
                crate::text::sanitize(key)
            ),
            self.timeout,
        );
        loop {
            let page = bound
                .page(self.versions_page(key, markers.clone(), None))
                .await?;
            out.requests += 1;
            let (next, listed) = (page.next.clone(), page.listed);
            // The ties' questions too run within the listing's time.
            bound
                .page(async {
                    self.merge(key, page, &mut out).await;
                    Ok(())
                })
                .await?;
            let Some(m) = next else { break };
            let token = format!(
                "{}\0{}",
                m.0.as_deref().unwrap_or_default(),
                m.1.as_deref().unwrap_or_default()
            );
            bound.follow(listed, &token)?;
            markers = m;
        }
        out.versions.reverse();
        out.versioning = stated.unwrap_or(if out.versions.iter().any(|v| v.version_id != "null") {
            Versioning::Enabled
        } else {
            Versioning::Off
        });
        Ok(out)
    }

    /// One page of `ListObjectVersions` with prefix `key` from `markers`
    /// (key marker, version-id marker), at most `max_keys` entries (the
    /// service's default when `None`); the entries of exactly `key`.
    async fn versions_page(
        &self,
        key: &str,
        (key_marker, version_marker): (Option<String>, Option<String>),
        max_keys: Option<i32>,
    ) -> Result<Page, StoreError> {
        let page = self
            .client
            .list_object_versions()
            .bucket(&self.bucket)
            .prefix(key)
            .set_key_marker(key_marker)
            .set_version_id_marker(version_marker)
            .set_max_keys(max_keys)
            .send()
            .await
            .map_err(|e| self.classify(e))?;
        let listed = page.versions().len() + page.delete_markers().len();
        let versions = page
            .versions()
            .iter()
            .filter(|v| v.key() == Some(key))
            .map(|v| ObjectVersion {
                version_id: v.version_id().unwrap_or("null").to_owned(),
                last_modified: v.last_modified().and_then(to_chrono),
                etag: v.e_tag().map(normalize_etag),
                size: v.size().unwrap_or(0).max(0) as u64,
                delete_marker: false,
            })
            .collect();
        let markers = page
            .delete_markers()
            .iter()
            .filter(|m| m.key() == Some(key))
            .map(|m| ObjectVersion {
                version_id: m.version_id().unwrap_or("null").to_owned(),
                last_modified: m.last_modified().and_then(to_chrono),
                etag: None,
                size: 0,
                delete_marker: true,
            })
            .collect();
        let next = (page.is_truncated() == Some(true)).then(|| {
            (
                page.next_key_marker().map(str::to_owned),
                page.next_version_id_marker().map(str::to_owned),
            )
        });
        Ok(Page {
            versions,
            markers,
            next,
            listed,
        })
    }

    /// Appends `page`'s entries to `out.versions` (newest first so far) in
    /// the service's order: by `Last-Modified` where it tells, by asking the
    /// service where a version and a delete marker tie.
    async fn merge(&self, key: &str, page: Page, out: &mut KeyVersions) {
        let mut versions = page.versions.into_iter().peekable();
        let mut markers = page.markers.into_iter().peekable();
        loop {
            let version_first = match (versions.peek(), markers.peek()) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(v), Some(m)) => match newer(v.last_modified, m.last_modified) {
                    Some(v_newer) => v_newer,
                    None => {
                        let (v_id, m_id) = (v.version_id.clone(), m.version_id.clone());
                        let after = out.versions.last().map(|e| e.version_id.clone());
                        out.requests += 1;
                        match self.first_after(key, after).await {
                            Some(id) if id == v_id => true,
                            Some(id) if id == m_id => false,
                            _ => {
                                out.unordered += 1;
                                true
                            }
                        }
                    }
                },
            };
            let next = if version_first {
                versions.next()
            } else {
                markers.next()
            };
            out.versions.extend(next);
        }
    }

    /// The version id of the entry of `key` the service lists right after
    /// the one with version id `after` (its newest entry when `None`), from
    /// a one-entry listing; `None` when the answer does not say (an error, or
    /// a service that ignores `max-keys` and mixes both kinds in its answer).
    async fn first_after(&self, key: &str, after: Option<String>) -> Option<String> {
        let markers = (after.as_ref().map(|_| key.to_owned()), after);
        let page = self.versions_page(key, markers, Some(1)).await.ok()?;
        match (page.versions.first(), page.markers.first()) {
            (Some(v), None) => Some(v.version_id.clone()),
            (None, Some(m)) => Some(m.version_id.clone()),
            _ => None,
        }
    }
}

/// Whether the entry written at `a` is newer than the one written at `b`;
/// `None` when their times do not tell (equal, or one unknown).
fn newer(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Option<bool> {
    match (a, b) {
        (Some(a), Some(b)) if a != b => Some(a > b),
        _ => None,
    }
}
