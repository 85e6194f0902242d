//! [`Ranks`]: which process this is and which processes write, one value for the builder.

/// Which rank this process is and which ranks write MLLOG records; [`crate::Builder::ranks`]
/// takes it. The default suits a launcher that sets a rank variable: the rank is detected,
/// rank 0 writes, the others stay silent (their callsites disabled).
///
/// ```
/// use tracing_mllog::{MllogLayer, Output, Ranks};
///
/// // Rank 3 of a job where every rank writes a file of its own.
/// let dir = tempfile::tempdir()?;
/// let (_layer, _guard) = MllogLayer::builder()
///     .output(Output::file(dir.path().join("rank3.txt")))
///     .ranks(Ranks::default().rank(3).all_write(true))
///     .build::<tracing_subscriber::Registry>()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ranks {
    pub(crate) rank: Option<u32>,
    pub(crate) writer: u32,
    pub(crate) all_write: bool,
}

impl Ranks {
    /// This process's global rank. Without it, the rank comes from the first of
    /// [`crate::env::RANK_VARIABLES`] that is set (`MLLOG_RANK`, `RANK`,
    /// `OMPI_COMM_WORLD_RANK`, `PMIX_RANK`, `PMI_RANK`, `MV2_COMM_WORLD_RANK`,
    /// `SLURM_PROCID`, `JOB_COMPLETION_INDEX`), else 0; another that disagrees is a warning
    /// naming both.
    pub fn rank(mut self, rank: u32) -> Self {
        self.rank = Some(rank);
        self
    }

    /// The rank that writes MLLOG records (default 0), unless every rank does.
    pub fn writer(mut self, rank: u32) -> Self {
        self.writer = rank;
        self
    }

    /// Every rank writes, whatever [`Ranks::writer`] says (`MLLOG_ALL_RANKS`); give each its
    /// own file or namespace.
    pub fn all_write(mut self, on: bool) -> Self {
        self.all_write = on;
        self
    }
}
