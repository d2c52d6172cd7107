#!/usr/bin/env bash
# tools/device_regress.sh: predicted against measured on the GPU machine, in one call
# (device_lib.sh: the packages carried in .deps, logs under $OUT, a short table last): each
# run of fuyou-run out of core under a 24 GiB device budget (the paper's RTX 4090) beside
# fuyou-sim's prediction for the same plan on h200.ini (or HW=ini, e.g. what PART profile
# measured) and fuyou-trace's comparison of the two traces. tools/regress.sh then reads every
# call's unpacked logs here (MEASUREMENTS.md keeps the results).
#   bash tools/device_regress.sh [PART [SUB]]   (carry: [".deps"], or [".deps", ".prebuilt"]
#                                                with PREBUILT=.prebuilt)
# PART:
#   runs        (default) the runs of RUNS="name|model|batch|iters|plan flags|fuyou-run
#               flags;..." (default: GPT-3 2.7B's states in CPU memory at batch 8 and 32, on
#               the SSD, and 6.7B's split between the two)
#   regression  the regression's ten runs, GPT-2 124M to GPT-3 6.7B (about 5.5 minutes)
#   sweep       the planner's regret: two configurations at five swap amounts and the
#               planner's own, its plan first and again last (REPEAT=2: the sweep twice over)
#   tiers       the optimizer on every tier, GPT-3 2.7B at the planner's defaults beside the
#               same with no sub-group updated on the GPU and with none streamed; SUB: check
#               (batch 8, the CUDA pipeline suite first), inmem (batch 16, 32), ssd (batch 8,
#               --cpu-mem 32GiB), table (all four), gpu (the GPU suites, compute-sanitizer, the
#               fused attention against the chunked path, fuyou-profile --gpu-only, then batch
#               8 predicted on that profile)
#   llama       llama-3.1-8b out of core, its states split between the SSD and CPU memory
#   profile     this machine measured into a hardware ini (fuyou-profile; ONLY=adam, ssd or
#               gpu: that part alone over h200.ini's other keys; QUICK=1)
# A run on the SSD tier has the disk measured again just before it (fuyou-profile --ssd-only,
# into hw<n>.ini beside its trace: regress.sh --again predicts on that); AGAIN=adam: every run
# has the Adam measured again too (--adam-only); AGAIN=0: neither. HW=profile: the GPU measured
# first (fuyou-profile --gpu-only over h200.ini), the runs predicted on that; PIPE_TEST=1: the
# CUDA pipeline suite before any run is timed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
part=${1:-runs} sub=${2:-check}
case "$part" in runs | regression | sweep | tiers | llama | profile) ;;
*) echo "usage: tools/device_regress.sh [runs|regression|sweep|tiers [SUB]|llama|profile]" >&2
   exit 2 ;;
esac
case "${AGAIN:-1}" in 0|1|adam) ;; *) echo "AGAIN=$AGAIN: 0, 1 or adam" >&2; exit 2 ;; esac
case "${REPEAT:-1}" in '' | *[!0-9]* | 0) echo "REPEAT: a count of 1 or more" >&2; exit 2 ;; esac

# The regression's runs: the regimes, from GPT-2 124M to GPT-3 6.7B (its states in CPU memory:
# 90 GiB of the machine's 125; on the SSD they would not fit the 64 GB disk). Three iterations a
# run, six for the states on the SSD: over three, that run's reads are still falling behind
# (fuyou-sim: 6.86 s over 3, 7.09 over 6, 7.16 over 10 on one H100's disk; MEASUREMENTS.md).
REGRESSION_RUNS="124m b8 all-gpu|gpt2-124m|8|3|--weights cpu --optim cpu --checkpoints gpu --act gpu|;\
350m b16 sg2|gpt3-350m|16|3|--weights cpu --optim cpu --checkpoints gpu --act recompute --subgroup 2|;\
760m b8 act-cpu|gpt3-760m|8|3|--weights cpu --optim cpu --checkpoints cpu --act cpu|;\
1.3b b8 recompute|gpt3-1.3b|8|3|--weights cpu --optim cpu --checkpoints gpu --act recompute|;\
1.3b b16 swap2g|gpt3-1.3b|16|3|--weights cpu --optim cpu --checkpoints gpu --swap 2GiB|;\
1.3b b64 mb2|gpt3-1.3b|64|3|--weights cpu --optim cpu --checkpoints cpu --act recompute --micro-batches 2|;\
1.3b b8 w-ssd|gpt3-1.3b|8|3|--weights ssd --optim cpu --checkpoints gpu --act recompute|;\
760m b8 states-ssd sg4|gpt3-760m|8|6|--weights cpu --optim ssd --checkpoints gpu --act recompute --subgroup 4|;\
2.7b b8 recompute|gpt3-2.7b|8|3|--weights cpu --optim cpu --checkpoints gpu --act recompute|;\
6.7b b8 recompute|gpt3-6.7b|8|3|--weights cpu --optim cpu --checkpoints gpu --act recompute|"
# The planner's regret: 1.3B b32 is bound by the CPU's Adam and the copies, 350M b64 by the
# GPU. The planner's own plan runs first and again last ("swap auto-again"): the CPU drifts,
# and the two bracket the sweep (regress.sh takes their mean and prints the drift).
sweep_runs() { # name prefix, model, batch, plan, amounts...
    local pre=$1 model=$2 batch=$3 plan=$4 a _
    shift 4
    for _ in $(seq "${REPEAT:-1}"); do
        for a in auto "$@" auto-again; do
            printf '%s swap %s|%s|%s|3|%s --swap %s|;' "$pre" "$a" "$model" "$batch" "$plan" \
                "${a%-again}"
        done
    done
}
# The optimizer on every tier: the planner's defaults (no knob pinned), each beside no
# sub-group updated on the GPU ("old") and none streamed ("resident", run only where the
# planner's plan streams some).
three() { # name, batch, iters, fuyou-run flags
    local f="--lr 3e-4 --warmup 1 $4"
    printf '%s old|gpt3-2.7b|%s|%s|--optim-gpu-groups 0 --optim-stream-groups 0|%s;' \
        "$1" "$2" "$3" "$f"
    printf '%s resident|gpt3-2.7b|%s|%s|--optim-stream-groups 0|%s;' "$1" "$2" "$3" "$f"
    printf '%s new|gpt3-2.7b|%s|%s||%s;' "$1" "$2" "$3" "$f"
}

knobs_default=$(cat tools/regression_plan_knobs)
case "$part" in
regression) RUNS=${RUNS:-$REGRESSION_RUNS} ;;
sweep)
    RUNS=${RUNS:-"$(sweep_runs "1.3b b32" gpt3-1.3b 32 "--weights cpu --optim cpu \
--checkpoints cpu" none 7GiB 13GiB 19GiB 25GiB)$(sweep_runs "350m b64" gpt3-350m 64 "--weights \
cpu --optim cpu --checkpoints gpu" none 5GiB 14GiB 20GiB 26GiB)"} ;;
tiers)
    b8=$(three "2.7b b8" 8 3 "") b16=$(three "2.7b b16" 16 3 "")
    b32=$(three "2.7b b32" 32 3 "") cpu32=$(three "2.7b b8 cpu32" 8 2 "--cpu-mem 32GiB")
    case "$sub" in
    check) default_runs=$b8 PIPE_TEST=1 ;;
    inmem) default_runs="$b16$b32" ;;
    ssd) default_runs=$cpu32 ;;
    table) default_runs="$b8$b16$b32$cpu32" ;;
    gpu) default_runs=$b8 GPU_CHECKS=1 ;;
    *) echo "tiers: check, gpu, inmem, ssd or table, not $sub" >&2; exit 2 ;;
    esac
    RUNS=${RUNS:-$default_runs} knobs_default="" ;;
llama)
    # under the 4090's 24 GiB, the states split: the first 16 of 32 blocks' on the SSD (16 x
    # 218M parameters x 12 bytes, 42 GB; the disk has 64), the rest and the edges' in CPU
    # memory with the weights
    RUNS=${RUNS:-"llama-3.1-8b states-split b8|llama-3.1-8b|8|2|--weights cpu --optim ssd \
--optim-cpu-groups 17 --checkpoints gpu --act recompute|--lr 1e-4 --warmup 1 --cpu-mem 110GiB"} ;;
runs)
    RUNS=${RUNS:-"2.7b states-cpu b8|gpt3-2.7b|8|4|--weights cpu --optim cpu --checkpoints gpu \
--act recompute|--lr 3e-4 --warmup 2;2.7b states-cpu b32|gpt3-2.7b|32|3|--weights cpu --optim \
cpu --checkpoints cpu --act recompute|--lr 3e-4 --warmup 2;2.7b states-ssd b8|gpt3-2.7b|8|2|\
--weights ssd --optim ssd --checkpoints gpu --act recompute|--lr 3e-4 --warmup 1;6.7b \
states-split b8|gpt3-6.7b|8|2|--weights ssd --optim ssd --optim-cpu-groups 16 --checkpoints \
gpu --act recompute|--lr 1e-4 --warmup 1 --cpu-mem 100GiB"} ;;
esac
# shellcheck source=tools/device_lib.sh
. tools/device_lib.sh

if [ "$part" = profile ]; then
    device_build exec/profile/fuyou-profile
    step "fuyou-profile"
    mkdir -p "$scratch"
    ./build-dev/exec/profile/fuyou-profile ${QUICK:+--quick} --ssd-dir "$scratch" \
        ${ONLY:+--$ONLY-only --base h200.ini} --out "$OUT/profiled.ini" 2>&1 |
        tee "$OUT/profile.txt"
    rm -rf "$scratch"
    cat "$OUT/profiled.ini"
    exit 0
fi

targets="exec/fuyou-run sim/fuyou-sim traces/fuyou-trace exec/profile/fuyou-profile"
[ -n "${PIPE_TEST:-}" ] && targets="$targets tests/test_pipeline_cuda"
[ -n "${GPU_CHECKS:-}" ] && targets="$targets tests/test_cuda_gpt2 tests/test_cuda_llama \
tests/test_pipeline_cuda bench/bench_llama_kernels"
# shellcheck disable=SC2086 # the targets are words
device_build $targets
run=./build-dev/exec/fuyou-run sim=./build-dev/sim/fuyou-sim
ssd=${SSD_DIR:-$PWD/regress-ssd}
mkdir -p "$ssd"

if [ -n "${PIPE_TEST:-}" ]; then
    step "the CUDA pipeline suite against the in-memory CUDA backend"
    CK_FORK=no timeout 300 ./build-dev/tests/test_pipeline_cuda > "$OUT/test_pipeline_cuda.log" 2>&1
    echo "test_pipeline_cuda rc=$?" | tee -a "$OUT/table.txt"
    grep -E "loss in memory|worst rel|whole model rel|Checks|:F:|:E:" \
        "$OUT/test_pipeline_cuda.log" | tail -40
fi
if [ -n "${GPU_CHECKS:-}" ]; then
    run_suites 240 "attention|worst rel|whole model rel|Checks|:F:|:E:" 24 \
        test_cuda_gpt2 test_cuda_llama test_pipeline_cuda
    step "compute-sanitizer (test_cuda_llama, kernels)"
    CK_FORK=no CK_RUN_CASE=kernels timeout 150 "$sanitizer" --tool memcheck \
        --error-exitcode 1 ./build-dev/tests/test_cuda_llama > "$OUT/sanitizer.log" 2>&1
    echo "compute-sanitizer rc=$?" | tee -a "$OUT/table.txt"
    grep -E "ERROR SUMMARY|Checks" "$OUT/sanitizer.log"
    step "fused attention against the chunked path (GPT-3 2.7B's, 760M's, 6.7B's heads)"
    for shape in "32 80" "16 96" "32 128"; do
        read -r heads dim <<< "$shape"
        ./build-dev/bench/bench_llama_kernels --batch 8 --seq 1024 --heads "$heads" \
            --kv-heads "$heads" --head-dim "$dim" --baseline chunked 2>&1 |
            tee -a "$OUT/bench_attention.txt" | grep -E "TFLOP|fused /"
        grep "fused /" "$OUT/bench_attention.txt" | tail -1 |
            sed "s/^/ATTN $heads x $dim: /" >> "$OUT/table.txt"
    done
fi
if [ -n "${GPU_CHECKS:-}" ] || [ "${HW:-}" = profile ]; then
    profile_gpu
fi

printf '%s\n' "$RUNS" | tr ';' '\n' > "$OUT/runs.txt"
# the text the runs train on: GPL-3 four times over (137 sequences of 1024 + 1 bytes; once
# holds 34, fewer than a batch of 64); what it says does not change a step's time
data=$PWD/regress-text.bin
for _ in 1 2 3 4; do cat /usr/share/common-licenses/GPL-3; done > "$PWD/regress-text.txt"
bytes_u16 "$PWD/regress-text.txt" "$data"
rm -f "$PWD/regress-text.txt"
# the knobs a run's flags leave open, pinned (the flags given come after and win): the planner
# would otherwise choose them, and a measured run must stay the plan it was
knobs=${KNOBS-$knobs_default}
n=0
while IFS='|' read -r name model batch iters plan extra; do
    [ -n "${name// }" ] || continue
    n=$((n + 1))
    plan="$knobs $plan"
    budget=$(printf '%s\n' "$extra" | grep -o -- '--cpu-mem [^ ]*' || true)
    # "resident" (the planner's plan with nothing streamed) only where the plan streams
    # shellcheck disable=SC2086 # flags
    if [ "${name##* }" = resident ] && ! $sim --hw "${HW:-h200.ini}" --gpu-mem 24GiB \
        $budget --model "$model" --batch "$batch" --seq 1024 $knobs 2>&1 | grep -q streamed
    then
        echo "TABLE $name: skipped, the planner's plan streams no sub-group here" |
            tee -a "$OUT/table.txt"
        continue
    fi
    step "run $n: $name: $model batch $batch x 1024, $plan, --gpu-mem 24GiB"
    # the machine measured again just before the run, into hw<n>.ini, kept only when
    # fuyou-profile succeeded (the disk drifts over minutes: MEASUREMENTS.md)
    hw_run=${HW:-h200.ini}
    ssd_run=$(printf '%s\n' "$plan" | grep -cE -- '--[a-z]+ ssd' || true)
    if [ "${AGAIN:-1}" = adam ] || { [ "${AGAIN:-1}" = 1 ] && [ "$ssd_run" = 1 ]; }; then
        prof=./build-dev/exec/profile/fuyou-profile again=ok base=$hw_run
        : > "$OUT/again$n.txt"
        if [ "${AGAIN:-1}" = adam ]; then
            # kept as hw<n>.adam.ini: the SSD one's comments name it as its base
            base=$OUT/hw$n.adam.ini
            $prof --adam-only --base "$hw_run" --out "$base" >> "$OUT/again$n.txt" 2>&1 ||
                again=failed
        fi
        if [ $again = ok ] && [ "$ssd_run" = 1 ]; then
            $prof --ssd-only --base "$base" --ssd-dir "$ssd" --gib 4 \
                --out "$OUT/hw$n.ini" >> "$OUT/again$n.txt" 2>&1 || again=failed
            rm -rf "${ssd:?}"/*
        else
            [ $again = ok ] && cp "$base" "$OUT/hw$n.ini"
        fi
        if [ $again = ok ]; then
            hw_run=$OUT/hw$n.ini
            grep -E "^(adam_Gparams_per_s|(read|write)_(bidir_)?GBps)" "$OUT/hw$n.ini"
        else
            rm -f "$OUT/hw$n.ini"
            echo "not measured again: $(tail -1 "$OUT/again$n.txt")"
        fi
    fi
    # the simulator on the run's budget (--gpu-mem: the capacity, none reserved)
    # shellcheck disable=SC2086
    $sim --hw "$hw_run" --gpu-mem 24GiB $budget --model "$model" --batch "$batch" \
        --seq 1024 --iters "$iters" $plan --trace "$OUT/pred$n.tsv" > "$OUT/sim$n.txt" 2>&1
    grep -E "^iteration|^bound by|memory peak" "$OUT/sim$n.txt"
    # shellcheck disable=SC2086
    timeout 540 $run --backend cuda --model "$model" --batch "$batch" --seq 1024 \
        --steps "$iters" --segment "$iters" --warmup 1 --gpu-mem 24GiB --hw "$hw_run" $plan \
        --data "$data" --ssd-dir "$ssd" --trace "$OUT/meas$n.tsv" --log "$OUT/log$n.tsv" $extra \
        > "$OUT/run$n.txt" 2>&1
    echo "rc=$?"
    grep -E "^step|loss|lanes busy|^[a-z_]+ +[0-9.]+ [KMGT]?i?B|fuyou-run:" "$OUT/run$n.txt" |
        tail -16
    ./build-dev/traces/fuyou-trace compare "$OUT/pred$n.tsv" "$OUT/meas$n.tsv" \
        > "$OUT/cmp$n.txt" 2>&1
    # steady state, from the traces: the iteration and each lane's busy time per iteration
    awk -v name="$name" '/^iteration:/ { pred = $3; meas = $6 }
        /^(gpu|h2d|d2h|ssd_read|ssd_write|cpu_adam) / {
            if ($3 + 0 > most) { most = $3; who = $1 } }
        END { if (meas > 0 && most > 0)
                printf "TABLE %s: measured %.3f s/iter, predicted %.3f, measured/predicted " \
                       "%.2f, busiest lane %s %.3f s/iter, iteration/busiest %.2f\n", name,
                       meas, pred, meas / pred, who, most, meas / most }' \
        "$OUT/cmp$n.txt" | tee -a "$OUT/table.txt"
    # what the plan put where: the plan line's sub-groups
    sed -n 's/^plan: //p' "$OUT/sim$n.txt" | grep -oE "sub-groups of [0-9]+ blocks?|the \
last [0-9]+ sub-groups?'? on gpu|the last [0-9]+ streamed|swapped to cpu [0-9.]+ [KMG]?i?B" |
        tr '\n' ';' | sed "s/^/PLAN $name: /; s/;$/\n/" >> "$OUT/table.txt"
    rm -rf "${ssd:?}"/*
done < "$OUT/runs.txt"
rm -rf "$ssd" "$data"
finish
