/* bench_sim: how fast fuyou-sim predicts one GPT-3 175B iteration (96 blocks) on one core.
 *
 * Prints the median time to build the schedule and simulate it, tasks and events per second,
 * and two ratios: against the 20 ms goal, and against a baseline measured in the same run,
 * sorting as many random event times with qsort (the ordering work any event-driven simulation
 * of this many events must do). Not a test: no thresholds, the numbers are for people. */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "predict.h"

enum { REPEATS = 21 };

/* The command line (bench_check_args): no options. */
static const char usage[] = "bench_sim (no options)";
static const char *const options[] = {NULL};

int main(int argc, char **argv)
{
    bench_check_args(argc, argv, usage, options);
    Err e;
    Hardware hw;
    Graph g;
    Plan p;
    if (hw_load("4090.ini", NULL, 0, &hw, &e) ||
        graph_init(&g, model_preset_find("gpt3-175b"), 16, 1024, &e) ||
        plan_init(&p, &g, POLICY_FUYOU, &e)) {
        fprintf(stderr, "bench_sim: %s\n", e.msg);
        return 1;
    }
    p.weights = p.optim = TIER_SSD;
    double t_sim[REPEATS], t_base[REPEATS];
    int n_tasks = 0;
    long long n_events = 0;
    for (int i = 0; i < REPEATS; i++) {
        Prediction pr;
        double t0 = bench_now();
        if (predict_run(&pr, &g, &hw, &p, 1, &e)) {
            fprintf(stderr, "bench_sim: %s\n", e.msg);
            return 1;
        }
        t_sim[i] = bench_now() - t0;
        n_tasks = pr.sched.n_tasks;
        n_events = pr.res.events + pr.res.stale_events;
        predict_free(&pr);

        double *keys = malloc((size_t)n_events * sizeof *keys);
        if (!keys)
            return 1;
        srand(12345u + (unsigned)i);
        for (long long k = 0; k < n_events; k++)
            keys[k] = rand() / (double)RAND_MAX;
        t0 = bench_now();
        qsort(keys, (size_t)n_events, sizeof *keys, bench_cmp_double);
        t_base[i] = bench_now() - t0;
        free(keys);
    }
    double sim = bench_median(t_sim, REPEATS), base = bench_median(t_base, REPEATS);
    printf("gpt3-175b, batch 16, fuyou on 4090.ini, 1 iteration: %d tasks, %lld events\n",
           n_tasks, n_events);
    printf("%-34s %10s\n", "", "median");
    printf("%-34s %8.2f ms\n", "build + simulate", sim * 1e3);
    printf("%-34s %8.2f ms\n", "baseline: qsort of the event times", base * 1e3);
    printf("%-34s %10.2f M/s\n", "tasks simulated", n_tasks / sim / 1e6);
    printf("%-34s %10.2f M/s\n", "events processed", n_events / sim / 1e6);
    printf("ratio to the 20 ms goal: %.3f (below 1 meets it)\n", sim / 20e-3);
    printf("ratio to the qsort baseline: %.1f\n", sim / base);
    plan_free(&p);
    graph_free(&g);
    hw_free(&hw);
    return 0;
}
