#!/usr/bin/env bash
# One run on a GPU machine with no Rust toolchain: the conformance suite on the GPU, then both
# sides of the benchmark (liandan on CPU and GPU, PyTorch on CPU and CUDA) in the same session.
# Build first on a machine with Rust (see docs/PERFORMANCE.md), copy .bin/ and .gpu/ over, then:
#   bash xtask/gpu-run.sh
set -u
cd "$(dirname "$0")/.."
[ -f .gpu/env.sh ] && . .gpu/env.sh
# Binaries may arrive gzipped (the copy to the GPU machine is size-limited).
for f in .bin/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
chmod +x .bin/* 2>/dev/null
echo "## machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
lscpu | grep -E "^Model name|^CPU\(s\)" | sed 's/  */ /g'
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>/dev/null
echo "## liandan info"
./.bin/liandan info
echo "## conformance suite on the GPU"
LIANDAN_REQUIRE_GPU=1 ./.bin/conformance --test-threads=8 2>&1 | grep -E "^test result|FAILED|panicked" | head -40
LIANDAN_REQUIRE_GPU=1 ./.bin/device 2>&1 | grep -E "^test result|FAILED|panicked"
LIANDAN_REQUIRE_GPU=1 ./.bin/memory 2>&1 | grep -E "^test result|FAILED|panicked"
# nn, where built: layers, recurrent and attention layers, losses, and every zoo model against
# PyTorch's outputs and gradients (tests/data/parity), on the GPU and the CPU.
for t in layers rnn attention loss init summary parity; do
    [ -x .bin/$t ] || continue
    echo "### nn $t"
    LIANDAN_REQUIRE_GPU=1 ./.bin/$t --nocapture --test-threads=4 2>&1 | grep -E "^test result|FAILED|panicked|rel err|fell back"
done
echo "## benchmarks"
./.bin/xtask bench --device all
if [ -x .bin/xtask-base ]; then
    # The previous build, timed in the same session, so a speedup is measured, not remembered.
    LIANDAN_BENCH_LABEL="liandan (previous build)" ./.bin/xtask-base bench --device gpu
fi
python3 xtask/bench_torch.py --device cuda | tail -n +1
python3 xtask/bench_torch.py --device cpu
