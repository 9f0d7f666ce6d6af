#!/usr/bin/env bash
# tools.cli_small: the programs' small command-line promises, each a run of a second or less.
#   tests/tools/cli_small.sh BIN_DIR WORK_DIR PROGRAM...   (PROGRAM: the programs of the build, by name)
# 1. `PROGRAM --version` exits 0 and prints one line, `PROGRAM DESCRIPTION` (the git description at
#    build time, or "unknown"), for every PROGRAM; the tool::Args programs list --version in --help.
# 2. lrt-embedded-generate and lrt-c-generate: --help and -h print the usage on stdout and exit 0;
#    a wrong argument count prints it on stderr and exits 2.
# 3. Integer options take integer-valued decimal and scientific spellings (--steps 1e3, 1000.0,
#    2.5e3) and refuse others (1.5, 1e3x, 0x10) with exit 2 and `--steps expects an integer, got
#    '1.5'`; the range check stays (1e30).
# 4. lrt-train --help lists this build: every preset (d12 among them) and every variant
#    --list-variants prints; lrt-train, lrt-eval and lrt-generate take --threads (checked right
#    after parsing), lrt-train --force.
# 5. lrt-tokenizer train counts merges and ids as they are (vocabulary 300 = 256 bytes + 43 merges
#    + 1 special).
set -u -o pipefail
bin=$1 work=$2
shift 2
programs=("$@")
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "PASS: $*"; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail "cannot use $work"
[ ${#programs[@]} -gt 0 ] || fail "no programs given"

# run RC PROGRAM ARGS...: runs it (stdout in out, stderr in err), checks the exit status.
run() {
  local rc=$1 got=0
  shift
  "$@" > out 2> err < /dev/null || got=$?
  [ "$got" -eq "$rc" ] || fail "exit $got, not $rc: $* (stdout: $(head -c 300 out); stderr: $(head -c 300 err))"
}
# has FILE REGEX: the file matches the (extended) regex.
has() { grep -Eq -- "$2" "$1" || fail "$1 does not match /$2/: $(head -c 400 "$1")"; }

# 1. --version
for p in "${programs[@]}"; do
  [ -x "$bin/$p" ] || fail "no program $bin/$p"
  run 0 "$bin/$p" --version
  [ "$(wc -l < out)" -eq 1 ] || fail "$p --version: not one line: $(cat out)"
  grep -Eq "^$p [^ ]+$" out || fail "$p --version printed '$(cat out)', not '$p DESCRIPTION'"
  [ ! -s err ] || fail "$p --version wrote to stderr: $(cat err)"
done
pass "--version of ${#programs[@]} programs: $(cut -d' ' -f2 out)"
for p in lrt-train lrt-eval lrt-generate lrt-quantize lrt-tokenizer; do
  [ -x "$bin/$p" ] || continue
  run 0 "$bin/$p" --help
  has out "^  --version +the program's name"
done
run 0 "$bin/lrt-tokenizer" train --help
has out "^  --version +the program's name"
run 0 "$bin/lrt-tokenizer" train --version
has out "^lrt-tokenizer [^ ]+$"
pass "--help lists --version; lrt-tokenizer train --version names lrt-tokenizer"

# 2. The positional programs' usage
for p in lrt-embedded-generate lrt-c-generate; do
  [ -x "$bin/$p" ] || fail "no program $bin/$p"
  for h in --help -h; do
    run 0 "$bin/$p" $h
    has out "^usage: $p CHECKPOINT PROMPT N"
    has out "--version"
    [ ! -s err ] || fail "$p $h wrote to stderr: $(cat err)"
  done
  run 2 "$bin/$p" only-one-argument
  has err "^usage: $p CHECKPOINT PROMPT N"
done
pass "lrt-embedded-generate and lrt-c-generate: --help and -h exit 0 with the usage on stdout"

# 3. Integer spellings. --tokens-per-param 0 is refused right after --steps is read (before any
#    work): its message shows that --steps was accepted.
printf 'The quick brown fox jumps over the lazy dog.\n%.0s' {1..50} > text.txt
train=("$bin/lrt-train" --data text.txt --out run)
for s in 1e3 1000.0 2.5e3 +12 1E2; do
  run 2 "${train[@]}" --steps "$s" --tokens-per-param 0
  has err "^lrt-train: --tokens-per-param must be in"
done
for s in 1.5 1e3x 0x10 1e-3 abc ""; do
  run 2 "${train[@]}" --steps "$s"
  has err "^lrt-train: --steps expects an integer, got '$s'; see --help$"
done
run 2 "${train[@]}" --steps 1e30
has err "^lrt-train: --steps must be in \[1, [0-9]+\], got 1e30; see --help$"
[ ! -e run ] || fail "a refused command line created --out"
run 1 "$bin/lrt-generate" -m missing.safetensors -n 1e2 -t 1e0 --sinks 0.0
has err "missing.safetensors"
run 2 "$bin/lrt-generate" -m missing.safetensors -n 1.5
has err "^lrt-generate: --max-new-tokens expects an integer, got '1.5'"
pass "integers: 1e3, 1000.0, 2.5e3 accepted; 1.5, 1e3x, 0x10 refused (exit 2); the range check holds"

# 4. What lrt-train --help lists
run 0 "$bin/lrt-train" --help
cp out train.help
preset=$(grep -E '^  --preset NAME' train.help) || fail "no --preset line: $(cat train.help)"
for p in tiny small medium d12 d20 d24; do
  [[ "$preset" =~ [\ ,]"${p}"[,\ ] ]] || fail "--preset help lacks $p: $preset"
done
variant=$(grep -E '^  --variant NAME' train.help) || fail "no --variant line"
run 0 "$bin/lrt-train" --list-variants
n=0
while read -r v; do
  [[ "$variant" =~ [\ ,]"${v}"[,\ ] ]] || fail "--variant help lacks $v (of --list-variants): $variant"
  n=$((n + 1))
done < <(grep -E '^--variant ' out | cut -d' ' -f2 | sort -u)
[ $n -gt 0 ] || fail "--list-variants printed no pair: $(cat out)"
has train.help "^  --threads N +threads of lrt's thread pool"
has train.help "^  --force +"
run 2 "${train[@]}" --threads 0
has err "^lrt-train: --threads must be in \[1, 1024\], got 0"
run 0 "$bin/lrt-eval" --help
has out "^  --threads N +threads of lrt's thread pool"
run 2 "$bin/lrt-eval" --checkpoint missing.safetensors --data text.txt --threads 0
has err "^lrt-eval: --threads must be in \[1, 1024\], got 0"
run 0 "$bin/lrt-generate" --help
has out "--threads N +threads of lrt's thread pool"
pass "lrt-train --help: presets (${preset#*model preset: }), $n variants of --list-variants; --threads and --force"

# 5. lrt-tokenizer's counts
if [ -x "$bin/lrt-tokenizer" ]; then
  for i in $(seq 1 40); do echo "word$i and the number $((i * 37)) went to town$((i % 7))"; done > words.txt
  run 0 "$bin/lrt-tokenizer" train --data words.txt --split all --vocab-size 300 --out tok.lrt
  has err "merges 43/43 "
  has out "^trained 299 ranks \(256 bytes \+ 43 merges\) \+ 1 special = 300 ids on "
  pass "lrt-tokenizer train: $(head -n 1 out | cut -d' ' -f1-13)"
fi
