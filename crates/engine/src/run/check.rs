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
        // Only reads and writes move data: a trim or write-zeroes larger than one transfer
        // is the engine's to split (UNMAP and WRITE SAME within the Block Limits, NVMe Write
        // Zeroes within WZSL, NBD within its maximum).
        let max_data = max_data_bs(&plan.workload);
        if let Some(mt) = info.max_transfer {
            if max_data > mt as u64 {
                return Err(bad(format!(
                    "transfer size {} exceeds the target's maximum {}",
                    format_size(max_data),
                    format_size(mt as u64)
                )));
            }
        }
        spans.push(span);
    }
    Ok(spans)
}

/// The largest I/O that moves data: the read size where a segment reads, the write size
/// where it writes data (not where its only writes are trims and write-zeroes).
fn max_data_bs(w: &Workload) -> u64 {
    w.segments
        .iter()
        .map(|s| {
            let r = if s.read_pct > 0.0 { s.read_bs } else { 0 };
            let wr = if s.write_pct() > 0.0 { s.write_bs } else { 0 };
            r.max(wr)
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Queue, QueueConfig, TargetInfo};
    use crate::spec::Segment;
    use std::sync::Arc;

    struct Limited(TargetInfo);

    impl Target for Limited {
        fn info(&self) -> &TargetInfo {
            &self.0
        }
        fn supports(&self, _: Op) -> bool {
            true
        }
        fn open_queue(&self, _: &QueueConfig) -> Result<Box<dyn Queue>, EngineError> {
            Err(EngineError::Invalid("not for I/O".into()))
        }
    }

    fn plan(read_pct: f64, trim_pct: f64, zeroes_pct: f64, bs: u64) -> RunPlan {
        let t = Limited(TargetInfo {
            uri: "t".into(),
            engine: "t".into(),
            size: 1 << 30,
            block_size: 512,
            max_transfer: Some(128 << 10),
            read_only: false,
            params: Default::default(),
        });
        let w = Workload {
            name: None,
            segments: vec![Segment {
                weight: 1,
                read_bs: 4096,
                write_bs: bs,
                read_pct,
                random_pct: 100.0,
                align: None,
                trim_pct,
                write_zeroes_pct: zeroes_pct,
            }],
            qd: 1,
            workers: 1,
            ramp: std::time::Duration::ZERO,
            time: std::time::Duration::from_millis(10),
            span: None,
            flush_every: 0,
            fua_pct: 0.0,
            rate: None,
            arrival: crate::run::pacer::Arrival::Fixed,
        };
        RunPlan::new(w, vec![Arc::new(t)])
    }

    #[test]
    fn trims_and_zeroes_larger_than_a_transfer_go_to_the_engine() {
        // Reads of 4 KiB beside trims and write-zeroes of 1 MiB: nothing moves 1 MiB.
        check_plan(&plan(50.0, 25.0, 25.0, 1 << 20)).unwrap();
        check_plan(&plan(0.0, 0.0, 100.0, 1 << 20)).unwrap();
        // Writes of data at that size are refused, as before.
        let e = check_plan(&plan(50.0, 25.0, 0.0, 1 << 20)).unwrap_err();
        assert!(
            e.error.to_string().contains("exceeds the target's maximum"),
            "{}",
            e.error
        );
        let e = check_plan(&plan(100.0, 0.0, 0.0, 1 << 20));
        assert!(e.is_ok(), "reads of 4 KiB only");
    }
}
