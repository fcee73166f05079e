/* A 2-D Jacobi stencil, rows split over the PEs, halo rows exchanged with puts and a barrier, the residual by a
 * max reduction; the result is compared with a serial run of the same sweeps on every PE. */
#include <math.h>
#include <stdio.h>
#include <shmem.h>

#define NX 32
#define NY_TOTAL 48
#define STEPS 40

static double serial[NY_TOTAL + 2][NX + 2], serial_new[NY_TOTAL + 2][NX + 2];

static double boundary(int gy, int x) { return gy == 0 ? 1.0 : (x == 0 ? 0.5 : 0.0); }

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    if (NY_TOTAL % npes) { printf("NY_TOTAL %% npes\n"); return 1; }
    int ny = NY_TOTAL / npes, y0 = me * ny; /* my rows: global 1 + y0 .. y0 + ny */
    double (*u)[NX + 2] = shmem_calloc((size_t)(ny + 2) * (NX + 2), sizeof(double));
    double (*un)[NX + 2] = shmem_calloc((size_t)(ny + 2) * (NX + 2), sizeof(double));
    double *res = shmem_malloc(sizeof(double)), *maxres = shmem_malloc(sizeof(double));
    for (int y = 0; y < ny + 2; y++)
        for (int x = 0; x < NX + 2; x++) {
            int gy = y0 + y;
            double b = (gy == 0 || gy == NY_TOTAL + 1 || x == 0 || x == NX + 1) ? boundary(gy, x) : 0.0;
            u[y][x] = un[y][x] = b;
        }
    for (int y = 0; y < NY_TOTAL + 2; y++)
        for (int x = 0; x < NX + 2; x++)
            serial[y][x] = serial_new[y][x] = (y == 0 || y == NY_TOTAL + 1 || x == 0 || x == NX + 1) ? boundary(y, x) : 0.0;
    shmem_barrier_all();
    for (int s = 0; s < STEPS; s++) {
        /* halos: my first row to the PE above's bottom halo, my last row to the PE below's top halo */
        if (me > 0) shmem_double_put(&u[ny + 1][0], &u[1][0], NX + 2, me - 1);
        if (me < npes - 1) shmem_double_put(&u[0][0], &u[ny][0], NX + 2, me + 1);
        shmem_barrier_all();
        double r = 0;
        for (int y = 1; y <= ny; y++)
            for (int x = 1; x <= NX; x++) {
                un[y][x] = 0.25 * (u[y - 1][x] + u[y + 1][x] + u[y][x - 1] + u[y][x + 1]);
                r = fmax(r, fabs(un[y][x] - u[y][x]));
            }
        for (int y = 1; y <= ny; y++)
            for (int x = 1; x <= NX; x++) u[y][x] = un[y][x];
        *res = r;
        shmem_barrier_all(); /* nobody writes my halo before I computed */
        if (shmem_double_max_reduce(SHMEM_TEAM_WORLD, maxres, res, 1) != 0) return 1;
        double sr = 0;
        for (int y = 1; y <= NY_TOTAL; y++)
            for (int x = 1; x <= NX; x++) {
                serial_new[y][x] = 0.25 * (serial[y - 1][x] + serial[y + 1][x] + serial[y][x - 1] + serial[y][x + 1]);
                sr = fmax(sr, fabs(serial_new[y][x] - serial[y][x]));
            }
        for (int y = 1; y <= NY_TOTAL; y++)
            for (int x = 1; x <= NX; x++) serial[y][x] = serial_new[y][x];
        if (fabs(*maxres - sr) > 1e-12) { printf("step %d: residual %g, serial %g\n", s, *maxres, sr); return 1; }
    }
    for (int y = 1; y <= ny; y++)
        for (int x = 1; x <= NX; x++)
            if (fabs(u[y][x] - serial[y0 + y][x]) > 1e-12) { printf("PE %d: u[%d][%d] differs\n", me, y, x); return 1; }
    shmem_free(maxres); shmem_free(res); shmem_free(un); shmem_free(u);
    printf("stencil OK on PE %d of %d\n", me, npes);
    shmem_finalize();
    return 0;
}
