//! The package README's table of commands and flags against what the `mllog` binary accepts:
//! every command `mllog --help` lists has a row, and every flag its `--help` lists is named in
//! that row, so that a flag added, renamed or removed shows up here before a user meets it.

use std::process::Command;

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_mllog"))
        .args(args)
        .arg("--help")
        .output()
        .expect("run mllog");
    assert!(out.status.success(), "mllog {args:?} --help failed");
    String::from_utf8(out.stdout).expect("UTF-8 help")
}

/// The subcommands `mllog --help` lists (its "Commands:" block), `help` aside.
fn commands() -> Vec<String> {
    let top = help(&[]);
    let block = top
        .split("Commands:")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .expect("a Commands: block");
    block
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

/// The long flags one command's `--help` lists in its "Options:" block, the ones every command
/// has (`--color`, `--help`) aside.
fn flags(command: &str) -> Vec<String> {
    let text = help(&[command]);
    let options = text.split("Options:").nth(1).expect("an Options: block");
    options
        .lines()
        // An option's own line is indented by at most 6 (clap's layout); deeper lines continue
        // a description, which may start with a flag it mentions.
        .filter(|l| {
            let indent = l.len() - l.trim_start().len();
            indent <= 6 && l.trim_start().starts_with('-')
        })
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("--")))
        .map(|w| w.trim_end_matches(',').to_owned())
        .filter(|f| f != "--color" && f != "--help")
        .collect()
}

#[test]
fn every_command_and_flag_is_in_the_readme_table() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("the package README");
    let commands = commands();
    assert!(commands.len() >= 9, "too few commands parsed: {commands:?}");
    let mut missing = Vec::new();
    for command in &commands {
        let prefix = format!("| `{command}");
        let Some(row) = readme.lines().find(|l| l.starts_with(&prefix)) else {
            missing.push(format!("no row for `{command}`"));
            continue;
        };
        for flag in flags(command) {
            if !row.contains(&format!("`{flag}")) && !row.contains(&format!("/`{flag}`")) {
                missing.push(format!("`{command}`'s row lacks `{flag}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "README.md's command table is not what the binary accepts:\n{}",
        missing.join("\n")
    );
}

/// The table's rows name no command the binary lacks.
#[test]
fn the_readme_table_names_no_command_the_binary_lacks() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("the package README");
    let commands = commands();
    let table = readme
        .split("## Every command and flag")
        .nth(1)
        .expect("the section")
        .split("\n## ")
        .next()
        .unwrap();
    for row in table.lines().filter(|l| l.starts_with("| `")) {
        let named = row[3..].split([' ', '`']).next().unwrap();
        assert!(
            commands.iter().any(|c| c == named),
            "README.md's row `{named}` is no command of the binary ({commands:?})"
        );
    }
}
