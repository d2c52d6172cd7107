#!/usr/bin/env bash
# tools/repredict.sh: a regression table's measured runs predicted again, by the cost model of
# this build, from the table alone (no run directories). For TABLE (traces/samples/regression-
# *.tsv: run, call, pass, measured_s, ...) it reads beside it TABLE-minus-.tsv plus
#   .runs     each run's configuration, as tools/device_regress.sh's RUNS list
#             (name|model|batch|iters|plan flags|fuyou-run flags), one a line;
#   .rowsets  optional: run name TAB --set overrides for that run (what was measured again just
#             before it and not kept: the disk of a run on SSD, a re-measured Adam);
#   .auto     optional: configuration TAB bytes: the amount a --swap auto run took, so it is
#             predicted as it ran;
# predicts each with fuyou-sim as tools/regress.sh does (--gpu-mem 24GiB, --seq 1024, the
# knobs of tools/regression_plan_knobs before the plan's flags, --cpu-mem from its flags) on
# --hw (default: the profile named in the table's file name, h200-profiled-DATE.ini), and
# prints one row per run (measured, predicted now, error = measured / predicted - 1 as
# fuyou-trace compare gives it, the busiest resource) and the median and worst |error|.
#   tools/repredict.sh [--build DIR] [--hw INI] [--set section.key=value]... TABLE
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build hw="" sets=()
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=$2; shift 2 ;;
    --hw) hw=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    -h|--help) sed -n 2,17p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "tools/repredict.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
    esac
done
[ $# -eq 1 ] || { echo "usage: tools/repredict.sh [--build DIR] [--hw INI] [--set K=V]... TABLE" >&2; exit 2; }
table=$1 base=${1%.tsv}
[ -r "$table" ] && [ -r "$base.runs" ] ||
    { echo "tools/repredict.sh: $table and $base.runs must both be readable" >&2; exit 2; }
if [ -z "$hw" ]; then
    hw=$(dirname "$table")/h200-profiled-$(basename "$base" | sed 's/^regression-//').ini
    [ -r "$hw" ] || { echo "tools/repredict.sh: no $hw: name the profile with --hw" >&2; exit 2; }
fi
sim=$build/sim/fuyou-sim
[ -x "$sim" ] || { echo "tools/repredict.sh: no $sim: build first (or --build DIR)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
knobs=$(cat "$root/tools/regression_plan_knobs")
declare -A cfg rowset amount
while IFS='|' read -r name model batch iters plan extra; do
    [ -n "${name// }" ] && cfg[$name]="$model|$batch|$iters|$plan|$extra"
done < "$base.runs"
[ -r "$base.rowsets" ] && while IFS=$'\t' read -r name args; do
    [ -n "$name" ] && rowset[$name]=$args
done < "$base.rowsets"
[ -r "$base.auto" ] && while IFS=$'\t' read -r name bytes; do
    [ -n "$name" ] && amount[$name]=$bytes
done < "$base.auto"

# predict NAME TRACE: the run's plan, as it ran; leaves the trace
predict() {
    local name=$1 trace=$2 model batch iters plan extra budget
    IFS='|' read -r model batch iters plan extra <<< "${cfg[$name]}"
    budget=$(printf '%s\n' "$extra" | grep -o -- '--cpu-mem [^ ]*' || true)
    local conf=${name% swap auto*}
    if [[ "$plan" == *"--swap auto"* ]] && [ -n "${amount[$conf]:-}" ]; then
        plan=${plan/--swap auto/--swap ${amount[$conf]}}
    fi
    # shellcheck disable=SC2086
    "$sim" --hw "$hw" ${rowset[$name]:-} "${sets[@]}" --gpu-mem 24GiB $budget --model "$model" \
        --batch "$batch" --seq 1024 --iters "$iters" $knobs $plan --trace "$trace" \
        > "$trace.txt" 2>&1 ||
        { echo "$name: fuyou-sim failed: $(tail -1 "$trace.txt")" >&2; return 1; }
}
# fuyou-trace compare's steady state: (end of the last iteration - end of the first) / (n - 1)
iter_s() {
    awk -F'\t' 'NR > 1 { if (!($1 in e) || $7 + 0 > e[$1]) e[$1] = $7 + 0; if ($1 + 0 > n) n = $1 + 0 }
        END { printf "%.9f\n", n ? (e[n] - e[0]) / n : 0 }' "$1"
}
busiest() {
    awk -F'\t' 'NR > 1 && $1 >= 1 { b[$3] += $7 - $6 } END { m = -1
        for (r in b) if (b[r] > m) { m = b[r]; w = r } print w }' "$1"
}

k=0
{ printf 'run\tpass\tmeasured_s\tpredicted_s\terror\tbottleneck_pred\n'
while IFS=$'\t' read -r name call pass meas _; do
    [ "$name" = run ] && continue
    k=$((k + 1))
    [ -n "${cfg[$name]:-}" ] || { echo "$name: no configuration in $base.runs" >&2; exit 1; }
    predict "$name" "$tmp/p$k.tsv"
    awk -v n="$name" -v pa="$pass" -v m="$meas" -v p="$(iter_s "$tmp/p$k.tsv")" \
        -v b="$(busiest "$tmp/p$k.tsv")" 'BEGIN {
        printf "%s\t%s\t%s\t%.6f\t%+.2f%%\t%s\n", n, pa, m, p, 100 * (m / p - 1), b }'
done < "$table"; } | tee "$tmp/rows.tsv"
# the summary: median (the mean of the middle two where even, as regress.sh) and worst
worst=$(awk -F'\t' 'NR > 1 { e = $5 + 0; e = e < 0 ? -e : e
    if (e >= w) { w = e; who = $1 " (pass " $2 ")" } } END { print who }' "$tmp/rows.tsv")
awk -F'\t' 'NR > 1 { e = $5 + 0; print (e < 0 ? -e : e) }' "$tmp/rows.tsv" |
    sort -g | awk -v who="$worst" '{ a[++n] = $1 }
    END { m = n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        printf "# %d runs: iteration time |error| median %.2f%%, worst %.2f%%, %s\n", n, m,
               a[n], who }'
