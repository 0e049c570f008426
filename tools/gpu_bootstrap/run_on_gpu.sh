#!/usr/bin/env bash
# Run ON the GPU machine, from the repository root, with .gpu_wheels/ carried
# (tools/gpu_bootstrap/fetch_wheels.sh made it): installs the wheels into a
# throwaway folder (a fresh private one from mktemp, or $GPU_SITE) on top
# of the machine's own torch (no index, no
# dependency resolution: nothing the machine has is replaced), then runs
# tools/gpu_report.py once. Extra arguments go to the report, e.g.
#   bash tools/gpu_bootstrap/run_on_gpu.sh --device cpu --tiny   # dry run
# The report goes to $OUT (the device tool's folder that comes back), else
# work_dirs/gpu_report.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
# a fixed name in /tmp could hold anyone's modules, first on PYTHONPATH
SITE=${GPU_SITE:-$(mktemp -d "${TMPDIR:-/tmp}/tlalign_site.XXXXXX")}
WHEELS=.gpu_wheels
if ! ls "$WHEELS"/*.whl > /dev/null 2>&1; then
    echo "no wheels in $WHEELS: run tools/gpu_bootstrap/fetch_wheels.sh" \
        "here and carry $WHEELS" >&2
    exit 2
fi
"$PYTHON" -m pip install --quiet --no-index --no-deps --no-compile \
    --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
OUT_DIR=${OUT:-work_dirs/gpu_report}
mkdir -p "$OUT_DIR"
COMMIT=$(cat "$WHEELS/COMMIT" 2>/dev/null || echo unknown)
set -o pipefail
"$PYTHON" tools/gpu_report.py --out "$OUT_DIR" --commit "$COMMIT" "$@" \
    2>&1 | tee "$OUT_DIR/gpu_report.log"
