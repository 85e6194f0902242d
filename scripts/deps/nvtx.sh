# Sourced by the scripts that build the `nvtx` feature (bash, `set -euo pipefail`, cwd = crate
# root). The `nvtx` crate generates its bindings with bindgen at build time, which loads
# libclang and needs clang's own headers (stddef.h, ...): Debian's libclang-dev brings both.
# Nothing of CUDA is needed to build.
. scripts/lib/need.sh
_nvtx_has_libclang() {
  if [ -n "${LIBCLANG_PATH:-}" ]; then
    ls "$LIBCLANG_PATH"/libclang*.so* >/dev/null 2>&1 || return 1
  else
    ls /usr/lib/llvm-*/lib/libclang.so /usr/lib/llvm-*/lib/libclang-*.so* \
      /usr/lib/*-linux-gnu/libclang-*.so* >/dev/null 2>&1 || return 1
  fi
  ls /usr/lib/llvm-*/lib/clang/*/include/stddef.h >/dev/null 2>&1
}
need_deb libclang-dev "the nvtx feature (bindgen)" _nvtx_has_libclang
unset -f _nvtx_has_libclang
