set -u
for f in .bin/x/*.gz; do gunzip -f $f; done; chmod +x .bin/x/*
mkdir -p /work && ln -sfn "$PWD" /work/main; . .gpu/env.sh; export LIANDAN_REQUIRE_GPU=1
X=$PWD/.bin/x/xtask
nvidia-smi --query-gpu=pstate,clocks.sm,clocks.max.sm,clocks.mem,persistence_mode,power.draw --format=csv
nvidia-smi dmon -s pc -d 1 -o T > $OUT/dmon.txt 2>&1 &
D=$!
B="--device gpu:0 --models mlp,mnist_cnn,seed003_cnn --precisions f16 --no-micro --steps 10 --sync-every 5 --groups 4 --epoch-samples 640"
for r in 1 2; do
  sleep 8; echo "== round $r, --warmup 3 (and 1 s), $(date -u +%T)"; $X bench $B --warmup 3 --out /tmp/w3 2>/dev/null | grep -E "^\| (mlp|mnist|seed)" | cut -d'|' -f2,4,6,7,11
  sleep 8; echo "== round $r, --warmup 4000, $(date -u +%T)"; $X bench $B --warmup 4000 --out /tmp/w4k 2>/dev/null | grep -E "^\| (mlp|mnist|seed)" | cut -d'|' -f2,4,6,7,11
done
echo "== end $(date -u +%T)"
kill $D; cat $OUT/dmon.txt
