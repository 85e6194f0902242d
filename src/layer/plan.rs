//! The sink plan: which sinks the worker calls, in which order, each delivered how. The order
//! is [`Place`]'s, stated once; `Builder::build` only says where each sink belongs.

use crate::sink::{Delivery, Sink};

/// Where a sink goes. The worker calls the sinks in the order of these variants, and in the
/// order they were added within one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Place {
    /// The MLLOG output: the log itself, first.
    Output,
    /// The live checker: right after the output, so it checks exactly the lines written.
    Checker,
    /// Sinks that read the file the output has just flushed (the uploader).
    AfterLog,
    /// The sinks given to the builder, in the order given.
    Given,
    /// The other optional sinks, in registration order (`crate::registry::FACTORIES`).
    Optional,
}

impl Place {
    /// The output and the checker are the log: always inline, whatever a delivery chosen by
    /// name says.
    fn is_log(self) -> bool {
        matches!(self, Place::Output | Place::Checker)
    }
}

/// The sinks of one build, each with its place and delivery.
#[derive(Default)]
pub(crate) struct SinkPlan {
    sinks: Vec<(Place, Box<dyn Sink>, Delivery)>,
}

impl SinkPlan {
    /// Adds `sink` at `place`; the log's own sinks are inline whatever `delivery` says.
    pub(crate) fn add(&mut self, place: Place, sink: Box<dyn Sink>, delivery: Delivery) {
        let delivery = if place.is_log() {
            Delivery::Inline
        } else {
            delivery
        };
        self.sinks.push((place, sink, delivery));
    }

    /// Whether any sink is planned.
    pub(crate) fn is_empty(&self) -> bool {
        self.sinks.is_empty()
    }

    /// The names of the sinks planned so far, in the order added.
    #[cfg(test)]
    fn names(&self) -> Vec<String> {
        self.sinks
            .iter()
            .map(|(_, s, _)| s.name().to_owned())
            .collect()
    }

    /// The sinks in the order the worker calls them. A delivery chosen by name
    /// (`Builder::sink_delivery`, the last one for a name wins) applies to every sink of that
    /// name but the log's own.
    pub(crate) fn into_ordered(
        mut self,
        by_name: &[(String, Delivery)],
    ) -> Vec<(Box<dyn Sink>, Delivery)> {
        // Stable: within a place, the order added.
        self.sinks.sort_by_key(|(place, _, _)| *place);
        self.sinks
            .into_iter()
            .map(|(place, sink, delivery)| {
                let chosen = by_name.iter().rev().find(|(n, _)| n == sink.name());
                match chosen {
                    Some((_, d)) if !place.is_log() => (sink, *d),
                    _ => (sink, delivery),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::TracedRecord;
    use crate::sink::SinkError;

    struct Named(&'static str);

    impl Sink for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn write(&mut self, _: &TracedRecord) -> Result<(), SinkError> {
            Ok(())
        }
    }

    /// Added in the order `build` adds them (the given sinks first, the output last, once
    /// nothing else can fail), called in the order of `Place`.
    #[test]
    fn the_worker_calls_the_sinks_in_the_order_of_their_places() {
        let mut plan = SinkPlan::default();
        let iso = Delivery::isolated();
        plan.add(Place::Given, Box::new(Named("mine")), iso);
        plan.add(Place::Checker, Box::new(Named("compliance")), iso);
        plan.add(Place::Optional, Box::new(Named("rpd")), iso);
        plan.add(Place::AfterLog, Box::new(Named("upload")), iso);
        plan.add(Place::Given, Box::new(Named("memory")), iso);
        plan.add(Place::Optional, Box::new(Named("otel")), iso);
        plan.add(Place::Output, Box::new(Named("mllog")), iso);
        assert_eq!(
            plan.names(),
            [
                "mine",
                "compliance",
                "rpd",
                "upload",
                "memory",
                "otel",
                "mllog"
            ]
        );
        let by_name = [
            ("otel".to_owned(), Delivery::Inline),
            ("mllog".to_owned(), Delivery::isolated()),
            ("compliance".to_owned(), Delivery::isolated()),
            ("otel".to_owned(), Delivery::Isolated { capacity: 8 }),
        ];
        let ordered: Vec<(String, Delivery)> = plan
            .into_ordered(&by_name)
            .into_iter()
            .map(|(s, d)| (s.name().to_owned(), d))
            .collect();
        assert_eq!(
            ordered,
            [
                ("mllog".to_owned(), Delivery::Inline),
                ("compliance".to_owned(), Delivery::Inline),
                ("upload".to_owned(), iso),
                ("mine".to_owned(), iso),
                ("memory".to_owned(), iso),
                ("rpd".to_owned(), iso),
                ("otel".to_owned(), Delivery::Isolated { capacity: 8 }),
            ]
        );
    }
}
