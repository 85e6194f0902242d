//! Which rank this process is.

use crate::Error;

/// The launcher variables that carry the global rank, in the order they are consulted:
/// PyTorch/torchrun, Slurm, Open MPI, MPICH/Intel MPI (PMI).
pub const RANK_VARIABLES: [&str; 4] = ["RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"];

/// The global rank from the first launcher variable that is set, with that variable's name.
///
/// `Ok(None)` when none is set (a single-process run). A variable that is set but is not a
/// non-negative integer is an error naming it: guessing rank 0 would make every rank write.
pub fn detect_rank() -> Result<Option<(u32, &'static str)>, Error> {
    detect_rank_from(|name| std::env::var_os(name))
}

pub(crate) fn detect_rank_from(
    get: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<Option<(u32, &'static str)>, Error> {
    for name in RANK_VARIABLES {
        let Some(raw) = get(name) else { continue };
        let text = raw.to_string_lossy();
        let trimmed = text.trim();
        if trimmed.is_empty() {
            continue;
        }
        return trimmed
            .parse::<u32>()
            .map(|r| Some((r, name)))
            .map_err(|_| Error::env(name, &text, "expected a non-negative integer rank"));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<std::ffi::OsString> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.into())
    }

    #[test]
    fn each_launcher_variable_is_read() {
        for name in RANK_VARIABLES {
            assert_eq!(
                detect_rank_from(env(&[(name, "3")])).unwrap(),
                Some((3, name))
            );
        }
        assert_eq!(detect_rank_from(env(&[])).unwrap(), None);
    }

    #[test]
    fn first_variable_wins_and_garbage_is_an_error() {
        let got = detect_rank_from(env(&[("SLURM_PROCID", "5"), ("RANK", "2")])).unwrap();
        assert_eq!(got, Some((2, "RANK")));
        let err = detect_rank_from(env(&[("OMPI_COMM_WORLD_RANK", "x1")])).unwrap_err();
        assert!(err.to_string().contains("OMPI_COMM_WORLD_RANK"), "{err}");
    }
}
