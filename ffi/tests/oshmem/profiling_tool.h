/* The counters of profiling_tool.c, a profiling tool written against the OpenSHMEM profiling interface. */
#ifndef PROFILING_TOOL_H
#define PROFILING_TOOL_H
#include <stddef.h>

struct tool_counts {
    long init, finalize, barrier_all, putmem, putmem_bytes, int_fetch_add, long_g, int_sum_reduce, malloc;
    long flushes;  /* shmem_pcontrol(2) */
    int level;     /* the last level given to shmem_pcontrol (1 until then, as the specification recommends) */
};

/* This PE's counts so far. */
struct tool_counts tool_counts(void);
#endif
