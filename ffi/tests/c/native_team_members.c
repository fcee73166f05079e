/* Teams made by their members only through the C ABI (issue #30, item 6): PEs 1..n-1 make a team listed in
 * descending order while PE 0 does not call; its numbering follows the list, a team allocation aligned to 256 bytes
 * is symmetric among the members and carries data between them. Then a mismatched tag fails on every member with
 * XPUSHMEM_ERROR_MISMATCH, a bad list fails at once, and the team is destroyed by its members.
 * Prints "native_team_members OK on PE <me> of <n>" at the end. */
#include <stdint.h>
#include <stddef.h>
#include "xpushmem.h"
#include "check.h"

int main(void) {
    OK(xpushmem_init());
    int me = xpushmem_my_pe(), npes = xpushmem_n_pes();
    int pes[64];
    int k = npes - 1;
    for (int i = 0; i < k; i++) pes[i] = npes - 1 - i; /* n-1, ..., 1 */
    if (me != 0) {
        xpushmem_team_t t = XPUSHMEM_TEAM_INVALID;
        OK(xpushmem_team_of_members(pes, k, 7, &t));
        CHECK(xpushmem_team_n_pes(t) == k, "n_pes %d", xpushmem_team_n_pes(t));
        CHECK(xpushmem_team_my_pe(t) == npes - 1 - me, "my_pe %d on PE %d", xpushmem_team_my_pe(t), me);
        long *a = (long *)xpushmem_team_align(t, 256, 50 * sizeof(long));
        CHECK(a != NULL && ((uintptr_t)a & 255) == 0, "team_align: %p %s", (void *)a, xpushmem_last_error());
        int r = xpushmem_team_my_pe(t);
        int next = xpushmem_team_translate_pe(t, (r + 1) % k, XPUSHMEM_TEAM_WORLD);
        int prev = xpushmem_team_translate_pe(t, (r + k - 1) % k, XPUSHMEM_TEAM_WORLD);
        for (int i = 0; i < 50; i++) OK(xpushmem_long_p(&a[i], me * 1000 + i, next));
        OK(xpushmem_quiet());
        OK(xpushmem_team_sync(t));
        for (int i = 0; i < 50; i++) CHECK(a[i] == prev * 1000 + i, "a[%d] = %ld from PE %d", i, a[i], prev);
        xpushmem_team_t bad = 5;
        CHECK(xpushmem_team_of_members(pes, k, (uint64_t)me, &bad) == XPUSHMEM_ERROR_MISMATCH || k == 1,
              "mismatched tags: %s", xpushmem_last_error());
        CHECK(k == 1 || bad == XPUSHMEM_TEAM_INVALID, "a failed creation leaves XPUSHMEM_TEAM_INVALID");
        OK(xpushmem_team_sync(t));
        OK(xpushmem_team_free(t, a));
        OK(xpushmem_team_destroy(t));
    }
    int twice[2] = {me, me};
    xpushmem_team_t none = 5;
    CHECK(xpushmem_team_of_members(twice, 2, 0, &none) == XPUSHMEM_ERROR_INVALID_ARGUMENT && none == XPUSHMEM_TEAM_INVALID,
          "a PE listed twice: %s", xpushmem_last_error());
    OK(xpushmem_barrier_all());
    OK(xpushmem_finalize());
    printf("native_team_members OK on PE %d of %d\n", me, npes);
    return 0;
}
