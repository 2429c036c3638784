#!/usr/bin/env bash
# Set up a fresh machine for pos_geometry: Debian's chromium (static figure export and the
# render test), a virtual environment in .venv, the CPU build of torch first, then the
# package with what it needs to run (the `run` extra); with --dev, also the tools to test it, run the
# notebooks and sweeps, and build the documentation (the `dev` extra). Safe to run again: it only adds
# what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

EXTRAS=run
for arg in "$@"; do
  case "$arg" in
    --dev) EXTRAS=dev ;;
    *) echo "setup: unknown option $arg (known: --dev)" >&2; exit 2 ;;
  esac
done

PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Debian's chromium (for PNG/SVG export and the render test)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "setup: chromium not found and cannot apt-get install it here; PNG export and the browser test will be skipped" >&2
  fi
fi

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# torch first: a plain 'torch' requirement with no torch installed would pull a multi-GB CUDA build.
.venv/bin/python -m pip install -q "$TORCH_SPEC"
.venv/bin/python -m pip install -q -e ".[$EXTRAS]"
echo "setup: done ($(.venv/bin/python -c 'import torch, pos_geometry; print("pos_geometry", pos_geometry.__version__, "torch", torch.__version__)'))"
