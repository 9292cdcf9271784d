/* bench_clock.h — the clocks the benchmarks in perf/ measure with (header only). */
#ifndef NF_BENCH_CLOCK_H
#define NF_BENCH_CLOCK_H

#include <sys/resource.h>
#include <time.h>

/* CLOCK_MONOTONIC in seconds: wall time of an interval. */
static inline double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The process's CPU so far (user + system), in seconds. */
static inline double bench_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

#endif
