#!/usr/bin/env bash
# One run on the GPU machine (no Rust there): the GPU tests, `liandan train`, the profiler on
# resnet18 and lstm, the fused-kernel and convolution benchmarks, the previous build's
# benchmark, then the full `xtask bench --torch` table (CPU and GPU, PyTorch beside). Build
# here first (see docs/PERFORMANCE.md), put the stripped, gzipped binaries in .bin/
# (xtask-base: the previous build; test binaries under their test names) and the loader folder
# in .gpu/, then:
# bash xtask/gpu-run.sh (OUT: where files go). The device tool limits one command to 10
# minutes: `PART=1` runs everything but the full table, `PART=2` the full table alone.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/target/gpu-run}"; mkdir -p "$OUT/bench"
PART="${PART:-all}"
for f in .bin/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
chmod +x .bin/* 2>/dev/null
mkdir -p /work && ln -sfn "$PWD" /work/main   # test binaries find their data under /work/main
. .gpu/env.sh
export LIANDAN_REQUIRE_GPU=1
echo "## machine"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
python3 -c "import torch; print('torch', torch.__version__)"
if [ "$PART" != 2 ]; then
  echo "## liandan info"; ./.bin/liandan info 2>&1
  echo "## liandan train (defaults)"
  SECONDS=0; ./.bin/liandan train --out "$OUT/run" 2>&1 | tail -12; echo "wall ${SECONDS} s"
  for t in conformance device memory shaders profile optim_parity trains fused_optim trainer; do
    [ -x .bin/$t ] || continue
    echo "### test $t"; timeout 240 ./.bin/$t --test-threads=8 2>&1 | grep -E "^test result|FAILED|panicked|failed" | head -20
  done
  echo "## profile resnet18"; timeout 120 ./.bin/liandan profile --model resnet18 --batch 128 --steps 5 --device gpu --trace "$OUT/resnet18-trace.json" 2>&1 | head -70
  echo "## profile lstm"; timeout 120 ./.bin/liandan profile --model lstm --batch 64 --steps 5 --device gpu --trace "$OUT/lstm-trace.json" 2>&1 | head -50
  echo "## bench-fusion"; timeout 240 ./.bin/xtask bench-fusion --device gpu --torch 2>&1
  echo "## bench-conv"; timeout 150 ./.bin/xtask bench-conv --device gpu 2>&1; timeout 60 ./.bin/xtask bench-conv --device gpu --dtype f16 --quick 2>&1
  echo "## previous build bench"; LIANDAN_BENCH_LABEL="liandan (previous build)" timeout 150 ./.bin/xtask-base bench --device gpu 2>&1
fi
if [ "$PART" != 1 ]; then
  timeout 560 ./.bin/xtask bench --torch --warmup 3 --steps 10 --sync-every 5 --groups 2 --epoch-samples 12800 \
    --out "$OUT/bench" > "$OUT/bench/bench.md" 2> "$OUT/bench/bench.log"
  echo "rc $?"; cat "$OUT/bench/bench.md"; tail -5 "$OUT/bench/bench.log"
fi
