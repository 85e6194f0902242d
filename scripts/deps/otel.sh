# Sourced by scripts/test (bash, set -euo pipefail, cwd = crate root, $VENV = the Python venv).
# The OTel sink's tests need a real OTLP collector: rotel (PyPI wheel with the `rotel-agent`
# binary, a Rust OTLP collector with gRPC and HTTP receivers), pinned (it has only
# pre-releases). Installed once into $VENV; tests/otel/ reads MLLOG_ROTEL_BIN and fails (never
# skips) without it.
. scripts/lib/need.sh
need_pip "$VENV" rotel==0.0.1a15
MLLOG_ROTEL_BIN="$("$VENV/bin/python" -c "import rotel, os; print(os.path.join(os.path.dirname(rotel.__file__), 'rotel-agent'))")"
export MLLOG_ROTEL_BIN
# rotel-agent links libpython3.11 dynamically; a bare Debian 12 lacks the shared library.
_otel_rotel_links() { ! ldd "$MLLOG_ROTEL_BIN" | grep -q "not found"; }
need_deb libpython3.11 "rotel-agent, the OTLP collector of the OpenTelemetry tests" _otel_rotel_links
unset -f _otel_rotel_links
