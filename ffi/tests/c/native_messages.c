/* Messages name the argument that is wrong, with the value passed (issue 14, item 5), through the C ABI:
 * a strided put whose stride makes the span overflow names the stride; alltoall and fcollect with a huge nelems
 * name nelems as passed; overlap errors of broadcast and alltoall show the nelems elements involved, not the rest
 * of the heap. Prints "native_messages OK on PE <me> of <n>" at the end. */
#include <stdint.h>
#include <stddef.h>
#include "xpushmem.h"
#include "check.h"

/* The call failed and the last error contains `text`. */
#define NAMES(call, text)                                                                              \
    do {                                                                                               \
        int rc_ = (call);                                                                              \
        CHECK(rc_ != 0, "%s succeeded", #call);                                                        \
        CHECK(strstr(xpushmem_last_error(), (text)) != NULL, "message of %s lacks \"%s\": %s", #call, \
              (text), xpushmem_last_error());                                                          \
    } while (0)

int main(void) {
    OK(xpushmem_init());
    int me = xpushmem_my_pe(), npes = xpushmem_n_pes();
    long *a = (long *)xpushmem_calloc(64, sizeof(long));
    CHECK(a != NULL, "calloc: %s", xpushmem_last_error());
    long loc[3] = {1, 2, 3};
    char want[128];

    /* The reported case: nelems 3 is fine, the destination stride is not. */
    NAMES(xpushmem_long_iput(a, loc, 2305843009213693951, 1, 3, (me + 1) % npes),
          "invalid argument dst = 2305843009213693951");
    CHECK(strstr(xpushmem_last_error(), "4611686018427387903") == NULL, "a computed count is shown: %s",
          xpushmem_last_error());
    NAMES(xpushmem_long_iput(a, loc, 1, 2305843009213693951, 3, (me + 1) % npes),
          "invalid argument sst = 2305843009213693951");

    /* Huge nelems: the message shows the nelems passed. */
    size_t huge = (size_t)1 << 62;
    snprintf(want, sizeof want, "nelems = %zu", huge);
    NAMES(xpushmem_long_alltoall(XPUSHMEM_TEAM_WORLD, a, a + 32, huge), want);
    NAMES(xpushmem_long_fcollect(XPUSHMEM_TEAM_WORLD, a, a + 32, huge), want);

    /* Overlaps: the nelems elements, not the rest of the heap. */
    int rc = xpushmem_long_broadcast(XPUSHMEM_TEAM_WORLD, a + 1, a, 4, 0);
    CHECK(rc != 0, "overlapping broadcast succeeded");
    if (me == 0) {
        CHECK(strstr(xpushmem_last_error(), "SymSlice<int64>[4] ") != NULL &&
                  strstr(xpushmem_last_error(), "(nelems = 4)") != NULL,
              "broadcast overlap: %s", xpushmem_last_error());
    }
    NAMES(xpushmem_long_alltoall(XPUSHMEM_TEAM_WORLD, a + 1, a, 2), "(nelems = 2)");
    snprintf(want, sizeof want, "invalid argument dest = SymSlice<int64>[%d] ", 2 * npes);
    CHECK(strstr(xpushmem_last_error(), want) != NULL, "alltoall overlap lacks \"%s\": %s", want,
          xpushmem_last_error());

    OK(xpushmem_free(a));
    OK(xpushmem_finalize());
    printf("native_messages OK on PE %d of %d\n", me, npes);
    return 0;
}
