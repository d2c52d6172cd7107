#!/usr/bin/env bash
# tools/regress.sh: the simulator held against measured traces. For every run that
# tools/device_regress.sh made (its runs.txt, meas<n>.tsv and log<n>.tsv in each
# DIR, unpacked from fuyou-logs.tgz), predicts the same model, batch and plan with fuyou-sim on
# --hw INI (e.g. what device_regress.sh profile measured) and compares the traces with fuyou-trace; prints
# one row per run, the median and worst |error| of the steady-state iteration time and of each
# busy resource's busy time (busy_errors.tsv); writes
# rows.tsv and batch.tsv (model TFLOPS, predicted and measured: fuyou-plot batch) under --out.
# --again: each run predicted on the hw<n>.ini beside its trace where its call left one (what
# device_regress.sh's AGAIN measured just before it: the disk for a run on the SSD tier, and with
# AGAIN=adam the Adam for every run); a run whose plan as predicted there differs from the plan
# it printed (--swap auto, planned on another ini) is predicted on --hw instead, and said so.
# --set section.key=value (repeatable): every prediction with that key overridden, a what-if
# on the measured traces (e.g. --set cpu.sum_GBps=45).
#   tools/regress.sh [--build DIR] [--out DIR] [--again] [--set K=V]... --hw INI RUNDIR...
set -euo pipefail
build=build out=${TMPDIR:-/tmp}/fuyou-regress hw="" again=0 sets=()
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --hw) hw=$2; shift 2 ;;
    --again) again=1; shift ;;
    --set) [ $# -ge 2 ] || { echo "regress.sh: --set needs section.key=value" >&2; exit 2; }
           sets+=(--set "$2"); shift 2 ;;
    -h|--help) sed -n 2,15p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
    esac
done
[ -n "$hw" ] && [ $# -gt 0 ] || { echo "usage: tools/regress.sh [--build DIR] [--out DIR] [--again] [--set K=V]... --hw INI RUNDIR..." >&2; exit 2; }
sim=$build/sim/fuyou-sim trace=$build/traces/fuyou-trace
mkdir -p "$out"
rows="$out/rows.tsv" batch_tsv="$out/batch.tsv"
printf 'run\tmeasured_s\tpredicted_s\terror\tbottleneck_pred\tbottleneck_meas\n' > "$rows"
printf 'model\tbatch\tpredicted_tflops\tmeasured_tflops\n' > "$batch_tsv"
: > "$out/busy_errors.tsv"
# the knobs device_regress.sh pinned for every run (its flags come after and win)
knobs=$(cat "$(dirname "$0")/regression_plan_knobs")
k=0
for dir in "$@"; do
    n=0
    while IFS='|' read -r name model batch iters plan extra; do
        [ -n "${name// }" ] || continue
        n=$((n + 1))
        plan="$knobs $plan"
        [ -s "$dir/meas$n.tsv" ] || { echo "$dir: run $n ($name) has no measured trace, skipped" >&2; continue; }
        k=$((k + 1))
        # the plan as measured, on the ini given, with the run's GPU budget (--gpu-mem)
        budget=$(printf '%s\n' "$extra" | grep -o -- '--cpu-mem [^ ]*' || true)
        hw_k=$hw
        [ "$again" = 1 ] && [ -s "$dir/hw$n.ini" ] && hw_k=$dir/hw$n.ini
        predict() {
            "$sim" --hw "$1" --gpu-mem 24GiB $budget --model "$model" --batch "$batch" --seq 1024 \
                --iters "$iters" $plan "${sets[@]}" --trace "$out/pred$k.tsv" --deps "$out/deps$k.tsv" \
                > "$out/sim$k.txt" 2>&1
        }
        if ! predict "$hw_k"; then
            echo "$name: fuyou-sim failed: $(tail -1 "$out/sim$k.txt")" >&2; continue
        fi
        # what the planner chose (--swap auto) on the ini measured again may not be what the
        # run planned (runs before device_regress.sh planned on that ini too planned on its HW):
        # then on --hw, which should be that HW; said so, and again if that differs as well
        plan_of() { grep -m1 '^plan:' "$1" || true; }
        if [ "$hw_k" != "$hw" ] && [ -s "$dir/run$n.txt" ] &&
            [ "$(plan_of "$out/sim$k.txt")" != "$(plan_of "$dir/run$n.txt")" ]; then
            echo "$name: planned otherwise on $hw_k than the run did: predicted on $hw" >&2
            predict "$hw" || { echo "$name: fuyou-sim failed: $(tail -1 "$out/sim$k.txt")" >&2; continue; }
            [ "$(plan_of "$out/sim$k.txt")" = "$(plan_of "$dir/run$n.txt")" ] ||
                echo "$name: planned otherwise on $hw too: its prediction is of another plan" >&2
        fi
        "$trace" compare "$out/pred$k.tsv" "$dir/meas$n.tsv" --deps "$out/deps$k.tsv" \
            --tsv "$out/joined$k.tsv" \
            > "$out/cmp$k.txt" 2>&1 || true
        awk -v name="$name" -F'\n' '
            /^iteration:/ { split($0, f, " "); pred = f[3]; meas = f[6]; err = f[9] }
            /^bottleneck:/ { split($0, f, " "); bp = f[3]; bm = f[5] }
            END { printf "%s\t%s\t%s\t%s\t%s\t%s\n", name, meas, pred, err, bp, bm }' \
            "$out/cmp$k.txt" | tr -d ',' >> "$rows"
        # each resource busy at least 5% of the measured iteration: its busy time's |error|
        awk -v name="$name" '/^iteration:/ { it = $6 }
            /^(gpu|h2d|d2h|ssd_read|ssd_write|cpu_adam) / && it > 0 && $3 >= 0.05 * it {
                e = $4; sub(/%/, "", e); e += 0; printf "%s\t%s %s\n", (e < 0 ? -e : e), name, $1 }' \
            "$out/cmp$k.txt" >> "$out/busy_errors.tsv"
        # model TFLOPS (fuyou-sim's convention, 6 P tokens): the same work over the measured time
        tail -1 "$rows" | awk -F'\t' -v model="$model" -v batch="$batch" -v tf="$(awk \
            '/^TFLOPS/ {print $2}' "$out/sim$k.txt")" '{ printf "%s\t%s\t%s\t%.1f\n", model,
            batch, tf, ($2 > 0 ? tf * $3 / $2 : "NaN") }' >> "$batch_tsv"
    done < "$dir/runs.txt"
done
column -t -s $'\t' "$rows"
# median and worst of "|error|<TAB>who" lines on stdin, sorted here (sort, not gawk's asort:
# Debian's awk is mawk): "<count> <what>: <measure> |error| median M%, worst W% (who)"
summary() {
    sort -g | awk -F'\t' -v what="$1" -v measure="$2" '{ a[NR] = $1; who = $2 }
        END { if (!NR) exit 1
              m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
              printf "%d %s: %s |error| median %.1f%%, worst %.1f%% (%s)\n", NR, what, measure,
                     m, a[NR], who }'
}
awk -F'\t' 'NR > 1 { e = $4; sub(/%/, "", e); e += 0; print (e < 0 ? -e : e) "\t" $1 }' "$rows" |
    summary runs "iteration time" || { echo "no run compared" >&2; exit 1; }
# per-resource busy time (issue 12's second goal): over every run's busy resources
summary "busy resources" "busy time" < "$out/busy_errors.tsv" || true
# the planner's regret (issue 12's third goal), where a DIR holds a sweep (device_regress.sh
# sweep: runs named "<config> swap <amount>", one of them "swap auto"): the planner's measured time over the best.
# Where the planner's plan also ran last ("swap auto-again"), its time is the mean of the two
# and their difference is printed: how far the machine drifted over the sweep. An amount that
# ran more than once (device_regress.sh REPEAT=2, or a sweep in two DIRs) counts the mean of its
# runs. A run without a measured time (its comparison failed) is left out.
awk -F'\t' 'NR > 1 && $1 ~ / swap [^ ]+$/ && $2 + 0 > 0 {
        cfg = $1; sub(/ swap [^ ]+$/, "", cfg); amt = $1; sub(/.* swap /, "", amt)
        if (amt == "auto" && !(cfg in first)) first[cfg] = $2
        if (amt == "auto-again") { last[cfg] = $2; amt = "auto" }
        if (!((cfg, amt) in sum)) n[cfg] += amt != "auto" # every configuration in n
        sum[cfg, amt] += $2; runs[cfg, amt]++ }
    END { for (c in n) {
              if (!((c, "auto") in sum) || !n[c]) continue # nothing to hold it against
              t = sum[c, "auto"] / runs[c, "auto"]; best = t; who = "auto"; most = 0
              for (k in sum) {
                  split(k, f, SUBSEP)
                  if (f[1] != c || f[2] == "auto") continue
                  if (runs[k] > most) most = runs[k]
                  if (sum[k] / runs[k] < best) { best = sum[k] / runs[k]; who = f[2] }
              }
              drift = ""
              if ((c in last) && (c in first))
                  drift = sprintf(" (first %.4f, last %.4f: drift %+.1f%%)", first[c], last[c],
                                  100 * (last[c] / first[c] - 1))
              mean = most > 1 ? sprintf(", each amount the mean of its runs (up to %d)", most) : ""
              printf "%s: the planner'"'"'s amount measured %.4f s%s, the best of it and %d amounts " \
                     "%.4f s (swap %s)%s: regret %.1f%%\n", c, t, drift, n[c], best, who,
                     mean, 100 * (t / best - 1) } }' "$rows"
exit 0
