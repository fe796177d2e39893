#!/usr/bin/env bash
# Temporary (run 152): a convolution's bias and ReLU in one kernel: tests, then mnist_cnn against the previous build.
set -u
for f in .bin/*.gz; do gunzip -f $f; done; chmod +x .bin/*; mkdir -p /work && ln -sfn "$PWD" /work/main
. .gpu/env.sh; export LIANDAN_REQUIRE_GPU=1
date -u +%T
./.bin/conformance 2>&1 | grep -E "test result|FAILED|panicked" | head
./.bin/parity --nocapture 2>&1 | grep -E "mnist_cnn on|test result"
B="--device gpu:0 --models mnist_cnn --precisions f32,f16 --no-micro --warmup 3 --steps 10 --sync-every 5 --groups 4 --epoch-samples 6400"
for r in 1 2; do
  echo "== round $r"; date -u +%T
  ./.bin/xtask-old bench $B --out "$OUT/old$r" > "$OUT/old$r.md" 2>&1; echo "old"; grep -E '^\| [a-z0-9_]+ \| gpu' "$OUT/old$r.md"
  if [ $r = 1 ]; then T=--torch; else T=; fi
  ./.bin/xtask bench $B $T --out "$OUT/new$r" > "$OUT/new$r.md" 2>&1; echo "new"; grep -E '^\| [a-z0-9_]+ \| gpu' "$OUT/new$r.md"
done
date -u +%T
