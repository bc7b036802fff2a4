#!/usr/bin/env bash
# The GPU benchmark's run on a lent device machine (issue 48): installs what kernelpath needs
# beside the machine's image, builds FALKON 0.9 from its source with CUDA in the background
# (niced; the fits run on the GPU meanwhile), then runs benchmarks/gpu.py inside DEADLINE
# seconds. Everything it writes lands in $OUT. Environment: PLAN (gpu.py's --plan, default
# full), DEADLINE (seconds, default 540), TESTS (if set: the CUDA tests first, within that
# many seconds, into $OUT/cuda_tests.log).
#
# Prepared here, in the repository root (.gpu/ is ignored through .git/info/exclude and
# travels with the device tool's `carry`):
#   .gpu/whl/      wheels the device image lacks: array-api-compat, and pytest-timeout for
#                  TESTS (`pip download --no-deps --only-binary=:all: --python-version 3.12
#                  --implementation cp --platform manylinux2014_x86_64 --platform any -d
#                  .gpu/whl array-api-compat==1.16.0 pytest-timeout`)
#   .gpu/data/     mnist/mnist.npz (from ../shared/data)
#   .gpu/falkon/   `git archive` of FalkonML/falkon (the fetch tool's snapshot)
#   .gpu/falkon-wheel/  optional: a FALKON wheel built by an earlier run (skips the build)
set -u
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src:/tmp/falkon-site
# FALKON's extension finds torch's libraries (libtorch_cuda_linalg.so) by an rpath relative to
# a site-packages install; installed with --target it needs them on the loader's path
torch_lib=$(python3 -c "import os, torch; print(os.path.join(os.path.dirname(torch.__file__), 'lib'))")
export LD_LIBRARY_PATH=$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
ls "$torch_lib" | grep -i linalg
rm -f /tmp/falkon_status
if ls .gpu/falkon-wheel/falkon*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-deps --target /tmp/falkon-site .gpu/falkon-wheel/falkon*.whl \
    && echo ok > /tmp/falkon_status || echo failed > /tmp/falkon_status
elif [[ -f .gpu/falkon/setup.py ]]; then
  (
    cd .gpu/falkon \
      && TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=${FALKON_JOBS:-12} nice -n 19 \
        python3 -m pip wheel --no-build-isolation --no-deps -w /tmp/fw . \
        > "$OUT/falkon_build.log" 2>&1 \
      && python3 -m pip install -q --no-deps --target /tmp/falkon-site /tmp/fw/falkon*.whl \
      && cp /tmp/fw/falkon*.whl "$OUT/" \
      && echo ok > /tmp/falkon_status || echo failed > /tmp/falkon_status
  ) &
else
  echo failed > /tmp/falkon_status
fi
python3 -c "import kernelpath, torch; print('kernelpath', kernelpath.__version__, 'torch', torch.__version__)"
if [[ -n ${TESTS:-} ]]; then  # the CUDA tests (the rest run on every CPU CI), 90 s a test
  OMP_NUM_THREADS=4 timeout "$TESTS" python3 -m pytest -q -p no:cacheprovider -p no:benchmark \
    -n 4 --timeout 90 -rfEs --tb=short --durations=10 -k "cuda or on_the_gpu" \
    tests/test_torch_backend.py tests/test_fused.py tests/test_float32_products.py \
    > "$OUT/cuda_tests.log" 2>&1
  echo "cuda tests rc=$?" >> "$OUT/cuda_tests.log"
  grep -v "^  warn" "$OUT/cuda_tests.log" | tail -60
fi
PYTHONUNBUFFERED=1 python3 benchmarks/gpu.py run --out "$OUT" --deadline "${DEADLINE:-540}" \
  --mnist-root .gpu/data --falkon-status /tmp/falkon_status --plan "${PLAN:-full}" 2>&1 | tee "$OUT/gpu_stdout.log"
tail -5 "$OUT/falkon_build.log" 2>/dev/null
