//! A listing under a prefix with delimiter `/`: its prefixes, objects and
//! the entries that cannot be named as keys or lie outside the prefix asked
//! for ([`Listing::confine`]).

use super::ObjectMeta;
use crate::text::sanitize;

/// A listing under a prefix with delimiter `/`.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// Common prefixes directly under the listed prefix, each ending in `/`.
    pub prefixes: Vec<String>,
    /// Objects directly under the listed prefix.
    pub objects: Vec<ObjectMeta>,
    /// Prefixes the service listed that cannot be named as keys (a directory
    /// whose name is not UTF-8; an S3 key that decodes to bytes that are not
    /// UTF-8): never dropped, the caller reports each as unread. (An object
    /// with such a name is left out: it cannot be a `LEASE`, whose key is a
    /// listed prefix followed by `LEASE`.)
    pub unlisted: Vec<Unlisted>,
}

/// A prefix a listing returned that cannot be named as a key, so nothing
/// under it can be read ([`Listing::unlisted`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unlisted {
    /// The prefix as far as it can be shown: the bytes that are not UTF-8
    /// replaced by U+FFFD, ending in `/`.
    pub prefix: String,
    /// Why it cannot be read, naming the bytes that are not UTF-8 and where
    /// they are (`0xFF at byte 3`); safe to print, and free of backslashes,
    /// so it reads the same however often it is escaped.
    pub problem: String,
}

impl Listing {
    /// Keeps to `prefix` what a service listed under it: a common prefix is
    /// kept only when it is `prefix` followed by one segment (which may be
    /// empty, as in `x//`, but not `.` or `..`) and `/`; any other is moved to
    /// [`Listing::unlisted`], named, so that nothing outside the target is
    /// read or shown as one of its prefixes. Objects outside `prefix` are
    /// dropped (none can be its LEASE).
    pub(crate) fn confine(&mut self, prefix: &str) {
        let mut kept = Vec::with_capacity(self.prefixes.len());
        for p in std::mem::take(&mut self.prefixes) {
            let segment = p.strip_prefix(prefix).and_then(|r| r.strip_suffix('/'));
            match segment {
                // An empty segment (`x//`) is a key S3 allows: its own prefix.
                Some(s) if !s.contains('/') && s != "." && s != ".." => {
                    kept.push(p)
                }
                _ => self.unlisted.push(Unlisted {
                    prefix: sanitize(&p),
                    problem: format!(
                        "the service listed \"{}\" under \"{}\": it is not a prefix directly under the one asked for, so it is not read",
                        sanitize(&p),
                        sanitize(prefix)
                    ),
                }),
            }
        }
        self.prefixes = kept;
        self.objects.retain(|o| o.key.starts_with(prefix));
    }
}

impl Unlisted {
    /// The entry for a prefix whose name, as the bytes `raw` (the whole
    /// prefix, ending in `/`), is not UTF-8. `what` names the thing:
    /// `directory`, `key prefix`.
    pub(crate) fn not_utf8(raw: &[u8], what: &str) -> Self {
        // Runs of bytes that are not UTF-8, with their offsets.
        let mut runs: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut at = 0;
        for chunk in raw.utf8_chunks() {
            at += chunk.valid().len();
            let invalid = chunk.invalid();
            if invalid.is_empty() {
                continue;
            }
            match runs.last_mut() {
                Some((start, bytes)) if *start + bytes.len() == at => {
                    bytes.extend_from_slice(invalid)
                }
                _ => runs.push((at, invalid.to_vec())),
            }
            at += invalid.len();
        }
        let mut bad: Vec<String> = runs
            .iter()
            .map(|(start, bytes)| {
                let hex: Vec<String> = bytes.iter().map(|b| format!("0x{b:02X}")).collect();
                format!("{} at byte {start}", hex.join(" "))
            })
            .collect();
        let more = bad.len().saturating_sub(4);
        bad.truncate(4);
        if more > 0 {
            bad.push(format!("{more} more"));
        }
        Self {
            prefix: String::from_utf8_lossy(raw).into_owned(),
            problem: format!(
                "the {what} name is not valid UTF-8 ({}; shown as U+FFFD), so it cannot be \
                 named as a key and its LEASE was not read; rename it",
                bad.join(", ")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 37 item 9: what a service lists outside the prefix asked for
    /// (`otherprefix/`, `../`, deeper levels) is not read: it is named.
    #[test]
    fn a_listing_is_confined_to_the_prefix_asked_for() {
        let mut l = Listing {
            prefixes: [
                "sub/db1/",
                "otherprefix/",
                "sub/../",
                "sub/./",
                "sub/a/b/",
                "sub//",
                "sub/db2/",
                "../",
            ]
            .map(str::to_owned)
            .to_vec(),
            objects: ["sub/LEASE", "elsewhere/LEASE"]
                .map(|k| ObjectMeta {
                    key: k.to_owned(),
                    etag: None,
                    last_modified: None,
                    size: 0,
                })
                .to_vec(),
            unlisted: Vec::new(),
        };
        l.confine("sub/");
        assert_eq!(l.prefixes, ["sub/db1/", "sub//", "sub/db2/"]);
        assert_eq!(l.objects.len(), 1);
        let named: Vec<&str> = l.unlisted.iter().map(|u| u.prefix.as_str()).collect();
        assert_eq!(
            named,
            ["otherprefix/", "sub/../", "sub/./", "sub/a/b/", "../"]
        );
        assert!(l.unlisted[0]
            .problem
            .contains("not a prefix directly under the one asked for"));
    }
}
