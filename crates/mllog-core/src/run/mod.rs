//! What a run aims for and when it evaluates: quality targets and convergence, the evaluation
//! schedule. The run's live accounting (`RunHandle`) belongs to the layer, in `tracing-mllog`.

mod schedule;
mod target;

pub use schedule::EvalSchedule;
pub use target::{Direction, Target};
