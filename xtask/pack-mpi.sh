#!/usr/bin/env bash
# Packs MPICH's launcher and the shared libraries it and an MPI build of liandan load into one
# folder, for a machine that has no MPI and no package manager (a rented GPU box):
#
#   cargo build --release -p liandan --features mpi
#   bash xtask/pack-mpi.sh                      # -> .mpi/ (ignored by git)
#   # carry .mpi/ and the binary over (`tar czf` shrinks .mpi/ to about a third), then there:
#   source .mpi/env.sh && mpiexec -n 2 ./liandan train --model resnet18 ...
#
# Arguments: the binary (default target/release/liandan) and the folder (default .mpi). Needs
# the MPICH it was built against installed here (apt-get install mpich libmpich-dev); Open
# MPI's launcher needs its whole installation and is not packed by this script.
set -euo pipefail
bin=${1:-target/release/liandan}
dir=${2:-.mpi}
[ -x "$bin" ] || { echo "pack-mpi: no binary at $bin; build it first: cargo build --release -p liandan --features mpi" >&2; exit 2; }
libmpi=$(ldd "$bin" | awk '/libmpi/ {print $3; exit}')
[ -n "$libmpi" ] || { echo "pack-mpi: $bin links no MPI library; build it with --features mpi" >&2; exit 2; }
launcher=$(command -v mpiexec.hydra || true)
proxy=$(command -v hydra_pmi_proxy || true)
if [ -z "$launcher" ] || [ -z "$proxy" ]; then
    echo "pack-mpi: MPICH's launcher (mpiexec.hydra, hydra_pmi_proxy) is not on PATH; install mpich (apt-get install mpich)" >&2
    exit 2
fi

mkdir -p "$dir/bin" "$dir/lib"
cp "$launcher" "$dir/bin/mpiexec.hydra"
ln -sf mpiexec.hydra "$dir/bin/mpiexec"
cp "$proxy" "$dir/bin/"
# Every library the three programs load, except the C runtime's own, which the target has
# (and must match its kernel) anyway.
ldd "$launcher" "$proxy" "$bin" | awk '/=> \// {print $3}' | sort -u \
    | grep -vE '/(libc|libm|libgcc_s|libpthread|libdl|librt|libresolv|ld-linux[^/]*)\.so' \
    | while read -r lib; do cp -L "$lib" "$dir/lib/"; done
# UCX, where MPICH uses it, loads its transports as plugins from a folder of their own.
ucx=$(dirname "$libmpi")/ucx
if [ -d "$ucx" ]; then
    mkdir -p "$dir/lib/ucx"
    cp -L "$ucx"/*.so* "$dir/lib/ucx/" 2>/dev/null || true
fi
strip "$dir/bin/"* "$dir/lib/"*.so* 2>/dev/null || true
cat > "$dir/env.sh" <<'EOF'
# Source this (`source .mpi/env.sh`) to run MPICH's launcher and an MPI build of liandan.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PATH="$here/bin:$PATH"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UCX_MODULE_DIR="$here/lib/ucx"
EOF
du -sh "$dir"
echo "packed MPICH's launcher and the libraries of $bin ($(basename "$libmpi")) into $dir; there: source $dir/env.sh && mpiexec -n 2 ./liandan train ..."
