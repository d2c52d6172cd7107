#!/usr/bin/env bash
# tools/device_test.sh: builds and tests on the GPU machine, in one call (device_lib.sh: the
# packages carried in .deps, logs under $OUT, a short table last). Correctness before any
# timing: every GPU result against the CPU reference.
#   bash tools/device_test.sh [PART]           (carry: [".deps"], or [".deps", ".prebuilt"]
#                                               with PREBUILT=.prebuilt for the parts that
#                                               run programs only)
# PART:
#   all       (default) the whole test suite, GPU suites included, then compute-sanitizer
#             memcheck over the kernel cases
#   gpu       the GPU suites alone, each on its own (kernels and backends against the CPU
#             reference, the CUDA pipeline against the in-memory CUDA backend), then
#             compute-sanitizer
#   llama     the Llama family: its suites, compute-sanitizer, the Hugging Face round trip
#             through transformers (fuyou-run on cuda, out of core), the in-memory speed (MFU)
#   pipeline  the CPU and CUDA pipeline suites, then the CUDA lane out of core against the
#             in-memory CUDA backend on three plans (gpt2-124m, 10 steps, the losses side by
#             side)
#   resume    an out-of-core CUDA run with weights and states on the SSD stopped by SIGINT
#             mid-run, resumed, against an uninterrupted run's losses (within the lane's
#             run-to-run drift: it is not bit-reproducible)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
part=${1:-all}
case "$part" in all | gpu | llama | pipeline | resume) ;;
*) echo "usage: tools/device_test.sh [all|gpu|llama|pipeline|resume]" >&2; exit 2 ;;
esac
# shellcheck source=tools/device_lib.sh
. tools/device_lib.sh

cuda_suites=(tests/test_cuda_gpt2 tests/test_cuda_llama tests/test_pipeline_cuda)
case "$part" in
all | pipeline) device_build ;;
gpu) device_build "${cuda_suites[@]}" ;;
llama) device_build exec/fuyou-run bench/bench_cuda "${cuda_suites[@]}" ;;
resume) device_build exec/fuyou-run tests/test_pipeline_cuda ;;
esac

if [ "$part" = all ]; then
    step "tests"
    meson test -C build-dev --print-errorlogs > "$OUT/test.log" 2>&1
    test_rc=$?
    grep -E "^ *[0-9]+/[0-9]+ " "$OUT/test.log" | tee -a "$OUT/summary.txt"
    grep -E "^GPU:|SKIP" build-dev/meson-logs/testlog.txt | tee -a "$OUT/summary.txt"
    step "compute-sanitizer"
    sanitize_kernels
    cat "$OUT/machine.txt"
    echo "tests rc=$test_rc" | tee -a "$OUT/table.txt"
    grep -E "^(Ok|Fail|Skipped):" "$OUT/test.log" | tee -a "$OUT/table.txt"
    grep -E "ERROR SUMMARY" "$OUT/sanitizer.log"
    echo "compute-sanitizer rc=$san_rc" | tee -a "$OUT/table.txt"
    finish $(( test_rc || san_rc ))
fi

if [ "$part" = gpu ]; then
    run_suites 300 "rel L2|fused AdamW|layernorm|rmsnorm|worst rel|whole model rel|loss cpu|\
identical|Checks|SKIP|GPU:|:F:|:E:" 24 test_cuda_gpt2 test_cuda_llama test_pipeline_cuda
    step "compute-sanitizer (the kernel cases)"
    sanitize_kernels
    grep -E "ERROR SUMMARY|Checks" "$OUT/sanitizer.log"
    echo "compute-sanitizer rc=$san_rc" | tee -a "$OUT/table.txt"
    finish "$san_rc"
fi

if [ "$part" = llama ]; then
    run_suites 150 "rel L2|loss cpu|worst|tolerance|identical|Checks|:F:|:E:|ms|TFLOP" 60 \
        test_cuda_llama test_cuda_gpt2 test_pipeline_cuda
    step "compute-sanitizer (test_cuda_llama, kernels)"
    CK_FORK=no CK_RUN_CASE=kernels timeout 120 "$sanitizer" --tool memcheck --error-exitcode 1 \
        ./build-dev/tests/test_cuda_llama > "$OUT/sanitizer.log" 2>&1
    echo "compute-sanitizer rc=$?" | tee -a "$OUT/table.txt"
    grep -E "ERROR SUMMARY|Checks" "$OUT/sanitizer.log"
    step "Hugging Face round trip: transformers -> fuyou-run (cuda, out of core) -> transformers"
    timeout 150 python3 tools/hf_roundtrip.py --fuyou-run ./build-dev/exec/fuyou-run \
        --work "$PWD/hf-work" --backend cuda --offload 2>&1 | tee "$OUT/hf_roundtrip.txt"
    echo "hf round trip rc=${PIPESTATUS[0]}" | tee -a "$OUT/table.txt"
    rm -rf "$PWD/hf-work"
    step "in GPU memory: llama-3.1-8b's layers and GPT-2 1.5B (MFU)"
    for m in "bench/llama-3.1-8b-16l.ini --batch ${BATCH:-2} --seq 4096" \
             "gpt2-1.5b --batch 8 --seq 1024"; do
        # shellcheck disable=SC2086 # a model and its flags
        timeout 120 ./build-dev/bench/bench_cuda --steps 4 --models $m 2>&1 |
            tee -a "$OUT/bench_cuda.txt" | grep -E "tokens/s|GEMM|peak"
    done
    grep "MFU" "$OUT/bench_cuda.txt" >> "$OUT/table.txt"
    finish
fi

if [ "$part" = pipeline ]; then
    run=./build-dev/exec/fuyou-run ssd=$PWD/pipeline-ssd
    mkdir -p "$ssd"
    step "pipeline suites and GPU suites"
    meson test -C build-dev --suite gpu --print-errorlogs > "$OUT/test_gpu.log" 2>&1
    echo "gpu suites rc=$?" | tee -a "$OUT/table.txt"
    meson test -C build-dev pipeline_placements pipeline_runs --print-errorlogs \
        > "$OUT/test_pipeline.log" 2>&1
    echo "pipeline suites rc=$?" | tee -a "$OUT/table.txt"
    step "CUDA lane against the in-memory CUDA backend (gpt2-124m, batch 4 x 256, 10 steps)"
    bytes_u16 /usr/share/common-licenses/GPL-3 "$PWD/gpl3-u16.bin"
    common="--model gpt2-124m --batch 4 --seq 256 --steps 10 --warmup 2"
    common="$common --data $PWD/gpl3-u16.bin"
    # shellcheck disable=SC2086 # flags
    $run --backend cuda $common --log "$OUT/ref.tsv" > "$OUT/ref.txt" 2>&1 ||
        tail -3 "$OUT/ref.txt"
    i=0
    for plan in "--weights cpu --optim cpu --checkpoints gpu --act gpu" \
                "--weights ssd --optim ssd --checkpoints cpu --act recompute" \
                "--weights cpu --optim ssd --checkpoints ssd --act cpu --subgroup 3 --tail 2"; do
        i=$((i + 1))
        # shellcheck disable=SC2086
        $run --backend cuda $common $plan --ssd-dir "$ssd" --log "$OUT/off$i.tsv" \
            > "$OUT/off$i.txt" 2>&1 || tail -3 "$OUT/off$i.txt"
        echo "plan $i: $plan"
        paste "$OUT/ref.tsv" "$OUT/off$i.tsv" | awk -F'\t' 'NR > 1 {
            d = $2 - $8; if (d < 0) d = -d; r = d / $2; if (r > m) m = r
            printf "  step %2d loss %.5f / %.5f  norm %.4f / %.4f\n", $1, $2, $8, $4, $10 }
            END { printf "  worst relative loss difference %.2e\n", m }' |
            tee "$OUT/off$i.cmp"
        tail -1 "$OUT/off$i.cmp" | sed "s/^ */PLAN $i: /" >> "$OUT/table.txt"
    done
    rm -rf "$ssd" "$PWD/gpl3-u16.bin"
    finish
fi

# resume: gpt3-350m out of core on the GPU, weights and states on the SSD: 12 steps whole,
# then the same stopped by SIGINT once its log has 4 rows, resumed to 12; the losses (log
# column 2) against the whole run's
step "test_pipeline_cuda"
CK_FORK=no timeout 200 ./build-dev/tests/test_pipeline_cuda > "$OUT/test_pipeline_cuda.log" 2>&1
echo "test_pipeline_cuda rc=$?" | tee -a "$OUT/table.txt"
grep -E "worst|identical|Checks|:F:|:E:" "$OUT/test_pipeline_cuda.log" | head -30
ssd=$PWD/resume-ssd data=$PWD/resume-data.bin
mkdir -p "$ssd"
bytes_u16 /usr/share/common-licenses/GPL-3 "$data"
for i in 1 2 3 4; do cat "$data" "$data" > "$data.2" && mv "$data.2" "$data"; done
run="./build-dev/exec/fuyou-run --backend cuda --model gpt3-350m --batch 4 --seq 512
     --data $data --steps 12 --warmup 2 --weights ssd --optim ssd --ssd-dir $ssd"
step "whole run"
$run --log "$OUT/whole.tsv" > "$OUT/whole.txt" 2>&1
echo "whole rc=$?" | tee -a "$OUT/table.txt"
step "stopped by SIGINT"
$run --log "$OUT/part.tsv" --save "$PWD/resume-ck" > "$OUT/part.txt" 2>&1 &
pid=$!
n=0
while [ $n -lt 1200 ] && [ "$(wc -l < "$OUT/part.tsv" 2>/dev/null || echo 0)" -lt 5 ]; do
    sleep 0.1; n=$((n + 1))
done
kill -INT $pid; wait $pid
echo "stopped rc=$? (130 expected): $(grep -o 'stopped by.*' "$OUT/part.txt")" |
    tee -a "$OUT/table.txt"
$run --log "$OUT/part.tsv" --resume "$PWD/resume-ck" > "$OUT/resumed.txt" 2>&1
echo "resumed rc=$?" | tee -a "$OUT/table.txt"
# the CUDA lane is not bit-reproducible at this size (MEASUREMENTS.md): the stopped run is
# judged against that drift, not bit for bit
paste "$OUT/whole.tsv" "$OUT/part.tsv" | awk -F'\t' 'NR > 1 { d = $2 - $8; d = d < 0 ? -d : d
    r = d / $2; if (r > worst) { worst = r; at = $1 } } END { printf "stopped + resumed ' \
    'against whole: worst loss rel %.1e at step %d\n", worst, at }' | tee -a "$OUT/table.txt"
grep -E "tokens/s|steady" "$OUT/whole.txt" "$OUT/resumed.txt" | tee -a "$OUT/table.txt"
rm -rf "$ssd" "$data" "$PWD/resume-ck"
finish
