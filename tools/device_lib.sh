#!/usr/bin/env bash
# tools/device_lib.sh: what the device scripts share (device_test.sh, device_bench.sh,
# device_regress.sh), sourced by them on the GPU machine: the Debian packages carried in .deps/
# unpacked (that machine has no package registry), the programs built with its meson and nvcc
# or taken as tools/prebuild.sh built them here (PREBUILT=dir, carried), logs under $OUT packed
# into fuyou-logs.tgz at the end, and the helpers every part uses. Each script prints a short
# table last ($OUT/table.txt). History and measurements: MEASUREMENTS.md.
#   here, to fetch the packages once: tools/device_lib.sh --fetch-deps

# device_fetch_deps: downloads the packages into .deps/ (on the development machine).
device_fetch_deps() {
    mkdir -p .deps && cd .deps && apt-get download libgsl27 libgslcblas0 libgsl-dev liburing2 \
        liburing-dev check libsubunit0 libsubunit-dev libinih1 libinih-dev libjansson4 \
        libjansson-dev
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then # run, not sourced
    set -euo pipefail
    cd "$(dirname "$0")/.."
    [ "${1:-}" = "--fetch-deps" ] && { device_fetch_deps; exit; }
    echo "usage: tools/device_lib.sh --fetch-deps (the device scripts source it)" >&2
    exit 2
fi

OUT=${OUT:-/tmp/fuyou-out}
mkdir -p "$OUT" /opt/deps
for f in .deps/*.deb; do dpkg -x "$f" /opt/deps; done
lib=/opt/deps/usr/lib/x86_64-linux-gnu
export PKG_CONFIG_PATH=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=/opt/deps LD_LIBRARY_PATH=$lib
export PATH="$PATH:/usr/local/cuda/bin"
export scratch=${SCRATCH:-$PWD/bench-scratch} # a directory the parts may fill, then remove
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

# step TEXT: a heading on the console and in summary.txt, with the seconds so far.
step() { echo "== $* ($SECONDS s)" | tee -a "$OUT/summary.txt"; }

# compute-sanitizer memcheck over the GPT-2 kernel cases and the Llama suite: san_rc, the log
sanitize_kernels() {
    CK_FORK=no CK_RUN_CASE=kernels "$sanitizer" --tool memcheck --error-exitcode 1 \
        ./build-dev/tests/test_cuda_gpt2 > "$OUT/sanitizer.log" 2>&1
    san_rc=$?
    CK_FORK=no "$sanitizer" --tool memcheck --error-exitcode 1 \
        ./build-dev/tests/test_cuda_llama >> "$OUT/sanitizer.log" 2>&1
    san_rc=$(( san_rc || $? ))
}

# run_suites LIMIT PATTERN LINES TEST...: test binaries each on its own (not meson's whole-tree
# rebuild), at most LIMIT s: its log $OUT/NAME.log, its status in the table, and the last LINES
# of its lines that match PATTERN.
run_suites() {
    local limit=$1 pattern=$2 lines=$3 t
    shift 3
    for t in "$@"; do
        step "$t"
        CK_FORK=no timeout "$limit" "./build-dev/tests/$t" > "$OUT/$t.log" 2>&1
        echo "$t rc=$?" | tee -a "$OUT/table.txt"
        grep -E "$pattern" "$OUT/$t.log" | tail -"$lines"
    done
}

# bytes_u16 IN OUT: the bytes of text file IN as headerless uint16 tokens: data for GPT-2's
# vocabulary, which fuyou-run refuses to give raw text (the timing does not depend on what the
# text says).
bytes_u16() { python3 -c 'import sys; d = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(bytes(b for c in d for b in (c, 0)))' "$1" "$2"; }

# Everything the call wrote under $OUT, in one archive (the device returns a few files only).
pack() {
    (cd "$OUT" && tar czf /tmp/fuyou-logs.tgz --exclude=table.txt . &&
        find . -mindepth 1 ! -name table.txt -delete && mv /tmp/fuyou-logs.tgz .)
}
trap pack EXIT

{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    nproc; free -g | sed -n 2p; df -h "$PWD" | tail -1; uname -r
} > "$OUT/machine.txt" 2>&1

# device_build [TARGET...]: the programs a part runs (none: the whole tree), taken from
# $PREBUILT when it is set, else built here into build-dev; exits 1 when they cannot be had.
device_build() {
    local targets="$*" t build_rc
    if [ -n "${PREBUILT:-}" ]; then
        step "the programs built on the development machine, from $PREBUILT"
        for t in $targets; do
            mkdir -p "build-dev/$(dirname "$t")" && cp "$PREBUILT/$(basename "$t")" "build-dev/$t"
        done
        export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64
        [ -x build-dev/exec/fuyou-run ] &&
            ldd build-dev/exec/fuyou-run | grep "not found" | tee -a "$OUT/summary.txt"
        return 0
    fi
    step "build ${targets:-everything}"
    local reconf=""
    [ -d build-dev/meson-info ] && reconf=--reconfigure
    # shellcheck disable=SC2086 # the targets are words
    meson setup $reconf build-dev -Dgpu_arch=90 -Dwerror=true > "$OUT/setup.log" 2>&1 &&
        ninja -C build-dev $targets > "$OUT/build.log" 2>&1
    build_rc=$?
    if [ $build_rc -ne 0 ]; then
        # This machine's compiler is newer than CI's: keep its warnings, but still test and
        # measure.
        step "build with -Dwerror=true failed; warnings below, retrying without -Werror"
        grep -E "error:|warning:" "$OUT/build.log" | sort -u | head -20 | tee -a "$OUT/summary.txt"
        # shellcheck disable=SC2086
        meson configure build-dev -Dwerror=false >> "$OUT/setup.log" 2>&1 &&
            ninja -C build-dev $targets > "$OUT/build2.log" 2>&1
        build_rc=$?
    fi
    step "build rc=$build_rc"
    [ $build_rc -eq 0 ] || { tail -40 "$OUT/setup.log" "$OUT/build.log"; exit 1; }
}

# profile_gpu: this machine's GPU and host memory measured over h200.ini's other keys
# (fuyou-profile --gpu-only) into $OUT/gpu.ini, its curves into the table; HW names that file
# when the profile succeeded, and when it failed is left as it was (HW=profile: h200.ini).
profile_gpu() {
    [ "${HW:-}" != profile ] || HW=h200.ini
    step "fuyou-profile --gpu-only"
    if ./build-dev/exec/profile/fuyou-profile --gpu-only --base h200.ini \
        --out "$OUT/gpu.ini" > "$OUT/profile.txt" 2>&1; then
        # shellcheck disable=SC2034 # read by the script that sources this one
        HW=$OUT/gpu.ini
        grep -E "^attn_efficiency|^gemm_efficiency|^(h2d|d2h)" "$OUT/gpu.ini" |
            tee -a "$OUT/table.txt"
    else
        tail -3 "$OUT/profile.txt" | tee -a "$OUT/table.txt"
    fi
}

# finish [STATUS]: the table, last; exits with STATUS (0).
# shellcheck disable=SC2120 # called with and without a status
finish() {
    echo
    cat "$OUT/table.txt" 2>/dev/null
    exit "${1:-0}"
}
