#!/usr/bin/env bash
# Installs pipec on a GPU machine that has no package registry and runs the GPU tests and the
# benchmarks in one command. Pure-Python wheels the machine lacks travel in .whl/ (see
# CONTRIBUTING.md). Results land in $OUT (default ./out): logs, JSON figures, PNG charts.
#
#   scripts/gpu-check.sh              # GPU tests, then every benchmark
#   scripts/gpu-check.sh tests        # GPU tests only
#   scripts/gpu-check.sh bench        # benchmarks only
#   scripts/gpu-check.sh tests -k verify   # extra arguments go to pytest
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
what=${1:-all}
shift || true

if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/pipec-site .whl/*.whl || exit 2
    export PYTHONPATH=/tmp/pipec-site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || {
    cat "$OUT/install.log"; exit 2; }
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"

status=0
if [[ $what == all || $what == tests ]]; then
    python3 -m pytest -m gpu -q -rs --junitxml="$OUT/gpu-tests.xml" "$@" 2>&1 | tee "$OUT/gpu-tests.log"
    status=${PIPESTATUS[0]}
    # the baselines' tests (the DQN twins and the trainer twins) need PyTorch and JAX, which this machine has
    python3 -m pytest -q -rs tests/test_torch_dqn.py tests/test_jax_dqn.py tests/test_trainer_bench.py 2>&1 | tee -a "$OUT/gpu-tests.log"
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
    # two GPUs: the tests start their own ranks with torchrun (skipped, with the reason, on one)
    python3 -m pytest -m gpu2 -q -rs tests/gpu2 2>&1 | tee -a "$OUT/gpu-tests.log"
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
fi
if [[ $what == all || $what == bench ]]; then
    runs=("launch_overhead.py" "rl_step.py --scaling" "control_flow.py" "learning.py" "gemm_sharing.py"
          "live_update.py" "c51_step.py" "c51_step.py --precision bf16"
          "learning.py --pipe pipelines/c51_step.pipe" "trainer_step.py")
    # the one-GPU against two-GPU sweep needs two GPUs
    if (( $(nvidia-smi --list-gpus | wc -l) >= 2 )); then runs+=("distributed.py"); fi
    for run in "${runs[@]}"; do
        echo "== bench/$run"
        log=$(echo "${run%.py*}${run#*.py}" | tr -c 'A-Za-z0-9_\n' '_')  # "c51_step.py --precision bf16" logs to c51_step___precision_bf16.log
        # shellcheck disable=SC2086  # $run is a script and its options
        python3 bench/$run --out "$OUT" 2>&1 | tee "$OUT/$log.log"
        [[ ${PIPESTATUS[0]} == 0 ]] || status=1
    done
    echo "== bench/torch_dqn.py --count-ops"  # operators and CUDA kernels of one twin step
    python3 bench/torch_dqn.py --count-ops 2>&1 | tee "$OUT/torch_dqn_ops.log"
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
fi
exit "$status"
