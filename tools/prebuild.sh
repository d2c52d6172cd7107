#!/usr/bin/env bash
# tools/prebuild.sh: builds the programs a device call runs here, where nvcc is (no GPU), and
# puts them, stripped, in .prebuilt/ (ignored by git) to carry to the GPU machine, where the
# device scripts (tools/device_lib.sh) run them as they are (PREBUILT=.prebuilt): a call then
# spends no minutes in nvcc. The machine has the same CUDA (13.0) and a newer glibc; the Debian
# libraries these link come with .deps (tools/device_lib.sh --fetch-deps).
#   tools/prebuild.sh [TARGET...]   (default: what device_bench.sh plans and
#                                    device_regress.sh run)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
targets=${*:-"exec/fuyou-run sim/fuyou-sim traces/fuyou-trace exec/profile/fuyou-profile \
tests/test_pipeline_cuda tests/test_cuda_gpt2 tests/test_cuda_llama bench/bench_cuda"}
[ -d build-prebuilt/meson-info ] ||
    meson setup build-prebuilt -Dgpu_arch=90 -Dwerror=true > /dev/null
ninja -C build-prebuilt $targets
mkdir -p .prebuilt
for t in $targets; do
    cp "build-prebuilt/$t" .prebuilt/
    strip ".prebuilt/$(basename "$t")"
done
du -sh .prebuilt
