/* cuda_wait: a copy's waiter sleeps through most of it, then polls; see cuda_wait.h. */
#include <errno.h>
#include <sys/prctl.h>
#include <time.h>

#include "cuda_wait.h"

extern "C" {
#include "clock.h"
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Sleeps until the monotonic clock reads until_s. The thread's timer slack (50 us by default:
 * a wake-up that late would eat half the margin) is cut to 1 us the first time. */
static void sleep_until(double until_s)
{
    static thread_local bool slack_cut;
    if (!slack_cut) {
        prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
        slack_cut = true;
    }
    struct timespec ts;
    ts.tv_sec = (time_t)until_s;
    ts.tv_nsec = (long)((until_s - (double)ts.tv_sec) * 1e9);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

cudaError_t cuda_wait_paced(const CopyPace *pace, cudaEvent_t done, double t0_s, size_t bytes)
{
    double wake = copy_pace_wake_s(pace, t0_s, bytes);
    if (wake > clock_monotonic_s())
        sleep_until(wake);
    cudaError_t st;
    while ((st = cudaEventQuery(done)) == cudaErrorNotReady)
        for (int i = 0; i < 16; i++)
            cpu_relax();
    return st;
}
