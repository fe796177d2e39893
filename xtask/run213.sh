set -u
for f in .bin/x/*.gz; do gunzip -f $f; done; chmod +x .bin/x/*
mkdir -p /work && ln -sfn "$PWD" /work/main; . .gpu/env.sh; export LIANDAN_REQUIRE_GPU=1 LIANDAN_BENCH_PHASES=1
X=$PWD/.bin/x/xtask
C="--device gpu:0 --warmup 3 --steps 10 --sync-every 5 --groups 4"
$X bench-model --model mlp --precision f16 --batch 1024 $C > /dev/null 2>&1
for i in 1 2 3 4 5 6; do
  $X bench-model --model mlp --precision f16 --batch 1024 $C 2>&1 | sed 's/"peak_bytes.*//' | tr '\n' ' ' | sed 's/{"synced":{"median_ms"/ synced/'; echo
done
for i in 1 2 3 4; do
  $X bench-model --model mnist_cnn --precision f16 --batch 64 $C 2>&1 | sed 's/"peak_bytes.*//' | tr '\n' ' ' | sed 's/{"synced":{"median_ms"/ synced/'; echo
done
for i in 1 2 3; do
  $X bench-model --model mlp --precision f32 --batch 1024 $C 2>&1 | sed 's/"peak_bytes.*//' | tr '\n' ' ' | sed 's/{"synced":{"median_ms"/ synced/'; echo
done
