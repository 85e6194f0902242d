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
# any warning, the lints' among them. It writes the test executables' paths to
# `example_tests_list MANIFEST`.
#
# `example_test MANIFEST`: runs those test executables, as `cargo test` would (from the
# example's folder) but without cargo: cargo would wait for its lock on the release folder
# while another release build (CI builds the CLI's wheel meanwhile) holds it.
example_cargo() {
  local manifest=$1
  shift
  RUSTC_WORKSPACE_WRAPPER=$(command -v clippy-driver) cargo "$@" --manifest-path "$manifest"
}

example_tests_list() {
  echo "$CARGO_TARGET_DIR/example-tests/$(basename "$(dirname "$1")")"
}

example_build() {
  command -v clippy-driver >/dev/null ||
    { echo "error: linting the example needs clippy (rustup component add clippy)" >&2; return 1; }
  local log artifacts list status=0
  log=$(mktemp)
  artifacts=$(mktemp)
  example_cargo "$1" test --release --no-run --message-format=json-render-diagnostics \
    >"$artifacts" 2>"$log" || status=$?
  cat "$log" >&2
  if [ "$status" = 0 ] && grep -q "^warning" "$log"; then
    echo "error: the build of $1 warned (above)" >&2
    status=1
  fi
  if [ "$status" = 0 ]; then
    list=$(example_tests_list "$1")
    mkdir -p "$(dirname "$list")"
    python3 -c '
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message["profile"]["test"]:
        print(message["executable"])' <"$artifacts" >"$list" || status=$?
    [ -s "$list" ] || { echo "error: the build of $1 made no test executable" >&2; status=1; }
  fi
  rm -f "$log" "$artifacts"
  return "$status"
}

example_test() {
  local list test
  list=$(example_tests_list "$1")
  [ -s "$list" ] || { echo "error: no test executables listed in $list (build first)" >&2; return 1; }
  while read -r test; do
    echo "     Running $test"
    (cd "$(dirname "$1")" && "$test" </dev/null)
  done <"$list"
}
