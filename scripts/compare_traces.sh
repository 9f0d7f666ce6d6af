#!/usr/bin/env bash
# Losses do not move: trains every registry entry 20 steps with the build of BASE and with the
# build of the current work tree, in the same run, on the same data, with LRT_NUM_THREADS=1, and
# requires identical results bit for bit.
#
#   bash scripts/compare_traces.sh [--data PATH] [BASE]
#
# BASE (default 63fcc96662f69bbab5ab3c637bf72c85455c74ff, the commit before "One home for every
# fact") is checked out in a git worktree outside the clone, $LRT_TRACE_DIR/base-<sha> (created,
# or reused when it is already there at that commit). lrt-train is built there and in the current
# tree (preset nocuda: build-nocuda/bin/lrt-train). Every `--variant V --schedule S` pair that
# BASE's lrt-train --list-variants prints is trained by both builds with
#   --steps 20 --batch-rows 4 --sequence-len 64 --eval-every 20 --eval-tokens 256 --seed 1
# and compared: the train_loss column of log.csv (6 significant digits; the first differing step
# is reported), the tensor data of model.safetensors byte for byte (the data section after the
# JSON header; the header's tensor table too, without __metadata__, which may legitimately
# change), and the val_bpb lines printed at the end (numbers equal up to the coarser printed
# precision: four decimals before, six now). One line per pair, then a summary; exit
# status 0 when every pair is identical, 1 on any difference, on a pair that BASE lists and the
# current build does not, or on a failed run; 2 on a usage or setup error. Pairs that only the
# current build lists are reported and not compared.
#
# Environment:
#   LRT_TRACE_DIR        worktree, runs and generated data (default $HOME/.cache/lrt-traces);
#                        the runs of the last comparison stay in $LRT_TRACE_DIR/out
#   LRT_TRACE_DATA       training text (file or folder) instead of the generated one (also --data)
#   LRT_TRACE_STEPS      steps per run (default 20)
#   LRT_TRACE_FILTER     only the pairs whose "VARIANT SCHEDULE" matches this extended regex
#   LRT_TRACE_CURRENT    the tree taken as "current" (default: this work tree); e.g. another
#                        checkout, or BASE's own worktree to test the script (self-comparison)
#   LRT_TRACE_BASE_TREE  an existing checkout of BASE to use instead of the worktree (its HEAD
#                        must be BASE and its tracked files unmodified)
#   LRT_GEMM             the current build's GEMM path (default openblas, the default BASE's; lrt
#                        or eigen sum in another order, so their losses differ from step 1 or 2)
#   LRT_JOBS             parallel build jobs (default 2)
#   CCACHE_DIR           compiler cache (default $HOME/.cache/lrt-ccache, as scripts/test.sh).
#                        The build gives ccache base_dir = each tree's own source dir and no
#                        hash_dir (CMakeLists.txt), so translation units that are the same in
#                        both trees hit the same cache entries.
set -euo pipefail

default_base=63fcc96662f69bbab5ab3c637bf72c85455c74ff
usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
}
die() { echo "compare_traces.sh: error: $*" >&2; exit 2; }

data="${LRT_TRACE_DATA:-}"
base_arg=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --data) [ $# -ge 2 ] || die "--data needs a value"; data="$2"; shift 2 ;;
    --data=*) data="${1#--data=}"; shift ;;
    -*) die "unknown option '$1' (usage: compare_traces.sh [--data PATH] [BASE])" ;;
    *) [ -z "$base_arg" ] || die "more than one BASE given ('$base_arg', '$1')"; base_arg="$1"; shift ;;
  esac
done
base="${base_arg:-$default_base}"
steps="${LRT_TRACE_STEPS:-20}"
case "$steps" in ''|*[!0-9]*|0) die "LRT_TRACE_STEPS must be a positive integer, got '$steps'" ;; esac
jobs="${LRT_JOBS:-2}"
filter="${LRT_TRACE_FILTER:-}"

command -v git >/dev/null 2>&1 || die "git not found"
command -v cmake >/dev/null 2>&1 || die "cmake not found"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(git -C "$here" rev-parse --show-toplevel 2>/dev/null)" ||
  die "$here is not inside a git work tree (the script compares the current tree with a commit of its repository)"
sha="$(git -C "$root" rev-parse --verify --quiet "${base}^{commit}")" ||
  die "unknown commit '$base' in $root (fetch it first, or give another BASE)"

trace_dir="${LRT_TRACE_DIR:-${HOME:-/root}/.cache/lrt-traces}"
mkdir -p "$trace_dir"
trace_dir="$(cd "$trace_dir" && pwd -P)"
case "$trace_dir/" in
  "$(cd "$root" && pwd -P)/"*) die "LRT_TRACE_DIR ($trace_dir) must be outside the repository ($root)" ;;
esac

export CCACHE_DIR="${CCACHE_DIR:-${HOME:-/root}/.cache/lrt-ccache}"
mkdir -p "$CCACHE_DIR"
export LRT_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
# The same products on both sides: builds since "The default build runs a crippled GEMM" choose
# their GEMM at run time (lrt's own kernels where they fit, another summation order), while the
# default BASE multiplies with OpenBLAS, so the current build runs OpenBLAS too unless told.
export LRT_GEMM="${LRT_GEMM:-openblas}"

# --- the two trees --------------------------------------------------------------------------
clean_at() {  # clean_at DIR SHA: DIR is a git checkout whose HEAD is SHA with unmodified tracked files
  local head
  head="$(git -C "$1" rev-parse --verify --quiet HEAD 2>/dev/null)" ||
    die "$1 is not a git checkout (a stale worktree? remove the folder and run again)"
  [ "$head" = "$2" ] || die "$1 is at $head, not at $2"
  [ -z "$(git -C "$1" status --porcelain --untracked-files=no)" ] ||
    die "$1 has modified tracked files; it would not build $2 (git -C $1 status)"
}
if [ -n "${LRT_TRACE_BASE_TREE:-}" ]; then
  base_tree="$(cd "$LRT_TRACE_BASE_TREE" 2>/dev/null && pwd)" || die "LRT_TRACE_BASE_TREE: no such folder '$LRT_TRACE_BASE_TREE'"
  clean_at "$base_tree" "$sha"
else
  base_tree="$trace_dir/base-${sha:0:12}"
  if [ -e "$base_tree" ]; then
    echo "== BASE worktree: reusing $base_tree"
  else
    git -C "$root" worktree prune
    echo "== BASE worktree: git worktree add --detach $base_tree ${sha:0:12}"
    wt_out="$(git -C "$root" worktree add --detach "$base_tree" "$sha" 2>&1)" ||
      die "git worktree add --detach $base_tree $sha failed: $wt_out"
  fi
  clean_at "$base_tree" "$sha"
fi
if [ -n "${LRT_TRACE_CURRENT:-}" ]; then
  cur_tree="$(cd "$LRT_TRACE_CURRENT" 2>/dev/null && pwd)" || die "LRT_TRACE_CURRENT: no such folder '$LRT_TRACE_CURRENT'"
  [ -f "$cur_tree/CMakePresets.json" ] || die "LRT_TRACE_CURRENT ($cur_tree) is not an lrt source tree"
else
  cur_tree="$root"
fi
describe_tree() {  # a commit and whether tracked files differ from it
  local d h
  h="$(git -C "$1" rev-parse --short=12 HEAD 2>/dev/null || echo '?')"
  d="$(git -C "$1" status --porcelain --untracked-files=no 2>/dev/null | wc -l | tr -d ' ')"
  if [ "$d" = 0 ]; then echo "$h"; else echo "$h + $d modified files"; fi
}
echo "== BASE:    $base_tree ($(describe_tree "$base_tree"))"
echo "== current: $cur_tree ($(describe_tree "$cur_tree"))"

# --- builds ---------------------------------------------------------------------------------
build_tree() {  # build_tree DIR NAME: configure (preset nocuda) and build lrt-train; logs in the trace dir
  local dir="$1" log="$trace_dir/build-$2.log" t0=$SECONDS
  echo "== build lrt-train in $dir (preset nocuda, -j$jobs; log $log)"
  if ! { (cd "$dir" && cmake --preset nocuda && cmake --build build-nocuda --target lrt-train -j "$jobs") \
           </dev/null >"$log" 2>&1; }; then
    tail -n 40 "$log" >&2
    die "the build of lrt-train in $dir failed (log: $log)"
  fi
  [ -x "$dir/build-nocuda/bin/lrt-train" ] || die "no $dir/build-nocuda/bin/lrt-train after the build"
  echo "   done in $((SECONDS - t0))s"
}
build_tree "$base_tree" base
if [ "$cur_tree" != "$base_tree" ]; then build_tree "$cur_tree" current; fi
base_bin="$base_tree/build-nocuda/bin/lrt-train"
cur_bin="$cur_tree/build-nocuda/bin/lrt-train"

# --- data -----------------------------------------------------------------------------------
if [ -n "$data" ]; then
  [ -e "$data" ] || die "no such file or folder: '$data'"
  data="$(cd "$(dirname "$data")" && pwd)/$(basename "$data")"
else
  # Deterministic text (~60 KB): words chosen by a Park-Miller generator in bash's 64-bit integers.
  data="$trace_dir/corpus.txt"
  read -r -d "" -a words <<<"the a of and to in is was he she it that for on with as his her at by from they
    we an be this had not are but or have were which one all their there been has when who will more
    if no out so said what up its about into than them can only other new some could time these two
    may then do first any my now such like our over man me even most made after also did many before
    must through back years where much your way well down should because each just" || true
  nw=${#words[@]}
  x=12345
  text=""
  for ((line = 1; line <= 1200; ++line)); do
    x=$(( x * 16807 % 2147483647 )); n=$(( 6 + x % 9 ))
    s="Line $line:"
    for ((k = 0; k < n; ++k)); do
      x=$(( x * 16807 % 2147483647 )); s+=" ${words[x % nw]}"
    done
    text+="$s."$'\n'
    if (( x % 5 == 0 )); then text+=$'\n'; fi
  done
  printf '%s' "$text" >"$data.tmp" && mv "$data.tmp" "$data"
fi
echo "== data: $data ($(du -sh "$data" | cut -f1))"

# --- pairs ----------------------------------------------------------------------------------
list_pairs() {  # "VARIANT SCHEDULE" lines of a build's --list-variants
  "$1" --list-variants </dev/null | sed -n 's/^--variant \([^ ]*\) --schedule \([^ ]*\)$/\1 \2/p'
}
base_pairs="$(list_pairs "$base_bin")" || die "$base_bin --list-variants failed"
cur_pairs="$(list_pairs "$cur_bin")" || die "$cur_bin --list-variants failed"
[ -n "$base_pairs" ] || die "$base_bin --list-variants printed no pairs"
if [ -n "$filter" ]; then
  base_pairs="$(grep -E -- "$filter" <<<"$base_pairs" || true)"
  cur_pairs="$(grep -E -- "$filter" <<<"$cur_pairs" || true)"
  [ -n "$base_pairs" ] || die "no pair of BASE matches LRT_TRACE_FILTER='$filter'"
fi

out="$trace_dir/out"
rm -rf "$out"
mkdir -p "$out"
have_python=0
if command -v python3 >/dev/null 2>&1; then have_python=1; fi
train_args=(--data "$data" --steps "$steps" --batch-rows 4 --sequence-len 64 --eval-every "$steps"
            --eval-tokens 256 --seed 1)
echo "== lrt-train ${train_args[*]} (LRT_NUM_THREADS=1, LRT_GEMM=$LRT_GEMM); runs in $out"

header_len() {  # the 8-byte little-endian header length N of a safetensors file
  od -An -v -t u8 --endian=little -N 8 "$1" | tr -d ' \n'
}
tensor_table() {  # the header's tensor entries (without __metadata__), canonical JSON
  python3 - "$1" <<'EOF'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    h = json.loads(f.read(n))
h.pop("__metadata__", None)
print(json.dumps(h, sort_keys=True))
EOF
}
losses() {  # "step loss" lines of log.csv (header skipped)
  awk -F, 'NR > 1 { print $1, $3 }' "$1"
}

n_same=0 n_diff=0 n_fail=0 n_missing=0
failed_pairs=()
t_runs=$SECONDS
i=0
while read -r variant schedule; do
  [ -n "$variant" ] || continue
  i=$((i + 1))
  label="$(printf '%-12s %-16s' "$variant" "$schedule")"
  if ! grep -qxF -- "$variant $schedule" <<<"$cur_pairs"; then
    echo "$label MISSING: the current build does not list it"
    n_missing=$((n_missing + 1)); failed_pairs+=("$variant $schedule")
    continue
  fi
  dir="$out/$(printf '%02d' "$i")-${variant}-${schedule//:/}"
  ok=1
  for side in base current; do
    bin="$base_bin"; [ "$side" = current ] && bin="$cur_bin"
    mkdir -p "$dir/$side"
    if ! "$bin" --variant "$variant" --schedule "$schedule" "${train_args[@]}" --out "$dir/$side" \
         </dev/null >"$dir/$side.log" 2>&1; then
      echo "$label FAILED: the $side build's lrt-train failed (log $dir/$side.log):"
      tail -n 5 "$dir/$side.log" | sed 's/^/    /'
      ok=0
      break
    fi
  done
  if [ "$ok" = 0 ]; then
    n_fail=$((n_fail + 1)); failed_pairs+=("$variant $schedule"); continue
  fi
  b="$dir/base" c="$dir/current"
  diffs=()
  # (i) the training losses, step by step
  first="$(paste -d' ' <(losses "$b/log.csv") <(losses "$c/log.csv") |
           awk '$1 != $3 || $2 != $4 { print "step " $1 " of log.csv: " $2 " vs " $4; exit }')"
  nb="$(losses "$b/log.csv" | wc -l | tr -d ' ')"
  nc="$(losses "$c/log.csv" | wc -l | tr -d ' ')"
  if [ -n "$first" ]; then
    diffs+=("train_loss first differs at $first")
  elif [ "$nb" != "$nc" ]; then
    diffs+=("log.csv has $nb steps vs $nc")
  fi
  # (ii) the tensors of model.safetensors, bit for bit
  hb="$(header_len "$b/model.safetensors")" hc="$(header_len "$c/model.safetensors")"
  if ! cmp -s -i "$((hb + 8)):$((hc + 8))" "$b/model.safetensors" "$c/model.safetensors"; then
    diffs+=("tensor data of model.safetensors differs")
  fi
  if [ "$have_python" = 1 ] &&
     [ "$(tensor_table "$b/model.safetensors")" != "$(tensor_table "$c/model.safetensors")" ]; then
    diffs+=("tensor table (names, dtypes, shapes, offsets) differs")
  fi
  # (iii) the val_bpb lines printed at the end: the same lines with the same numbers up to the
  # coarser of the two printed precisions (lrt-train printed four decimals before, six now), i.e.
  # each pair of numbers within half a unit of each print's last digit.
  vb="$(grep '^val_bpb' "$b.log" || true)" vc="$(grep '^val_bpb' "$c.log" || true)"
  bpb_diff="$(paste -d'|' <(echo "$vb") <(echo "$vc") | awk -F'|' '
    function split_nums(s, out,   n, t) {
      n = 0
      while (match(s, /[0-9]+(\.[0-9]+)?/)) { out[++n] = substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH) }
      return n
    }
    function decimals(x,   i) { i = index(x, "."); return i ? length(x) - i : 0 }
    {
      a = $1; b = $2; ta = a; tb = b
      gsub(/[0-9]+(\.[0-9]+)?/, "#", ta); gsub(/[0-9]+(\.[0-9]+)?/, "#", tb)
      na = split_nums(a, xa); nb = split_nums(b, xb)
      if (ta != tb || na != nb) { print a " vs " b; exit }
      for (i = 1; i <= na; i++) {
        tol = 0.5 * 10 ^ (-decimals(xa[i])) + 0.5 * 10 ^ (-decimals(xb[i])) + 1e-12
        d = xa[i] - xb[i]; if (d < 0) d = -d
        if (d > tol) { print a " vs " b; exit }
      }
    }')"
  if [ -n "$bpb_diff" ]; then
    diffs+=("$bpb_diff")
  fi
  final_loss="$(losses "$b/log.csv" | tail -n 1 | cut -d' ' -f2)"
  final_bpb="$(sed -n 's/^val_bpb: //p' "$b.log")"
  if [ ${#diffs[@]} -eq 0 ]; then
    echo "$label identical ($nb steps, last loss $final_loss, val_bpb $final_bpb, $(( $(stat -c %s "$b/model.safetensors") - hb - 8 )) bytes of tensors)"
    n_same=$((n_same + 1))
  else
    echo "$label DIFFERENT: $(printf '%s; ' "${diffs[@]}" | sed 's/; $//')"
    n_diff=$((n_diff + 1)); failed_pairs+=("$variant $schedule")
  fi
done <<<"$base_pairs"

while read -r variant schedule; do
  [ -n "$variant" ] || continue
  if ! grep -qxF -- "$variant $schedule" <<<"$base_pairs"; then
    echo "$(printf '%-12s %-16s' "$variant" "$schedule") only in the current build: not compared"
  fi
done <<<"$cur_pairs"

total=$((n_same + n_diff + n_fail + n_missing))
[ "$have_python" = 1 ] || echo "note: python3 not found, the tensor tables were not compared (the tensor data was)"
echo "== $n_same of $total pairs identical, $n_diff different, $n_fail failed, $n_missing missing in the current build ($((SECONDS - t_runs))s of training; BASE ${sha:0:12})"
if [ ${#failed_pairs[@]} -gt 0 ]; then
  echo "== compare_traces.sh: FAILED for $(printf '%s, ' "${failed_pairs[@]}" | sed 's/, $//')" >&2
  exit 1
fi
echo "== compare_traces.sh: the losses do not move (every pair identical bit for bit)"
