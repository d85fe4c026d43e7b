//! The precondition probe: does this service really implement `If-None-Match: *`,
//! `If-Match` and conditional `DELETE` as S3 does?
//!
//! Some services accept conditional headers and then ignore them, or implement
//! them differently (Ceph RGW 16 refuses `If-Match` with the quoted ETag the
//! object has, accepts it bare, and ignores `If-Match` on `DELETE`). A lease on
//! a service that ignores a write precondition excludes nobody, so:
//!
//! - every acquire checks the two write refusals on the lease just written
//!   ([`check_writes`]) and, once per store, conditional `DELETE` on a scratch
//!   key ([`learn_delete`]);
//! - `leasectl probe`, a takeover and the console run the full probe on a
//!   scratch key `{root}.leasectl-probe/{id}` ([`probe_scratch`]), eight named
//!   steps — the seven one request at a time, then [`CONCURRENT_CREATES`]
//!   creates at once, whose winners are counted (a service whose check and
//!   write are two steps lets several win: SeaweedFS answered three
//!   concurrent `If-None-Match: *` PUTs 200, its issue 8800; versitygw's
//!   POSIX backend let 2 to 32 of 32 win, its issue 2288) — and remove what
//!   they wrote.
//!
//! What can be adapted safely is adapted and recorded in the store's
//! [`Capabilities`]: the ETag form `If-Match` is sent with, and release by
//! read-check-delete where conditional `DELETE` is ignored. What cannot (a
//! write precondition ignored, `If-Match` on an absent key creating it) is
//! refused.
//!
//! 409 and 5xx answers to a conditional write are ambiguous (the write may have
//! landed): the probe reads the key back and judges by what is there.

use serde::Serialize;

use crate::clock::Clock;
use crate::store::{Capabilities, DeleteSupport, EtagForm, ObjectStore, PutCondition, StoreError};
use crate::text::sanitize;

/// What the service did with one precondition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Honoured {
    /// Did what S3 does.
    Yes,
    /// Accepted a request it should have refused: the precondition was ignored.
    Ignored,
    /// Refused the conditional request itself (HTTP 400 or 501).
    Unsupported,
}

/// The probe's steps, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepName {
    /// `PUT If-None-Match: *` on an absent key: must be accepted.
    CreateAbsent,
    /// `PUT If-None-Match: *` on the key just created: must be refused.
    CreatePresent,
    /// `PUT If-Match: <the ETag just returned>`: must be accepted.
    IfMatchCurrent,
    /// `PUT If-Match: <a made-up ETag>`: must be refused.
    IfMatchMadeUp,
    /// `PUT If-Match` on an absent key: must be refused, nothing created.
    IfMatchAbsent,
    /// `DELETE If-Match: <a made-up ETag>`: must be refused.
    DeleteMadeUp,
    /// `DELETE If-Match: <the current ETag>`: must be accepted.
    DeleteCurrent,
    /// [`CONCURRENT_CREATES`] `PUT If-None-Match: *` at once on an absent
    /// key: exactly one must win.
    ConcurrentCreates,
}

/// The creates sent at once by the probe's eighth step.
pub const CONCURRENT_CREATES: usize = 4;

impl StepName {
    /// The request, for people.
    pub fn request(self) -> &'static str {
        match self {
            StepName::CreateAbsent => "PUT If-None-Match: * (key absent)",
            StepName::CreatePresent => "PUT If-None-Match: * (key present)",
            StepName::IfMatchCurrent => "PUT If-Match: <current ETag>",
            StepName::IfMatchMadeUp => "PUT If-Match: <made-up ETag>",
            StepName::IfMatchAbsent => "PUT If-Match (key absent)",
            StepName::DeleteMadeUp => "DELETE If-Match: <made-up ETag>",
            StepName::DeleteCurrent => "DELETE If-Match: <current ETag>",
            StepName::ConcurrentCreates => "PUT If-None-Match: * x4 at once (absent)",
        }
    }

    /// What S3 does.
    pub fn expected(self) -> Outcome {
        match self {
            StepName::CreateAbsent
            | StepName::IfMatchCurrent
            | StepName::DeleteCurrent
            | StepName::ConcurrentCreates => Outcome::Accepted,
            _ => Outcome::Refused,
        }
    }
}

/// What the service did with a request (after reading back an ambiguous answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Carried it out.
    Accepted,
    /// Refused it (412, or 404 for `If-Match` on an absent key).
    Refused,
    /// Refused the conditional header itself (400 / 501).
    Unsupported,
    /// Carried out for several concurrent requests where one must win.
    SeveralWon,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Accepted => "accepted",
            Outcome::Refused => "refused",
            Outcome::Unsupported => "not supported",
            Outcome::SeveralWon => "several won",
        }
    }
}

/// One step as run.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// Which step.
    pub step: StepName,
    /// The request, for people.
    pub request: &'static str,
    /// What S3 does.
    pub expected: Outcome,
    /// What this service did.
    pub result: Outcome,
    /// The answers seen (`412`, `500, read back: written`, `412 quoted, 200 unquoted`).
    pub answer: String,
    /// True when the service did what S3 does.
    pub ok: bool,
    /// True when it did not, and leasectl works around it safely.
    pub adapted: bool,
    /// What leasectl makes of a deviation (null when there is nothing to
    /// say; always present in `probe --json`).
    pub note: Option<String>,
}

impl Step {
    /// One line for the text report.
    pub fn line(&self) -> String {
        let mark = match (self.ok, self.adapted) {
            (true, _) => "ok",
            (false, true) => "DEVIATES (adapted)",
            (false, false) => "DEVIATES",
        };
        let mut s = format!(
            "{:<34} expected {:<9} got {:<13} ({}) {mark}",
            self.request,
            self.expected.as_str(),
            self.result.as_str(),
            self.answer
        );
        if let Some(n) = &self.note {
            s.push_str(" — ");
            s.push_str(n);
        }
        s
    }
}

/// The probe's findings.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PreconditionReport {
    /// `If-None-Match: *` on an absent key accepted (only from the full probe);
    /// `Ignored` here means it was refused.
    pub(crate) create_absent: Option<Honoured>,
    /// `If-None-Match: *` over an existing key.
    pub(crate) if_none_match: Honoured,
    /// `If-Match` with a made-up ETag.
    pub(crate) if_match: Honoured,
    /// `If-Match` with the current ETag accepted (in one form or the other);
    /// `Ignored` here means it was refused in both forms. Only from the full probe.
    pub(crate) if_match_current: Option<Honoured>,
    /// `If-Match` on an absent key refused with nothing created (only from the full probe).
    pub(crate) if_match_absent: Option<Honoured>,
    /// `DELETE` with `If-Match` on a made-up ETag (only from the full probe).
    pub conditional_delete: Option<Honoured>,
    /// Of [`CONCURRENT_CREATES`] creates sent at once on an absent key, how
    /// many won (exactly one on a service whose conditional write is one
    /// step; only from the full probe).
    pub concurrent_winners: Option<usize>,
    /// Why the ETags this service returns cannot be sent in `If-Match`
    /// (`empty`, `not a plain token`), when they cannot: then no lease there
    /// can exclude anyone ([`crate::store::unusable_etag`]).
    pub(crate) etag_unusable: Option<&'static str>,
    /// The ETag form `If-Match` is sent with from now on.
    pub(crate) etag_form: EtagForm,
    /// How a lease is released on this service: `conditional_delete` or `read_check_delete`.
    pub release: &'static str,
    /// Every step, in order (empty for the check at acquire).
    pub steps: Vec<Step>,
    /// What the probe changed beyond its scratch key, and old scratch keys it removed.
    pub changed: Vec<String>,
}

impl PreconditionReport {
    /// One sentence when several of the concurrent creates won: the
    /// service's check and write are two steps, and a lease there excludes
    /// nobody.
    pub(crate) fn not_atomic(&self) -> Option<String> {
        self.concurrent_winners.filter(|&n| n > 1).map(|n| {
            format!(
                "PUT If-None-Match: * (one absent key) is not atomic: {n} of {CONCURRENT_CREATES} concurrent requests won"
            )
        })
    }

    /// The first precondition the service ignores or cannot evaluate such that
    /// no lease there can exclude anyone, if any.
    pub(crate) fn ignored_header(&self) -> Option<&'static str> {
        if self.etag_unusable.is_some() {
            Some("If-Match (the ETags it returns cannot be sent in it)")
        } else if self.if_none_match == Honoured::Ignored {
            Some("If-None-Match")
        } else if self.create_absent == Some(Honoured::Ignored) {
            Some("If-None-Match: * on an absent key (it refuses the create)")
        } else if self.if_match == Honoured::Ignored {
            Some("If-Match")
        } else if self.if_match_absent == Some(Honoured::Ignored) {
            Some("If-Match on an absent key (it creates the object)")
        } else if self.if_match_current == Some(Honoured::Ignored) {
            Some("If-Match with the current ETag (it refuses it in both forms)")
        } else {
            None
        }
    }

    /// The first precondition the service refuses to evaluate (400/501), if any.
    pub(crate) fn unsupported(&self) -> Option<&'static str> {
        if self.if_none_match == Honoured::Unsupported {
            Some("If-None-Match")
        } else if self.if_match == Honoured::Unsupported
            || self.if_match_current == Some(Honoured::Unsupported)
            || self.if_match_absent == Some(Honoured::Unsupported)
        {
            Some("If-Match")
        } else {
            None
        }
    }

    /// What leasectl does differently on this service, one sentence each.
    pub(crate) fn adaptations(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.etag_form == EtagForm::Unquoted {
            out.push(
                "If-Match is sent with the ETag unquoted (the service refuses the quoted form)"
                    .to_owned(),
            );
        }
        if self.conditional_delete == Some(Honoured::Ignored) {
            out.push(
                "a lease is released by reading it, checking it is still ours, then deleting \
                 (the service ignores If-Match on DELETE)"
                    .to_owned(),
            );
        }
        out
    }
}

/// A new scratch key for a probe next to `prefix`:
/// `{prefix}.leasectl-probe/{random id}` (discovery never lists it as a prefix).
pub(crate) fn scratch_key(prefix: &str) -> String {
    format!(
        "{prefix}.leasectl-probe/{}",
        super::record::new_instance_id()
    )
}

/// Held while a check switches a store's ETag form.
static FORM_CHANGE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A made-up ETag no real object has.
pub use crate::bucket::race::MADE_UP_ETAG;

/// Scratch keys this old are left over from interrupted probes and are removed.
pub const SWEEP_AFTER: std::time::Duration = std::time::Duration::from_secs(10 * 60);

fn outcome(r: Result<Option<String>, StoreError>) -> Result<Honoured, StoreError> {
    match r {
        Ok(_) => Ok(Honoured::Ignored),
        Err(StoreError::PreconditionFailed) | Err(StoreError::Conflict) => Ok(Honoured::Yes),
        // If-Match on a key that (to the service) does not match anything.
        Err(StoreError::NotFound(_)) => Ok(Honoured::Yes),
        Err(StoreError::NotImplemented(_)) => Ok(Honoured::Unsupported),
        Err(StoreError::Other { status: 400, .. }) => Ok(Honoured::Unsupported),
        Err(e) => Err(e),
    }
}

/// Probes the write preconditions on `key`, which must already hold `body`
/// (written by the caller). Each PUT that should be refused re-sends the same
/// `body`, so a service that ignores the header leaves the content unchanged.
///
/// Errors: any store failure other than the expected refusals.
pub(crate) async fn check_writes(
    store: &dyn ObjectStore,
    key: &str,
    body: &[u8],
) -> Result<PreconditionReport, StoreError> {
    let inm = outcome(
        store
            .put(key, body.to_vec(), PutCondition::IfNoneMatch)
            .await,
    )?;
    let im = outcome(
        store
            .put(
                key,
                body.to_vec(),
                PutCondition::IfMatch(MADE_UP_ETAG.into()),
            )
            .await,
    )?;
    let caps = store.capabilities();
    Ok(PreconditionReport {
        create_absent: None,
        if_none_match: inm,
        if_match: im,
        if_match_current: None,
        if_match_absent: None,
        conditional_delete: None,
        concurrent_winners: None,
        etag_unusable: None,
        etag_form: caps.etag_form,
        release: release_word(caps.conditional_delete),
        steps: Vec::new(),
        changed: Vec::new(),
    })
}

fn release_word(d: DeleteSupport) -> &'static str {
    match d {
        DeleteSupport::Honoured => "conditional_delete",
        _ => "read_check_delete",
    }
}

/// The service refused `If-Match` with the ETag an object still has. If the
/// store still sends ETags quoted, check on the scratch key `scratch` (created,
/// then removed) whether the service accepts the bare ETag and still refuses a
/// made-up one in that form; if so, the store sends bare ETags from now on.
/// Returns true when the store now sends bare ETags (switched here or before).
/// Callers that sent the bare form already must not call it: a refusal of the
/// bare form is not adaptable. `clock` stamps the scratch body.
///
/// Errors: [`StoreError`] from the check (the store is left as it was).
pub(crate) async fn adapt_etag_form(
    store: &dyn ObjectStore,
    scratch: &str,
    clock: &dyn Clock,
) -> Result<bool, StoreError> {
    // One change of form at a time: a check running while another user of the
    // store switched it would send the "quoted" request bare.
    let _one = FORM_CHANGE.lock().await;
    let caps = store.capabilities();
    if caps.etag_form == EtagForm::Unquoted {
        // Adapted meanwhile (by a concurrent user of this store).
        return Ok(true);
    }
    let unquoted = Capabilities {
        etag_form: EtagForm::Unquoted,
        ..caps
    };
    let check = async {
        let body = scratch_body("etag_form", clock);
        let etag = match store
            .put(scratch, body.clone(), PutCondition::IfNoneMatch)
            .await?
        {
            Some(e) => e,
            None => match current(store, scratch).await?.and_then(|(_, e)| e) {
                Some(e) => e,
                None => return Ok(false),
            },
        };
        // Quoted accepted here: the refusal was something else.
        let (quoted, _, etag2) =
            put_step(store, scratch, &body, PutCondition::IfMatch(etag.clone())).await?;
        if quoted == Outcome::Accepted {
            let _ = etag2;
            return Ok(false);
        }
        if !store.set_capabilities(unquoted) {
            return Ok(false);
        }
        let (bare, _, _) = put_step(store, scratch, &body, PutCondition::IfMatch(etag)).await?;
        let (made_up, _, _) = put_step(
            store,
            scratch,
            &body,
            PutCondition::IfMatch(MADE_UP_ETAG.into()),
        )
        .await?;
        Ok(bare == Outcome::Accepted && made_up == Outcome::Refused)
    }
    .await;
    let _ = store.delete(scratch, None).await;
    match check {
        Ok(true) => {
            tracing::warn!(
                "the service refuses If-Match with the current ETag quoted, accepts it unquoted \
                 and still refuses a made-up one: sending ETags unquoted from now on"
            );
            Ok(true)
        }
        Ok(false) => {
            store.set_capabilities(caps);
            Ok(false)
        }
        Err(e) => {
            store.set_capabilities(caps);
            Err(e)
        }
    }
}

/// Learns, once per store, whether conditional `DELETE` is honoured and
/// whether `If-Match` on an absent key creates it, on a scratch key `scratch`
/// (created, deleted with a made-up ETag, removed, written with `If-Match`
/// while absent, removed).
/// Leaves the finding in the store's [`Capabilities`]. `clock` stamps the
/// scratch bodies.
///
/// Errors: store failures; the capability then stays unknown (a release then
/// reads and checks before deleting).
pub(crate) async fn learn_delete(
    store: &dyn ObjectStore,
    scratch: &str,
    clock: &dyn Clock,
) -> Result<(), StoreError> {
    if store.capabilities().conditional_delete != DeleteSupport::Unknown {
        return Ok(());
    }
    let body = scratch_body("learn_delete", clock);
    store
        .put(scratch, body.clone(), PutCondition::IfNoneMatch)
        .await?;
    let found = match store.delete(scratch, Some(MADE_UP_ETAG)).await {
        Ok(()) => match exists(store, scratch).await? {
            false => DeleteSupport::Ignored,
            true => DeleteSupport::Honoured,
        },
        Err(StoreError::PreconditionFailed) => DeleteSupport::Honoured,
        Err(StoreError::NotImplemented(_)) | Err(StoreError::Other { status: 400, .. }) => {
            DeleteSupport::Ignored
        }
        Err(e) => {
            let _ = store.delete(scratch, None).await;
            return Err(e);
        }
    };
    store.delete(scratch, None).await?;
    // If-Match on the (now absent) scratch key must not create it.
    let creates = match store
        .put(
            scratch,
            body.clone(),
            PutCondition::IfMatch(MADE_UP_ETAG.into()),
        )
        .await
    {
        Ok(_) => true,
        Err(StoreError::Conflict) | Err(StoreError::Other { status: 500.., .. }) => {
            exists(store, scratch).await?
        }
        Err(_) => false,
    };
    // Always: a local store keeps a lock file for a key it refused to write.
    store.delete(scratch, None).await?;
    if creates {
        tracing::error!(
            "the service creates an absent key on If-Match: a lease there cannot be kept safely"
        );
    }
    if found == DeleteSupport::Ignored {
        tracing::warn!(
            "the service ignores If-Match on DELETE: a lease is released by read, check, delete"
        );
    }
    store.set_capabilities(Capabilities {
        conditional_delete: found,
        if_match_absent_creates: creates,
        ..store.capabilities()
    });
    Ok(())
}

/// A scratch key's body for `step`, stamped with `clock`'s wall time and a nonce.
fn scratch_body(step: &str, clock: &dyn Clock) -> Vec<u8> {
    format!(
        "{{\"leasectl_probe\":true,\"step\":\"{step}\",\"at\":\"{}\",\"nonce\":\"{}\"}}",
        clock.wall().to_rfc3339(),
        super::record::new_instance_id()
    )
    .into_bytes()
}

async fn exists(store: &dyn ObjectStore, key: &str) -> Result<bool, StoreError> {
    match store.get(key, None).await {
        Ok(_) => Ok(true),
        Err(StoreError::NotFound(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// What is at `key`: its body and ETag, or nothing.
async fn current(
    store: &dyn ObjectStore,
    key: &str,
) -> Result<Option<(Vec<u8>, Option<String>)>, StoreError> {
    match store.get(key, None).await {
        Ok(out) => Ok(Some((out.body, out.meta.etag))),
        Err(StoreError::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// One conditional PUT, its outcome judged by a read-back when the answer is
/// ambiguous (409, 5xx): written if `key` now holds `body`.
async fn put_step(
    store: &dyn ObjectStore,
    key: &str,
    body: &[u8],
    cond: PutCondition,
) -> Result<(Outcome, String, Option<String>), StoreError> {
    let ambiguous = |status: String| async move {
        let back = current(store, key).await?;
        Ok::<_, StoreError>(match back {
            Some((b, etag)) if b == body => (
                Outcome::Accepted,
                format!("{status}, read back: written"),
                etag,
            ),
            _ => (
                Outcome::Refused,
                format!("{status}, read back: not written"),
                None,
            ),
        })
    };
    match store.put(key, body.to_vec(), cond).await {
        Ok(etag) => {
            let etag = match etag {
                Some(e) => Some(e),
                None => current(store, key).await?.and_then(|(_, e)| e),
            };
            Ok((Outcome::Accepted, "200".into(), etag))
        }
        Err(StoreError::PreconditionFailed) => Ok((Outcome::Refused, "412".into(), None)),
        Err(StoreError::NotFound(_)) => Ok((Outcome::Refused, "404".into(), None)),
        Err(StoreError::NotImplemented(m)) => {
            Ok((Outcome::Unsupported, format!("501 {}", sanitize(&m)), None))
        }
        Err(StoreError::Other {
            status: 400,
            message,
        }) => Ok((
            Outcome::Unsupported,
            format!("400 {}", sanitize(&message)),
            None,
        )),
        Err(StoreError::Conflict) => ambiguous("409".into()).await,
        Err(StoreError::Other { status, .. }) if status >= 500 => {
            ambiguous(status.to_string()).await
        }
        Err(e) => Err(e),
    }
}

fn step(name: StepName, result: Outcome, answer: String, note: Option<String>) -> Step {
    Step {
        step: name,
        request: name.request(),
        expected: name.expected(),
        result,
        ok: result == name.expected(),
        adapted: false,
        answer,
        note,
    }
}

fn honoured(s: &Step) -> Honoured {
    match (s.ok, s.result) {
        (true, _) => Honoured::Yes,
        (false, _) if s.adapted && s.step == StepName::IfMatchCurrent => Honoured::Yes,
        (false, Outcome::Unsupported) => Honoured::Unsupported,
        (false, _) => Honoured::Ignored,
    }
}

/// What [`sweep`] did.
#[derive(Debug, Default)]
pub struct Swept {
    /// The old scratch keys removed.
    pub removed: Vec<String>,
    /// Why old scratch keys may be left (a sentence safe to print): the
    /// listing could not be made, or it goes on past its first page.
    pub(crate) unswept: Option<String>,
}

/// Removes the scratch keys directly under `dir` (a `.leasectl-probe/`
/// prefix) older than `age` by the service's Last-Modified against the
/// service's clock where known (`clock`'s wall time plus the service's
/// offset; `clock`'s alone otherwise), except `own`: probes killed mid-way leave
/// theirs behind. Each is deleted with `If-Match` on the ETag listed. Looks
/// at one page of the listing (up to 1,000 keys on S3; a local store's
/// whole directory): housekeeping never holds up a probe, a takeover or an
/// acquire for longer than one request, and the next probe looks again.
/// [`probe_scratch`] sweeps with [`SWEEP_AFTER`].
pub async fn sweep(
    store: &dyn ObjectStore,
    dir: &str,
    own: &str,
    age: std::time::Duration,
    clock: &dyn Clock,
) -> Swept {
    let shown = sanitize(dir);
    let (listing, more) = match store.list_page(dir, None).await {
        Ok(page) => page,
        Err(e) => {
            tracing::warn!("could not list old scratch keys under {shown}: {e}");
            return Swept {
                removed: Vec::new(),
                unswept: Some(format!(
                    "old scratch keys under {shown} were not looked for: listing them failed ({e})"
                )),
            };
        }
    };
    let unswept = more.is_some().then(|| {
        format!(
            "old scratch keys under {shown} were looked for in the first page of their \
             listing only ({} keys; the service says more follow): any others are left for \
             the next probe",
            listing.objects.len()
        )
    });
    let offset = store.server_offset().map(|o| o.offset_s).unwrap_or(0.0);
    let service_now = clock.wall() + chrono::Duration::milliseconds((offset * 1000.0) as i64);
    let limit = chrono::Duration::from_std(age).unwrap_or(chrono::Duration::MAX);
    let mut removed = Vec::new();
    for o in listing.objects {
        if o.key == own || !o.key.starts_with(dir) {
            continue;
        }
        let Some(lm) = o.last_modified else { continue };
        if service_now - lm < limit {
            continue;
        }
        let r = match &o.etag {
            Some(e) => store.delete(&o.key, Some(e)).await,
            None => store.delete(&o.key, None).await,
        };
        match r {
            Ok(()) => removed.push(o.key),
            Err(e) => tracing::warn!(
                "could not remove the old scratch key {}: {e}",
                sanitize(&o.key)
            ),
        }
    }
    Swept { removed, unswept }
}

/// The full probe on a scratch key (see the module documentation): seven
/// named steps, then whatever it wrote is removed. Scratch keys next to it
/// older than [`SWEEP_AFTER`] are removed first. Records what it found in the
/// store's [`Capabilities`] (ETag form, conditional DELETE). `clock` stamps
/// the scratch bodies and dates the sweep.
///
/// Errors: store failures (403 → `AccessDenied`: the credentials may not write there).
pub(crate) async fn probe_scratch(
    store: &dyn ObjectStore,
    key: &str,
    clock: &dyn Clock,
) -> Result<PreconditionReport, StoreError> {
    let absent_key = format!("{key}.absent");
    let dir = match key.rfind('/') {
        Some(i) => &key[..=i],
        None => "",
    };
    let swept = sweep(store, dir, key, SWEEP_AFTER, clock).await;
    let mut changed: Vec<String> = swept
        .removed
        .into_iter()
        .map(|k| format!("removed {} left by an interrupted probe", sanitize(&k)))
        .chain(swept.unswept)
        .collect();
    let result = run_steps(store, key, &absent_key, &mut changed, clock).await;
    // Remove what we wrote, whatever happened.
    let cleanup = async {
        if exists(store, key).await? {
            store.delete(key, None).await?;
        }
        // Unconditionally: a local store keeps a lock file for a key it was asked to
        // write, even when it refused; deleting a missing key is no error on S3.
        store.delete(&absent_key, None).await?;
        store.delete(&concurrent_key(key), None).await?;
        Ok::<_, StoreError>(())
    }
    .await;
    let mut report = result?;
    if let Err(e) = cleanup {
        report.changed.push(format!(
            "could not remove the scratch key {}: {e}",
            sanitize(key)
        ));
    }
    Ok(report)
}

/// The scratch key of the probe's eighth step, next to `key`.
pub fn concurrent_key(key: &str) -> String {
    format!("{key}.concurrent")
}

mod steps;

use steps::run_steps;
