//! `leasectl bucket hold`: the command line wired to the hold engine
//! ([`crate::hold`]).

use crate::bucket::LeaseConfig;
use crate::cli::HoldArgs;
use crate::clock::SystemClock;
use crate::exit::Exit;
use crate::hold::{hold, HoldOptions};
use crate::setup::Shared;

/// `leasectl bucket hold PREFIX_URL -- CMD`: each request's deadline is at
/// most a third of the TTL.
pub async fn run(a: &HoldArgs, shared: &Shared) -> Exit {
    let target = &a.prefix_url;
    let connector = shared.connector_with_timeout(shared.s3.timeout.min(a.ttl / 3));
    crate::setup::announce("bucket hold", &connector, target).await;
    let store = match connector.open(target).await {
        Ok(s) => s,
        Err(e) => return crate::setup::fail(&color_eyre::eyre::eyre!("{target}: {e}")),
    };
    let config = LeaseConfig {
        ttl_s: a.ttl.as_secs(),
        exclusion: shared.exclusion(),
        record_format: a.record_format,
    };
    if config.record_format == crate::bucket::RecordFormat::Seed {
        tracing::info!(
            "record format seed: no generation written (the LEASE has the seed's four fields; the command gets no generation)"
        );
    }
    hold(
        store,
        SystemClock::shared(),
        target.prefix(),
        HoldOptions {
            config,
            instance_id: a.instance_id.clone(),
            wait: a.wait,
            grace: a.grace,
            containment: a.containment,
        },
        &a.command,
    )
    .await
}
