# Sourced by the scripts that build or run something with a system prerequisite.
# `need_deb PACKAGE WHAT CHECK...`: runs CHECK; when it fails, installs the Debian PACKAGE
# (root and apt-get needed) and checks again. Without root or apt-get, or when the install
# does not help, it prints one line naming the package and what needs it, and returns 1.
need_deb() {
  local package=$1 what=$2
  shift 2
  "$@" >/dev/null 2>&1 && return 0
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "installing $package (needed by $what)" >&2
    apt-get install -y -qq "$package" >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq "$package" >/dev/null 2>&1; } \
      || true
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
