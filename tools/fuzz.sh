#!/usr/bin/env bash
# fuzz.sh: builds the libFuzzer targets (tests/fuzz/: the hardware ini, the model ini, a Hugging
# Face config.json, the safetensors header, the token file, state.json, the trace and dependency TSVs) with ASan and
# UBSan, and runs each one for a given time. CI runs it for 10 s a target; a longer run is the same with more seconds.
#
# Usage: tools/fuzz.sh [-j JOBS] [SECONDS_PER_TARGET] [TARGET...]
#   SECONDS_PER_TARGET  default 10; e.g. 600 for ten minutes each
#   TARGET              hw model_ini hf_config safetensors tokens state trace plot (default: all)
#   -j JOBS             targets run at once (default 1; one core each)
# Environment: CC (default clang-16: libFuzzer needs clang, and exec/optim's _Float16 clang 15
# or later), BUILD (default build-fuzz, configured here if it is not yet).
#
# Each target starts from its seed corpus (tests/fuzz/corpus/TARGET, only read) and what earlier
# runs in BUILD found (BUILD/fuzz/corpus/TARGET). A crash, a sanitizer report, a leak, a broken
# check of the target's (fuzz_check) or one input running over 10 s is a finding: the input is
# saved as BUILD/fuzz/TARGET-crash-* (or -leak-, -timeout-), the report is printed, and the input
# belongs in the seed corpus with a regression test in the Check suites once it is fixed.
# Exit status: 0 no finding, 1 a finding or a failed build, 2 usage error.
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets="hw model_ini hf_config safetensors tokens state trace plot"
usage() {
    echo "usage: tools/fuzz.sh [-j JOBS] [SECONDS_PER_TARGET] [TARGET...]" \
         "(targets: $all_targets)" >&2
    exit 2
}
jobs=1
if [ "${1:-}" = -j ]; then
    [ $# -ge 2 ] || usage
    jobs=$2
    shift 2
fi
case "$jobs" in '' | *[!0-9]* | 0) usage ;; esac
seconds=10
if [ $# -gt 0 ]; then
    case "$1" in '' | *[!0-9]* | 0) usage ;; esac
    seconds=$1
    shift
fi
targets=${*:-$all_targets}
for t in $targets; do
    case " $all_targets " in *" $t "*) ;; *) usage ;; esac
done

build=${BUILD:-build-fuzz}
export CC=${CC:-clang-16}
if ! command -v "$CC" > /dev/null; then
    echo "fuzz.sh: no $CC; apt-get install clang-16 libclang-rt-16-dev (or set CC)" >&2
    exit 1
fi
if [ ! -f "$build/build.ninja" ]; then
    log=$(mktemp)
    meson setup "$build" -Dfuzz=true -Dcuda=disabled > "$log" 2>&1 ||
        { cat "$log" >&2; rm -f "$log"; echo "fuzz.sh: meson setup $build failed" >&2; exit 1; }
    rm -f "$log"
fi
names=()
for t in $targets; do names+=("fuzz_$t"); done
meson compile -C "$build" "${names[@]}" > /dev/null ||
    { echo "fuzz.sh: building the fuzz targets failed (meson compile -C $build)" >&2; exit 1; }

out=$build/fuzz
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
# reports with file:line: clang's own symbolizer where it is installed, else binutils' addr2line
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ]; then
    if command -v "llvm-symbolizer-${CC#clang-}" > /dev/null; then
        ASAN_SYMBOLIZER_PATH=$(command -v "llvm-symbolizer-${CC#clang-}")
    elif command -v addr2line > /dev/null; then
        ASAN_SYMBOLIZER_PATH=$(command -v addr2line)
        export ASAN_OPTIONS=${ASAN_OPTIONS:-allow_addr2line=1}
    fi
    export ASAN_SYMBOLIZER_PATH
fi

# Runs one target; its log in $out/T.log, one summary line on stdout.
run_target() {
    local t=$1 dict=tests/fuzz/$1.dict
    case $t in safetensors | state | hf_config) dict=tests/fuzz/json.dict ;; esac
    mkdir -p "$out/corpus/$t"
    local args=(-max_total_time="$seconds" -timeout=10 -print_final_stats=1
                -artifact_prefix="$out/$t-")
    [ -f "$dict" ] && args+=(-dict="$dict")
    if "$build/tests/fuzz/fuzz_$t" "${args[@]}" "$out/corpus/$t" "tests/fuzz/corpus/$t" \
        > "$out/$t.log" 2>&1; then
        local runs cov found seeds
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$t.log")
        cov=$(grep -o 'cov: [0-9]*' "$out/$t.log" | tail -1)
        found=$(find "$out/corpus/$t" -type f | wc -l)
        seeds=$(find "tests/fuzz/corpus/$t" -type f | wc -l)
        echo "fuzz_$t: ${runs:-?} runs in ${seconds} s, ${cov:-cov: ?}," \
             "corpus $found + $seeds seeds, no finding"
    else
        echo "fuzz_$t: FINDING (log $out/$t.log):"
        grep -E -A40 '^==[0-9]+==ERROR|runtime error|fuzz check failed|ERROR: libFuzzer' \
            "$out/$t.log" | head -60
        grep -E '^artifact_prefix|Test unit written to' "$out/$t.log" || true
        return 1
    fi
}

mkdir -p "$out"
echo "fuzz.sh: $targets, ${seconds} s each, $jobs at a time ($CC, $build)"
failed=0
running=0
for t in $targets; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n || failed=1
        running=$((running - 1))
    fi
    run_target "$t" &
    running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
    wait -n || failed=1
    running=$((running - 1))
done
if [ "$failed" -ne 0 ]; then
    echo "fuzz.sh: findings above; reproduce one with $build/tests/fuzz/fuzz_TARGET FILE" >&2
    exit 1
fi
echo "fuzz.sh: no finding"
