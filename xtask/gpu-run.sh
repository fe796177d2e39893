#!/usr/bin/env bash
# One run on the GPU machine (no Rust there): the GPU tests (the tensor-core f16 matmul's with
# LIANDAN_COOP_MATRIX on and off), `liandan train` in f32, f16 and
# bf16, the profiler on resnet18 (fusion on and off) and lstm, the fused-kernel and convolution
# benchmarks and the f16/bf16 bench rows, then the full `xtask bench --torch` table (CPU and
# GPU, PyTorch beside). Build here first (see docs/PERFORMANCE.md), put the stripped, gzipped
# binaries in .bin/ (test binaries under their test names) and the loader folder in .gpu/, then:
# bash xtask/gpu-run.sh (OUT: where files go). The device tool limits one command to 10
# minutes: `PART=1` runs everything but the tables, `PART=2` the full f32 table, `PART=3` the
# convolution benchmark and the f16/bf16 rows; `PART=4` a compact set; `PART=5` what the shader
# run-time checks cost; `PART=6` the convolution cut and the optimizer step's cost;
# `PART=coop` the tensor-core f16 matmul's variants (tests and timings); `PART=9` and `PART=10` a
# final build against the previous one (`.bin/xtask-old`, `.bin/liandan-old`) in the same call:
# 9 the tests, the optimizer step and the host cost per op; 10 the full GPU table and the host
# CPU's slowest models. `PART=11`: where the time goes (ours and PyTorch's per-op profiles of
# resnet18, seed003_cnn and vit; resnet18's convolution passes; PyTorch with and without TF32).
# `PART=12`: the GPU tests, the full GPU table beside PyTorch, and the previous build's rows of
# the models a change touched (`MODELS`). `PART=13`: the GPU tests, then this build against the
# previous one on the micro-benchmarks (PyTorch's add and copy beside), the optimizer step
# (`bench-fusion`, PyTorch beside), the host cost per op, and the models in `MODELS` (`ONLY=tests`
# or `ONLY=bench` for one half). `PART=14`: f16 convolution on tensor cores: its tests, both
# builds' `bench-conv --dtype f16`, and the mixed-precision table (`bench --precisions
# f32,f16,bf16 --torch`, PyTorch with autocast) of mnist_cnn, resnet18 and vit (`ONLY=tests`,
# `ONLY=conv` or `ONLY=bench` for one third; `MODELS`, `PRECISIONS`, and `OLD_PRECISIONS` for
# the previous build's). `PART=15`: bf16 held two to a word: the GPU tests that touch it, then
# both builds' bf16 (and f32) training steps of `MODELS` with PyTorch's autocast beside, and
# `liandan train` in f32, f16 and bf16 (`TRAIN_PRECISIONS`) with its validation history
# (`ONLY=tests` or `ONLY=bench` for one half). `PART=16`: the LSTM step in fewer ops and the
# loss scaler's joined check: the GPU tests, then both builds alternating, previous first, two
# rounds: `bench-host`'s lstm and sync rows, the f32 steps of `MODELS` (PyTorch beside in the first
# round) and vit's f16 step; then PyTorch's add and synchronize, and `liandan profile --model
# lstm` of each (`ONLY=tests` or `ONLY=bench` for one half; `ONLY=profile`: this build's
# profile of `MODELS` in f32 and f16; `TRAIN_PRECISIONS` adds `liandan train` runs to the tests).
# `PART=17`: the autotune: its tests and the conformance suite with it on, then the steps of
# `MODELS` in `PRECISIONS` with it off and on, alternated (`ONLY=tests` or `ONLY=bench`).
# `PART=18`: dense elementwise ops in vec4s, `LIANDAN_DENSE4=0` against `=1` (micro rows and the
# steps of `MODELS` in `PRECISIONS`). `PART=19`: the host CPU on `THREADS` threads (default 16),
# this build against the previous one, and per-op profiles (`ONLY=bench` or `ONLY=profile`).
# `PART=20`: the tensor-core kernels' default variant against `prefetch`: registers, tests, the
# f16 matmul and the f16 steps of `MODELS` (`ONLY=tests` or `ONLY=bench`).
# `PART=21`: where the products' time goes: `xtask ceiling`, then this build against
# `.bin/xtask-old` (products and f16 steps) with PyTorch's products beside.
# `PART=22`: what a synchronize costs: `xtask ceiling --only latency` (wgpu alone), this build's
# and `.bin/xtask-old`'s `bench-host --only sync`, PyTorch's add and synchronize; then both
# builds' f32 steps of `MODELS` (default lstm, seed003_cnn, mlp), alternated, PyTorch beside.
# `PART=23`: autocast's batch norm and recurrence (runs 106-108): this build against
# `.bin/xtask-old` on resnet18 and lstm in f16 (resnet18 in f32 too), alternated, PyTorch
# beside; resnet18's f16 memory breakdown; the whole zoo beside PyTorch; the lstm's f16 step
# in three more processes and its per-op profile in f32 and f16.
# `PART=24`: by shape (runs 109-112): the GPU conformance suite (`.bin/conformance`, when
# there), `liandan profile --shapes` of `MODELS` (default lstm, mnist_cnn, vit, resnet18) in f32
# and the lstm in f16 for this build and `.bin/liandan-old`, the same with the autotune on
# (its choices printed), both builds' steps of mlp, mnist_cnn, vit and lstm alternated (two
# rounds), and PyTorch's per-shape profiles of resnet18 (TF32 on and off).
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/target/gpu-run}"; mkdir -p "$OUT/bench"
PART="${PART:-all}"
for f in .bin/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
chmod +x .bin/* 2>/dev/null
mkdir -p /work && ln -sfn "$PWD" /work/main   # test binaries find their data under /work/main
. .gpu/env.sh
export LIANDAN_REQUIRE_GPU=1
# The tensor-core f16 matmul's variants (LIANDAN_COOP_VARIANT), each checked against the CPU's
# f32 product (the matmul_coop test) and then timed (bench-micro --f16-matmul prints one JSON
# line of rows: 1024^3, 2048^3, 4096^3 and 4096^3 with a transposed rhs), the ordinary kernels
# and PyTorch's f16 matmul last for comparison. VARIANTS overrides the list.
coop_variants() {
  for v in ${VARIANTS:-prefetch wide direct narrow}; do
    echo "### variant $v"
    LIANDAN_COOP_VARIANT=$v timeout 100 ./.bin/matmul_coop --nocapture 2>&1 | grep -E "cooperative|^test result|FAILED|panicked|failed" | head -8
    LIANDAN_COOP_VARIANT=$v timeout 120 ./.bin/xtask bench-micro --device gpu:0 --f16-matmul 2>&1 | tail -1
  done
  echo "### ordinary kernels"; LIANDAN_COOP_MATRIX=0 timeout 120 ./.bin/xtask bench-micro --device gpu:0 --f16-matmul 2>&1 | tail -1
  echo "### PyTorch"; timeout 120 python3 xtask/bench_torch.py --matmul --device gpu:0 2>&1 | tail -1
}
echo "## machine"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
python3 -c "import torch; print('torch', torch.__version__)"
if [ "$PART" = 1 ] || [ "$PART" = all ]; then
  for p in f32 f16 bf16; do
    echo "## liandan train --precision $p"
    SECONDS=0; ./.bin/liandan train --precision $p --out "$OUT/run-$p" 2>&1 | tail -6; echo "wall ${SECONDS} s"
  done
  for t in conformance device memory shaders kernels_window_index optim_parity trains fused_optim trainer; do
    [ -x .bin/$t ] || continue
    echo "### test $t"; timeout 200 ./.bin/$t --test-threads=8 2>&1 | grep -E "^test result|FAILED|panicked|failed" | head -20
  done
  # The tensor-core f16 matmul (the test says which path it checked), then the ordinary one.
  echo "## liandan info (cooperative matrices)"; ./.bin/liandan info 2>&1 | grep -iE "cooperative|f16 matmul|subgroup"
  for coop in 1 0; do
    [ -x .bin/matmul_coop ] || continue
    echo "### test matmul_coop, LIANDAN_COOP_MATRIX=$coop"
    LIANDAN_COOP_MATRIX=$coop timeout 100 ./.bin/matmul_coop --nocapture 2>&1 | grep -E "cooperative|^test result|FAILED|panicked|failed" | head -20
  done
  [ -x .bin/kernels_reduce_matmul ] && { echo "### test kernels_reduce_matmul"; timeout 200 ./.bin/kernels_reduce_matmul 2>&1 | grep -E "^test result|FAILED|panicked" | head; }
  echo "## profile resnet18"; timeout 90 ./.bin/liandan profile --model resnet18 --batch 128 --steps 5 --device gpu --trace "$OUT/resnet18-trace.json" 2>&1 | head -60
  echo "## profile resnet18, LIANDAN_FUSION=0"; LIANDAN_FUSION=0 timeout 90 ./.bin/liandan profile --model resnet18 --batch 128 --steps 5 --device gpu 2>&1 | head -30
  echo "## profile lstm"; timeout 60 ./.bin/liandan profile --model lstm --batch 64 --steps 5 --device gpu 2>&1 | head -30
  echo "## bench-fusion"; timeout 240 ./.bin/xtask bench-fusion --device gpu --torch 2>&1
fi
if [ "$PART" = 2 ] || [ "$PART" = all ]; then
  timeout 500 ./.bin/xtask bench --torch --warmup 3 --steps 10 --sync-every 5 --groups 2 --epoch-samples 12800 \
    --out "$OUT/bench" > "$OUT/bench/bench.md" 2> "$OUT/bench/bench.log"
  echo "rc $?"; cat "$OUT/bench/bench.md"; tail -5 "$OUT/bench/bench.log"
fi
if [ "$PART" = 3 ] || [ "$PART" = all ]; then
  echo "## bench-conv"; timeout 300 ./.bin/xtask bench-conv --device gpu 2>&1
  echo "## f16/bf16 rows"
  timeout 90 ./.bin/xtask bench --torch --models mnist_cnn,resnet18,vit --device gpu:0 --precisions f16,bf16 --no-micro \
    --warmup 3 --steps 10 --sync-every 5 --groups 2 --epoch-samples 6400 --out "$OUT/bench-amp" 2>"$OUT/bench-amp.log"; echo "rc $?"; tail -3 "$OUT/bench-amp.log"
fi
if [ "$PART" = 4 ]; then
  # One compact set for a session with little device time left: the tests of the new kernels,
  # training, the profiles, the convolution table and the GPU rows of the full table.
  echo "## liandan info (cooperative matrices)"; ./.bin/liandan info 2>&1 | grep -iE "cooperative|f16 matmul|subgroup"
  for t in conformance fused_optim matmul_coop kernels_reduce_matmul memory trains; do
    [ -x .bin/$t ] || continue
    echo "### test $t"; timeout 150 ./.bin/$t --test-threads=8 --nocapture 2>&1 | grep -E "cooperative|^test result|FAILED|panicked|failed" | head -20
  done
  for p in f32 f16; do
    echo "## liandan train --precision $p"
    SECONDS=0; timeout 60 ./.bin/liandan train --precision $p --out "$OUT/run-$p" 2>&1 | tail -3; echo "wall ${SECONDS} s"
  done
  for m in "lstm 64" "resnet18 128" "mnist_cnn 64" "mlp 1024"; do
    set -- $m; timeout 60 ./.bin/liandan profile --model $1 --batch $2 --steps 5 --device gpu > "$OUT/profile-$1.txt" 2>&1
    echo "## profile $1 (top)"; head -12 "$OUT/profile-$1.txt"
  done
  echo "## bench-conv --quick"; timeout 150 ./.bin/xtask bench-conv --device gpu --quick > "$OUT/bench-conv.txt" 2>&1; echo "rc $?"; cat "$OUT/bench-conv.txt"
  echo "## resnet18 with LIANDAN_CONV_PHASES=0"
  LIANDAN_CONV_PHASES=0 timeout 60 ./.bin/xtask bench --torch --models resnet18 --device gpu:0 --no-micro --warmup 3 --steps 10 --sync-every 5 --groups 2 \
    --epoch-samples 6400 --out "$OUT/bench-nophase" > "$OUT/bench-nophase.md" 2>/dev/null; echo "rc $?"; cat "$OUT/bench-nophase.md"
  echo "## bench --torch, GPU"
  timeout 240 ./.bin/xtask bench --torch --device gpu:0 --warmup 3 --steps 10 --sync-every 5 --groups 2 --epoch-samples 12800 \
    --out "$OUT/bench" > "$OUT/bench/bench.md" 2> "$OUT/bench/bench.log"
  echo "rc $?"; cat "$OUT/bench/bench.md"; tail -3 "$OUT/bench/bench.log"
fi
if [ "$PART" = 5 ]; then
  # What naga's run-time checks cost (LIANDAN_SHADER_CHECKS=0 builds shaders without them),
  # micro-benchmarks and four models, PyTorch beside the checked run; the fused optimizers' test.
  for t in fused_optim; do
    [ -x .bin/$t ] || continue
    echo "### test $t"; timeout 150 ./.bin/$t --test-threads=8 2>&1 | grep -E "^test result|FAILED|panicked|failed" | head -20
  done
  for c in 1 0; do
    torch=""; [ $c = 1 ] && torch="--torch"
    echo "## bench, LIANDAN_SHADER_CHECKS=$c"
    LIANDAN_SHADER_CHECKS=$c timeout 200 ./.bin/xtask bench $torch --device gpu:0 --models mlp,seed003_cnn,lstm,resnet18 --warmup 3 --steps 10 \
      --sync-every 5 --groups 2 --epoch-samples 6400 --out "$OUT/bench-checks$c" > "$OUT/bench-checks$c.md" 2> "$OUT/bench-checks$c.log"
    echo "rc $?"; cat "$OUT/bench-checks$c.md"
  done
fi
if [ "$PART" = 6 ]; then
  # The convolution cut (tiles and K splits per pass), the step-overhead table of every zoo
  # model, and the model rows under the cut and shader-check switches, PyTorch beside.
  for t in conformance fused_optim; do
    [ -x .bin/$t ] || continue
    echo "### test $t"; timeout 200 ./.bin/$t --test-threads=8 2>&1 | grep -E "^test result|FAILED|panicked|failed" | head -20
  done
  echo "## bench-conv --sweep"; SECONDS=0; timeout 240 ./.bin/xtask bench-conv --device gpu --sweep > "$OUT/bench-conv.txt" 2>&1; echo "rc $? in ${SECONDS} s"
  grep -E "^\| (resnet18|whole|model)|best|^## " "$OUT/bench-conv.txt" | head -40
  for v in default previous 1024 checks; do
    env=""; torch=""
    case $v in previous) env="LIANDAN_CONV_CUT=previous";; 1024) env="LIANDAN_CONV_CUT=1024";; checks) env="LIANDAN_SHADER_CHECKS=1";; default) torch="--torch";; esac
    echo "## bench resnet18, seed003_cnn: $v"
    env $env timeout 120 ./.bin/xtask bench $torch --device gpu:0 --models resnet18,seed003_cnn --no-micro --warmup 3 --steps 10 --sync-every 5 --groups 2 \
      --epoch-samples 6400 --out "$OUT/bench-$v" > "$OUT/bench-$v.md" 2> "$OUT/bench-$v.log"; echo "rc $?"; grep -E "^\| (resnet18|seed003)" "$OUT/bench-$v.md"
  done
  echo "## bench-fusion --torch"; timeout 200 ./.bin/xtask bench-fusion --device gpu --torch > "$OUT/bench-fusion.txt" 2>&1; echo "rc $?"; cat "$OUT/bench-fusion.txt"
  echo "## profile resnet18"; timeout 60 ./.bin/liandan profile --model resnet18 --batch 128 --steps 5 --device gpu > "$OUT/profile-resnet18.txt" 2>&1; head -14 "$OUT/profile-resnet18.txt"
fi
if [ "$PART" = coop ]; then
  # The tensor-core f16 matmul's variants (see coop_variants).
  echo "## liandan info (cooperative matrices)"; ./.bin/liandan info 2>&1 | grep -iE "cooperative|f16 matmul|subgroup"
  coop_variants
fi
if [ "$PART" = 7 ]; then
  # One call for a session's final build: the GPU tests, the tensor-core variants (as PART=coop),
  # the host cost per op with and without the batch ramp, the full GPU table beside PyTorch, the
  # small models without the ramp, the lstm profile and `liandan train`.
  for t in conformance device memory matmul_coop kernels_reduce_matmul trains; do
    [ -x .bin/$t ] || continue
    echo "### test $t"; timeout 150 ./.bin/$t --test-threads=8 --nocapture 2>&1 | grep -E "cooperative|^test result|FAILED|panicked|failed" | head -12
  done
  echo "## liandan info"; ./.bin/liandan info 2>&1 | grep -iE "cooperative|f16 matmul"
  coop_variants
  for fb in default 512; do
    env=""; [ $fb = 512 ] && env="LIANDAN_WGPU_FIRST_BATCH=512"
    echo "## bench-host ($fb)"; env $env timeout 60 ./.bin/xtask bench-host --device gpu > "$OUT/bench-host-$fb.txt" 2>&1; echo "rc $?"; cat "$OUT/bench-host-$fb.txt"
  done
  echo "## bench --torch, GPU"
  timeout 200 ./.bin/xtask bench --torch --device gpu:0 --warmup 3 --steps 10 --sync-every 5 --groups 2 --epoch-samples 12800 \
    --out "$OUT/bench" > "$OUT/bench.md" 2> "$OUT/bench.log"; echo "rc $?"; grep -E "^\||^2026" "$OUT/bench.md" | head -40
  echo "## small models, LIANDAN_WGPU_FIRST_BATCH=512"
  LIANDAN_WGPU_FIRST_BATCH=512 timeout 90 ./.bin/xtask bench --device gpu:0 --models lstm,mnist_cnn,seed003_cnn,mlp --no-micro --warmup 3 --steps 10 \
    --sync-every 5 --groups 2 --epoch-samples 6400 --out "$OUT/bench-fb512" > "$OUT/bench-fb512.md" 2>/dev/null; echo "rc $?"; grep -E "^\| (lstm|mnist|seed|mlp)" "$OUT/bench-fb512.md"
  echo "## profile lstm"; timeout 60 ./.bin/liandan profile --model lstm --batch 64 --steps 5 --device gpu > "$OUT/profile-lstm.txt" 2>&1; head -14 "$OUT/profile-lstm.txt"
  echo "## liandan train"; SECONDS=0; timeout 60 ./.bin/liandan train --out "$OUT/run-f32" 2>&1 | tail -3; echo "wall ${SECONDS} s"
fi
if [ "$PART" = 8 ]; then
  # A last check of a final build: its GPU tests, the GPU table and the host CPU's table, both
  # beside PyTorch.
  for t in conformance matmul_coop; do
    [ -x .bin/$t ] || continue
    echo "### test $t"; timeout 150 ./.bin/$t --test-threads=8 --nocapture 2>&1 | grep -E "cooperative|^test result|FAILED|panicked|failed" | head -12
  done
  echo "## bench --torch, GPU"
  timeout 200 ./.bin/xtask bench --torch --device gpu:0 --warmup 3 --steps 10 --sync-every 5 --groups 2 --epoch-samples 12800 \
    --out "$OUT/bench" > "$OUT/bench.md" 2> "$OUT/bench.log"; echo "rc $?"; grep -E "^\| (gpu|[a-z0-9_]+ \| gpu)" "$OUT/bench.md" | head -40
  echo "## bench --torch, CPU"
  timeout 280 ./.bin/xtask bench --torch --device cpu --warmup 2 --steps 5 --sync-every 5 --groups 1 --epoch-samples 6400 \
    --out "$OUT/bench-cpu" > "$OUT/bench-cpu.md" 2> "$OUT/bench-cpu.log"; echo "rc $?"; grep -E "^\| (cpu|[a-z0-9_]+ \| cpu)" "$OUT/bench-cpu.md" | head -40
fi
if [ "$PART" = 9 ]; then
  # A final build's GPU tests, then the optimizer step's cost (bench-fusion: the step alone beside
  # torch.optim foreach) and the host cost per op, this build and the previous one.
  for t in conformance fused_optim memory device; do
    [ -x .bin/$t ] || continue
    echo "### test $t"; timeout 150 ./.bin/$t --test-threads=8 2>&1 | grep -E "^test result|FAILED|panicked|failed" | head -12
  done
  echo "## bench-fusion --torch, this build"; timeout 200 ./.bin/xtask bench-fusion --device gpu --torch > "$OUT/bench-fusion.txt" 2>&1; echo "rc $?"; cat "$OUT/bench-fusion.txt"
  if [ -x .bin/xtask-old ]; then
    echo "## bench-fusion, previous build"; timeout 120 ./.bin/xtask-old bench-fusion --device gpu > "$OUT/bench-fusion-old.txt" 2>&1; echo "rc $?"
    grep -iE "step|^\| [a-z0-9_]+ \|" "$OUT/bench-fusion-old.txt" | tail -14
  fi
  for b in xtask xtask-old; do
    [ -x .bin/$b ] || continue
    echo "## bench-host, $b"; timeout 60 ./.bin/$b bench-host --device gpu > "$OUT/bench-host-$b.txt" 2>&1; echo "rc $?"; cat "$OUT/bench-host-$b.txt"
  done
  echo "## profile lstm"; timeout 60 ./.bin/liandan profile --model lstm --batch 64 --steps 5 --device gpu > "$OUT/profile-lstm.txt" 2>&1; head -16 "$OUT/profile-lstm.txt"
fi
if [ "$PART" = 10 ]; then
  # The full GPU table beside PyTorch (time and peak memory), then the host CPU's three slowest
  # models beside PyTorch CPU, this build and the previous one.
  echo "## bench --torch, GPU, this build"
  timeout 230 ./.bin/xtask bench --torch --device gpu:0 --warmup 3 --steps 10 --sync-every 5 --groups 2 --epoch-samples 12800 \
    --out "$OUT/bench" > "$OUT/bench.md" 2> "$OUT/bench.log"; echo "rc $?"; grep -E "^\| (gpu|[a-z0-9_]+ \| gpu)" "$OUT/bench.md" | head -40
  for b in xtask xtask-old; do
    [ -x .bin/$b ] || continue
    torch=""; [ $b = xtask ] && torch="--torch"
    echo "## bench, CPU, $b"
    timeout 150 ./.bin/$b bench $torch --device cpu --models vit,resnet18,lstm --warmup 2 --steps 5 --sync-every 5 --groups 1 --no-micro \
      --out "$OUT/bench-cpu-$b" > "$OUT/bench-cpu-$b.md" 2> "$OUT/bench-cpu-$b.log"; echo "rc $?"; grep -E "^\| (cpu|[a-z0-9_]+ \| cpu)" "$OUT/bench-cpu-$b.md" | head -20
  done
fi
if [ "$PART" = 11 ]; then
  # Where the time goes, ours (GPU timestamps per op) beside PyTorch's (torch.profiler), and
  # PyTorch's resnet18 with and without TF32 convolutions (its f32 default uses tensor cores).
  for m in resnet18 seed003_cnn vit; do
    echo "## profile $m"; timeout 90 ./.bin/liandan profile --model $m --batch 128 --steps 3 --device gpu > "$OUT/profile-$m.txt" 2>&1; echo "rc $?"; head -40 "$OUT/profile-$m.txt"
    echo "## torch profile $m"; timeout 120 python3 xtask/bench_torch.py --profile --model $m --batch 128 --device gpu:0 --steps 3 > "$OUT/torch-profile-$m.txt" 2>&1
    echo "rc $?"; grep -vE "^(USDT|ERROR|WARNING)" "$OUT/torch-profile-$m.txt" | cut -c1-60,100-200 | head -24
  done
  for tf in "" --no-tf32; do
    echo "## torch resnet18 $tf"; timeout 120 python3 xtask/bench_torch.py --json --model resnet18 --batch 128 --device gpu:0 --warmup 3 --steps 10 --sync-every 5 --groups 2 --precision f32 $tf 2>&1 | tail -1
  done
  echo "## memory at the peak, resnet18"; LIANDAN_MEMORY_BREAKDOWN=1 timeout 90 ./.bin/liandan profile --model resnet18 --batch 128 --steps 2 --device gpu > "$OUT/memory-resnet18.txt" 2>&1; echo "rc $?"
  echo "## bench-conv"; timeout 150 ./.bin/xtask bench-conv --device gpu > "$OUT/bench-conv.txt" 2>&1; echo "rc $?"; grep -E "^\|" "$OUT/bench-conv.txt" | head -50
fi
if [ "$PART" = 12 ]; then
  # The GPU tests, the full GPU table beside PyTorch (time and peak memory), then the previous
  # build's rows of the models the change touched, in the same call.
  for t in conformance memory fused_optim device; do
    [ -x .bin/$t ] || continue
    echo "### test $t"; timeout 150 ./.bin/$t --test-threads=8 2>&1 | grep -E "^test result|FAILED|panicked|failed" | head -12
  done
  echo "## bench --torch, GPU, this build"
  timeout 240 ./.bin/xtask bench --torch --device gpu:0 --warmup 3 --steps 10 --sync-every 5 --groups 2 --epoch-samples 12800 \
    --out "$OUT/bench" > "$OUT/bench.md" 2> "$OUT/bench.log"; echo "rc $?"; grep -E "^\| (gpu|[a-z0-9_]+ \| gpu)" "$OUT/bench.md" | head -40
  if [ -x .bin/xtask-old ]; then
    echo "## bench, GPU, previous build: ${MODELS:-resnet18,vit}"
    timeout 150 ./.bin/xtask-old bench --device gpu:0 --models "${MODELS:-resnet18,vit}" --no-micro --warmup 3 --steps 10 --sync-every 5 --groups 2 \
      --epoch-samples 6400 --out "$OUT/bench-old" > "$OUT/bench-old.md" 2> "$OUT/bench-old.log"; echo "rc $?"; grep -E "^\| (gpu|[a-z0-9_]+ \| gpu)" "$OUT/bench-old.md" | head -20
  fi
fi
if [ "$PART" = 13 ]; then
  # ONLY=tests or ONLY=bench runs that half (each fits the device tool's 10 minutes).
  for t in conformance memory device fused_optim optim_parity dispatches; do
    [ -x .bin/$t ] && [ "${ONLY:-all}" != bench ] || continue
    echo "### test $t"; timeout 150 ./.bin/$t --test-threads=8 2>&1 | grep -E "^test result|FAILED|panicked|failed" | head -12
  done
  [ "${ONLY:-all}" = tests ] && exit 0
  echo "## PyTorch add and copy (x * 1), GB/s"
  timeout 60 python3 -c "
import torch
def t(f):
    for _ in range(3): f()
    torch.cuda.synchronize(); s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for _ in range(10):
        s.record(); f(); e.record(); torch.cuda.synchronize(); ms.append(s.elapsed_time(e))
    return sorted(ms)[5]
for n in (1 << 24, 1 << 26):
    a, b = torch.randn(n, device='cuda'), torch.randn(n, device='cuda')
    print('add', n, round(12 * n / t(lambda: a + b) / 1e6), 'GB/s;', 'copy x*1', n, round(8 * n / t(lambda: a * 1.0) / 1e6), 'GB/s')
" 2>&1 | tail -2
  for b in xtask xtask-old; do
    [ -x .bin/$b ] || continue
    echo "## bench-micro, $b"; timeout 150 ./.bin/$b bench-micro --device gpu:0 2>&1 | tail -1 > "$OUT/micro-$b.json"
    python3 -c "
import json, sys
m = json.load(open(sys.argv[1]))
print('peak copy', round(m['peak_copy_gbs']), 'GB/s')
for r in m['rows']:
    if r['unit'] != 'GFLOP/s' or '4096' in r['size']: print(r['bench'], r['size'], round(r['rate'], 1), r['unit'])
" "$OUT/micro-$b.json"
  done
  for b in xtask xtask-old; do
    [ -x .bin/$b ] || continue
    torch=""; [ $b = xtask ] && torch="--torch"
    echo "## bench-fusion $torch, $b"; timeout 200 ./.bin/$b bench-fusion --device gpu $torch > "$OUT/fusion-$b.txt" 2>&1; echo "rc $?"
    grep -E "^\| (gpu|device)" "$OUT/fusion-$b.txt" | tail -9
    echo "## bench-host, $b"; timeout 60 ./.bin/$b bench-host --device gpu 2>&1 | grep -E "^\|" | head -20
  done
  for b in xtask xtask-old; do
    [ -x .bin/$b ] || continue
    echo "## bench, GPU, $b: ${MODELS:-mlp,vit,resnet18}"
    timeout 150 ./.bin/$b bench --device gpu:0 --models "${MODELS:-mlp,vit,resnet18}" --no-micro --warmup 3 --steps 10 --sync-every 5 --groups 2 \
      --epoch-samples 6400 --out "$OUT/bench-$b" > "$OUT/bench-$b.md" 2> "$OUT/bench-$b.log"; echo "rc $?"; grep -E "^\| (gpu|[a-z0-9_]+ \| gpu)" "$OUT/bench-$b.md" | head -20
  done
fi
if [ "$PART" = 14 ]; then
  if [ "${ONLY:-tests}" = tests ]; then
    echo "## liandan info (cooperative matrices)"; ./.bin/liandan info 2>&1 | grep -iE "f16 matmul"
    for t in conv_coop matmul_coop conformance; do
      [ -x .bin/$t ] || continue
      echo "### test $t"; timeout 150 ./.bin/$t --test-threads=4 --nocapture 2>&1 | grep -E "^test result|FAILED|panicked|failed|cooperative|tensor-core" | head -12
    done
    for v in wide narrow short; do
      for t in conv_coop matmul_coop; do
        [ -x .bin/$t ] || continue
        echo "### test $t, LIANDAN_COOP_VARIANT=$v"; LIANDAN_COOP_VARIANT=$v timeout 100 ./.bin/$t 2>&1 | grep -E "^test result|FAILED|panicked" | head -6
      done
    done
  fi
  if [ "${ONLY:-tests}" = conv ]; then
    for b in xtask xtask-old; do
      [ -x .bin/$b ] || continue
      echo "## bench-conv --dtype f16 --quick, $b"
      timeout 170 ./.bin/$b bench-conv --device gpu:0 --dtype f16 --quick > "$OUT/conv-f16-$b.md" 2>&1; echo "rc $?"
      grep -E "^\| " "$OUT/conv-f16-$b.md" | head -48
    done
  fi
  if [ "${ONLY:-tests}" = bench ]; then
    for b in xtask xtask-old; do
      [ -x .bin/$b ] || continue
      torch=""; p="${PRECISIONS:-f32,f16,bf16}"
      [ $b = xtask ] && torch="--torch"
      [ $b = xtask-old ] && p="${OLD_PRECISIONS:-$p}"
      echo "## bench, GPU, $b $torch: ${MODELS:-mnist_cnn,resnet18,vit} in $p"
      timeout 280 ./.bin/$b bench --device gpu:0 --models "${MODELS:-mnist_cnn,resnet18,vit}" --precisions "$p" $torch --no-micro \
        --warmup 30 --steps 10 --sync-every 5 --groups 2 --epoch-samples 6400 --out "$OUT/bench14-$b" > "$OUT/bench14-$b.md" 2> "$OUT/bench14-$b.log"; echo "rc $?"
      grep -E "^\| (gpu|[a-z0-9_]+ \| gpu)" "$OUT/bench14-$b.md" | head -30
    done
  fi
fi
if [ "$PART" = 15 ]; then
  if [ "${ONLY:-all}" != bench ]; then
    for t in bf16 memory conformance conv_coop; do
      [ -x .bin/$t ] || continue
      echo "### test $t"; timeout 150 ./.bin/$t --test-threads=4 2>&1 | grep -E "^test result|FAILED|panicked|failed" | head -12
    done
  fi
  if [ "${ONLY:-all}" != tests ]; then
    for b in xtask xtask-old; do
      [ -x .bin/$b ] || continue
      torch=""; [ $b = xtask ] && torch="--torch"
      echo "## bench, GPU, $b $torch: ${MODELS:-mnist_cnn,resnet18,vit} in ${PRECISIONS:-f32,bf16}"
      timeout 200 ./.bin/$b bench --device gpu:0 --models "${MODELS:-mnist_cnn,resnet18,vit}" --precisions "${PRECISIONS:-f32,bf16}" $torch --no-micro \
        --warmup 30 --steps 10 --sync-every 5 --groups 2 --epoch-samples 6400 --out "$OUT/bench15-$b" > "$OUT/bench15-$b.md" 2> "$OUT/bench15-$b.log"; echo "rc $?"
      grep -E "^\| (gpu|[a-z0-9_]+ \| gpu)" "$OUT/bench15-$b.md" | head -30
    done
    for p in ${TRAIN_PRECISIONS:-f32 f16 bf16}; do
      echo "## liandan train --precision $p"
      SECONDS=0; timeout 100 ./.bin/liandan train --precision $p --out "$OUT/run-$p" 2>&1 | grep -vE "^(checkpoint|training state|history|plot)"; echo "wall ${SECONDS} s"
      cat "$OUT/run-$p/history.csv"
    done
  fi
fi

if [ "$PART" = 16 ]; then
  if [ "${ONLY:-all}" != bench ]; then
    for t in conformance memory bf16 dispatches amp; do
      [ -x .bin/$t ] || continue
      echo "### test $t"; timeout 150 ./.bin/$t --test-threads=4 2>&1 | grep -E "^test result|FAILED|panicked|failed" | head -12
    done
    for p in ${TRAIN_PRECISIONS:-}; do
      echo "## liandan train --precision $p"
      SECONDS=0; timeout 100 ./.bin/liandan train --precision $p --out "$OUT/run-$p" 2>&1 | grep -vE "^(checkpoint|training state|history|plot)"; echo "wall ${SECONDS} s"
    done
  fi
  if [ "${ONLY:-all}" = profile ]; then
    for m in $(echo "${MODELS:-vit}" | tr , ' '); do
      for p in f32 f16; do
        echo "## liandan profile --model $m --precision $p"
        timeout 120 ./.bin/liandan profile --model $m --steps 3 --device gpu --precision $p 2>&1 | head -40
      done
    done
  elif [ "${ONLY:-all}" != tests ]; then
    for round in 1 2; do
      for b in xtask-old xtask; do
        [ -x .bin/$b ] || continue
        echo "## round $round, $b"
        timeout 60 ./.bin/$b bench-host --device gpu --only lstm 2>&1 | grep -E "^\| (record|sync)"
        timeout 60 ./.bin/$b bench-host --device gpu --only sync 2>&1 | grep -E "^\| (record|sync)"
        torch=""; [ $b = xtask ] && [ $round = 1 ] && torch="--torch"
        timeout 150 ./.bin/$b bench --device gpu:0 --models "${MODELS:-lstm,vae,mlp}" $torch --no-micro --warmup 30 --steps 10 --sync-every 5 --groups 2 \
          --epoch-samples 640 --out "$OUT/bench16-$b-$round" > "$OUT/bench16-$b-$round.md" 2> "$OUT/bench16-$b-$round.log"; echo "rc $?"
        grep -E "^\| [a-z0-9_]+ \| gpu" "$OUT/bench16-$b-$round.md"
        timeout 100 ./.bin/$b bench --device gpu:0 --models vit --precisions f16 --no-micro --warmup 30 --steps 10 --sync-every 5 --groups 2 \
          --epoch-samples 640 --out "$OUT/bench16-vit-$b-$round" > "$OUT/bench16-vit-$b-$round.md" 2>&1; echo "rc $?"
        grep -E "^\| [a-z0-9_]+ \| gpu" "$OUT/bench16-vit-$b-$round.md"
      done
    done
    echo "## PyTorch: an add of one element, then synchronize (median of 2,000, us)"
    python3 -c "
import statistics, time, torch
z = torch.zeros(1, device='cuda'); torch.cuda.synchronize()
def one():
    t = time.perf_counter(); (z + 1.0); torch.cuda.synchronize(); return time.perf_counter() - t
for _ in range(200): one()
print(round(statistics.median(one() for _ in range(2000)) * 1e6, 1))"
    for l in liandan-old liandan; do
      [ -x .bin/$l ] || continue
      echo "## $l profile --model lstm"
      timeout 60 ./.bin/$l profile --model lstm --batch 64 --steps 5 --device gpu 2>&1 | head -24
    done
  fi
fi

if [ "$PART" = 17 ]; then
  # The autotune: its tests and the conformance suite with it on (ONLY=tests), then the zoo's
  # steps with it off and on, alternated, two rounds (ONLY=bench; PyTorch beside in the first),
  # and the cuts it kept.
  if [ "${ONLY:-all}" != bench ]; then
    [ -x .bin/autotune ] && { echo "### test autotune"; timeout 120 ./.bin/autotune 2>&1 | grep -E "^test result|FAILED|panicked"; }
    echo "### test conformance, LIANDAN_AUTOTUNE=1"
    LIANDAN_AUTOTUNE=1 LIANDAN_CACHE_DIR="$OUT/tune-conformance" timeout 240 ./.bin/conformance --test-threads=4 2>&1 | grep -E "^test result|FAILED|panicked|failed" | head -12
  fi
  if [ "${ONLY:-all}" = bench ] || [ "${ONLY:-all}" = all ]; then
    for round in 1 2; do
      for t in 0 1; do
        torch=""; [ $t = 0 ] && [ $round = 1 ] && torch="--torch"
        for p in ${PRECISIONS:-f32}; do
          echo "## round $round, LIANDAN_AUTOTUNE=$t, $p $torch"
          SECONDS=0
          LIANDAN_AUTOTUNE=$t LIANDAN_CACHE_DIR="$OUT/tune" timeout 240 ./.bin/xtask bench --device gpu:0 --models "${MODELS:-resnet18,seed003_cnn,mnist_cnn,vit,mlp}" \
            --precisions $p $torch --no-micro --warmup 30 --steps 10 --sync-every 5 --groups 2 --epoch-samples 640 \
            --out "$OUT/bench17-$t-$p-$round" > "$OUT/bench17-$t-$p-$round.md" 2> "$OUT/bench17-$t-$p-$round.log"; echo "rc $? wall ${SECONDS} s"
          grep -E "^\| [a-z0-9_]+ \| gpu" "$OUT/bench17-$t-$p-$round.md"
        done
      done
    done
    echo "## the autotune's files"
    for f in "$OUT"/tune/autotune/*.txt; do echo "$f: $(wc -l < "$f") lines"; done
  fi
  if [ "${ONLY:-all}" = more ]; then
    # Two caches filled by separate first runs (A, B), each then alternated with the autotune
    # off: MODELS in f32 two rounds and f16 one; then every shape whose cut A changed (chosen
    # tile, splits, us; the rule's tile, splits, us).
    for fill in A B; do
      LIANDAN_AUTOTUNE=1 LIANDAN_CACHE_DIR="$OUT/tune-$fill" timeout 200 ./.bin/xtask bench --device gpu:0 --models "${MODELS:-resnet18}" --precisions f32,f16 --no-micro \
        --warmup 3 --steps 3 --sync-every 3 --groups 1 --epoch-samples 256 --out "$OUT/fill" > /dev/null 2>&1; echo "fill $fill rc $?"
      for round in 1 2 3; do
        for t in 0 1; do
          p=f32; [ $round = 3 ] && p=f16
          LIANDAN_AUTOTUNE=$t LIANDAN_CACHE_DIR="$OUT/tune-$fill" timeout 120 ./.bin/xtask bench --device gpu:0 --models "${MODELS:-resnet18}" --precisions $p --no-micro \
            --warmup 30 --steps 10 --sync-every 5 --groups 2 --epoch-samples 640 --out "$OUT/b" > "$OUT/b.md" 2>&1
          grep -E "^\| [a-z0-9_]+ \| gpu" "$OUT/b.md" | cut -d'|' -f2,4,6,7,11 | sed "s/^/$fill round $round autotune=$t:/"
        done
      done
    done
    for fill in A B; do
      echo "## cuts the autotune changed in $fill (chosen tile splits us | rule's tile splits us)"
      cat "$OUT"/tune-$fill/autotune/*.txt | awk -F'\t' 'NR > 1 { split($2, v, " "); if (v[1] != v[4] || v[2] != v[5]) print $1 " | " $2 }' \
        | sed -E 's/ConvGeometry \{ n: ([0-9]+), c: ([0-9]+), h: ([0-9]+), w: ([0-9]+), o: ([0-9]+), kernel: \(([0-9]+), [0-9]+\), stride: \(([0-9]+), [0-9]+\)[^}]*\}/n\1 c\2 \3x\4 o\5 k\6 s\7/' \
        | if [ $fill = A ]; then cat; else wc -l; fi
      echo "unchanged: $(cat "$OUT"/tune-$fill/autotune/*.txt | awk -F'\t' 'NR > 1 { split($2, v, " "); if (v[1] == v[4] && v[2] == v[5]) n++ } END { print n + 0 }')"
    done
    rm -rf "$OUT/b" "$OUT/fill"
  fi
fi

if [ "$PART" = 18 ]; then
  # Dense f32 and f16 elementwise ops in vec4s: the GPU tests, then LIANDAN_DENSE4=0 and =1
  # alternated, two rounds: the micro rows of adds and copies, and the steps of MODELS in
  # PRECISIONS (default f32); PyTorch's micro rows last.
  for t in conformance kernels_reduce_matmul; do
    [ -x .bin/$t ] || continue
    echo "### test $t"; timeout 150 ./.bin/$t --test-threads=4 2>&1 | grep -E "^test result|FAILED|panicked|failed" | head -12
  done
  for round in 1 2; do
    for v in 0 1; do
      echo "## round $round, LIANDAN_DENSE4=$v"
      LIANDAN_DENSE4=$v timeout 120 ./.bin/xtask bench-micro --device gpu:0 2>&1 | grep -E "add f(32|16)|copy" | cut -c1-150
      LIANDAN_DENSE4=$v timeout 150 ./.bin/xtask bench --device gpu:0 --models "${MODELS:-mlp,vae,lstm,mnist_cnn,vit,resnet18}" --precisions "${PRECISIONS:-f32}" --no-micro --warmup 30 --steps 10 --sync-every 5 --groups 2 \
        --epoch-samples 640 --out "$OUT/b" > "$OUT/b.md" 2>&1; echo "rc $?"
      grep -E "^\| [a-z0-9_]+ \| gpu" "$OUT/b.md" | cut -d'|' -f2,4,6,7,11
    done
  done
  echo "## PyTorch"; timeout 120 python3 xtask/bench_torch.py --device cuda 2>&1 | grep -E "add|copy" | head -8
  rm -rf "$OUT/b"
fi
if [ "$PART" = 19 ]; then
  # The host CPU on many threads: this build against the previous one (.bin/xtask-old,
  # .bin/liandan-old), previous first, ROUNDS rounds of the zoo's steps of MODELS at batch
  # BATCH with THREADS threads a side (PyTorch beside in this build's first round); then per-op
  # profiles of PROFILE_MODELS on THREADS threads and on one (`ONLY=bench` or `ONLY=profile`
  # for one half).
  th="${THREADS:-16}"; echo "## host: $(nproc) cores, $th threads"
  if [ "${ONLY:-all}" != profile ]; then
    for round in $(seq "${ROUNDS:-1}"); do
      for b in xtask-old xtask; do
        [ -x .bin/$b ] || continue
        torch=""; [ $b = xtask ] && [ "$round" = 1 ] && torch="--torch"
        echo "## round $round, $b"
        timeout 280 ./.bin/$b bench $torch --device cpu --threads "$th" --batch "${BATCH:-16}" --models "${MODELS:-resnet18,lstm,vit,seed003_cnn}" \
          --warmup 2 --steps 5 --sync-every 5 --groups 1 --no-micro --epoch-samples 64 --out "$OUT/c" > "$OUT/c-$b.md" 2>&1; echo "rc $?"
        grep -E "^\| [a-z0-9_]+ \| cpu" "$OUT/c-$b.md" | cut -d'|' -f2,6,7,12,13
      done
    done
    rm -rf "$OUT/c"
  fi
  if [ "${ONLY:-all}" != bench ]; then
    for m in ${PROFILE_MODELS:-lstm resnet18}; do
      for t in "$th" 1; do
        batch=16; [ $m = lstm ] && batch=64
        echo "## liandan profile --model $m --batch $batch --device cpu, $t threads"
        RAYON_NUM_THREADS=$t timeout 150 ./.bin/liandan profile --model $m --batch $batch --steps 2 --device cpu 2>&1 | head -22
      done
    done
  fi
fi
if [ "$PART" = 20 ]; then
  # The tensor-core kernels' default (`tall` where the device fits it) against `prefetch` (the
  # previous default), one binary with LIANDAN_COOP_VARIANT: the driver's registers and workgroup
  # memory of each (`xtask kernel-stats`), the GPU tests on the default, the f16 matmul
  # micro-benchmarks (PyTorch's beside) and the f16 steps of MODELS, alternated in two rounds,
  # PyTorch with autocast beside once (`ONLY=tests` or `ONLY=bench` for one half).
  if [ "${ONLY:-all}" != bench ]; then
    echo "## registers"
    for v in Prefetch Tall; do timeout 60 ./.bin/xtask kernel-stats "MatmulCoop(Key { variant: $v" "a: K, b: Outer, partial: false" 2>&1 | grep -v "^device"; done
    ./.bin/liandan info 2>&1 | grep -iE "f16 matmul"
    for t in conformance matmul_coop conv_coop memory device; do
      [ -x .bin/$t ] || continue
      echo "### test $t"; timeout 150 ./.bin/$t --test-threads=8 --nocapture 2>&1 | grep -E "cooperative matrices on|^test result|FAILED|panicked" | head -6
    done
  fi
  [ "${ONLY:-all}" = tests ] && exit 0
  rows() { python3 -c "
import json,sys
m=json.loads(sys.stdin.read().strip().splitlines()[-1])
for r in m['rows']:
    if 'matmul' in r['bench']: print('%-50s %-16s %9.3f ms %10.0f %s' % (r['bench'][:50], r['size'], r['median_ms'], r['rate'], r['unit']))
"; }
  for round in 1 2; do for v in prefetch ""; do
    echo "## f16 matmul, LIANDAN_COOP_VARIANT=$v (round $round)"; LIANDAN_COOP_VARIANT=$v timeout 60 ./.bin/xtask bench-micro --device gpu:0 --f16-matmul 2>/dev/null | rows
  done; done
  echo "## PyTorch f16 matmul"; timeout 120 python3 xtask/bench_torch.py --matmul --device gpu:0 2>&1 | tail -1
  steps() { grep -E "^\| (gpu|[a-z0-9_]+ \| gpu)" "$1" | head -16; }
  models="${MODELS:-resnet18,vit,seed003_cnn,mnist_cnn}"
  echo "## steps f16, default, PyTorch autocast beside"
  timeout 200 ./.bin/xtask bench --torch --device gpu:0 --models "$models" --precisions f16 --no-micro --warmup 3 --steps 10 --sync-every 5 --groups 2 \
    --epoch-samples 6400 --out "$OUT/t" > "$OUT/t.md" 2>/dev/null; steps "$OUT/t.md"
  for round in 1 2; do for v in prefetch ""; do
    echo "## steps f16, LIANDAN_COOP_VARIANT=$v (round $round)"
    LIANDAN_COOP_VARIANT=$v timeout 150 ./.bin/xtask bench --device gpu:0 --models "$models" --precisions f16 --no-micro --warmup 3 --steps 10 --sync-every 5 --groups 2 \
      --epoch-samples 6400 --out "$OUT/s" > "$OUT/s.md" 2>/dev/null; steps "$OUT/s.md"
  done; done
  rm -rf "$OUT/s" "$OUT/t"
fi
# PART=21: where the products' time goes (`xtask ceiling`, runs 78-89): every ceiling kernel
# and the real `tall` kernel cut down, twice; then this build's and the previous build's
# (`.bin/xtask-old`, if there) products and PyTorch's, and the f16 steps of `MODELS`, alternated.
if [ "$PART" = 21 ]; then
  for round in 1 2; do echo "## ceiling (round $round)"; timeout 200 ./.bin/xtask ceiling; done
  rows() { python3 -c "
import json,sys
m=json.loads(sys.stdin.read().strip().splitlines()[-1])
for r in m['rows']:
    if 'matmul' in r['bench'] and ('2048' in r['size'] or '4096' in r['size']): print('%-50s %-16s %9.3f ms %10.0f %s' % (r['bench'][:50], r['size'], r['median_ms'], r['rate'], r['unit']))
"; }
  builds="xtask"; [ -x .bin/xtask-old ] && builds="xtask-old xtask"
  for round in 1 2; do for b in $builds; do
    echo "## products, $b (round $round)"; timeout 90 ./.bin/$b bench-micro --device gpu:0 2>/dev/null | rows
  done; done
  echo "## PyTorch f16 matmul"; timeout 120 python3 xtask/bench_torch.py --matmul --device gpu:0 2>&1 | tail -1
  echo "## PyTorch f32 matmul"; timeout 150 python3 xtask/bench_torch.py --device cuda 2>&1 | grep -i "matmul f32"
  for round in 1 2; do for b in $builds; do
    echo "## steps f16, $b (round $round)"
    timeout 150 ./.bin/$b bench --device gpu:0 --models "${MODELS:-vit,resnet18,mnist_cnn,seed003_cnn}" --precisions f16 --no-micro --warmup 3 --steps 10 --sync-every 5 \
      --groups 2 --epoch-samples 6400 --out "$OUT/s" > "$OUT/s.md" 2>/dev/null; grep -E "^\| (gpu|[a-z0-9_]+ \| gpu)" "$OUT/s.md" | head -16
  done; done
  rm -rf "$OUT/s"
fi
if [ "$PART" = 22 ]; then
  builds="xtask"; [ -x .bin/xtask-old ] && builds="xtask-old xtask"
  for round in 1 2; do
    echo "## wgpu alone (round $round)"; timeout 60 ./.bin/xtask ceiling --only latency 2>&1 | grep -E "^\|"
    for b in $builds; do
      echo "## $b bench-host --only sync (round $round)"; timeout 60 ./.bin/$b bench-host --device gpu --only sync 2>&1 | grep -E "^\|" | head -20
    done
    echo "## PyTorch: an add of one element, then synchronize; a synchronize alone (medians of 2,000, us)"
    python3 -c "
import statistics, time, torch
z = torch.zeros(1, device='cuda'); torch.cuda.synchronize()
def one(f):
    t = time.perf_counter(); f(); torch.cuda.synchronize(); return time.perf_counter() - t
for _ in range(200): one(lambda: z + 1.0)
print('add + synchronize', round(statistics.median(one(lambda: z + 1.0) for _ in range(2000)) * 1e6, 1))
print('synchronize alone', round(statistics.median(one(lambda: None) for _ in range(2000)) * 1e6, 1))
print('add + item()', round(statistics.median(one(lambda: (z + 1.0).item()) for _ in range(2000)) * 1e6, 1))"
  done
  for round in 1 2; do for b in $builds; do
    echo "## steps f32, $b (round $round)"
    timeout 150 ./.bin/$b bench --device gpu:0 --models "${MODELS:-lstm,seed003_cnn,mlp}" --precisions f32 --no-micro --warmup 3 --steps 10 --sync-every 5 \
      --groups 2 --epoch-samples 6400 $([ "$round$b" = 1xtask ] && echo --torch) --out "$OUT/s" > "$OUT/s.md" 2>/dev/null; grep -E "^\| (gpu|[a-z0-9_]+ \| (gpu|cuda))" "$OUT/s.md" | head -16
  done; done
  rm -rf "$OUT/s"
fi

if [ "$PART" = 23 ]; then
  builds="xtask"; [ -x .bin/xtask-old ] && builds="xtask xtask-old"
  step() { # binary, precisions, models, extra flags
    timeout 300 ./.bin/$1 bench --device gpu:0 --models "$3" --precisions "$2" --no-micro --warmup 3 --steps 10 --sync-every 5 --groups 2 \
      --epoch-samples 6400 ${4:-} --out "$OUT/s" > "$OUT/s.md" 2>/dev/null; grep -E "^\| [a-z0-9_]+ \| gpu" "$OUT/s.md"
  }
  for round in 1 2; do for b in $builds; do
    echo "## f16 steps, $b (round $round)"; step "$b" f16 resnet18,lstm "$([ "$round$b" = 1xtask ] && echo --torch)"
  done; done
  for b in $builds; do echo "## resnet18 f32, $b"; step "$b" f32 resnet18; done
  echo "## resnet18 f16 memory at the peak"
  LIANDAN_MEMORY_BREAKDOWN=1 timeout 120 ./.bin/liandan profile --model resnet18 --precision f16 --steps 5 --device gpu 2>&1 | sed -n '/peak memory/,$p' | head -24
  echo "## the zoo beside PyTorch"; step xtask f32,f16 mlp,mnist_cnn,seed003_cnn,resnet18,vit,lstm,vae --torch
  for k in 1 2 3; do echo "## lstm f16, process $k"; step xtask f16 lstm; done
  for p in f32 f16; do echo "## lstm $p profile"; timeout 120 ./.bin/liandan profile --model lstm --precision $p --steps 5 --device gpu 2>&1 | sed -n 2,14p; done
  rm -rf "$OUT/s"
fi
if [ "$PART" = 24 ]; then
  [ -x .bin/conformance ] && { timeout 300 ./.bin/conformance 2>&1 | grep -E "^test result|FAILED|panicked" | head; }
  shapes() { sed -n '/input shapes/,/^$/p' | head -${1:-12}; }
  builds="liandan"; [ -x .bin/liandan-old ] && builds="liandan-old liandan"
  for b in $builds; do
    for m in ${MODELS:-lstm mnist_cnn vit resnet18}; do
      echo "## $b $m f32"; timeout 120 ./.bin/$b profile --model $m --steps 5 --device gpu --shapes 2>&1 | shapes
    done
    echo "## $b lstm f16"; timeout 120 ./.bin/$b profile --model lstm --precision f16 --steps 5 --device gpu --shapes 2>&1 | shapes
  done
  export LIANDAN_CACHE_DIR="$OUT/autotune"
  for m in ${MODELS:-lstm mnist_cnn vit resnet18}; do
    echo "## autotuned $m f32"; LIANDAN_AUTOTUNE=1 timeout 180 ./.bin/liandan profile --model $m --steps 5 --warmup 3 --device gpu --shapes 2>&1 | shapes
  done
  echo "## the autotune's choices (chosen tile, splits, us; the rule's tile, splits, us)"; cat "$OUT"/autotune/autotune/* 2>/dev/null
  xs="xtask"; [ -x .bin/xtask-old ] && xs="xtask-old xtask"
  for round in 1 2; do for b in $xs; do
    echo "## steps, $b (round $round)"
    timeout 300 ./.bin/$b bench --device gpu:0 --models mlp,mnist_cnn,vit,lstm --precisions f32,f16 --no-micro --warmup 3 --steps 10 --sync-every 5 \
      --groups 2 --epoch-samples 6400 --out "$OUT/s" > "$OUT/s.md" 2>/dev/null; grep -E "^\| [a-z0-9_]+ \| gpu" "$OUT/s.md"
  done; done
  for tf in "" --no-tf32; do
    echo "## PyTorch resnet18 $tf"; timeout 120 python3 xtask/bench_torch.py --profile --shapes $tf --model resnet18 --batch 128 --steps 5 2>&1 | grep -E "aten::(cudnn_convolution|convolution_backward) " | head -20
  done
  rm -rf "$OUT/s"
fi
