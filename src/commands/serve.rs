//! `leasectl serve`: the Prometheus exporter (module `crate::monitor::serve`).

use std::sync::Arc;
use std::time::Duration;

use crate::cli::ServeArgs;
use crate::exit::Exit;
use crate::monitor::serve;
use crate::setup::Shared;
use crate::snapshot::Gatherer;
use crate::store::Counters;

/// Serves `/metrics` and `/healthz` until SIGTERM or SIGINT.
pub async fn run(args: &ServeArgs, shared: &Shared) -> Exit {
    if args.targets.is_empty() && args.pod.no_pod {
        crate::exit::say("serve with no TARGET and --no-pod has nothing to export");
        return Exit::Usage;
    }
    let refresh = args.refresh.max(Duration::from_secs(1));
    let counters = Arc::new(Counters::default());
    let open = crate::setup::open_targets(&shared.connector, &args.targets, &counters, false).await;
    let relist = crate::setup::relist_every(refresh);
    serve::serve(
        Gatherer::new(open.read, shared.gather_at(args.depth), relist)
            .schedule(refresh)
            .budget(args.max_requests),
        crate::clock::SystemClock::shared(),
        crate::setup::recipe(&args.pod, shared),
        counters,
        serve::ServeOptions {
            listen: args.listen,
            refresh,
            request_timeout: shared.gather.request_timeout,
            audit_path: crate::setup::audit_path(args.audit_log.as_deref()),
        },
    )
    .await
}
