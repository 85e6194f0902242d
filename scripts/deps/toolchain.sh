# Sourced by every script that builds (bash, `set -euo pipefail`, cwd = crate root). Rust links
# through the system C compiler, and the `rpd` feature's bundled SQLite and the tests' stub
# libraries are C: Debian's gcc provides `cc`.
. scripts/lib/need.sh
need_deb gcc "linking Rust programs, the rpd feature's bundled SQLite and the tests' C stubs" \
  command -v cc
