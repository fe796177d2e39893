#!/usr/bin/env bash
# The GPU tests and the benchmark tables on a GPU machine without Rust, run from the root of a
# copy of the repository. Build on a machine with Rust first and put the stripped binaries in
# .bin/ (`liandan`, `xtask`, and test binaries under their test names): docs/PERFORMANCE.md,
# "How to reproduce", has the commands. The machine needs its GPU's Vulkan driver and a Vulkan
# loader (libvulkan.so.1); libraries it lacks can go in .gpu/lib, which is put on
# LD_LIBRARY_PATH. PyTorch (`python3 -c 'import torch'`) gives the columns beside ours.
#
#   PART=tests|train|bench|precisions|compile|cpu|sync|profile|ddp|all bash xtask/gpu-run.sh   (default: all = tests, train, bench)
#
# bench: the zoo's training steps beside PyTorch, f32 with the micro-benchmarks, then the
# other PRECISIONS (default f16) without; MODELS limits the models. With a previous build's
# xtask as .bin/xtask-old, its rows are timed too, the two builds alternated for ROUNDS
# rounds (default 2), so a change is measured against what it changed in the same call.
# precisions: MODELS (default mlp, mnist_cnn, seed003_cnn, lstm, vae) in f32, f16 and bf16, each
# row timed in ROUNDS processes (default 3, `bench --rounds`): the small models' steps move
# between processes more than between precisions.
# compile: the zoo's steps (PRECISIONS_COMPILE, default f32) beside PyTorch eager and under
# torch.compile in COMPILE_MODES (default "default,reduce-overhead"); a compile takes up to a
# minute or more a model and mode (resnet18, vit), so MODELS keeps a call within its time.
# cpu: the zoo on the host's CPU beside PyTorch's, all cores a side (THREADS), batch 16 (BATCH).
# sync: what a synchronize costs through wgpu alone, through the backend, and in CUDA.
# profile: `liandan profile --shapes` of MODELS (default resnet18, vit, lstm) in f32.
# ddp: data-parallel training (a .bin/liandan built with `--features liandan/mpi`, and MPICH
# packed into .mpi/ by xtask/pack-mpi.sh): MODELS (default resnet18, vit) at batch BATCH (default
# 128) per GPU on synthetic data, alone on gpu:0, as 2 ranks on gpu:0 and gpu:1, and as 2 ranks
# sharing gpu:0; samples/s of each run's second epoch, and what the all-reduce cost per step.
# OUT (default target/gpu-run) receives bench.json, bench.png and the Markdown tables.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/target/gpu-run}"; mkdir -p "$OUT"
PART="${PART:-all}"
for f in .bin/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
chmod +x .bin/* 2>/dev/null
# MPICH's launcher and libraries, where an MPI build of liandan was packed with them.
# shellcheck disable=SC1091
[ -f .mpi/env.sh ] && . .mpi/env.sh
[ -d .gpu/lib ] && export LD_LIBRARY_PATH="$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export WGPU_BACKEND="${WGPU_BACKEND:-vulkan}"
export LIANDAN_REQUIRE_GPU=1
want() { [ "$PART" = "$1" ] || { [ "$PART" = all ] && [ "$1" != precisions ] && [ "$1" != compile ] && [ "$1" != cpu ] && [ "$1" != sync ] && [ "$1" != profile ] && [ "$1" != ddp ]; }; }
STEPS=(--device gpu:0 --warmup 3 --steps 10 --sync-every 5 --groups 4 --epoch-samples 6400)
MODELS_ARG=(); [ -n "${MODELS:-}" ] && MODELS_ARG=(--models "$MODELS")

echo "## machine"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null; nproc
python3 -c "import torch; print('torch', torch.__version__)" 2>/dev/null || echo "no PyTorch: its columns stay empty"
./.bin/liandan info 2>&1 | head -40

if want tests; then
  for t in .bin/*; do
    name="$(basename "$t")"
    case "$name" in liandan|liandan-old|xtask|xtask-old) continue ;; esac
    echo "## test $name"; timeout 300 "$t" --include-ignored --test-threads=8 2>&1 | grep -E "^test result|FAILED|panicked" | head -20
  done
fi

if want train; then
  for p in f32 f16 bf16; do
    echo "## liandan train --precision $p"
    SECONDS=0; ./.bin/liandan train --precision "$p" --out "$OUT/train-$p" 2>&1 | tail -6; echo "wall ${SECONDS} s"
  done
fi

if want bench; then
  builds="xtask"; [ -x .bin/xtask-old ] && builds="xtask-old xtask"
  echo "## bench f32 (micro-benchmarks, PyTorch beside)"
  timeout 500 ./.bin/xtask bench "${STEPS[@]}" ${MODELS_ARG[@]+"${MODELS_ARG[@]}"} --torch --precisions f32 --out "$OUT/bench-f32" > "$OUT/bench-f32.md" 2> "$OUT/bench-f32.log"
  echo "rc $?"; cat "$OUT/bench-f32.md"; tail -3 "$OUT/bench-f32.log"
  for p in ${PRECISIONS:-f16}; do
    echo "## bench $p (PyTorch beside)"
    timeout 400 ./.bin/xtask bench "${STEPS[@]}" ${MODELS_ARG[@]+"${MODELS_ARG[@]}"} --torch --no-micro --precisions "$p" --out "$OUT/bench-$p" > "$OUT/bench-$p.md" 2> "$OUT/bench-$p.log"
    echo "rc $?"; cat "$OUT/bench-$p.md"
  done
  if [ "$builds" != xtask ]; then
    for round in $(seq "${ROUNDS:-2}"); do for b in $builds; do
      echo "## steps, $b, round $round"
      timeout 400 ./.bin/$b bench "${STEPS[@]}" ${MODELS_ARG[@]+"${MODELS_ARG[@]}"} --no-micro --precisions "${PRECISIONS_COMPARED:-f32,f16}" --out "$OUT/s" > "$OUT/s.md" 2>/dev/null
      grep -E "^\| [a-z0-9_]+ \| gpu" "$OUT/s.md"
    done; done
    rm -rf "$OUT/s" "$OUT/s.md"
  fi
fi

if want precisions; then
  echo "## f32, f16 and bf16, ${ROUNDS:-3} processes a row"
  timeout 590 ./.bin/xtask bench --device gpu:0 --models "${MODELS:-mlp,mnist_cnn,seed003_cnn,lstm,vae}" --precisions f32,f16,bf16 \
    --rounds "${ROUNDS:-3}" --no-micro --epoch-samples 6400 --out "$OUT/bench-precisions" > "$OUT/bench-precisions.md" 2> "$OUT/bench-precisions.log"
  echo "rc $?"; cat "$OUT/bench-precisions.md"; tail -3 "$OUT/bench-precisions.log"
fi

if want compile; then
  echo "## bench ${PRECISIONS_COMPILE:-f32} beside PyTorch eager and under torch.compile"
  timeout 590 ./.bin/xtask bench "${STEPS[@]}" ${MODELS_ARG[@]+"${MODELS_ARG[@]}"} --torch --torch-compile "${COMPILE_MODES:-default,reduce-overhead}" \
    --no-micro --precisions "${PRECISIONS_COMPILE:-f32}" --out "$OUT/bench-compile" > "$OUT/bench-compile.md" 2> "$OUT/bench-compile.log"
  echo "rc $?"; cat "$OUT/bench-compile.md"; tail -3 "$OUT/bench-compile.log"
fi

if want cpu; then
  echo "## bench on the CPU (PyTorch beside)"
  timeout 580 ./.bin/xtask bench --device cpu --threads "${THREADS:-$(nproc)}" --batch "${BATCH:-16}" --warmup 2 --steps 5 --sync-every 5 --groups 2 \
    ${MODELS_ARG[@]+"${MODELS_ARG[@]}"} --torch --no-micro --out "$OUT/bench-cpu" > "$OUT/bench-cpu.md" 2> "$OUT/bench-cpu.log"
  echo "rc $?"; cat "$OUT/bench-cpu.md"
fi

if want sync; then
  for round in 1 2; do
    echo "## wgpu alone (round $round)"; timeout 60 ./.bin/xtask ceiling --only latency 2>&1 | grep -E "^\|"
    echo "## bench-host --only sync (round $round)"; timeout 60 ./.bin/xtask bench-host --device gpu --only sync 2>&1 | grep -E "^\|"
    echo "## PyTorch: an add of one element, then a synchronize (medians of 2,000, us)"
    python3 -c "
import statistics, time, torch
z = torch.zeros(1, device='cuda'); torch.cuda.synchronize()
def one(f):
    t = time.perf_counter(); f(); torch.cuda.synchronize(); return time.perf_counter() - t
for _ in range(200): one(lambda: z + 1.0)
print('add + synchronize', round(statistics.median(one(lambda: z + 1.0) for _ in range(2000)) * 1e6, 1))
print('add + item()', round(statistics.median(one(lambda: (z + 1.0).item()) for _ in range(2000)) * 1e6, 1))"
  done
fi

if want profile; then
  models="${MODELS:-resnet18,vit,lstm}"
  for m in ${models//,/ }; do
    echo "## profile $m"; timeout 120 ./.bin/liandan profile --model "$m" --steps 5 --device gpu --shapes 2>&1 | head -60
  done
fi

if want ddp; then
  command -v mpiexec >/dev/null || echo "no mpiexec: pack MPICH into .mpi/ with xtask/pack-mpi.sh (docs/DISTRIBUTED.md)"
  batch="${BATCH:-128}"
  for m in $(echo "${MODELS:-resnet18,vit}" | tr , ' '); do
    # 30 steps per epoch for every rank: 2 ranks split 7,680 samples into 3,840 each.
    args=(train --model "$m" --data synthetic --max-samples $((60 * batch)) --batch-size "$batch" --epochs 2 --limit-batches 30)
    for run in "1 gpu" "2 gpus" "2 ranks on gpu:0"; do
      echo "## ddp $m, $run, batch $batch per rank"
      case "$run" in
        "1 gpu") cmd=(./.bin/liandan "${args[@]}" --device gpu:0) ;;
        "2 gpus") cmd=(mpiexec -n 2 ./.bin/liandan "${args[@]}") ;;
        *) cmd=(mpiexec -n 2 -env LIANDAN_DEVICE gpu:0 ./.bin/liandan "${args[@]}") ;;
      esac
      SECONDS=0
      timeout 500 "${cmd[@]}" --out "$OUT/ddp-$m" > "$OUT/ddp.log" 2>&1
      echo "rc $? wall ${SECONDS} s"
      grep -E "^  rank|^epoch 2/2|all-reduce over" "$OUT/ddp.log" | tail -5
      grep -E "^epoch 2/2 step" "$OUT/ddp.log" | tail -1
      grep -iE "error|panick" "$OUT/ddp.log" | head -5
      rm -rf "$OUT/ddp-$m"
    done
  done
fi
