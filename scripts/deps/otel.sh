# Sourced by scripts/test (bash, set -euo pipefail, cwd = crate root, $VENV = the Python venv).
# The OTel sink's tests need a real OTLP collector: rotel (PyPI wheel with the `rotel-agent`
# binary, a Rust OTLP collector with gRPC and HTTP receivers). Installed once into $VENV;
# tests/otel/ reads MLLOG_ROTEL_BIN and fails (never skips) without it.
if ! "$VENV/bin/python" -c "import importlib.metadata as m; m.version('rotel')" 2>/dev/null; then
  echo "installing rotel into $VENV" >&2
  "$VENV/bin/pip" install --quiet --disable-pip-version-check rotel
fi
MLLOG_ROTEL_BIN="$("$VENV/bin/python" -c "import rotel, os; print(os.path.join(os.path.dirname(rotel.__file__), 'rotel-agent'))")"
export MLLOG_ROTEL_BIN
# rotel-agent links libpython3.11 dynamically; a bare Debian 12 lacks the shared library.
if ! ldd "$MLLOG_ROTEL_BIN" 2>/dev/null | grep -q "libpython.*=> /"; then
  if command -v apt-get >/dev/null; then
    echo "installing libpython3.11 for rotel-agent" >&2
    (apt-get install -y -qq libpython3.11 >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq libpython3.11 >/dev/null; }) || true
  fi
fi
