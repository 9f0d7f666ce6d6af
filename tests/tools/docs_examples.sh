#!/usr/bin/env bash
# tools.docs_examples: every command block of README.md and docs/*.md runs as written.
#   tests/tools/docs_examples.sh SOURCE_DIR BUILD_DIR WORK_DIR
#
# Every fenced block must name its language, so that each one is classified:
#   ```sh               commands a user types: run here, unless marked (below)
#   ```text             output, pseudocode, file listings: not run
#   ```cpp, cmake, python, js
#                       code, not commands: not run here (README.md's C++ quickstart is
#                       examples/quickstart.cpp, checked verbatim by tools.readme_snippet)
# A block without a language, or with another one (bash, console, ...), fails the test.
#
# HTML comments on the lines right before a fence (invisible on the rendered page) say more:
#   <!-- skip: REASON -->     an sh block that is not run; the reason is printed
#   <!-- run-by: TEST -->     an sh block another test runs (it must be a test in tests/)
#   <!-- needs: PROGRAM -->   run only where PROGRAM is on PATH, else reported as skipped
#   <!-- file: NAME -->       a text block that later blocks use: written to NAME first
#   <!-- expect: REGEX -->    the block's output (stdout and stderr) must match REGEX (grep -E)
#
# The blocks run in order (README.md, then docs/*.md by name), each in its own
# `bash -euo pipefail` under a time limit (300 s, scaled to the time of the first two runs below),
# all in WORK_DIR, which holds what the pages assume a user has:
#   build-release and build -> BUILD_DIR (the build under test), so build-release/bin/lrt-... and
#     build/bin/... are its programs; tests/ and scripts/ -> the source's
#   $bin, $data, $seconds as README.md's programs block sets them, but data is a generated text
#     (the documentation itself, ~500 KB) and seconds is 12; a block's own lines setting them
#     are replaced by these values
#   runs/lrt, runs/baseline: what `bash scripts/run.sh` leaves (here: 20 steps each)
#   my-test.txt: "a text of your own"
set -u -o pipefail
src=$1 build=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
[ -x "$build/bin/lrt-train" ] || fail "no $build/bin/lrt-train"
build=$(cd "$build" && pwd)
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail "cannot use $work"
work=$(pwd)
ln -s "$build" build-release
ln -s "$build" build
ln -s "$src/tests" tests
ln -s "$src/scripts" scripts
for _ in 1 2 3; do cat "$src/README.md" "$src"/docs/*.md; done > corpus.txt
head -c 3000 "$src/docs/model.md" > my-test.txt
export bin=build-release/bin data=$work/corpus.txt seconds=12
export LRT_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# OpenMPI refuses root without these (docs/distributed.md says so); waiting ranks yield their core.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo

echo "== the pages' assumptions, set up in $work"
echo "  bin=$bin (-> $build/bin)  data=$data ($(wc -c < corpus.txt) bytes)  seconds=$seconds"
prep_start=$SECONDS
for v in lrt baseline; do
  "$bin/lrt-train" --variant $v --preset tiny --data "$data" --steps 20 --eval-tokens 4096 --out runs/$v \
    > prep_$v.log 2>&1 || { tail prep_$v.log; fail "could not train runs/$v"; }
done
prep_s=$((SECONDS - prep_start))
echo "  runs/lrt, runs/baseline: lrt-train --variant lrt|baseline --preset tiny --steps 20 (run.sh's stand-ins), $prep_s s"
# A block's time limit: 300 s on a machine that trains those two runs in the reference time
# (prep_ref_s, the developers' machine), more in proportion where it is slower (a busy or slower
# CI machine, a BLAS on the wrong kernels), so that the limit catches a hung block, not a slow one.
prep_ref_s=${LRT_DOCS_PREP_REF_S:-12}
limit=$((300 * (prep_s > prep_ref_s ? prep_s : prep_ref_s) / prep_ref_s))
echo "  each block's time limit: $limit s (300 s x max(1, $prep_s s / $prep_ref_s s))"

# Each block as a record: file, line, language, markers (\x1f-separated), then its lines.
pages=("$src/README.md")
for f in "$src"/docs/*.md; do pages+=("$f"); done
n_run=0 n_skip=0 n_by=0 n_text=0 n_code=0 n_file=0
skipped=() by=()
mkdir -p blocks
k=0
for page in "${pages[@]}"; do
  k=$((k + 1))
  rel=${page#"$src"/}
  # A fence may be indented (a block inside a list item); its lines lose that indentation.
  awk -v out="$work/blocks" -v rel="$rel" -v start=$((k * 1000)) '
    /^ *```/ {
      if (!inb) {
        inb = 1; ind = match($0, /[^ ]/) - 1; lang = $0; sub(/^ *```/, "", lang)
        n++; f = sprintf("%s/%05d", out, start + n)
        printf "%s\n%d\n%s\n%s\n", rel, NR, lang, marks > (f ".meta"); close(f ".meta")
        printf "" > (f ".body")
      } else { inb = 0; close(f ".body") }
      marks = ""; next
    }
    inb { line = $0; if (ind > 0 && substr(line, 1, ind) ~ /^ *$/) line = substr(line, ind + 1); print line > (f ".body"); next }
    /^ *<!-- .* -->$/ { m = $0; sub(/^ *<!-- /, "", m); sub(/ -->$/, "", m); marks = marks (marks == "" ? "" : "\037") m; next }
    { marks = "" }
    END { if (inb) { print rel ": a block opened at line " NR " is never closed" > "/dev/stderr"; exit 1 } }
  ' "$page" 2>awk.err || fail "$(cat awk.err)"
done
[ "$(find blocks -name '*.meta' | wc -l)" -gt 0 ] || fail "no blocks found"

total_start=$SECONDS
for meta in $(find blocks -name '*.meta' | sort); do
  body=${meta%.meta}.body
  { read -r rel; read -r line; read -r lang; IFS= read -r marks; } < "$meta"
  where="$rel:$line"
  skip="" runby="" needs="" file="" expects=()
  IFS=$'\037' read -r -a ms <<< "$marks"
  for m in "${ms[@]}"; do
    case "$m" in
      skip:*) skip=${m#skip: } ;;
      run-by:*) runby=${m#run-by: } ;;
      needs:*) needs=${m#needs: } ;;
      file:*) file=${m#file: } ;;
      expect:*) expects+=("${m#expect: }") ;;
    esac
  done
  case "$lang" in
    text)
      n_text=$((n_text + 1))
      if [ -n "$file" ]; then cp "$body" "$file"; n_file=$((n_file + 1)); echo "file   $where -> $file"; fi
      continue ;;
    cpp|cmake|python|js) n_code=$((n_code + 1)); continue ;;
    sh) ;;
    "") fail "$where: a block without a language (sh, text, cpp, cmake, python or js)" ;;
    *) fail "$where: language '$lang' (write sh for commands, text for anything else)" ;;
  esac
  [ -z "$file" ] || fail "$where: a file marker on an sh block"
  if [ -n "$skip" ]; then
    n_skip=$((n_skip + 1)); skipped+=("$where: $skip"); echo "skip   $where: $skip"; continue
  fi
  if [ -n "$runby" ]; then
    t=${runby%% *}
    grep -Eq "add_test\(NAME $t([ )]|\$)" "$src/tests/CMakeLists.txt" || fail "$where: run-by '$t', which is no test in tests/CMakeLists.txt"
    n_by=$((n_by + 1)); by+=("$where: $runby"); echo "run-by $where: $runby"; continue
  fi
  if [ -n "$needs" ] && ! command -v "$needs" >/dev/null 2>&1; then
    n_skip=$((n_skip + 1)); skipped+=("$where: needs $needs, not installed"); echo "skip   $where: needs $needs, not installed"; continue
  fi
  # The block's own bin=, data=, seconds= lines give way to the test's values (exported above).
  grep -Ev '^(bin|data|seconds)=' "$body" > "$body.run"
  replaced=$(($(wc -l < "$body") - $(wc -l < "$body.run")))
  t0=$SECONDS
  rc=0
  timeout "$limit" bash -euo pipefail "$body.run" > "$body.out" 2>&1 < /dev/null || rc=$?
  if [ $rc -ne 0 ]; then
    echo "FAILED $where (exit $rc):"; sed 's/^/  | /' "$body"; echo "  output:"; tail -n 25 "$body.out" | sed 's/^/  > /'
    fail "$where: the block exited with $rc"
  fi
  for re in "${expects[@]}"; do
    grep -Eq -- "$re" "$body.out" || { tail -n 25 "$body.out" | sed 's/^/  > /'; fail "$where: no output line matches /$re/"; }
  done
  n_run=$((n_run + 1))
  echo "run    $where: $(grep -c . "$body") lines in $((SECONDS - t0)) s$([ $replaced -gt 0 ] && echo ", its $replaced settings lines replaced")$([ ${#expects[@]} -gt 0 ] && echo ", ${#expects[@]} expected outputs found")"
  sed 's/^/  | /' "$body"
  tail -n 3 "$body.out" | sed 's/^/  > /'
done

echo
echo "== $n_run command blocks ran as written in $((SECONDS - total_start)) s; $n_skip skipped; $n_by run by other tests;"
echo "   not commands: $n_text text blocks ($n_file of them written as files), $n_code code blocks"
if [ $n_skip -gt 0 ]; then echo "skipped:"; printf '  %s\n' "${skipped[@]}"; fi
if [ $n_by -gt 0 ]; then echo "run by other tests:"; printf '  %s\n' "${by[@]}"; fi
[ $n_run -gt 0 ] || fail "no command block ran"
echo "PASS: every unmarked command block of README.md and docs/*.md ran"
