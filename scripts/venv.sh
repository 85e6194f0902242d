# Sourced by scripts/test and scripts/quickstart: a Python venv with the pinned official
# checker (mlperf-logging 4.1.68), created once, and MLLOG_PYTHON pointing at it.
. scripts/lib/need.sh
need_deb python3-venv "the official checker's venv (python3 -m venv)" python3 -c 'import venv, ensurepip'
MLLOG_CHECKER_VERSION=4.1.68
VENV=${MLLOG_VENV:-$PWD/.venv}
if ! "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mlperf-logging') != '$MLLOG_CHECKER_VERSION')" 2>/dev/null; then
  echo "setting up $VENV with mlperf-logging==$MLLOG_CHECKER_VERSION" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "mlperf-logging==$MLLOG_CHECKER_VERSION"
fi
export MLLOG_PYTHON="$VENV/bin/python"
