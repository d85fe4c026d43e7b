//! The eight steps of the precondition probe on the scratch key, in order:
//! create, `If-Match` on the current ETag, on a made-up one, on an absent
//! key, DELETE with a made-up and with the current ETag, then creates at
//! once on an absent key (the winners counted).

use super::*;

use crate::bucket::race::creates_at_once;
use crate::store::unusable_etag;
use crate::text::sanitize;

/// What the steps share: the store, the scratch key, the clock, the
/// scratch key's ETag as the last step left it, and the steps so far.
struct StepRun<'a> {
    store: &'a dyn ObjectStore,
    key: &'a str,
    clock: &'a dyn Clock,
    etag: Option<String>,
    steps: Vec<Step>,
}

impl StepRun<'_> {
    /// The scratch key's ETag: the one the last write returned, else read.
    async fn current_etag(&self) -> Result<String, StoreError> {
        match self.etag.clone() {
            Some(e) => Ok(e),
            None => Ok(current(self.store, self.key)
                .await?
                .and_then(|(_, e)| e)
                .unwrap_or_default()),
        }
    }
}

pub(super) async fn run_steps(
    store: &dyn ObjectStore,
    key: &str,
    absent_key: &str,
    changed: &mut Vec<String>,
    clock: &dyn Clock,
) -> Result<PreconditionReport, StoreError> {
    let mut run = StepRun {
        store,
        key,
        clock,
        etag: None,
        steps: Vec::new(),
    };
    let caps0 = store.capabilities();
    step_creates(&mut run).await?;
    // An ETag that cannot be sent in If-Match: step 3 cannot run, and no
    // lease can be conditional here. The report says so and stops.
    let current = run.current_etag().await?;
    if let Some(why) = unusable_etag(&current) {
        run.steps.push(step(
            StepName::IfMatchCurrent,
            Outcome::Refused,
            format!("not sent: the ETag returned is {why}"),
            Some(format!(
                "the service returned ETag \"{}\": an If-Match with it is ignored or refused, \
                 so no renewal or release could be conditional",
                sanitize(&current)
            )),
        ));
        let caps = store.capabilities();
        let by = |n: StepName| run.steps.iter().find(|s| s.step == n).map(honoured);
        return Ok(PreconditionReport {
            create_absent: by(StepName::CreateAbsent),
            if_none_match: by(StepName::CreatePresent).unwrap_or(Honoured::Yes),
            if_match: Honoured::Ignored,
            if_match_current: by(StepName::IfMatchCurrent),
            if_match_absent: None,
            conditional_delete: None,
            concurrent_winners: None,
            etag_unusable: Some(why),
            etag_form: caps.etag_form,
            release: release_word(caps.conditional_delete),
            changed: std::mem::take(changed),
            steps: run.steps,
        });
    }
    step_if_match_current(&mut run, caps0).await?;
    step_if_match_made_up(&mut run).await?;
    step_if_match_absent(&mut run, absent_key, changed).await?;
    let delete = step_delete_made_up(&mut run).await?;
    let delete = step_delete_current(&mut run, delete).await?;
    let concurrent_winners = step_concurrent_creates(&mut run).await?;
    let steps = run.steps;

    let creates = steps
        .iter()
        .any(|s| s.step == StepName::IfMatchAbsent && s.result == Outcome::Accepted);
    store.set_capabilities(Capabilities {
        conditional_delete: delete,
        if_match_absent_creates: creates,
        ..store.capabilities()
    });
    let caps = store.capabilities();
    let by = |n: StepName| steps.iter().find(|s| s.step == n).map(honoured);
    Ok(PreconditionReport {
        create_absent: by(StepName::CreateAbsent),
        if_none_match: by(StepName::CreatePresent).unwrap_or(Honoured::Yes),
        if_match: by(StepName::IfMatchMadeUp).unwrap_or(Honoured::Yes),
        if_match_current: by(StepName::IfMatchCurrent),
        if_match_absent: by(StepName::IfMatchAbsent),
        conditional_delete: by(StepName::DeleteMadeUp),
        concurrent_winners: Some(concurrent_winners),
        etag_unusable: None,
        etag_form: caps.etag_form,
        release: release_word(caps.conditional_delete),
        changed: std::mem::take(changed),
        steps,
    })
}

/// Steps 1 and 2: create on an absent key, then on the key just created.
async fn step_creates(run: &mut StepRun<'_>) -> Result<(), StoreError> {
    let (store, key, clock) = (run.store, run.key, run.clock);
    // 1. Create on an absent key.
    let body = scratch_body("create_absent", clock);
    let (res, answer, etag) = put_step(store, key, &body, PutCondition::IfNoneMatch).await?;
    run.etag = etag;
    let mut note = None;
    if res != Outcome::Accepted {
        // Go on with an unconditional write, so the other steps can run.
        note = Some("a lease could never be created here".to_owned());
        let held = scratch_body("create_absent_unconditional", clock);
        run.etag = store.put(key, held, PutCondition::None).await?;
    }
    run.steps
        .push(step(StepName::CreateAbsent, res, answer, note));

    // 2. Create on the key just created.
    let body = scratch_body("create_present", clock);
    let (res, answer, e) = put_step(store, key, &body, PutCondition::IfNoneMatch).await?;
    let note = (res == Outcome::Accepted)
        .then(|| "If-None-Match ignored: two contenders could both create a lease".to_owned());
    if res == Outcome::Accepted {
        run.etag = e;
    }
    run.steps
        .push(step(StepName::CreatePresent, res, answer, note));
    Ok(())
}

/// Step 3: If-Match with the real ETag; adapts the ETag form if only the
/// bare one passes.
async fn step_if_match_current(
    run: &mut StepRun<'_>,
    caps0: Capabilities,
) -> Result<(), StoreError> {
    let (store, key, clock) = (run.store, run.key, run.clock);
    let current_etag = run.current_etag().await?;
    let body = scratch_body("if_match_current", clock);
    let (mut res, mut answer, e) = put_step(
        store,
        key,
        &body,
        PutCondition::IfMatch(current_etag.clone()),
    )
    .await?;
    let mut note = None;
    let mut got = e;
    let one = FORM_CHANGE.lock().await;
    if res == Outcome::Refused && caps0.etag_form == EtagForm::Quoted {
        let unquoted = Capabilities {
            etag_form: EtagForm::Unquoted,
            ..caps0
        };
        if store.set_capabilities(unquoted) {
            let (res2, answer2, e2) = put_step(
                store,
                key,
                &body,
                PutCondition::IfMatch(current_etag.clone()),
            )
            .await?;
            answer = format!("{answer} quoted, {answer2} unquoted");
            if res2 == Outcome::Accepted {
                res = res2;
                got = e2;
                note = Some("If-Match is sent with the ETag unquoted from now on".to_owned());
            } else {
                store.set_capabilities(caps0);
            }
        }
    }
    if res == Outcome::Accepted {
        run.etag = got;
    } else if res == Outcome::Refused {
        note = Some(
            "a lease here could be neither renewed nor taken over; run best-effort or use another service"
                .to_owned(),
        );
    }
    let mut s3 = step(StepName::IfMatchCurrent, res, answer, note);
    if res == Outcome::Accepted
        && caps0.etag_form == EtagForm::Quoted
        && store.capabilities().etag_form == EtagForm::Unquoted
    {
        // Refused quoted, accepted bare: a deviation, adapted.
        s3.ok = false;
        s3.adapted = true;
    }
    run.steps.push(s3);
    drop(one);
    Ok(())
}

/// Step 4: If-Match with a made-up ETag (in the form now in use).
async fn step_if_match_made_up(run: &mut StepRun<'_>) -> Result<(), StoreError> {
    let body = scratch_body("if_match_made_up", run.clock);
    let (res, answer, e) = put_step(
        run.store,
        run.key,
        &body,
        PutCondition::IfMatch(MADE_UP_ETAG.into()),
    )
    .await?;
    let note = (res == Outcome::Accepted)
        .then(|| "If-Match ignored: a lease here excludes nobody".to_owned());
    if res == Outcome::Accepted {
        run.etag = e;
    }
    run.steps
        .push(step(StepName::IfMatchMadeUp, res, answer, note));
    Ok(())
}

/// Step 5: If-Match on an absent key: refused, and nothing created.
async fn step_if_match_absent(
    run: &mut StepRun<'_>,
    absent_key: &str,
    changed: &mut Vec<String>,
) -> Result<(), StoreError> {
    let store = run.store;
    let body = scratch_body("if_match_absent", run.clock);
    let (mut res, mut answer, _) = put_step(
        store,
        absent_key,
        &body,
        PutCondition::IfMatch(MADE_UP_ETAG.into()),
    )
    .await?;
    let mut note = None;
    if exists(store, absent_key).await? {
        res = Outcome::Accepted;
        answer = format!("{answer}, object created");
        store.delete(absent_key, None).await?;
        changed.push(format!(
            "created {} with If-Match on an absent key (removed again)",
            sanitize(absent_key)
        ));
        note =
            Some("an evicted holder's renewal would resurrect a deleted lease: refused".to_owned());
    }
    run.steps
        .push(step(StepName::IfMatchAbsent, res, answer, note));
    Ok(())
}

/// Step 6: DELETE with a made-up ETag. Returns whether conditional DELETE
/// is honoured so far; a scratch key it deleted is put back.
async fn step_delete_made_up(run: &mut StepRun<'_>) -> Result<DeleteSupport, StoreError> {
    let (store, key) = (run.store, run.key);
    let (res, answer, note) = match store.delete(key, Some(MADE_UP_ETAG)).await {
        Ok(()) => {
            if exists(store, key).await? {
                (Outcome::Refused, "2xx, object still there".to_owned(), None)
            } else {
                (
                    Outcome::Accepted,
                    "204, object deleted".to_owned(),
                    Some("a lease is released by read, check, delete".to_owned()),
                )
            }
        }
        Err(StoreError::PreconditionFailed) => (Outcome::Refused, "412".to_owned(), None),
        Err(e) => (
            Outcome::Unsupported,
            unsupported_answer(e)?,
            Some("a lease is released by read, check, delete".to_owned()),
        ),
    };
    let delete = match res {
        Outcome::Refused => DeleteSupport::Honoured,
        _ => DeleteSupport::Ignored,
    };
    let mut s6 = step(StepName::DeleteMadeUp, res, answer, note);
    s6.adapted = !s6.ok;
    run.steps.push(s6);
    if res == Outcome::Accepted {
        // Deleted: put it back for the last step.
        let held = scratch_body("recreate", run.clock);
        run.etag = store.put(key, held, PutCondition::None).await?;
    }
    Ok(delete)
}

/// Step 7: DELETE with the current ETag. Returns how a lease is released.
async fn step_delete_current(
    run: &mut StepRun<'_>,
    delete: DeleteSupport,
) -> Result<DeleteSupport, StoreError> {
    let (store, key) = (run.store, run.key);
    let current_etag = run.current_etag().await?;
    let (res, answer) = match store.delete(key, Some(&current_etag)).await {
        Ok(()) => {
            if exists(store, key).await? {
                (Outcome::Refused, "2xx, object still there".to_owned())
            } else {
                (Outcome::Accepted, "204".to_owned())
            }
        }
        Err(StoreError::PreconditionFailed) => (Outcome::Refused, "412".to_owned()),
        Err(e) => (Outcome::Unsupported, unsupported_answer(e)?),
    };
    let note =
        (res != Outcome::Accepted).then(|| "a lease is released by read, check, delete".to_owned());
    let delete = if res == Outcome::Accepted {
        delete
    } else {
        DeleteSupport::Ignored
    };
    let mut s7 = step(StepName::DeleteCurrent, res, answer, note);
    // Not a hazard: release falls back to read, check, delete.
    s7.adapted = !s7.ok;
    run.steps.push(s7);
    Ok(delete)
}

/// Step 8: [`CONCURRENT_CREATES`] creates at once on an absent key (next to
/// the scratch key, removed after): exactly one must win. Returns how many
/// did.
async fn step_concurrent_creates(run: &mut StepRun<'_>) -> Result<usize, StoreError> {
    let key = concurrent_key(run.key);
    let race = creates_at_once(run.store, &key, CONCURRENT_CREATES).await?;
    let won = race.max_winners;
    let answers = race
        .answers
        .iter()
        .map(|(a, n)| format!("{n}× {a}"))
        .collect::<Vec<_>>()
        .join(", ");
    let (result, note) = match won {
        1 => (Outcome::Accepted, race.note.clone()),
        0 => (
            Outcome::Refused,
            Some("none of the concurrent creates won: a contended acquire tries again".into()),
        ),
        n => (
            Outcome::SeveralWon,
            Some(format!(
                "{n} of {CONCURRENT_CREATES} concurrent creates won: the service checks, then \
                 writes, in two steps; a lease here excludes nobody"
            )),
        ),
    };
    let answer = format!("{won} of {CONCURRENT_CREATES} won: {answers}");
    run.steps
        .push(step(StepName::ConcurrentCreates, result, answer, note));
    Ok(won)
}

/// A conditional DELETE's answer that says the service does not support it
/// (501, or 400), as the step's answer; any other error is the probe's.
fn unsupported_answer(e: StoreError) -> Result<String, StoreError> {
    match e {
        StoreError::NotImplemented(m) => Ok(format!("501 {}", sanitize(&m))),
        StoreError::Other {
            status: 400,
            message,
        } => Ok(format!("400 {}", sanitize(&message))),
        e => Err(e),
    }
}
