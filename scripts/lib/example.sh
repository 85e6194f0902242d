# Sourced by scripts/burn and scripts/candle (cwd = repository root, CARGO_TARGET_DIR set).
#
# `example_cargo MANIFEST ARGS...` runs cargo on an example workspace with its own code compiled
# through clippy-driver (RUSTC_WORKSPACE_WRAPPER, which wraps the workspace's members only: the
# mechanism `cargo clippy` uses). The example is linted by the build that runs it, instead of by
# a `cargo clippy` that would check all of burn's or candle's dependencies once more (minutes
# on a small machine). Every cargo call on the example goes through here: the wrapper is part
# of what cargo remembers of a build, and a call without it would build the example again.
#
# `example_build MANIFEST`: the release build of the example's binary and tests, failing on
# any warning, the lints' among them.
example_cargo() {
  local manifest=$1
  shift
  RUSTC_WORKSPACE_WRAPPER=$(command -v clippy-driver) cargo "$@" --manifest-path "$manifest"
}

example_build() {
  command -v clippy-driver >/dev/null ||
    { echo "error: linting the example needs clippy (rustup component add clippy)" >&2; return 1; }
  local log status=0
  log=$(mktemp)
  example_cargo "$1" test --release --no-run 2>"$log" || status=$?
  cat "$log" >&2
  if [ "$status" = 0 ] && grep -q "^warning" "$log"; then
    echo "error: the build of $1 warned (above)" >&2
    status=1
  fi
  rm -f "$log"
  return "$status"
}
