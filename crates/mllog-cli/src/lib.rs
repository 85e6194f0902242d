//! The library half of the `mllog` command: the dry-run driver (a preset through the real
//! layer) and the plots of `mllog summary`. The command itself is `src/bin/mllog`; everything
//! it checks, summarises and scores comes from `mllog-core`.
#![deny(missing_docs)]
#![warn(unreachable_pub)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod dry_run;
pub mod follow;
pub mod plot;
