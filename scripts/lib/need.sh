# Sourced by the scripts that build or run something with a system prerequisite.
# `need_deb PACKAGE WHAT CHECK...`: runs CHECK; when it fails, installs the Debian PACKAGE
# (root and apt-get needed) and checks again. Without root or apt-get, or when the install
# does not help, it prints one line naming the package and what needs it, and returns 1.
# Scripts that run at once (CI builds beside the tests) install one at a time: apt-get fails
# while another holds its lock, so the install is made under a lock of our own, and the check
# made again under it, since the script that waited may find the package installed.
need_deb() {
  local package=$1 what=$2
  shift 2
  "$@" >/dev/null 2>&1 && return 0
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (
      flock 9
      "$@" >/dev/null 2>&1 && exit 0
      echo "installing $package (needed by $what)" >&2
      apt-get install -y -qq "$package" >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq "$package" >/dev/null 2>&1; } \
        || true
    ) 9>"${TMPDIR:-/tmp}/mllog-need-deb.lock" || true
    "$@" >/dev/null 2>&1 && return 0
  fi
  echo "error: $what needs the Debian package $package (apt-get install $package); it is missing and could not be installed here" >&2
  return 1
}

# `need_pip VENV NAME==VERSION...`: installs into VENV each pinned package whose installed
# version differs (or that is missing), so a test server is the version the tests were written
# against, whatever a registry serves as newest.
need_pip() {
  local venv=$1 spec name missing=()
  shift
  for spec in "$@"; do
    name=${spec%%==*}
    name=${name%%[*}
    "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('$name') != '${spec##*==}')" \
      2>/dev/null || missing+=("$spec")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing ${missing[*]} into $venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check "${missing[@]}"
}
