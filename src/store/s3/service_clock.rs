//! The service's clock: an SDK interceptor that reads each answer's `Date`
//! header and narrows this host's offset from it ([`OffsetEstimator`]: the
//! intersection of every answer's `Date` interval).

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use chrono::{DateTime, Utc};

use crate::clock::{boottime, DateAnswer, OffsetEstimator, ServerOffset};

/// The service's clock from the `Date` headers of its answers so far,
/// shared with the SDK interceptor that reads them.
#[derive(Debug, Clone, Default)]
pub(super) struct ServerClock(std::sync::Arc<std::sync::Mutex<ClockReading>>);

impl ServerClock {
    /// This host's offset from the service's clock now, from every answer
    /// since the last one without a usable `Date`.
    pub(super) fn offset(&self) -> Option<ServerOffset> {
        let (mono, wall) = (boottime(), Utc::now());
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .offset
            .estimate(mono, wall)
    }

    /// Why the latest answer gave no estimate (a sentence, escaped).
    pub(super) fn problem(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .problem
            .clone()
    }
}

/// What the answers said about the service's clock.
#[derive(Debug, Clone, Default)]
struct ClockReading {
    /// The intersection of their `Date` intervals (forgotten at an answer
    /// without a usable one).
    offset: OffsetEstimator,
    /// Why the latest answer gave no estimate: no `Date`, or one that does
    /// not parse (a sentence, escaped).
    problem: Option<String>,
}

/// When the request of this attempt was sent (boot-time clock).
#[derive(Debug, Clone, Copy)]
struct SentAt(std::time::Duration);

impl aws_smithy_types::config_bag::Storable for SentAt {
    type Storer = aws_smithy_types::config_bag::StoreReplace<Self>;
}

impl Intercept for ServerClock {
    fn name(&self) -> &'static str {
        "leasectl-server-clock"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        cfg.interceptor_state().store_put(SentAt(boottime()));
        Ok(())
    }

    fn read_after_transmit(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let (received_mono, received_wall) = (boottime(), Utc::now());
        let Some(sent_mono) = cfg.load::<SentAt>().map(|s| s.0) else {
            return Ok(());
        };
        let header = context.response().headers().get("date");
        let mut reading = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match header.map(|d| (d, parse_http_date(d))) {
            Some((_, Some(date))) => {
                reading.offset.add(DateAnswer {
                    date,
                    sent_mono,
                    received_mono,
                    received_wall,
                });
                reading.problem = None;
            }
            Some((d, None)) => {
                reading.offset.reset();
                reading.problem = Some(format!(
                    "the service's clock is unknown: its Date header `{}` is not an HTTP date, \
                     so this host's clock cannot be checked against it",
                    crate::text::sanitize_cut(d, 64)
                ));
            }
            None => {
                reading.offset.reset();
                reading.problem = Some(
                    "the service's clock is unknown: its answers carry no Date header, \
                     so this host's clock cannot be checked against it"
                        .to_owned(),
                );
            }
        }
        Ok(())
    }
}

/// An HTTP `Date` (RFC 7231 IMF-fixdate, or the RFC 2822 form it is a case
/// of), UTC; `None` when it does not parse.
fn parse_http_date(d: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc2822(d.trim())
        .ok()
        .map(|d| d.with_timezone(&Utc))
}
