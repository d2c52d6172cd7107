#!/usr/bin/env bash
# tools/device_bench.sh: the benchmark tables on the GPU machine, in one call (device_lib.sh:
# the packages carried in .deps, logs under $OUT, a short table last). Run tools/device_test.sh
# first: a number is reported only for results checked against the CPU reference.
#   bash tools/device_bench.sh [PART [check|budget]]
#                              (carry: [".deps"], or [".deps", ".prebuilt"] with
#                               PREBUILT=.prebuilt: tools/prebuild.sh's programs, no nvcc here)
# PART:
#   all       (default) I/O and optimizer (bench_adam, bench_store, bench_ooc_adam), the CUDA
#             backend (bf16, fp16) and per-kernel times, PyTorch on the same models (TORCH=0
#             leaves it out: torch.compile takes minutes), the CPU and CUDA trainers' default runs
#   torch     the CUDA backend against PyTorch (eager and torch.compile), with and without the
#             cuBLASLt epilogues (BATCH, default 8)
#   ncu       Nsight Compute on one launch of each attention kernel (GPT-2 1.5B's layer)
#   allgpu    the whole state on the GPU two ways: the in-memory CUDA trainer and the pipeline
#             with every sub-group updated on the GPU (tokens/s of the last step)
#   ckptio    the checkpoint files' I/O alone: bench_ckpt_io (BENCH_GIB, default 8) and dd's
#             raw O_DIRECT rates
#   finetune  a Llama 3.1 8B folder of real size (tools/hf_real_size.py: bf16, 5 GB shards)
#             fine-tuned out of core under --gpu-mem 24GiB for STEPS (3) with --eval-data,
#             saved weights-only, reloaded in transformers (HF_LOSS=0 leaves it out), whose
#             loss on the same sequences must equal fuyou's; load and save rates beside dd's
#             and bench_ckpt_io's; with RUNS=, the plans part's runs after it
#   plans     fuyou-run as a user runs it (no plan option: the planner's plan) beside
#             fuyou-sim's prediction for the same options: the plan lines compared, the time
#             to step 1, the steady iteration measured / predicted. check (default): the CUDA
#             suites and compute-sanitizer first, then llama-3.1-8b b8, gpt3-2.7b b8 (beside
#             the in-memory CUDA trainer) and llama-3.2-3b b8, no budget; budget: under
#             --gpu-mem 24GiB; table: the issue's whole table in one call, the suites (no
#             compute-sanitizer), check's runs, the in-memory trainer, then budget's runs.
#             RUNS="name|model|batch|flags;..." replaces the runs;
#             SUITES="test_pipeline_cuda": only those suites first (a shorter call);
#             BEFORE=.prebuilt/fuyou-run-old: each run alternating with that binary (A/B);
#             HW=ini: planned and predicted on that (default h200.ini); HW=profile: this
#             machine's GPU measured first (fuyou-profile --gpu-only over h200.ini) and
#             that ini used: fuyou-run and fuyou-sim both take it, so the plan lines agree
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
part=${1:-all} sub=${2:-check}
case "$part" in all | torch | ncu | allgpu | ckptio | finetune | plans) ;;
*) echo "usage: tools/device_bench.sh [all|torch|ncu|allgpu|ckptio|finetune|plans" \
        "[check|budget|table]]" >&2; exit 2 ;;
esac
case "$sub" in check | budget | table) ;;
*) echo "plans: check, budget or table, not $sub" >&2; exit 2 ;; esac
# shellcheck source=tools/device_lib.sh
. tools/device_lib.sh

case "$part" in
all | torch | ncu) device_build ;;
allgpu) device_build exec/fuyou-run ;;
ckptio) device_build bench/bench_ckpt_io ;;
finetune) device_build exec/fuyou-run sim/fuyou-sim traces/fuyou-trace bench/bench_ckpt_io ;;
plans) device_build exec/fuyou-run sim/fuyou-sim traces/fuyou-trace tests/test_pipeline_cuda \
           tests/test_cuda_gpt2 tests/test_cuda_llama bench/bench_cuda \
           exec/profile/fuyou-profile ;;
esac
PY=$(command -v python3)
[ -x /opt/torch/.venv/bin/python ] && PY=/opt/torch/.venv/bin/python

# dd_raw DIR: the disk's raw O_DIRECT rates, 4 GiB written then read, into the table
dd_raw() {
    dd if=/dev/zero of="$1/raw" bs=16M count=256 oflag=direct 2>&1 | tail -1 |
        sed 's/^/RAW write: /' | tee -a "$OUT/table.txt"
    dd if="$1/raw" of=/dev/null bs=16M iflag=direct 2>&1 | tail -1 |
        sed 's/^/RAW read: /' | tee -a "$OUT/table.txt"
    rm -f "$1/raw"
}

if [ "$part" = all ]; then
    step "benchmarks"
    ./build-dev/bench/bench_adam --mparams "${ADAM_MPARAMS:-256}" > "$OUT/bench_adam.txt" 2>&1
    ./build-dev/bench/bench_store --dir "$scratch" --gib "${STORE_GIB:-4}" \
        > "$OUT/bench_store.txt" 2>&1
    ./build-dev/bench/bench_ooc_adam --dir "$scratch" --gib "${OOC_GIB:-8}" --groups 16 \
        > "$OUT/bench_ooc_adam.txt" 2>&1
    rm -rf "$scratch"
    ./build-dev/bench/bench_cuda --steps 5 --batch 8 > "$OUT/bench_cuda.txt" 2>&1
    ./build-dev/bench/bench_cuda --steps 5 --batch 8 --dtype fp16 2>&1 | grep "tokens/s" \
        > "$OUT/bench_cuda_fp16.txt"
    ./build-dev/bench/bench_kernels > "$OUT/bench_kernels.txt" 2>&1
    ./build-dev/bench/bench_kernels --model gpt2-1.5b > "$OUT/bench_kernels_1.5b.txt" 2>&1
    ./build-dev/bench/bench_llama_kernels > "$OUT/bench_llama_kernels.txt" 2>&1
    : > "$OUT/bench_torch.txt"
    [ "${TORCH:-1}" = 0 ] || timeout 300 "$PY" bench/torch_gpt2.py --steps 5 --batch 8 2>&1 |
        grep -v Warning > "$OUT/bench_torch.txt"
    # the CPU reference trainer: the default run, and GPT-2 124M for a few steps; the same
    # command line on the CUDA backend
    ./build-dev/exec/fuyou-run --steps 50 > "$OUT/run_tiny.txt" 2>&1
    bytes_u16 /usr/share/common-licenses/GPL-3 "$PWD/gpl3-u16.bin"
    ./build-dev/exec/fuyou-run --model gpt2-124m --batch 4 --seq 64 --steps 3 --warmup 1 \
        --data "$PWD/gpl3-u16.bin" > "$OUT/run_124m.txt" 2>&1
    ./build-dev/exec/fuyou-run --backend cuda --steps 200 > "$OUT/run_tiny_cuda.txt" 2>&1
    rm -f "$PWD/gpl3-u16.bin"
    cat "$OUT/machine.txt" "$OUT/bench_adam.txt" "$OUT/bench_store.txt" \
        "$OUT/bench_ooc_adam.txt" "$OUT/bench_kernels.txt" "$OUT/bench_kernels_1.5b.txt" \
        "$OUT/bench_cuda.txt" "$OUT/bench_cuda_fp16.txt" "$OUT/bench_torch.txt"
    for f in run_tiny run_124m run_tiny_cuda; do tail -n 1 "$OUT/$f.txt"; done
    exit 0
fi

if [ "$part" = torch ]; then
    step "bench_cuda"
    ./build-dev/bench/bench_cuda --steps 5 --batch "${BATCH:-8}" 2>&1 | tee "$OUT/bench_cuda.txt"
    ./build-dev/bench/bench_cuda --steps 5 --batch "${BATCH:-8}" --dtype fp16 2>&1 |
        grep "tokens/s" | tee "$OUT/bench_cuda_fp16.txt"
    echo "without the cuBLASLt epilogues (FUYOU_CUBLASLT=0):"
    FUYOU_CUBLASLT=0 ./build-dev/bench/bench_cuda --steps 5 --batch "${BATCH:-8}" 2>&1 |
        grep "tokens/s" | tee "$OUT/bench_cuda_nolt.txt"
    step "pytorch"
    timeout 420 "$PY" bench/torch_gpt2.py --steps 5 --batch "${BATCH:-8}" 2>&1 |
        grep -v Warning | tee "$OUT/bench_torch.txt"
    exit 0
fi

if [ "$part" = ncu ]; then
    # the card's clocks left as they are: what bounds each kernel
    ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    for k in flash_fwd_kernel flash_bwd_kernel; do
        step "ncu $k"
        "$ncu" --clock-control none -k "regex:$k" -c 1 --section SpeedOfLight \
            --section Occupancy --section WarpStateStats --section LaunchStats \
            ./build-dev/bench/bench_kernels --model gpt2-1.5b > "$OUT/ncu_$k.txt" 2>&1
        grep -E "Duration|Throughput|Registers|Occupancy|Block Limit|Warp Cycles Per Issued|\
Stall|smsp__pcsamp|Shared Memory Configuration Size|Dynamic Shared" "$OUT/ncu_$k.txt" | head -40
    done
    exit 0
fi

if [ "$part" = allgpu ]; then
    bytes_u16 /usr/share/common-licenses/GPL-3 "$PWD/gpl3-u16.bin"
    for x in "gpt2-124m 8 12" "gpt2-1.5b 8 48" "gpt3-2.7b 8 32"; do
        read -r model batch groups <<< "$x"
        for mode in memory pipeline; do
            flags="--backend cuda --model $model --batch $batch --seq 1024 --steps 6 --warmup 1"
            [ $mode = pipeline ] && flags="$flags --weights cpu --optim cpu --subgroup 1 \
                --tail 1 --optim-gpu-groups $groups --segment 6"
            # shellcheck disable=SC2086 # flags
            timeout 200 ./build-dev/exec/fuyou-run $flags --data "$PWD/gpl3-u16.bin" \
                > "$OUT/allgpu-$model-$mode.txt" 2>&1
            rc=$?
            last=$(tr '\r' '\n' < "$OUT/allgpu-$model-$mode.txt" | grep -E "^step 6/6" | tail -1)
            echo "ALLGPU $model b$batch $mode rc=$rc: $last" | tee -a "$OUT/table.txt"
        done
    done
    rm -f "$PWD/gpl3-u16.bin"
    finish
fi

if [ "$part" = ckptio ]; then
    mkdir -p ckptio-work
    ./build-dev/bench/bench_ckpt_io --dir ckptio-work --gib "${BENCH_GIB:-8}" 2>&1 |
        tee -a "$OUT/table.txt"
    dd_raw ckptio-work
    rm -rf ckptio-work
    finish
fi

if [ "$part" = finetune ]; then
    # the user's path end to end at 8B; every file removed at the end (64 GB disk)
    run=./build-dev/exec/fuyou-run work=$PWD/ft-work
    mkdir -p "$work/ssd"
    bytes_u16 /usr/share/common-licenses/GPL-3 "$work/gpl.bin"
    step "the folder (tools/hf_real_size.py make)"
    timeout 300 python3 tools/hf_real_size.py make --out "$work/llama-8b" 2>&1 | tail -3 |
        tee -a "$OUT/table.txt"
    du -sh "$work/llama-8b" | tee -a "$OUT/table.txt"
    ls "$work/llama-8b" >> "$OUT/table.txt"
    # the raw rates just before the load: this virtual disk's drift over minutes of I/O is
    # larger than the gap measured (MEASUREMENTS.md), so the two are taken side by side and the
    # benchmark's own I/O comes after the run
    step "the disk's raw rates: dd O_DIRECT, 4 GiB written then read"
    dd_raw "$work"
    sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null && echo "page cache dropped" |
        tee -a "$OUT/table.txt"
    step "fuyou-run: fine-tune out of core, evaluate, save the weights"
    timeout 420 $run --backend cuda --model "$work/llama-8b" --data "$work/gpl.bin" \
        --eval-data "$work/gpl.bin" --eval-batches 2 --batch 8 --steps "${STEPS:-3}" \
        --gpu-mem 24GiB --ssd-dir "$work/ssd" --save "$work/ckpt" --save-weights-only \
        --log "$OUT/ft-log.tsv" > "$OUT/ft-run.txt" 2>&1
    echo "fuyou-run rc=$?" | tee -a "$OUT/table.txt"
    grep -E "^fuyou-run|^plan|^hyperparameters|^checkpoints|loading|saving|eval after|\
initialising|steady|^step|host memory|ssd files" "$OUT/ft-run.txt" | cut -c1-400 |
        tee -a "$OUT/table.txt"
    saved=$(cat "$work/ckpt/latest" 2>/dev/null)
    du -sh "$work/ckpt/$saved" | tee -a "$OUT/table.txt"
    ls "$work/ckpt/$saved" >> "$OUT/table.txt"
    seqs=$(sed -n 's/.*eval after step [0-9]*: loss .* targets of \([0-9]*\) sequences.*/\1/p' \
        "$OUT/ft-run.txt" | tail -1)
    if [ "${HF_LOSS:-1}" = 1 ]; then
        step "transformers loads the checkpoint: its loss on the same $seqs sequences"
        timeout 300 python3 tools/hf_real_size.py loss --model "$work/ckpt/$saved" \
            --tokens "$work/gpl.bin" --batch 1 --seq 1024 --batches "${seqs:-0}" 2>&1 |
            tail -2 | tee -a "$OUT/table.txt"
    fi
    step "bench_ckpt_io: a checkpoint file written and read, against the raw rate"
    ./build-dev/bench/bench_ckpt_io --dir "$work" --gib "${BENCH_GIB:-8}" 2>&1 |
        tee -a "$OUT/table.txt"
    rm -rf "$work"
    [ -n "${RUNS:-}" ] || finish
    part=plans sub=budget
fi

# plans: the plan lines must be equal; the time from the command to step 1's line; the steady
# iteration (the report's, over the steps after a segment's first)
run=./build-dev/exec/fuyou-run sim=./build-dev/sim/fuyou-sim
ssd=$PWD/plans-ssd data=$PWD/gpl3-u16.bin
mkdir -p "$ssd"
bytes_u16 /usr/share/common-licenses/GPL-3 "$data"
# SUITES="..." names the suites run first (any sub; "" none); default: all three, none for budget
suites="test_cuda_gpt2 test_cuda_llama test_pipeline_cuda"
[ "$sub" = budget ] && suites=""
# shellcheck disable=SC2086 # the suites are words
run_suites 300 "fused AdamW|layernorm|rmsnorm|worst rel|whole model rel|Checks|:F:|:E:" \
    12 ${SUITES-$suites}
if [ "$sub" = check ]; then
    step "compute-sanitizer (the kernel cases)"
    for t in test_cuda_gpt2 test_cuda_llama; do
        CK_FORK=no CK_RUN_CASE=kernels timeout 200 "$sanitizer" --tool memcheck \
            --error-exitcode 1 ./build-dev/tests/$t > "$OUT/sanitizer-$t.log" 2>&1
        echo "compute-sanitizer $t rc=$?" | tee -a "$OUT/table.txt"
        grep -E "ERROR SUMMARY" "$OUT/sanitizer-$t.log"
    done
fi
[ "${HW:-}" != profile ] || profile_gpu
check_runs="8b b8|llama-3.1-8b|8|;2.7b b8|gpt3-2.7b|8|;3b b8|llama-3.2-3b|8|"
budget_runs="8b b16 24g|llama-3.1-8b|16|--gpu-mem 24GiB;\
3b b8 24g|llama-3.2-3b|8|--gpu-mem 24GiB;2.7b b8 24g|gpt3-2.7b|8|--gpu-mem 24GiB;\
2.7b b16 24g|gpt3-2.7b|16|--gpu-mem 24GiB;2.7b b32 24g|gpt3-2.7b|32|--gpu-mem 24GiB"
case "$sub" in
check) default_runs=$check_runs ;;
budget) default_runs=$budget_runs ;;
table) default_runs="$check_runs;in-memory;$budget_runs" ;;
esac
printf '%s\n' "${RUNS:-$default_runs}" | tr ';' '\n' > "$OUT/runs.txt"
# plan_run N NAME MODEL BATCH FLAGS RUN: run N of the table with the fuyou-run at RUN, beside
# fuyou-sim's prediction; its logs $OUT/*N.*, its TABLE and PLAN lines in the table
plan_run() {
    local n=$1 name=$2 model=$3 batch=$4 flags=$5 bin=$6 pred t0 first meas same
    step "run $n: $name: $model batch $batch x 1024 $flags ($bin)"
    # shellcheck disable=SC2086 # flags
    $sim --hw "${HW:-h200.ini}" --model "$model" --batch "$batch" --seq 1024 --iters 3 $flags \
        --trace "$OUT/pred$n.tsv" --deps "$OUT/deps$n.tsv" > "$OUT/sim$n.txt" 2>&1
    pred=$(awk '/^iteration/ { print $2 }' "$OUT/sim$n.txt")
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    timeout 420 "$bin" --backend cuda --hw "${HW:-h200.ini}" --model "$model" --batch "$batch" \
        --seq 1024 --steps "${STEPS:-5}" --segment "${STEPS:-5}" --warmup 1 --lr 3e-4 --data "$data" \
        --ssd-dir "$ssd" --trace "$OUT/meas$n.tsv" $flags 2>&1 |
        while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done \
        > "$OUT/run$n.txt"
    first=$(awk -v t0="$t0" '$2 == "step" && $3 ~ /^1\// { printf "%.1f", $1 - t0; exit }' \
        "$OUT/run$n.txt")
    meas=$(grep -o "steady iteration [0-9.]*" "$OUT/run$n.txt" | awk '{ print $3 }')
    cut -d' ' -f2- "$OUT/run$n.txt" | grep -E "^fuyou-run|^plan|loss|host memory|^total|\
initialising|^[a-z_]+ +[0-9.]+ [KMGT]?i?B" | tail -24
    # where the time went, against the prediction: per resource, and the critical path
    ./build-dev/traces/fuyou-trace compare "$OUT/pred$n.tsv" "$OUT/meas$n.tsv" \
        --deps "$OUT/deps$n.tsv" > "$OUT/cmp$n.txt" 2>&1
    sed -n '1,40p' "$OUT/cmp$n.txt"
    same=differs
    [ "$(sed -n 's/^plan: //p' "$OUT/sim$n.txt")" = \
      "$(cut -d' ' -f2- "$OUT/run$n.txt" | sed -n 's/^plan: //p')" ] && same=equal
    awk -v name="$name" -v m="$meas" -v p="$pred" -v f="$first" -v b="$batch" -v s="$same" \
        'BEGIN { if (m > 0 && p > 0)
            printf "TABLE %s: measured %.3f s/iter (%.0f tokens/s), predicted %.3f, " \
                   "measured/predicted %.3f, step 1 after %s s, plan lines %s\n", name, m,
                   b * 1024 / m, p, m / p, f, s
            else printf "TABLE %s: no steady iteration (rc of the run above)\n", name }' |
        tee -a "$OUT/table.txt"
    sed -n 's/^plan: //p' "$OUT/sim$n.txt" | cut -c1-200 | sed "s/^/PLAN $name: /" \
        >> "$OUT/table.txt"
    rm -rf "${ssd:?}"/*
}
# BEFORE=path: each run twice with that fuyou-run (the binary before a change, carried in
# PREBUILT's folder) and twice with this one, alternating on the same machine: before, after,
# before, after (their TABLE lines say which); only the after runs' traces are kept
n=0
# in_memory: the in-memory CUDA trainer on gpt3-2.7b b8, the tokens/s its pipeline run must reach
in_memory() {
    step "the in-memory CUDA trainer (bench_cuda): gpt3-2.7b b8 x 1024"
    timeout 120 ./build-dev/bench/bench_cuda --steps 6 --batch 8 --seq 1024 \
        --models gpt3-2.7b > "$OUT/bench_cuda.txt" 2>&1
    grep -E "tokens/s" "$OUT/bench_cuda.txt" | sed 's/^/IN-MEMORY /' | tee -a "$OUT/table.txt"
}
while IFS='|' read -r name model batch flags; do
    [ -n "${name// }" ] || continue
    if [ "$name" = in-memory ]; then
        in_memory
        continue
    fi
    if [ -z "${BEFORE:-}" ]; then
        n=$((n + 1))
        plan_run "$n" "$name" "$model" "$batch" "$flags" "$run"
        continue
    fi
    for pass in 1 2; do
        n=$((n + 1))
        plan_run "$n" "$name (before, $pass)" "$model" "$batch" "$flags" "$BEFORE"
        rm -f "$OUT/meas$n.tsv" "$OUT/pred$n.tsv" "$OUT/deps$n.tsv"
        n=$((n + 1))
        plan_run "$n" "$name (after, $pass)" "$model" "$batch" "$flags" "$run"
    done
done < "$OUT/runs.txt"
[ "$sub" = check ] && [ -z "${RUNS:-}" ] && in_memory
rm -rf "$ssd" "$data"
finish
