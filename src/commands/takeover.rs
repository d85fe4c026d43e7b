//! `leasectl takeover`: the command line wired to the operator's takeover
//! ([`crate::takeover::operator`]).

use crate::cli::ThenArg;
use crate::clock::SystemClock;
use crate::exit::Exit;
use crate::setup::Context;
use crate::takeover::{takeover_cmd, TakeoverArgs};

/// `leasectl takeover PREFIX_URL --reason WHY`: the audit log is opened
/// before anything else (no log, no write); then [`takeover_cmd`].
pub async fn run(a: &crate::cli::TakeoverArgs, ctx: &Context) -> Exit {
    let target = match crate::setup::target_or_usage(&a.prefix_url) {
        Ok(t) => t,
        Err(exit) => return exit,
    };
    let connector = &ctx.connector;
    crate::setup::announce("takeover", connector, &target).await;
    let log = match crate::setup::open_audit(connector, &a.audit).await {
        Ok(l) => l,
        Err(e) => {
            crate::exit::say(format!("{e}; nothing was sent"));
            return Exit::Failed;
        }
    };
    let store = match connector.open(&target).await {
        Ok(s) => s,
        Err(e) => return crate::setup::fail(&color_eyre::eyre::eyre!("{target}: {e}")),
    };
    let args = TakeoverArgs {
        prefix: target.prefix().to_owned(),
        url: target.to_string(),
        endpoint: connector.endpoint(&target).await,
        bucket: target.bucket().map(str::to_owned),
        reason: a.reason.clone(),
        expect_etag: a.expect_etag.clone(),
        then: then_of(&a.then),
        force: a.force,
        yes: a.yes,
        ttl_s: ctx.applied.ttl.unwrap_or(a.ttl).as_secs().max(1),
        exclusion: ctx.exclusion(),
        record_format: ctx.applied.record_format_or(a.record_format),
    };
    takeover_cmd(
        store,
        SystemClock::shared(),
        &log,
        args,
        &mut std::io::stdout(),
    )
    .await
}

/// The takeover's `Then` for `--then`.
fn then_of(t: &ThenArg) -> crate::takeover::Then {
    match t {
        ThenArg::Release => crate::takeover::Then::Release,
        ThenArg::Hold => crate::takeover::Then::Hold,
        ThenArg::Handover(id) => crate::takeover::Then::Handover(id.clone()),
    }
}
