//! Which TARGETs a probe module may read: its allow-list.
//!
//! A scrape names the TARGET it wants probed, so without a bound anyone who
//! can reach `serve` could make it read any bucket its credentials open. A
//! module reads only TARGETs at or under an entry of its list: `s3://b/`
//! allows every prefix of bucket `b`, `s3://b/tenants/` those under
//! `tenants/` (not `tenants-old/`: prefixes end in `/`), `file:///srv/l/`
//! that directory and the directories under it (whole path components). An
//! empty list allows nothing.

use crate::target::Target;

/// The TARGETs a module may read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    entries: Vec<Target>,
}

impl AllowList {
    /// The list of `entries` (TARGETs, parsed as the command line parses them).
    pub fn new(entries: Vec<Target>) -> Self {
        Self { entries }
    }

    /// Whether `target` is at or under one of the entries.
    pub fn permits(&self, target: &Target) -> bool {
        self.entries.iter().any(|e| covers(e, target))
    }

    /// The entries, as TARGET URLs (for messages).
    pub fn entries(&self) -> &[Target] {
        &self.entries
    }

    /// True when it allows nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Whether `entry` covers `target`: the same bucket and a key prefix that
/// starts with the entry's (both empty or ending in `/`), or the same local
/// directory or one below it, by whole path components.
fn covers(entry: &Target, target: &Target) -> bool {
    match (entry, target) {
        (
            Target::S3 { bucket, prefix },
            Target::S3 {
                bucket: b,
                prefix: p,
            },
        ) => bucket == b && p.starts_with(prefix.as_str()),
        (Target::Local { dir }, Target::Local { dir: d }) => d.starts_with(dir),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> AllowList {
        AllowList::new(entries.iter().map(|e| e.parse().unwrap()).collect())
    }

    fn permits(l: &AllowList, t: &str) -> bool {
        l.permits(&t.parse().unwrap())
    }

    #[test]
    fn a_bucket_entry_allows_its_prefixes_only() {
        let l = list(&["s3://fleet-a/"]);
        assert!(permits(&l, "s3://fleet-a/"));
        assert!(permits(&l, "s3://fleet-a/db/"));
        assert!(permits(&l, "s3://fleet-a/db/shard-1/"));
        assert!(!permits(&l, "s3://fleet-b/"));
        assert!(!permits(&l, "s3://fleet-a2/"));
        assert!(!permits(&l, "s3://fleet/"));
    }

    #[test]
    fn a_prefix_entry_allows_whole_prefixes_under_it() {
        let l = list(&["s3://fleet-a/tenants/", "s3://fleet-b/x/y/"]);
        assert!(permits(&l, "s3://fleet-a/tenants/"));
        assert!(permits(&l, "s3://fleet-a/tenants/acme/"));
        // A sibling whose name starts alike is another prefix.
        assert!(!permits(&l, "s3://fleet-a/tenants-old/"));
        assert!(!permits(&l, "s3://fleet-a/"));
        assert!(!permits(&l, "s3://fleet-a/ten/"));
        assert!(!permits(&l, "s3://fleet-b/x/"));
        assert!(permits(&l, "s3://fleet-b/x/y/z/"));
        // `s3://b//x/` names prefix `/x/`, not `x/`.
        assert!(!permits(&l, "s3://fleet-a//tenants/"));
    }

    #[test]
    fn a_directory_entry_allows_whole_components_under_it() {
        let l = list(&["file:///srv/leases/"]);
        assert!(permits(&l, "file:///srv/leases/"));
        assert!(permits(&l, "file:///srv/leases"));
        assert!(permits(&l, "file:///srv/leases/team-a/"));
        assert!(!permits(&l, "file:///srv/leases-old/"));
        assert!(!permits(&l, "file:///srv/"));
        assert!(!permits(&l, "file:///etc/"));
        // Kinds never cover each other.
        assert!(!permits(&l, "s3://srv/leases/"));
        assert!(!permits(&list(&["s3://srv/"]), "file:///srv/"));
    }

    #[test]
    fn an_empty_list_allows_nothing() {
        let l = AllowList::default();
        assert!(l.is_empty());
        assert!(!permits(&l, "s3://fleet-a/"));
        assert!(!permits(&l, "file:///"));
    }
}
