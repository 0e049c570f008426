#!/usr/bin/env bash
# Training on a Slurm cluster (one task per GPU).
#
#   [GPUS=8] [GPUS_PER_NODE=8] [CPUS_PER_TASK=5] [SRUN_ARGS=...] \
#   bash tools/slurm_train.sh PARTITION JOB_NAME CONFIG [WORK_DIR] [train.py args...]
#
# WORK_DIR defaults to ./work_dirs/<config name> (pass '' to keep that
# default while giving further arguments).

set -x

PARTITION=$1
JOB_NAME=$2
CONFIG=$3
WORK_DIR=$4
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-""}
PY_ARGS=${@:5}

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON=${PYTHON:-python}
if [ -x "$ROOT/.venv/bin/python" ]; then
    PYTHON="$ROOT/.venv/bin/python"
fi
WORK_DIR_ARG=""
if [ -n "$WORK_DIR" ]; then
    WORK_DIR_ARG="--work-dir=${WORK_DIR}"
fi

PYTHONPATH="$ROOT":$PYTHONPATH \
srun -p ${PARTITION} \
    --job-name=${JOB_NAME} \
    --gres=gpu:${GPUS_PER_NODE} \
    --ntasks=${GPUS} \
    --ntasks-per-node=${GPUS_PER_NODE} \
    --cpus-per-task=${CPUS_PER_TASK} \
    --kill-on-bad-exit=1 \
    ${SRUN_ARGS} \
    "$PYTHON" -u "$ROOT/tools/train.py" ${CONFIG} ${WORK_DIR_ARG} --launcher="slurm" ${PY_ARGS}
