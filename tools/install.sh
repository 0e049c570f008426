#!/usr/bin/env bash
# One-command set-up: creates .venv in the repository and installs the OpenMMLab
# stack on torch 2.14.1, mmcv 2.1.0 with compiled ops included, then tlalign_mm
# in editable mode. Idempotent: a second run with nothing changed takes seconds.
#
#   bash tools/install.sh
#
# Environment knobs:
#   PYTHON=python3.11      interpreter used to create .venv
#   MMCV_WHEEL_DIRS="..."  extra folders searched for a prebuilt mmcv wheel
#                          (default: ../shared/wheels, then .cache/wheels)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
CACHE="$ROOT/.cache/wheels"          # our own mmcv build lands here (git-ignored)
STAMP="$VENV/.tlalign_mm-installed"
mkdir -p "$CACHE"

log() { printf '[install %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
pip_q() { "$PY" -m pip install --disable-pip-version-check -q "$@"; }

# Versions the stack forces (see README "Installation"): mmdet 3.3.0 and
# mmseg 1.2.2 refuse mmcv >= 2.2, and mmcv 2.1.0 only builds against torch 2.14
# with C++20 and a setuptools that still ships pkg_resources.
TORCH_PINS=(torch==2.14.1 torchvision==0.29.1)
BUILD_PINS=("setuptools>=77,<81" wheel ninja)
STACK_PINS=(mmengine==0.10.7 mmdet==3.3.0 mmsegmentation==1.2.2 mmpretrain==1.2.0
            "timm>=1.0,<2" "pytest>=8" "ruff>=0.6" scikit-learn scipy matplotlib ftfy regex
            pyautoattack==0.2.0 radon==6.0.1)

fingerprint() {
  cat "$ROOT/tools/install.sh" "$ROOT/setup.py" | sha256sum | cut -d' ' -f1
}

stack_ok() {
  "$PY" - <<'PY' >/dev/null 2>&1
import torch, torchvision, mmengine, mmcv, mmdet, mmseg, mmpretrain, timm, pytest
from mmcv.ops import RoIAlign, nms
assert torch.__version__.startswith('2.14.1'), torch.__version__
assert mmcv.__version__ == '2.1.0', mmcv.__version__
import tlalign_mm
PY
}

if [ -x "$PY" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(fingerprint)" ] && stack_ok; then
  log "nothing changed: .venv is complete ($("$PY" -c 'import torch, mmcv; print("torch", torch.__version__, "mmcv", mmcv.__version__)'))"
  exit 0
fi

if [ ! -x "$PY" ]; then
  log "creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv "$VENV"
fi

log "pip, setuptools<81 (mmcv's setup.py imports pkg_resources), wheel, ninja"
pip_q -U pip
pip_q "${BUILD_PINS[@]}"

if ! "$PY" -c 'import torch, torchvision; assert torch.__version__.startswith("2.14.1")' 2>/dev/null; then
  log "torch 2.14.1 + torchvision 0.29.1 (large download the first time)"
  pip_q "${TORCH_PINS[@]}" "${BUILD_PINS[@]}"
fi

# mmcv's runtime requirements, so that a cached wheel can be tried with --no-deps.
MMCV_RUNTIME=(mmengine==0.10.7 addict numpy packaging Pillow pyyaml yapf opencv-python)
mmcv_ok() { "$PY" -c 'import mmcv, mmcv.ops; assert mmcv.__version__ == "2.1.0"' >/dev/null 2>&1; }

try_wheel() {  # $1: a wheel file; installs it and keeps it only if mmcv.ops imports
  log "trying cached mmcv wheel $1"
  pip_q --no-deps --force-reinstall "$1" || return 1
  if mmcv_ok; then return 0; fi
  log "  $1 does not import against this torch; removing it"
  "$PY" -m pip uninstall -y -q mmcv || true
  return 1
}

build_mmcv() {
  log "building mmcv 2.1.0 with ops from source (about an hour of CPU time: 30-40 minutes on 2 cores)"
  local work; work="$(mktemp -d)"
  "$PY" -m pip download --disable-pip-version-check -q --no-deps --no-binary :all: \
      --no-build-isolation \
      mmcv==2.1.0 -d "$work"
  tar -xzf "$work"/mmcv-2.1.0.tar.gz -C "$work"
  # torch 2.14's headers require C++20; mmcv 2.1.0 hard-codes -std=c++17.
  sed -i 's/-std=c++17/-std=c++20/g' "$work/mmcv-2.1.0/setup.py"
  MMCV_WITH_OPS=1 MAX_JOBS="${MAX_JOBS:-$(nproc)}" "$PY" -m pip wheel \
      --disable-pip-version-check -q --no-build-isolation --no-deps \
      "$work/mmcv-2.1.0" -w "$CACHE"
  rm -rf "$work"
}

if ! mmcv_ok; then
  pip_q "${MMCV_RUNTIME[@]}" "${TORCH_PINS[@]}" "${BUILD_PINS[@]}"
  found=0
  for dir in ${MMCV_WHEEL_DIRS:-"$ROOT/../shared/wheels" "$CACHE"}; do
    for whl in "$dir"/mmcv-2.1.0-cp311-*.whl; do
      [ -f "$whl" ] || continue
      if try_wheel "$whl"; then found=1; break 2; fi
    done
  done
  if [ "$found" = 0 ]; then
    build_mmcv
    try_wheel "$(ls "$CACHE"/mmcv-2.1.0-*.whl | head -n1)" \
      || { log "ERROR: the freshly built mmcv wheel does not import"; exit 1; }
  fi
fi

log "mmcv's own dependencies and the OpenMMLab stack"
# mmcv was installed with --no-deps; this resolves its requirements and keeps
# torch, mmcv and setuptools where they are.
pip_q "${STACK_PINS[@]}" mmcv==2.1.0 "${TORCH_PINS[@]}" "${BUILD_PINS[@]}"

log "tlalign_mm (editable)"
pip_q --no-build-isolation --no-deps -e "$ROOT"

if ! stack_ok; then
  log "ERROR: the stack does not import; run this to see why:"
  echo "  $PY -c 'import tlalign_mm, mmdet, mmseg, mmpretrain, timm; from mmcv.ops import RoIAlign'"
  exit 1
fi
fingerprint > "$STAMP"
log "done: $("$PY" -c 'import torch, mmcv, mmdet, mmseg, mmpretrain; print("torch", torch.__version__, "| mmcv", mmcv.__version__, "| mmdet", mmdet.__version__, "| mmseg", mmseg.__version__, "| mmpretrain", mmpretrain.__version__)')"
