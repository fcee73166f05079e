/* Error returns of the native API: calls before init, bad PEs (-1, n_pes), non-symmetric and NULL addresses,
 * ranges past the heap, bad operators and strides, misaligned atomics, allocation failures and collective
 * mismatches, double free, the _ex variants, the thread-local last error, and the panic firewall.
 * With the argument "abort", the first bad call must abort the process instead (XPUSHMEM_ERROR_MODE=abort). */
#include <pthread.h>
#include <stdint.h>
#include <stddef.h>
#include "xpushmem.h"
#include "check.h"

static void *other_thread(void *arg) {
    int *buf = arg;
    xpushmemx_clear_error();
    int rc = xpushmem_int_p(buf, 1, -7);
    CHECK(rc == XPUSHMEM_ERROR_INVALID_PE, "thread: rc %d", rc);
    CHECK(strstr(xpushmem_last_error(), "invalid PE -7") != NULL, "thread message: %s", xpushmem_last_error());
    return NULL;
}

int main(int argc, char **argv) {
    int abort_mode = argc > 1 && strcmp(argv[1], "abort") == 0;

    /* before init: State errors, no crash */
    if (!abort_mode) {
        CHECK(xpushmem_my_pe() == -1 && xpushmem_last_error_code() == XPUSHMEM_ERROR_STATE, "my_pe before init");
        CHECK(strstr(xpushmem_last_error(), "not initialised") != NULL, "message: %s", xpushmem_last_error());
        int x = 0;
        FAILS(xpushmem_int_put(&x, &x, 1, 0), XPUSHMEM_ERROR_STATE, "xpushmem_int_put");
        FAILS(xpushmem_barrier_all(), XPUSHMEM_ERROR_STATE, "not initialised");
        CHECK(xpushmem_malloc(8) == NULL, "malloc before init");
        FAILS(xpushmem_init_thread(99, NULL), XPUSHMEM_ERROR_INVALID_ARGUMENT, "requested = 99");
    }
    OK(xpushmem_init());
    OK(xpushmem_init()); /* a second init is a no-op */
    int me = xpushmem_my_pe(), npes = xpushmem_n_pes();
    int *buf = xpushmem_calloc(16, sizeof(int));
    CHECK(buf != NULL, "calloc");
    int local[16] = {0};

    if (abort_mode) {
        OK(xpushmem_barrier_all());
        printf("about to fail on PE %d\n", me);
        fflush(stdout);
        xpushmem_int_p(buf, 1, -1); /* must not return */
        printf("still alive after a bad call in abort mode\n");
        return 0;
    }

    char expect[64];
    /* PEs: -1 and n_pes, in every family */
    FAILS(xpushmem_int_p(buf, 1, -1), XPUSHMEM_ERROR_INVALID_PE, "invalid PE -1");
    snprintf(expect, sizeof expect, "invalid PE %d: must be in [0, %d)", npes, npes);
    FAILS(xpushmem_int_put(buf, local, 4, npes), XPUSHMEM_ERROR_INVALID_PE, expect);
    FAILS(xpushmem_int_get(local, buf, 4, -1), XPUSHMEM_ERROR_INVALID_PE, "xpushmem_int_get");
    FAILS(xpushmem_putmem(buf, local, 4, -2), XPUSHMEM_ERROR_INVALID_PE, "invalid PE -2");
    FAILS(xpushmem_int_iput(buf, local, 1, 1, 2, -1), XPUSHMEM_ERROR_INVALID_PE, "invalid PE -1");
    FAILS(xpushmem_int_atomic_add(buf, 1, -1), XPUSHMEM_ERROR_INVALID_PE, "xpushmem_int_atomic_add");
    FAILS(xpushmem_putmem_signal(buf, local, 4, (uint64_t *)&buf[8], 1, XPUSHMEM_SIGNAL_SET, npes + 3), XPUSHMEM_ERROR_INVALID_PE, "invalid PE");
    int v = 5;
    FAILS(xpushmem_int_g_ex(&v, buf, -1), XPUSHMEM_ERROR_INVALID_PE, "invalid PE -1");
    CHECK(v == 5, "g_ex left the output alone");
    xpushmemx_clear_error();
    CHECK(xpushmem_int_g(buf, -1) == 0 && xpushmem_last_error_code() == XPUSHMEM_ERROR_INVALID_PE, "g fallback");
    CHECK(xpushmem_int_atomic_fetch_add(buf, 1, 99) == 0 && xpushmem_last_error_code() == XPUSHMEM_ERROR_INVALID_PE, "fetch_add fallback");
    int f = 7;
    FAILS(xpushmem_int_atomic_fetch_add_ex(&f, buf, 1, -1), XPUSHMEM_ERROR_INVALID_PE, "invalid PE -1");
    CHECK(xpushmem_ptr(buf, -1) == NULL && xpushmem_last_error_code() == XPUSHMEM_ERROR_INVALID_PE, "ptr bad pe");

    /* addresses */
    FAILS(xpushmem_int_put(local, local, 4, 0), XPUSHMEM_ERROR_NOT_SYMMETRIC, "is not symmetric");
    FAILS(xpushmem_int_put(NULL, local, 4, 0), XPUSHMEM_ERROR_NOT_SYMMETRIC, "argument dest");
    FAILS(xpushmem_int_get(local, local, 4, 0), XPUSHMEM_ERROR_NOT_SYMMETRIC, "argument source");
    FAILS(xpushmem_int_atomic_set(local, 1, 0), XPUSHMEM_ERROR_NOT_SYMMETRIC, "not symmetric");
    FAILS(xpushmem_int_wait_until(local, XPUSHMEM_CMP_EQ, 0), XPUSHMEM_ERROR_NOT_SYMMETRIC, "argument ivar");
    FAILS(xpushmem_signal_wait_until_ex(NULL, (uint64_t *)local, XPUSHMEM_CMP_EQ, 0), XPUSHMEM_ERROR_NOT_SYMMETRIC, "sig_addr");
    FAILS(xpushmem_int_put(buf, NULL, 4, 0), XPUSHMEM_ERROR_INVALID_ARGUMENT, "source = NULL");
    FAILS(xpushmem_int_get(NULL, buf, 4, 0), XPUSHMEM_ERROR_INVALID_ARGUMENT, "dest = NULL");
    size_t heap = xpushmemx_heap_size();
    FAILS(xpushmem_putmem(buf, local, heap + 1, 0), XPUSHMEM_ERROR_OUT_OF_BOUNDS, "out of bounds");
    FAILS(xpushmem_int_put(buf, local, SIZE_MAX / 2, 0), XPUSHMEM_ERROR_INVALID_ARGUMENT, "overflows");
    FAILS(xpushmem_int_atomic_inc((int *)((char *)buf + 1), 0), XPUSHMEM_ERROR_INVALID_ARGUMENT, "aligned");
    FAILS(xpushmem_int_p((int *)((char *)buf + 2), 1, 0), XPUSHMEM_ERROR_INVALID_ARGUMENT, "aligned to 4 bytes");

    /* operators, strides, modes */
    FAILS(xpushmem_int_wait_until(buf, 99, 0), XPUSHMEM_ERROR_INVALID_ARGUMENT, "cmp = 99");
    FAILS(xpushmem_int_test_ex(&v, buf, -1, 0), XPUSHMEM_ERROR_INVALID_ARGUMENT, "cmp = -1");
    FAILS(xpushmem_signal_wait_until_ex(NULL, (uint64_t *)&buf[8], 6, 0), XPUSHMEM_ERROR_INVALID_ARGUMENT, "cmp = 6");
    FAILS(xpushmem_int_put_signal(buf, local, 1, (uint64_t *)&buf[8], 1, 2, 0), XPUSHMEM_ERROR_INVALID_ARGUMENT, "sig_op = 2");
    FAILS(xpushmem_int_iput(buf, local, 0, 1, 2, 0), XPUSHMEM_ERROR_INVALID_ARGUMENT, "dst = 0");
    FAILS(xpushmem_int_iget(local, buf, 1, -3, 2, 0), XPUSHMEM_ERROR_INVALID_ARGUMENT, "sst = -3");
    size_t cnt = 0;
    FAILS(xpushmem_int_test_some_ex(&cnt, buf, 4, NULL, NULL, XPUSHMEM_CMP_EQ, 0), XPUSHMEM_ERROR_INVALID_ARGUMENT, "indices");
    FAILS(xpushmemx_set_error_mode(7), XPUSHMEM_ERROR_INVALID_ARGUMENT, "mode = 7");
    CHECK(xpushmemx_get_error_mode() == XPUSHMEMX_ERROR_MODE_RETURN, "default mode is return");
    FAILS(xpushmemx_init_attr(5, NULL), XPUSHMEM_ERROR_INVALID_ARGUMENT, "flags = 5");
    CHECK(strcmp(xpushmemx_error_name(XPUSHMEM_ERROR_INVALID_PE), "InvalidPe") == 0, "error_name");
    CHECK(strcmp(xpushmemx_error_name(12345), "Unknown") == 0, "error_name unknown");

    /* allocation: too big, exhausted, mismatched sizes (on every PE), bad alignment, bad frees */
    CHECK(xpushmem_malloc(heap * 2) == NULL && xpushmem_last_error_code() == XPUSHMEM_ERROR_INVALID_ARGUMENT, "malloc too big: %s", xpushmem_last_error());
    CHECK(xpushmem_malloc(heap) == NULL && xpushmem_last_error_code() == XPUSHMEM_ERROR_HEAP_EXHAUSTED, "malloc exhausted: %s", xpushmem_last_error());
    CHECK(strstr(xpushmem_last_error(), "XPUSHMEM_SYMMETRIC_MAX") != NULL, "exhausted message: %s", xpushmem_last_error());
    CHECK(xpushmem_calloc(SIZE_MAX, 4) == NULL && xpushmem_last_error_code() == XPUSHMEM_ERROR_INVALID_ARGUMENT, "calloc overflow");
    void *mm = xpushmem_malloc(me == npes - 1 ? 128 : 64);
    CHECK(mm == NULL && xpushmem_last_error_code() == XPUSHMEM_ERROR_MISMATCH, "mismatched malloc: %s", xpushmem_last_error());
    snprintf(expect, sizeof expect, "PE %d passed", npes - 1);
    CHECK(strstr(xpushmem_last_error(), expect) != NULL, "mismatch names the PE: %s", xpushmem_last_error());
    CHECK(xpushmem_align(3, 64) == NULL && xpushmem_last_error_code() == XPUSHMEM_ERROR_INVALID_ARGUMENT, "align(3): %s", xpushmem_last_error());
    FAILS(xpushmem_free(local), XPUSHMEM_ERROR_NOT_SYMMETRIC, "xpushmem_free");
    FAILS(xpushmem_free(&buf[1]), XPUSHMEM_ERROR_INVALID_ARGUMENT, "does not start a live symmetric allocation");
    int *tmp = xpushmem_malloc(32);
    CHECK(tmp != NULL, "malloc after errors: %s", xpushmem_last_error());
    OK(xpushmem_free(tmp));
    FAILS(xpushmem_free(tmp), XPUSHMEM_ERROR_INVALID_ARGUMENT, "live symmetric allocation");

    /* the last error is per thread */
    xpushmemx_clear_error();
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_thread, buf) == 0, "pthread_create");
    pthread_join(t, NULL);
    CHECK(xpushmem_last_error_code() == 0 && xpushmem_last_error()[0] == '\0', "main thread's error untouched: %s", xpushmem_last_error());

    /* the panic firewall: an internal panic is an error code, and the library keeps working */
    FAILS(xpushmemx_selftest_panic(), XPUSHMEM_ERROR_INTERNAL, "deliberate panic");
    CHECK(strstr(xpushmem_last_error(), "panic") != NULL, "panic message");
    int right = (me + 1) % npes, left = (me + npes - 1) % npes;
    OK(xpushmem_int_p(&buf[0], 100 + me, right));
    OK(xpushmem_barrier_all());
    CHECK(buf[0] == 100 + left, "works after a panic");

    printf("native_errors OK on PE %d of %d\n", me, npes);
    OK(xpushmem_free(buf));
    OK(xpushmem_finalize());
    FAILS(xpushmem_quiet(), XPUSHMEM_ERROR_STATE, "not initialised");
    OK(xpushmem_finalize()); /* a second finalize is a no-op */
    return 0;
}
