#!/usr/bin/env bash
# One run on the GPU machine (no Rust there): the GPU tests, `liandan train`, then the
# benchmarks, both builds and PyTorch measured in this same run. Build here first (see
# docs/PERFORMANCE.md), put the stripped, gzipped binaries in .bin/ (xtask-base: the previous
# build) and the loader folder in .gpu/, then: bash xtask/gpu-run.sh (OUT: where files go).
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/target/gpu-run}"; mkdir -p "$OUT"
for f in .bin/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
chmod +x .bin/* 2>/dev/null
mkdir -p /work && ln -sfn "$PWD" /work/main   # test binaries find their data under /work/main
. .gpu/env.sh
export LIANDAN_REQUIRE_GPU=1
echo "## machine"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__)"
echo "## liandan info (stderr too)"; ./.bin/liandan info 2>&1
echo "## liandan train (defaults: mnist_cnn, bundled MNIST, best device)"
SECONDS=0; ./.bin/liandan train --out "$OUT/run" 2>&1 | tail -25; echo "wall ${SECONDS} s"
ls "$OUT/run"
for t in conformance device memory shaders parity rnn optim_parity trains trainer data_loader; do
  [ -x .bin/$t ] || continue
  echo "### test $t"; timeout 240 ./.bin/$t --test-threads=8 2>&1 | grep -E "^test result|FAILED|panicked|failed" | head -20
done
echo "## bench-fusion"; timeout 120 ./.bin/xtask bench-fusion --device gpu 2>&1
echo "## bench (this build)"; timeout 200 ./.bin/xtask bench --device gpu 2>&1
echo "## bench (previous build)"; LIANDAN_BENCH_LABEL="liandan (previous build)" timeout 150 ./.bin/xtask-base bench --device gpu 2>&1
echo "## torch"; timeout 150 python3 xtask/bench_torch.py --device cuda 2>&1
