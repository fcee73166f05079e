/* The OpenSHMEM layer's error mode holds before shmem_init (issue 14): abort by default, so a call before init
 * stops the program with a message; with XPUSHMEM_ERROR_MODE=return the call returns and the error is recorded. */
#include "check.h"
#include <string.h>

long target;

int main(void) {
    int mode = xpushmemx_get_error_mode();
    const char *env = getenv("XPUSHMEM_ERROR_MODE");
    int want = (env != NULL && strcmp(env, "return") == 0) ? XPUSHMEMX_ERROR_MODE_RETURN : XPUSHMEMX_ERROR_MODE_ABORT;
    if (mode != want) {
        printf("error mode before init is %d, expected %d\n", mode, want);
        return 1;
    }
    printf("calling shmem_long_p before shmem_init\n");
    fflush(stdout);
    shmem_long_p(&target, 1, 0); /* aborts in abort mode */
    if (xpushmem_last_error_code() == 0 || strstr(xpushmem_last_error(), "not initialised") == NULL) {
        printf("no error recorded: %s\n", xpushmem_last_error());
        return 1;
    }
    shmem_barrier_all();
    if (shmem_malloc(64) != NULL) {
        printf("shmem_malloc before init returned memory\n");
        return 1;
    }
    shmem_init();
    PASS("preinit");
    shmem_finalize();
    return 0;
}
