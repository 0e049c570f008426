#!/usr/bin/env bash
# Run HERE (a machine that reaches PyPI), from the repository root: downloads
# the wheels of requirements.txt for the GPU machine's Python (3.12) into
# .gpu_wheels/ (git-ignored; it travels with `carry`), and writes the commit
# the report will name there, since the copy of the tree on the GPU machine
# has no git.
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=.gpu_wheels
PYTHON=${PYTHON:-python3}
rm -rf "$DEST" && mkdir -p "$DEST"
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --platform any \
    -d "$DEST" -r tools/gpu_bootstrap/requirements.txt
commit=$(git rev-parse --short=12 HEAD)
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    commit="$commit (uncommitted changes)"
fi
echo "$commit" > "$DEST/COMMIT"
ls "$DEST"
du -sh "$DEST"
