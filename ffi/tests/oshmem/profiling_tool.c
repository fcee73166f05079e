/* A profiling tool as the OpenSHMEM profiling interface intends one: it defines some of the standard routines,
 * counts the calls while profiling is enabled (shmem_pcontrol level >= 1), and reaches the library through the
 * name-shifted pshmem_* routines of pshmem.h. It is linked into the program, into a shared library linked before
 * libxpushmem_oshmem, or next to the static libxpushmem_oshmem.a (ffi/oshmem/tests/oshmem_programs.rs). */
#include <pshmem.h>
#include <stdarg.h>
#include "profiling_tool.h"

static struct tool_counts counts = {.level = 1};

#define COUNT(field) \
    do {                \
        if (counts.level >= 1) counts.field++; \
    } while (0)

struct tool_counts tool_counts(void) { return counts; }

void shmem_init(void) {
    COUNT(init);
    pshmem_init();
}

void shmem_finalize(void) {
    COUNT(finalize);
    pshmem_finalize();
}

void shmem_barrier_all(void) {
    COUNT(barrier_all);
    pshmem_barrier_all();
}

void shmem_putmem(void *dest, const void *source, size_t nelems, int pe) {
    COUNT(putmem);
    if (counts.level >= 1) counts.putmem_bytes += (long)nelems;
    pshmem_putmem(dest, source, nelems, pe);
}

int shmem_int_atomic_fetch_add(int *dest, int value, int pe) {
    COUNT(int_fetch_add);
    return pshmem_int_atomic_fetch_add(dest, value, pe);
}

long shmem_long_g(const long *source, int pe) {
    COUNT(long_g);
    return pshmem_long_g(source, pe);
}

int shmem_int_sum_reduce(shmem_team_t team, int *dest, const int *source, size_t nreduce) {
    COUNT(int_sum_reduce);
    return pshmem_int_sum_reduce(team, dest, source, nreduce);
}

void *shmem_malloc(size_t size) {
    COUNT(malloc);
    return pshmem_malloc(size);
}

/* The specification's recommended levels: <= 0 off, 1 on, 2 on and flush; above 2 tool-defined, here: store the
 * int given as third argument through the int * given as second (to show that the extra arguments arrive). */
void shmem_pcontrol(const int level, ...) {
    counts.level = level;
    if (level == 2) counts.flushes++;
    if (level > 2) {
        va_list ap;
        va_start(ap, level);
        int *where = va_arg(ap, int *);
        int value = va_arg(ap, int);
        va_end(ap);
        *where = value;
    }
    pshmem_pcontrol(level);
}
