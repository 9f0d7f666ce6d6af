#!/usr/bin/env bash
# bench/dist_scaling.sh BIN_DIR [DATA]: data-parallel scaling of lrt-train on this machine, at the
# same global batch: 1 rank x 1 thread, 1 rank x 2 threads (LRT_NUM_THREADS=2) and 2 ranks x 1
# thread (mpirun -np 2), for the tiny and small presets (baseline). Prints tokens/s (training
# steps only, from lrt-train's `done:` line), each ratio to 1 x 1, and the optimizer's and the
# exchanges' shares of a step (lrt-train's `step time:` line). The runs take turns, so machine
# drift hits all three; a benchmark, not a test.
#   LRT_SCALING_PRESETS (default "tiny small"), LRT_SCALING_STEPS (default: tiny 40, small 16, others 8),
#   LRT_SCALING_ROWS (8). Needs mpirun (bash scripts/setup.sh --mpi) and an lrt-train built with MPI.
set -euo pipefail
bin=$(cd "$1" && pwd)
data=${2:-${LRT_DATA_DIR:-$HOME/.cache/lrt-data}/brown/package}
work=$(mktemp -d "${TMPDIR:-/tmp}/lrt-scaling.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
rows=${LRT_SCALING_ROWS:-8}
run() {  # run NAME PRESET CMD...: prints "tokens/s optimizer% exchanges%"
  local name=$1 preset=$2
  shift 2
  local out steps=${LRT_SCALING_STEPS:-}
  [ -n "$steps" ] || case $preset in tiny) steps=40 ;; small) steps=16 ;; *) steps=8 ;; esac
  out=$("$@" "$bin/lrt-train" --variant baseline --preset "$preset" --data "$data" --batch-rows "$rows" \
    --steps "$steps" --eval-every "$steps" --eval-tokens 512 --out "$work/$name" 2>&1) ||
    { printf '%s\n' "$out" | tail -n 5 >&2; echo "dist_scaling: $name failed" >&2; exit 1; }
  local tps opt comm
  tps=$(printf '%s\n' "$out" | sed -n 's/^done: .* \([0-9]*\) tokens\/s .*/\1/p')
  opt=$(printf '%s\n' "$out" | sed -n 's/^step time: optimizer \([0-9.]*\)%.*/\1/p')
  comm=$(printf '%s\n' "$out" | sed -n 's/.*data-parallel exchanges \([0-9.]*\)%.*/\1/p')
  echo "$tps $opt $comm"
}
echo "| preset | run | tokens/s | vs 1x1 | optimizer share | exchanges share |"
echo "|---|---|---:|---:|---:|---:|"
for preset in ${LRT_SCALING_PRESETS:-tiny small}; do
  read -r a1 o1 c1 < <(run "${preset}_1x1" "$preset" env LRT_NUM_THREADS=1)
  read -r a2 o2 c2 < <(run "${preset}_1x2" "$preset" env LRT_NUM_THREADS=2)
  read -r a3 o3 c3 < <(run "${preset}_2x1" "$preset" env LRT_NUM_THREADS=1 mpirun -np 2 --oversubscribe --bind-to none)
  for r in "1 rank x 1 thread|$a1|$o1|$c1" "1 rank x 2 threads|$a2|$o2|$c2" "2 ranks x 1 thread|$a3|$o3|$c3"; do
    IFS='|' read -r label tps opt comm <<<"$r"
    printf '| %s | %s | %s | %.2fx | %s%% | %s%% |\n' "$preset" "$label" "$tps" "$(echo "$tps / $a1" | bc -l)" "$opt" "$comm"
  done
done
