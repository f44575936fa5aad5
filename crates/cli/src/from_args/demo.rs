//! `sanbench demo ARGS` as a [`DemoConfig`].

use crate::args::DemoArgs;
use sanbench_session::demo::DemoConfig;

/// The configuration of `sanbench demo ARGS`.
pub fn demo(a: DemoArgs) -> DemoConfig {
    DemoConfig {
        out: a.out,
        suite: a.suite,
        size: a.size.0,
        prealloc: a.prealloc,
        repeat: a.repeat,
        max_repeat: a.max_repeat,
        budget: a.budget.0,
        min_effect: a.min_effect,
        time: a.time.0,
        ramp: a.ramp.0,
        db: a.db,
        no_store: a.no_store,
        placement: a.placement,
        require_headroom: a.require_headroom,
        quiet: a.quiet,
    }
}
