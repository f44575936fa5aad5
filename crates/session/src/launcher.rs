//! Knowing when sanbench was started by an MPI launcher (mpirun, mpiexec, srun) as one of
//! several ranks. A build without the `mpi` feature cannot join the job: N copies would run N
//! unrelated benchmarks and write N results, so it refuses instead (exit 2).

/// The launcher's view of this process: (rank, size, launcher), from the environment
/// variables Open MPI, MPICH/PMI, PMIx and Slurm set; `None` for a single rank.
#[cfg(any(not(feature = "mpi"), test))]
pub fn mpi_rank(env: &dyn Fn(&str) -> Option<String>) -> Option<(u64, u64, &'static str)> {
    launched(env).filter(|&(_, n, _)| n > 1)
}

/// As [`mpi_rank`], a job of one rank included (`mpirun -n 1`).
pub fn launched(env: &dyn Fn(&str) -> Option<String>) -> Option<(u64, u64, &'static str)> {
    let num = |k: &str| env(k).and_then(|v| v.trim().parse::<u64>().ok());
    let probes: [(&str, &str, &'static str); 4] = [
        (
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_RANK",
            "mpirun (Open MPI)",
        ),
        ("PMI_SIZE", "PMI_RANK", "mpiexec (PMI)"),
        ("PMIX_SIZE", "PMIX_RANK", "a PMIx launcher"),
        ("SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "srun"),
    ];
    probes.iter().find_map(|(size, rank, who)| {
        let n = num(size)?;
        (n >= 1).then(|| (num(rank).unwrap_or(0), n, *who))
    })
}

/// This rank's place among the ranks on its own host (0 first), from the launcher's
/// environment (Open MPI, MPICH's Hydra, PMIx, Slurm); `None` when it does not say.
pub fn local_rank(env: &dyn Fn(&str) -> Option<String>) -> Option<u64> {
    [
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "MPI_LOCALRANKID",
        "PMIX_LOCAL_RANK",
        "SLURM_LOCALID",
    ]
    .iter()
    .find_map(|k| env(k).and_then(|v| v.trim().parse::<u64>().ok()))
}

/// The refusal, when started as one of several ranks without MPI support built in.
#[cfg(not(feature = "mpi"))]
pub fn refuse_without_mpi() -> Option<String> {
    let (rank, size, who) = mpi_rank(&|k| std::env::var(k).ok())?;
    Some(format!(
        "started by {who} as rank {rank} of {size}, but this sanbench was built without the \
         mpi feature: build it with `cargo build --release --features mpi`, or run it once \
         without the launcher"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn launchers_are_recognised_and_one_rank_is_not_a_job() {
        assert_eq!(mpi_rank(&env(&[])), None);
        let om = [("OMPI_COMM_WORLD_SIZE", "4"), ("OMPI_COMM_WORLD_RANK", "2")];
        assert_eq!(mpi_rank(&env(&om)), Some((2, 4, "mpirun (Open MPI)")));
        let slurm = [("SLURM_STEP_NUM_TASKS", "8"), ("SLURM_PROCID", "7")];
        assert_eq!(mpi_rank(&env(&slurm)), Some((7, 8, "srun")));
        // A batch script's single step, or mpirun -n 1: nothing to refuse.
        assert_eq!(mpi_rank(&env(&[("SLURM_STEP_NUM_TASKS", "1")])), None);
        assert_eq!(mpi_rank(&env(&[("PMI_SIZE", "x")])), None);
        let one = [("OMPI_COMM_WORLD_SIZE", "1"), ("OMPI_COMM_WORLD_RANK", "0")];
        assert_eq!(launched(&env(&one)), Some((0, 1, "mpirun (Open MPI)")));
    }

    #[test]
    fn the_local_rank_comes_from_whichever_launcher_set_it() {
        assert_eq!(local_rank(&env(&[])), None);
        assert_eq!(
            local_rank(&env(&[("OMPI_COMM_WORLD_LOCAL_RANK", "3")])),
            Some(3)
        );
        assert_eq!(local_rank(&env(&[("MPI_LOCALRANKID", "1")])), Some(1));
        assert_eq!(local_rank(&env(&[("SLURM_LOCALID", "2")])), Some(2));
        assert_eq!(local_rank(&env(&[("SLURM_LOCALID", "x")])), None);
    }
}
