#!/usr/bin/env bash
# tools.usage_errors: every program refuses a bad command line the same way (cli/args.hpp,
# tool::refuse_usage): exit status 2, nothing on stdout, and one line on stderr,
#   PROGRAM: WHAT WAS WRONG (the option, the value); see --help
# and nothing created on the way (lrt-train's --out is not made when an argument is refused).
#   tests/tools/usage_errors.sh BIN_DIR WORK_DIR SOURCE_DIR
set -u -o pipefail
bin=$1 work=$2 src=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail "cannot use $work"
head -c 20000 "$src/README.md" > text.txt
checked=0 missing=()

# refused PROGRAM MESSAGE ARGS...: PROGRAM ARGS exits 2 with exactly "PROGRAM: MESSAGE; see --help"
# on stderr (MESSAGE: a fixed string) and nothing on stdout. PROGRAM may be "lrt-tokenizer encode";
# EXE=NAME runs another build of it (lrt-train-emu names itself lrt-train).
refused() {
  local prog=$1 message=$2; shift 2
  local exe=${EXE:-${prog%% *}} sub=()
  [ "${prog%% *}" != "$prog" ] && sub=("${prog#* }")
  if [ ! -x "$bin/$exe" ]; then missing+=("$exe"); return; fi
  local rc=0
  "$bin/$exe" "${sub[@]}" "$@" > out.txt 2> err.txt < /dev/null || rc=$?
  local want="$prog: $message; see --help"
  [ "$rc" -eq 2 ] || { cat out.txt err.txt | tail -n 5; fail "$exe $*: exit $rc, not 2"; }
  [ ! -s out.txt ] || { head -n 5 out.txt; fail "$exe $*: wrote to stdout"; }
  [ "$(cat err.txt)" = "$want" ] || { printf 'got:  %s\nwant: %s\n' "$(cat err.txt)" "$want"; fail "$exe $*: not the one line"; }
  echo "  ok  $exe${sub[*]:+ ${sub[*]}} $* -> $want"
  checked=$((checked + 1))
}

echo "== an unknown option, in every program that reads options"
for p in lrt-train lrt-eval lrt-generate lrt-quantize lrt-server lrt-ablate \
         "lrt-tokenizer train" "lrt-tokenizer encode" "lrt-tokenizer decode" "lrt-tokenizer stats" \
         "lrt-tokenizer convert" "lrt-tokenizer ranks" \
         lrt-bench lrt-bench-core lrt-bench-rows lrt-bench-server lrt-bench-prefill lrt-bench-lrt-cost \
         lrt-bench-attention lrt-bench-gemm lrt-bench-elementwise lrt-bench-autodiff-linear lrt-bench-tokenizer; do
  refused "$p" "unknown option '--no-such-option'" --no-such-option
done
for p in lrt-train lrt-eval lrt-generate; do  # the CUDA emulator's builds of them
  EXE=$p-emu refused $p "unknown option '--no-such-option'" --no-such-option
done

echo "== bad values and paths"
refused lrt-tokenizer "unknown command 'tran' (known: train, encode, decode, stats, convert, ranks)" tran
refused lrt-tokenizer "no command (known: train, encode, decode, stats, convert, ranks)"
refused lrt-train "missing required option '--data'" --out run
refused lrt-train "--out needs a folder, got ''" --data text.txt --out ""
refused lrt-train "--data: no such file or folder: 'nowhere.txt'" --data nowhere.txt --out run
refused lrt-train "--steps must be in [1, 1099511627776], got -3" --data text.txt --out run --steps -3
refused lrt-train "--micro-rows 3 must divide --batch-rows 32" --data text.txt --out run --micro-rows 3
refused lrt-train "--eval-tokens 64 is less than one row of the model (sequence length 256): give at least 256" \
  --preset small --data text.txt --out run --eval-tokens 64
[ ! -e run ] || fail "a refused lrt-train left its --out folder behind"
refused lrt-generate "--temperature must be in [0, 1e+06], got -1" --checkpoint x --temperature -1
refused lrt-eval "option '--data' needs a value (PATH)" --checkpoint x --data
refused lrt-server "--parallel must be in [1, 1024], got 0" -m x --parallel 0

echo "== a shared option (cli/args.hpp, tool::shared_options): one check, one message, in every program"
for p in "lrt-train --data text.txt --out run" "lrt-eval --checkpoint x" "lrt-generate --checkpoint x" "lrt-server -m x" \
         "lrt-bench-core --checkpoint x" lrt-bench-rows lrt-bench-server lrt-bench-gemm lrt-bench-elementwise; do
  read -r -a words <<< "$p"
  refused "${words[0]}" "--threads must be in [1, 1024], got 0" "${words[@]:1}" --threads 0
done
[ ! -e run ] || fail "a refused lrt-train left its --out folder behind"

echo "checked $checked refusals${missing[*]:+; not in this build: ${missing[*]}}"
[ "$checked" -ge 20 ] || fail "only $checked programs checked"
