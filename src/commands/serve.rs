//! `leasectl serve`: the Prometheus exporter (module `crate::monitor::serve`),
//! and its probes (`--module`, module `crate::monitor::probe`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::cli::{ProbeEndpointArgs, ServeArgs};
use crate::clock::SystemClock;
use crate::config::{self, CONFIG_ENV};
use crate::exit::{say, Exit};
use crate::monitor::probe::{
    AllowList, Bounds, ConnectorStores, ProbeModule, ProbeOptions, Prober,
};
use crate::monitor::serve;
use crate::setup::{audit_path, open_targets, recipe, relist_every, Shared};
use crate::snapshot::{GatherOptions, Gatherer};
use crate::store::s3::S3Options;
use crate::store::Counters;
use crate::target::Connector;
use crate::text::sanitize;

/// Serves `/metrics` and `/healthz` (and `/probe` with `--module`) until
/// SIGTERM or SIGINT.
pub(crate) async fn run(args: &ServeArgs, shared: &Shared) -> Exit {
    let probes = &args.probes;
    if args.targets.is_empty() && args.pod.no_pod && probes.modules.is_empty() {
        say("serve with no TARGET, no --module and --no-pod has nothing to export");
        return Exit::Usage;
    }
    let audit_path = audit_path(args.audit_log.as_deref());
    let prober = if probes.modules.is_empty() {
        None
    } else {
        match modules(probes, args.depth, shared) {
            Ok(m) => Some(Arc::new(Prober::new(
                m,
                ProbeOptions {
                    bounds: Bounds {
                        max_targets: probes.probe_max_targets as usize,
                        max_bytes: probes.probe_max_bytes,
                        forget_after: probes.probe_forget_after,
                    },
                    timeout_offset: probes.probe_timeout_offset,
                    max_timeout: probes.probe_timeout,
                },
                SystemClock::shared(),
                audit_path.clone(),
            ))),
            Err(why) => {
                say(why);
                return Exit::Usage;
            }
        }
    };
    let refresh = args.refresh.max(Duration::from_secs(1));
    let counters = Arc::new(Counters::default());
    let open = open_targets(&shared.connector, &args.targets, &counters, false).await;
    let relist = relist_every(refresh);
    serve::serve_with_probes(
        Gatherer::new(open.read, shared.gather_at(args.depth), relist)
            .schedule(refresh)
            .budget(args.max_requests),
        SystemClock::shared(),
        recipe(&args.pod, shared),
        counters,
        serve::ServeOptions {
            listen: args.listen,
            refresh,
            request_timeout: shared.gather.request_timeout,
            audit_path,
        },
        prober,
    )
    .await
}

/// The probe modules named by `--module`, each from its context of the
/// config file: its endpoint, region, profile, path style, depth,
/// concurrency and exclusion mode (the command line's where the context
/// sets none; serve's `--depth`), its allow-list (`allow`, else `targets`).
///
/// Errors: no config file, a context that is not in it, a context that
/// allows nothing (a sentence naming the file and what to add).
fn modules(
    probes: &ProbeEndpointArgs,
    depth: u32,
    shared: &Shared,
) -> Result<BTreeMap<String, ProbeModule>, String> {
    let path = config::path().map_err(|e| e.to_string())?;
    let config = config::load(&path)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            format!(
                "--module names contexts of the config file, and there is none at {} (set {} or create it)",
                path.display(),
                CONFIG_ENV
            )
        })?;
    let mut out = BTreeMap::new();
    for name in &probes.modules {
        let ctx = config.context(name).map_err(|e| e.to_string())?;
        let allow = ctx.probe_allow().to_vec();
        if allow.is_empty() {
            return Err(format!(
                "the context `{}` in {} allows a probe to read nothing: give it `allow = [\"s3://bucket/\"]` (or `targets`), the TARGETs a scrape may name and those under them",
                sanitize(name),
                path.display()
            ));
        }
        let s3 = &shared.s3;
        let connector = Connector::new(S3Options {
            endpoint_url: ctx.endpoint_url.clone().or_else(|| s3.endpoint_url.clone()),
            region: ctx.region.clone().or_else(|| s3.region.clone()),
            profile: ctx.profile.clone().or_else(|| s3.profile.clone()),
            path_style: ctx.path_style.unwrap_or(s3.path_style),
            request_timeout: Some(s3.timeout),
            max_attempts: None,
        });
        out.insert(
            name.clone(),
            ProbeModule {
                stores: Arc::new(ConnectorStores::new(connector)),
                gather: GatherOptions {
                    depth: ctx.depth.unwrap_or(depth),
                    concurrency: ctx
                        .concurrency
                        .map_or(shared.gather.concurrency, usize::from),
                    request_timeout: s3.timeout,
                },
                best_effort: ctx.conditional.map_or(shared.best_effort, |on| !on),
                allow: AllowList::new(allow),
            },
        );
    }
    Ok(out)
}
