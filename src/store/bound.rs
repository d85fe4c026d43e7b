//! How far one listing may go: every loop that follows a service's pages
//! (continuation tokens, key and version markers) is bounded by pages,
//! entries and time, and ends in an error saying the listing is incomplete
//! when a bound is reached. A service that always answers "truncated" with a
//! fresh token (a broken or hostile one) then costs a bounded number of
//! requests, bytes and seconds, and the caller reports what it listed as
//! unknown, never as complete. A token given twice (A, B, A, …) ends the
//! listing at once.

use std::collections::HashSet;
use std::future::Future;
use std::time::Duration;

use super::StoreError;

/// The most pages one listing follows: 1,000 pages of a conforming service's
/// 1,000 entries, a million prefixes, objects or versions.
pub const MAX_LIST_PAGES: usize = 1000;

/// The most entries (prefixes, objects, versions) one listing gathers,
/// whatever a page holds: a service may put more in a page than it should.
pub const MAX_LIST_ENTRIES: usize = 1_000_000;

/// How long one listing may last, in request deadlines (`--timeout`): 30, so
/// 5 minutes at the default 10 s; 1,000 pages then fit at 300 ms a page.
pub const LIST_DEADLINES: u32 = 30;

/// The bounds of one listing followed page by page ([module docs](self)).
/// Made when the listing starts; each page's request runs under
/// [`ListBound::page`] and each page's continuation goes through
/// [`ListBound::follow`].
#[derive(Debug)]
pub struct ListBound {
    /// What is listed, for the sentences (`the listing under "db/"`).
    what: String,
    pages: usize,
    entries: usize,
    /// The hashes of the tokens given so far (a hostile service's tokens
    /// may be large).
    tokens: HashSet<u64>,
    /// How long the listing may last, and when that is over.
    time: Duration,
    deadline: tokio::time::Instant,
}

impl ListBound {
    /// A listing described as `what` (a phrase safe to print, e.g. `the
    /// listing under "db/"`), starting now, whose requests each have
    /// `request_timeout`: it may last [`LIST_DEADLINES`] of them.
    pub fn new(what: String, request_timeout: Duration) -> Self {
        let time = request_timeout.saturating_mul(LIST_DEADLINES);
        Self {
            what,
            pages: 0,
            entries: 0,
            tokens: HashSet::new(),
            time,
            deadline: tokio::time::Instant::now() + time,
        }
    }

    /// The listing under `prefix` (delimiter `/`), as [`ListBound::new`].
    pub fn under(prefix: &str, request_timeout: Duration) -> Self {
        Self::new(
            format!("the listing under \"{}\"", crate::text::sanitize(prefix)),
            request_timeout,
        )
    }

    /// Runs one page's request (retries included) under the listing's
    /// deadline: a timer ends it when the listing's time is up, whatever the
    /// request is waiting for.
    ///
    /// Errors: `f`'s; [`StoreError::Invalid`] saying the listing is
    /// incomplete when its time ran out first.
    pub async fn page<T>(
        &self,
        f: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout_at(self.deadline, f).await {
            Ok(r) => r,
            Err(_) => Err(self.out_of_time()),
        }
    }

    /// Counts a page of `entries` entries after which the service says more
    /// follow from `next` (its continuation token, or its key and version
    /// markers joined): `Ok` to ask for that page.
    ///
    /// Errors: [`StoreError::Invalid`], the listing incomplete, when the
    /// token was given before (the pages would go round for ever), or the
    /// listing has reached [`MAX_LIST_PAGES`], [`MAX_LIST_ENTRIES`] or its
    /// time.
    pub fn follow(&mut self, entries: usize, next: &str) -> Result<(), StoreError> {
        use std::hash::{Hash, Hasher};
        self.pages += 1;
        self.entries = self.entries.saturating_add(entries);
        let mut h = std::collections::hash_map::DefaultHasher::new();
        next.hash(&mut h);
        if !self.tokens.insert(h.finish()) {
            return Err(StoreError::Invalid(format!(
                "{} cannot be completed: the service gave a continuation token it had given \
                 before, after {} pages (it would go round for ever); the listing is incomplete",
                self.what,
                self.pages + 1
            )));
        }
        if self.pages >= MAX_LIST_PAGES || self.entries >= MAX_LIST_ENTRIES {
            return Err(StoreError::Invalid(format!(
                "{} was stopped after {} pages and {} entries (at most {MAX_LIST_PAGES} pages and \
                 {MAX_LIST_ENTRIES} entries are followed) with the service still saying more \
                 follow; the listing is incomplete. A service that never ends a listing is \
                 broken; a TARGET this large is listed from deeper in the bucket",
                self.what, self.pages, self.entries
            )));
        }
        if tokio::time::Instant::now() >= self.deadline {
            return Err(self.out_of_time());
        }
        Ok(())
    }

    /// For a listing made of many listings (a discovery several levels
    /// deep): `entries` listed so far in all of them.
    ///
    /// Errors: [`StoreError::Invalid`], the listing incomplete, at
    /// [`MAX_LIST_ENTRIES`].
    pub fn count(&self, entries: usize) -> Result<(), StoreError> {
        if entries < MAX_LIST_ENTRIES {
            return Ok(());
        }
        Err(StoreError::Invalid(format!(
            "{} was stopped after {entries} entries (at most {MAX_LIST_ENTRIES} are listed) with \
             more to list; the listing is incomplete. A TARGET this large is listed from deeper \
             in the bucket, or with a smaller --depth",
            self.what
        )))
    }

    fn out_of_time(&self) -> StoreError {
        StoreError::Invalid(format!(
            "{} was stopped after {} ({LIST_DEADLINES} request deadlines, --timeout) with {} \
             pages and {} entries read and more to come; the listing is incomplete",
            self.what,
            crate::text::format_secs(self.time.as_secs_f64()),
            self.pages,
            self.entries
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_token_given_twice_ends_the_listing() {
        let mut b = ListBound::under("db/", Duration::from_secs(1));
        b.follow(1, "A").unwrap();
        b.follow(1, "B").unwrap();
        let e = b.follow(1, "A").unwrap_err().to_string();
        assert!(
            e.contains("given before") && e.contains("incomplete"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn fresh_tokens_end_at_the_page_bound() {
        let mut b = ListBound::under("db/", Duration::from_secs(1));
        for i in 0..MAX_LIST_PAGES - 1 {
            b.follow(1, &i.to_string()).unwrap();
        }
        let e = b.follow(1, "last").unwrap_err().to_string();
        assert!(
            e.contains("stopped after 1000 pages") && e.contains("incomplete"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_page_too_full_ends_at_the_entry_bound() {
        let mut b = ListBound::under("db/", Duration::from_secs(1));
        b.follow(MAX_LIST_ENTRIES / 2, "A").unwrap();
        let e = b.follow(MAX_LIST_ENTRIES / 2, "B").unwrap_err().to_string();
        assert!(e.contains("after 2 pages and 1000000 entries"), "{e}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_still_in_flight_when_the_time_is_up_ends_the_listing() {
        let b = ListBound::under("db/", Duration::from_millis(10));
        let never = std::future::pending::<Result<(), StoreError>>();
        let e = b.page(never).await.unwrap_err().to_string();
        assert!(
            e.contains("was stopped after 300ms") && e.contains("incomplete"),
            "{e}"
        );
        let mut b = ListBound::under("db/", Duration::from_millis(10));
        tokio::time::sleep(Duration::from_millis(301)).await;
        assert!(b.follow(1, "A").is_err());
    }
}
