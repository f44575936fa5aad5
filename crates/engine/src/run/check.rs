//! Checks a plan against each target's geometry before anything is opened for I/O.

use super::{RunError, RunPlan};
use crate::engine::{Op, Target};
use crate::error::EngineError;
use crate::spec::Workload;
use crate::units::format_size;

/// Refuses a workload that trims or writes zeroes on a target without that op (the engine
/// lacks it, or the target did not offer it): callers check it before anything is written,
/// the precondition's fill included.
pub fn check_ops(w: &Workload, t: &dyn Target) -> Result<(), EngineError> {
    let info = t.info();
    for (op, asked) in [
        (Op::Trim, w.has_trims()),
        (Op::WriteZeroes, w.has_write_zeroes()),
    ] {
        if asked && !t.supports(op) {
            return Err(EngineError::Invalid(format!(
                "{}: the {} engine or this target does not offer {} (the workload asks for it)",
                info.uri,
                info.engine,
                op.name()
            )));
        }
    }
    Ok(())
}

/// Checks the workload against each target's geometry and returns the span to use per target.
pub fn check_plan(plan: &RunPlan) -> Result<Vec<u64>, RunError> {
    plan.workload.validate().map_err(|e| RunError {
        target: "spec".into(),
        worker: 0,
        error: EngineError::Invalid(e),
    })?;
    let mut spans = Vec::new();
    for t in &plan.targets {
        let info = t.info();
        let bad = |msg: String| RunError {
            target: info.uri.clone(),
            worker: 0,
            error: EngineError::Invalid(format!("{}: {msg}", info.uri)),
        };
        let span = plan.workload.span.unwrap_or(info.size);
        if span > info.size {
            return Err(bad(format!(
                "size {} is larger than the target ({})",
                format_size(span),
                format_size(info.size)
            )));
        }
        let max_bs = plan.workload.max_bs();
        if span < max_bs {
            return Err(bad(format!(
                "the target ({}) is smaller than the largest transfer ({})",
                format_size(span),
                format_size(max_bs)
            )));
        }
        if info.read_only && plan.workload.has_writes() {
            return Err(bad("the target is read-only but the workload writes".into()));
        }
        check_ops(&plan.workload, &**t).map_err(|e| RunError {
            target: info.uri.clone(),
            worker: 0,
            error: e,
        })?;
        let block = info.block_size.max(1) as u64;
        for s in &plan.workload.segments {
            for (what, v, used) in [
                ("read size", s.read_bs, s.read_pct > 0.0),
                ("write size", s.write_bs, s.read_pct < 100.0),
                ("alignment", s.align.unwrap_or(block), true),
            ] {
                if used && v % block != 0 {
                    return Err(bad(format!(
                        "{what} {} is not a multiple of the block size {}",
                        format_size(v),
                        format_size(block)
                    )));
                }
            }
        }
        if let Some(mt) = info.max_transfer {
            if max_bs > mt as u64 {
                return Err(bad(format!(
                    "transfer size {} exceeds the target's maximum {}",
                    format_size(max_bs),
                    format_size(mt as u64)
                )));
            }
        }
        spans.push(span);
    }
    Ok(spans)
}
