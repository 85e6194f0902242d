//! `mllog completions SHELL`.

use clap_complete::Shell;

/// Options of `mllog completions`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: Shell,
}

pub fn run(a: Args, cmd: &mut clap::Command) -> u8 {
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, cmd, "mllog", &mut buf);
    if crate::emit(&String::from_utf8_lossy(&buf)) {
        crate::OK
    } else {
        crate::USAGE_OR_IO
    }
}
