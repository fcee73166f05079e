/* The OpenSHMEM specification's environment variables (1.5, "Environment Variables"), read at shmem_init.
 * The test driver sets them and passes what to check as argv[1]:
 *   heap-3m        the heap holds 2 MiB but not 4 MiB (SHMEM_SYMMETRIC_SIZE=3M, XPUSHMEM_SYMMETRIC_SIZE unset)
 *   heap-4m-fits   a 4 MiB allocation succeeds (XPUSHMEM_SYMMETRIC_SIZE wins over a small SHMEM_SYMMETRIC_SIZE)
 *   plain          init, a put around the ring, finalize (SHMEM_VERSION, SHMEM_INFO, SHMEM_DEBUG)
 *   bad-size       shmem_init_thread fails and the error names SHMEM_SYMMETRIC_SIZE (return mode)
 * Allocation failures return NULL in every error mode (the specification defines it); the driver runs with
 * XPUSHMEM_ERROR_MODE=return for the bad-value checks, and once with abort for the NULL return. */
#include "check.h"
#include <string.h>

static long got;

static void ring_put(void) {
    int me = shmem_my_pe(), n = shmem_n_pes();
    got = -1;
    shmem_barrier_all();
    shmem_long_p(&got, 1000 + me, (me + 1) % n);
    shmem_barrier_all();
    CHECK(got == 1000 + (me + n - 1) % n, "got %ld from the left neighbour", got);
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "plain";
    if (strcmp(what, "bad-size") == 0) {
        int provided = -1;
        int rc = shmem_init_thread(SHMEM_THREAD_SINGLE, &provided);
        CHECK(rc != 0, "shmem_init_thread accepted SHMEM_SYMMETRIC_SIZE=%s", getenv("SHMEM_SYMMETRIC_SIZE"));
        const char *err = xpushmem_last_error();
        CHECK(strstr(err, "SHMEM_SYMMETRIC_SIZE") != NULL && strstr(err, getenv("SHMEM_SYMMETRIC_SIZE")) != NULL,
              "the error does not name the variable and its value: %s", err);
        printf("envvars OK (init refused: %s)\n", err);
        return 0;
    }
    shmem_init();
    if (strcmp(what, "heap-3m") == 0) {
        char *two = shmem_malloc(2 << 20);
        CHECK(two != NULL, "a 2 MiB shmem_malloc failed in a 3 MiB heap: %s", xpushmem_last_error());
        two[(2 << 20) - 1] = 1;
        char *four = shmem_malloc(4 << 20);
        CHECK(four == NULL, "a 4 MiB shmem_malloc succeeded in a 3 MiB heap");
        shmem_free(two);
    } else if (strcmp(what, "heap-4m-fits") == 0) {
        char *four = shmem_malloc(4 << 20);
        CHECK(four != NULL, "a 4 MiB shmem_malloc failed: %s", xpushmem_last_error());
        four[(4 << 20) - 1] = 1;
        shmem_free(four);
    } else {
        CHECK(strcmp(what, "plain") == 0, "unknown check %s", what);
    }
    ring_put();
    PASS("envvars");
    shmem_finalize();
    return 0;
}
