//! The library half of the `mllog` command: the dry-run driver (a preset through the real
//! layer), the plots of `mllog summary` and the follower of `mllog watch` (a log another
//! process is writing, as one byte stream). The command itself is `src/bin/mllog`; everything
//! it checks, summarises and scores comes from `mllog-core`.
#![deny(missing_docs)]
#![warn(missing_debug_implementations)]
#![warn(unreachable_pub)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod dry_run;
pub mod follow;
pub mod plot;
