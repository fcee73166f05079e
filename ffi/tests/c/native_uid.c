/* Start-up with a unique ID (NVSHMEM's nvshmemx_init_attr with NVSHMEMX_INIT_WITH_UNIQUEID): the first process
 * makes the ID, starts the other PEs itself (fork + exec of this program, ID passed as hex on the command line),
 * and every PE joins with xpushmemx_init_attr. Usage: native_uid NPES */
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include "xpushmem.h"
#include "check.h"

static void to_hex(const xpushmemx_uniqueid_t *id, char *out) {
    const unsigned char *b = (const unsigned char *)id->internal;
    for (int i = 0; i < XPUSHMEMX_UNIQUEID_BYTES; i++) sprintf(out + 2 * i, "%02x", b[i]);
}

static void from_hex(const char *s, xpushmemx_uniqueid_t *id) {
    for (int i = 0; i < XPUSHMEMX_UNIQUEID_BYTES; i++) {
        unsigned v = 0;
        CHECK(sscanf(s + 2 * i, "%2x", &v) == 1, "hex");
        id->internal[i] = (char)v;
    }
}

static int run_pe(int rank, int nranks, const xpushmemx_uniqueid_t *id) {
    xpushmemx_init_attr_t attr;
    memset(&attr, 0xff, sizeof attr);
    OK(xpushmemx_set_attr_uniqueid_args(rank, nranks, id, &attr));
    CHECK(attr.version == XPUSHMEMX_INIT_ATTR_VERSION && attr.rank == rank && attr.nranks == nranks, "attr");
    OK(xpushmemx_init_attr(XPUSHMEMX_INIT_WITH_UNIQUEID, &attr));
    int me = xpushmem_my_pe(), npes = xpushmem_n_pes();
    CHECK(me == rank && npes == nranks, "rank %d of %d, expected %d of %d", me, npes, rank, nranks);
    long *x = xpushmem_calloc(1, sizeof(long));
    CHECK(x != NULL, "calloc");
    OK(xpushmem_long_p(x, 1000 + me, (me + 1) % npes));
    OK(xpushmem_barrier_all());
    CHECK(*x == 1000 + (me + npes - 1) % npes, "ring over a uid bootstrap");
    OK(xpushmem_free(x));
    printf("native_uid OK on rank %d of %d\n", me, npes);
    fflush(stdout);
    OK(xpushmem_finalize());
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "child") == 0) {
        xpushmemx_uniqueid_t id;
        from_hex(argv[4], &id);
        return run_pe(atoi(argv[2]), atoi(argv[3]), &id);
    }
    int n = argc > 1 ? atoi(argv[1]) : 2;
    CHECK(n >= 1 && n <= 16, "NPES");
    /* bad arguments first */
    xpushmemx_uniqueid_t id;
    xpushmemx_init_attr_t attr;
    FAILS(xpushmemx_get_uniqueid(NULL), XPUSHMEM_ERROR_INVALID_ARGUMENT, "uid = NULL");
    memset(&id, 0, sizeof id);
    FAILS(xpushmemx_set_attr_uniqueid_args(3, 2, &id, &attr), XPUSHMEM_ERROR_INVALID_ARGUMENT, "rank = 3");
    FAILS(xpushmemx_set_attr_uniqueid_args(-1, 2, &id, &attr), XPUSHMEM_ERROR_INVALID_ARGUMENT, "rank = -1");
    OK(xpushmemx_set_attr_uniqueid_args(0, 1, &id, &attr));
    CHECK(xpushmemx_init_attr(XPUSHMEMX_INIT_WITH_UNIQUEID, &attr) != 0, "a zero unique ID is rejected");

    OK(xpushmemx_get_uniqueid(&id));
    char hex[2 * XPUSHMEMX_UNIQUEID_BYTES + 1];
    to_hex(&id, hex);
    pid_t kids[16];
    char rank_s[16], n_s[16];
    snprintf(n_s, sizeof n_s, "%d", n);
    for (int r = 1; r < n; r++) {
        snprintf(rank_s, sizeof rank_s, "%d", r);
        pid_t p = fork();
        CHECK(p >= 0, "fork");
        if (p == 0) {
            char *args[] = {argv[0], "child", rank_s, n_s, hex, NULL};
            execv("/proc/self/exe", args);
            _exit(127);
        }
        kids[r] = p;
    }
    int rc = run_pe(0, n, &id);
    for (int r = 1; r < n; r++) {
        int st = 0;
        CHECK(waitpid(kids[r], &st, 0) == kids[r], "waitpid");
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d ended with status %d", r, st);
    }
    printf("native_uid OK: %d ranks\n", n);
    return rc;
}
