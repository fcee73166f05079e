#include <stdio.h>
#include <shmem.h>

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    int major = 0, minor = 0;
    char name[SHMEM_MAX_NAME_LEN];
    shmem_info_get_version(&major, &minor);
    shmem_info_get_name(name);
    if (major != SHMEM_MAJOR_VERSION || minor != SHMEM_MINOR_VERSION) return 1;
    printf("Hello from PE %d of %d (%s, OpenSHMEM %d.%d)\n", me, npes, name, major, minor);
    printf("hello OK on PE %d of %d\n", me, npes);
    shmem_finalize();
    return 0;
}
