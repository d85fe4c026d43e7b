//! `leasectl takeover`: the command line wired to the operator's takeover
//! ([`crate::takeover::operator`]).

use crate::cli::TakeoverArgs;
use crate::clock::SystemClock;
use crate::exit::say;
use crate::exit::Exit;
use crate::setup::Shared;
use crate::setup::{announce, fail, open_audit};
use crate::takeover::{takeover_cmd, OperatorTakeover};

/// `leasectl takeover PREFIX_URL --reason WHY`: the audit log is opened
/// before anything else (no log, no write); then [`takeover_cmd`].
pub(crate) async fn run(a: &TakeoverArgs, shared: &Shared) -> Exit {
    let target = &a.prefix_url;
    let connector = &shared.connector;
    announce("takeover", connector, target).await;
    let log = match open_audit(connector, &a.audit).await {
        Ok(l) => l,
        Err(e) => {
            say(format!("{e}; nothing was sent"));
            return Exit::Failed;
        }
    };
    let store = match connector.open(target).await {
        Ok(s) => s,
        Err(e) => return fail(&color_eyre::eyre::eyre!("{target}: {e}")),
    };
    let takeover = OperatorTakeover {
        prefix: target.prefix().to_owned(),
        url: target.to_string(),
        bucket: target.bucket().map(str::to_owned),
        reason: a.reason.clone(),
        expect_etag: a.expect_etag.clone(),
        then: a.then.clone(),
        force: a.force,
        yes: a.yes,
        ttl_s: a.ttl.as_secs().max(1),
        exclusion: shared.exclusion(),
        record_format: a.record_format,
    };
    takeover_cmd(
        store,
        SystemClock::shared(),
        &log,
        takeover,
        &mut std::io::stdout(),
    )
    .await
}
