#!/usr/bin/env bash
# Everything a machine with an NVIDIA GPU should check, in order, each stage's output in its own
# file under OUT (at most six files):
#
#   bash examples/benchmarks/gpu_check.sh OUT [stage ...]
#
# stages (all, in this order, when none is named):
#   env        the GPU, driver, toolkit and Python packages; whether llvmlite has NVPTX   -> env.txt
#   tests      tests/runtime/test_cuda.py: the op table, training steps, device-resident
#              variables and graph replay on the GPU against the reference             -> tests.txt
#   bench      run.py --target cuda against torch and jax (CUDA)                        -> bench.txt, gpu.json
#   racecheck  compute-sanitizer --tool racecheck on a CNN training epoch               -> racecheck.txt
#   memcheck   compute-sanitizer --tool memcheck on an MLP training epoch               -> memcheck.txt
#
# Runs from the checkout with PYTHONPATH set, so it needs no install on a machine whose Python
# already has the packages (numpy, llvmlite, jinja2, cuda-bindings, pytest, hypothesis,
# scikit-learn, tqdm, and torch and jax for the comparison). A failed stage is reported and the
# next one runs; the exit status is the number of failed stages.
set -uo pipefail
OUT=${1:?usage: gpu_check.sh OUT [env|tests|bench|racecheck|memcheck ...]}
shift
STAGES=("$@")
[ ${#STAGES[@]} -eq 0 ] && STAGES=(env tests bench racecheck memcheck)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=${PYTHON:-python3}
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
cd "$ROOT" || exit 1
failed=0

stage() {  # stage NAME FILE COMMAND...: run COMMAND, its output into OUT/FILE, and say how it went
  local name=$1 file=$2
  shift 2
  local start=$SECONDS
  "$@" >"$OUT/$file" 2>&1
  local status=$?
  echo "$name: exit $status after $((SECONDS - start)) s ($OUT/$file)"
  [ $status -eq 0 ] || failed=$((failed + 1))
}

for name in "${STAGES[@]}"; do
  case $name in
    env)
      stage env env.txt bash -c "nvidia-smi; command -v ptxas compute-sanitizer; $PYTHON - <<'EOF'
import importlib, llvmlite.binding as llvm
llvm.initialize_all_targets(); llvm.initialize_all_asmprinters()
print('NVPTX target:', llvm.Target.from_triple('nvptx64-nvidia-cuda'))
for name in ('numpy', 'llvmlite', 'cuda.bindings', 'torch', 'jax', 'sklearn', 'pytest'):
    try:
        module = importlib.import_module(name)
        print(name, getattr(module, '__version__', '?'))
    except Exception as error:
        print(name, 'missing:', error)
EOF" ;;
    tests)
      stage tests tests.txt "$PYTHON" -m pytest tests/runtime/test_cuda.py -q -x -p no:cacheprovider ;;
    bench)
      stage bench bench.txt "$PYTHON" examples/benchmarks/run.py --target cuda --json "$OUT/gpu.json" ;;
    racecheck)
      stage racecheck racecheck.txt compute-sanitizer --tool racecheck --error-exitcode 1 \
        "$PYTHON" examples/train_cnn_digits.py --target cuda --epochs 1 ;;
    memcheck)
      stage memcheck memcheck.txt compute-sanitizer --tool memcheck --error-exitcode 1 \
        "$PYTHON" examples/train_digits.py --target cuda --epochs 1 ;;
    *)
      echo "unknown stage $name (env, tests, bench, racecheck, memcheck)"; failed=$((failed + 1)) ;;
  esac
done
exit $failed
