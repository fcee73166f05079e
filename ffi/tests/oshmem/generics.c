/* The C11 generic interfaces over every type the specification lists for them (OpenSHMEM 1.5, section 9 and
 * tables 5, 6, 7, 8, 10, 11): each generic is called with each of its types, with and without a context where the
 * specification has the context form. That it compiles is the first check (a missing association does not);
 * each call's result is then checked here on globals. */
#include "check.h"
#include <complex.h>

#define NE 4
#define MAXPE 8

/* (C type, name) of each type set */
#define RMA_TYPES(X)                                                                                  \
    X(float, f) X(double, d) X(long double, ld) X(char, c) X(signed char, sc) X(short, s) X(int, i)   \
    X(long, l) X(long long, ll) X(unsigned char, uc) X(unsigned short, us) X(unsigned int, ui)        \
    X(unsigned long, ul) X(unsigned long long, ull)
#define AMO_TYPES(X) X(int, i) X(long, l) X(long long, ll) X(unsigned int, ui) X(unsigned long, ul) X(unsigned long long, ull)
#define EXT_TYPES(X) AMO_TYPES(X) X(float, f) X(double, d)
#define BIT_TYPES(X) X(unsigned int, ui) X(unsigned long, ul) X(unsigned long long, ull) X(int, i) X(long, l)
#define SYNC_TYPES(X)                                                                                 \
    X(short, s) X(int, i) X(long, l) X(long long, ll) X(unsigned short, us) X(unsigned int, ui)       \
    X(unsigned long, ul) X(unsigned long long, ull)
#define RBIT_TYPES(X)                                                                                 \
    X(unsigned char, uc) X(unsigned short, us) X(unsigned int, ui) X(unsigned long, ul)               \
    X(unsigned long long, ull) X(signed char, sc) X(short, s) X(int, i) X(long, l)
#define RARITH_TYPES(X)                                                                               \
    X(char, c) X(signed char, sc) X(short, s) X(int, i) X(long, l) X(long long, ll) X(unsigned char, uc) \
    X(unsigned short, us) X(unsigned int, ui) X(unsigned long, ul) X(unsigned long long, ull)         \
    X(float, f) X(double, d) X(long double, ld)
#define COMPLEX_TYPES(X) X(float complex, cf) X(double complex, cd)

static shmem_ctx_t ctx;
static int me, npes, right, left;
static uint64_t sig;
static int nsig;

/* ---- RMA and signals ---- */
#define RMA_DEF(T, n)                                                                                 \
    static T r_src_##n[NE], r_d1_##n[NE], r_d2_##n[NE], r_d3_##n[NE], r_d4_##n[NE], r_d5_##n[2 * NE], \
        r_d6_##n[2 * NE], r_s1_##n[NE], r_s2_##n[NE], r_s3_##n[NE], r_s4_##n[NE], r_p1_##n, r_p2_##n;  \
    static void rma_##n(void) {                                                                       \
        T buf[NE], buf2[NE], ibuf[2 * NE];                                                            \
        for (int i = 0; i < NE; i++) r_src_##n[i] = (T)(me * 10 + i);                                 \
        shmem_barrier_all();                                                                          \
        shmem_put(r_d1_##n, r_src_##n, NE, right);                                                   \
        shmem_put(ctx, r_d2_##n, r_src_##n, NE, right);                                              \
        shmem_put_nbi(r_d3_##n, r_src_##n, NE, right);                                               \
        shmem_put_nbi(ctx, r_d4_##n, r_src_##n, NE, right);                                          \
        shmem_iput(r_d5_##n, r_src_##n, 2, 1, NE, right);                                            \
        shmem_iput(ctx, r_d6_##n, r_src_##n, 2, 1, NE, right);                                       \
        shmem_p(&r_p1_##n, r_src_##n[1], right);                                                     \
        shmem_p(ctx, &r_p2_##n, r_src_##n[2], right);                                                \
        shmem_put_signal(r_s1_##n, r_src_##n, NE, &sig, 1, SHMEM_SIGNAL_ADD, right);                 \
        shmem_put_signal(ctx, r_s2_##n, r_src_##n, NE, &sig, 1, SHMEM_SIGNAL_ADD, right);            \
        shmem_put_signal_nbi(r_s3_##n, r_src_##n, NE, &sig, 1, SHMEM_SIGNAL_ADD, right);             \
        shmem_put_signal_nbi(ctx, r_s4_##n, r_src_##n, NE, &sig, 1, SHMEM_SIGNAL_ADD, right);        \
        nsig += 4;                                                                                    \
        shmem_quiet();                                                                                \
        shmem_ctx_quiet(ctx);                                                                         \
        shmem_barrier_all();                                                                          \
        for (int i = 0; i < NE; i++) {                                                                \
            T want = (T)(left * 10 + i);                                                              \
            CHECK(r_d1_##n[i] == want && r_d2_##n[i] == want && r_d3_##n[i] == want &&                \
                      r_d4_##n[i] == want && r_d5_##n[2 * i] == want && r_d6_##n[2 * i] == want &&    \
                      r_s1_##n[i] == want && r_s2_##n[i] == want && r_s3_##n[i] == want &&            \
                      r_s4_##n[i] == want,                                                            \
                  #T " put forms [%d]", i);                                                           \
        }                                                                                             \
        CHECK(r_p1_##n == (T)(left * 10 + 1) && r_p2_##n == (T)(left * 10 + 2), #T " p");            \
        CHECK(shmem_g(&r_src_##n[3], right) == (T)(right * 10 + 3), #T " g");                        \
        CHECK(shmem_g(ctx, &r_src_##n[0], right) == (T)(right * 10), #T " ctx g");                   \
        shmem_get(buf, r_src_##n, NE, right);                                                        \
        shmem_get(ctx, buf2, r_src_##n, NE, right);                                                  \
        for (int i = 0; i < NE; i++) CHECK(buf[i] == (T)(right * 10 + i) && buf2[i] == buf[i], #T " get [%d]", i); \
        shmem_get_nbi(buf, r_src_##n, NE, left);                                                     \
        shmem_get_nbi(ctx, buf2, r_src_##n, NE, left);                                               \
        shmem_quiet();                                                                                \
        shmem_ctx_quiet(ctx);                                                                         \
        for (int i = 0; i < NE; i++) CHECK(buf[i] == (T)(left * 10 + i) && buf2[i] == buf[i], #T " get_nbi [%d]", i); \
        shmem_iget(ibuf, r_src_##n, 2, 1, NE, right);                                                \
        for (int i = 0; i < NE; i++) CHECK(ibuf[2 * i] == (T)(right * 10 + i), #T " iget [%d]", i);  \
        shmem_iget(ctx, ibuf, r_src_##n, 1, 2, NE / 2, left);                                        \
        for (int i = 0; i < NE / 2; i++) CHECK(ibuf[i] == (T)(left * 10 + 2 * i), #T " ctx iget [%d]", i); \
        shmem_barrier_all();                                                                          \
    }
RMA_TYPES(RMA_DEF)

/* ---- standard AMOs (on PE 0): 12 increments per PE ---- */
#define AMO_DEF(T, n)                                                                                 \
    static T a_##n;                                                                                   \
    static void amo_##n(void) {                                                                       \
        T f;                                                                                          \
        shmem_atomic_add(&a_##n, (T)1, 0);                                                            \
        shmem_atomic_add(ctx, &a_##n, (T)1, 0);                                                       \
        shmem_atomic_inc(&a_##n, 0);                                                                  \
        shmem_atomic_inc(ctx, &a_##n, 0);                                                             \
        (void)shmem_atomic_fetch_add(&a_##n, (T)1, 0);                                                \
        (void)shmem_atomic_fetch_add(ctx, &a_##n, (T)1, 0);                                           \
        (void)shmem_atomic_fetch_inc(&a_##n, 0);                                                      \
        (void)shmem_atomic_fetch_inc(ctx, &a_##n, 0);                                                 \
        shmem_atomic_fetch_add_nbi(&f, &a_##n, (T)1, 0);                                              \
        shmem_atomic_fetch_add_nbi(ctx, &f, &a_##n, (T)1, 0);                                         \
        shmem_atomic_fetch_inc_nbi(&f, &a_##n, 0);                                                    \
        shmem_atomic_fetch_inc_nbi(ctx, &f, &a_##n, 0);                                               \
        CHECK(shmem_atomic_compare_swap(&a_##n, (T)5000, (T)1, 0) != (T)5000, #T " compare_swap");    \
        CHECK(shmem_atomic_compare_swap(ctx, &a_##n, (T)5000, (T)1, 0) != (T)5000, #T " ctx cswap");  \
        shmem_atomic_compare_swap_nbi(&f, &a_##n, (T)5000, (T)1, 0);                                  \
        shmem_atomic_compare_swap_nbi(ctx, &f, &a_##n, (T)5000, (T)1, 0);                             \
        shmem_quiet();                                                                                \
        shmem_barrier_all();                                                                          \
        CHECK(shmem_atomic_fetch(&a_##n, 0) == (T)(12 * npes), #T " amo total");                      \
        shmem_barrier_all();                                                                          \
    }
AMO_TYPES(AMO_DEF)

/* ---- extended AMOs: set, fetch, swap (each PE writes its right neighbour's copy) ---- */
#define EXT_DEF(T, n)                                                                                 \
    static T e1_##n, e2_##n, e3_##n, e4_##n;                                                          \
    static void ext_##n(void) {                                                                       \
        T f = (T)0, g = (T)0;                                                                         \
        shmem_atomic_set(&e1_##n, (T)(me + 1), right);                                                \
        shmem_atomic_set(ctx, &e2_##n, (T)(me + 2), right);                                           \
        CHECK(shmem_atomic_swap(&e3_##n, (T)(me + 3), right) == (T)0, #T " swap");                    \
        CHECK(shmem_atomic_swap(ctx, &e4_##n, (T)(me + 4), right) == (T)0, #T " ctx swap");           \
        shmem_barrier_all();                                                                          \
        CHECK(shmem_atomic_fetch(&e1_##n, me) == (T)(left + 1), #T " fetch");                         \
        CHECK(shmem_atomic_fetch(ctx, &e2_##n, me) == (T)(left + 2), #T " ctx fetch");                \
        shmem_atomic_fetch_nbi(&f, &e3_##n, me);                                                      \
        shmem_atomic_fetch_nbi(ctx, &g, &e4_##n, me);                                                 \
        shmem_quiet();                                                                                \
        CHECK(f == (T)(left + 3) && g == (T)(left + 4), #T " fetch_nbi");                             \
        shmem_atomic_swap_nbi(&f, &e3_##n, (T)0, me);                                                 \
        shmem_atomic_swap_nbi(ctx, &g, &e4_##n, (T)0, me);                                            \
        shmem_quiet();                                                                                \
        CHECK(f == (T)(left + 3) && g == (T)(left + 4) && e3_##n == (T)0, #T " swap_nbi");            \
        shmem_barrier_all();                                                                          \
    }
EXT_TYPES(EXT_DEF)

/* ---- bitwise AMOs (on PE 0): every PE sets its bit with or, then and/xor leave it ---- */
#define BIT_DEF(T, n)                                                                                 \
    static T b_##n, b2_##n;                                                                           \
    static void bit_##n(void) {                                                                       \
        T f;                                                                                          \
        shmem_atomic_or(&b_##n, (T)(1 << me), 0);                                                     \
        (void)shmem_atomic_fetch_or(ctx, &b_##n, (T)(1 << me), 0);                                    \
        shmem_atomic_fetch_or_nbi(&f, &b_##n, (T)(1 << me), 0);                                       \
        shmem_atomic_fetch_or_nbi(ctx, &f, &b_##n, (T)(1 << me), 0);                                  \
        shmem_atomic_or(ctx, &b2_##n, (T)(1 << me), 0);                                               \
        shmem_atomic_and(&b_##n, (T)~0, 0);                                                           \
        (void)shmem_atomic_fetch_and(&b_##n, (T)~0, 0);                                               \
        shmem_atomic_and(ctx, &b_##n, (T)~0, 0);                                                      \
        (void)shmem_atomic_fetch_and(ctx, &b_##n, (T)~0, 0);                                          \
        shmem_atomic_fetch_and_nbi(&f, &b_##n, (T)~0, 0);                                             \
        shmem_atomic_fetch_and_nbi(ctx, &f, &b_##n, (T)~0, 0);                                        \
        shmem_atomic_xor(&b2_##n, (T)(1 << me), 0);                                                   \
        (void)shmem_atomic_fetch_xor(&b2_##n, (T)(1 << me), 0);                                       \
        shmem_atomic_xor(ctx, &b2_##n, (T)(1 << me), 0);                                              \
        (void)shmem_atomic_fetch_xor(ctx, &b2_##n, (T)(1 << me), 0);                                  \
        shmem_atomic_fetch_xor_nbi(&f, &b2_##n, (T)(1 << me), 0);                                     \
        shmem_atomic_fetch_xor_nbi(ctx, &f, &b2_##n, (T)(1 << me), 0);                                \
        shmem_quiet();                                                                                \
        shmem_barrier_all();                                                                          \
        T all = (T)((1 << npes) - 1);                                                                 \
        CHECK(shmem_atomic_fetch(&b_##n, 0) == all, #T " or/and");                                   \
        CHECK(shmem_atomic_fetch(&b2_##n, 0) == all, #T " xor (set, then xored 6 times)");             \
        shmem_barrier_all();                                                                          \
    }
BIT_TYPES(BIT_DEF)

/* ---- point-to-point synchronisation: PE p sets slot p of every PE to p + 1 ---- */
#define SYNC_DEF(T, n)                                                                                \
    static T w_##n[MAXPE];                                                                            \
    static void sync_##n(void) {                                                                      \
        size_t idx[MAXPE], n_ = (size_t)npes;                                                         \
        T v[MAXPE];                                                                                   \
        int st[MAXPE] = {0};                                                                          \
        for (int i = 0; i < npes; i++) v[i] = (T)(i + 1);                                             \
        CHECK(shmem_test(&w_##n[me], SHMEM_CMP_EQ, (T)0) == 1, #T " test before");                    \
        shmem_barrier_all();                                                                          \
        for (int pe = 0; pe < npes; pe++) shmem_p(&w_##n[me], (T)(me + 1), pe);                       \
        shmem_wait_until(&w_##n[left], SHMEM_CMP_EQ, (T)(left + 1));                                  \
        shmem_wait_until_all(w_##n, n_, NULL, SHMEM_CMP_GE, (T)1);                                    \
        shmem_wait_until_all_vector(w_##n, n_, st, SHMEM_CMP_EQ, v);                                  \
        CHECK(shmem_wait_until_any(w_##n, n_, NULL, SHMEM_CMP_GE, (T)1) < n_, #T " wait_until_any");  \
        CHECK(shmem_wait_until_any_vector(w_##n, n_, NULL, SHMEM_CMP_EQ, v) < n_, #T " any_vector");  \
        CHECK(shmem_wait_until_some(w_##n, n_, idx, NULL, SHMEM_CMP_GE, (T)1) == n_, #T " some");     \
        CHECK(shmem_wait_until_some_vector(w_##n, n_, idx, st, SHMEM_CMP_EQ, v) == n_, #T " some_v"); \
        CHECK(shmem_test(&w_##n[0], SHMEM_CMP_EQ, (T)1) == 1, #T " test");                            \
        CHECK(shmem_test_all(w_##n, n_, NULL, SHMEM_CMP_GT, (T)0) == 1, #T " test_all");              \
        CHECK(shmem_test_all_vector(w_##n, n_, NULL, SHMEM_CMP_EQ, v) == 1, #T " test_all_vector");   \
        CHECK(shmem_test_any(w_##n, n_, NULL, SHMEM_CMP_EQ, (T)npes) == n_ - 1, #T " test_any");      \
        CHECK(shmem_test_any_vector(w_##n, n_, NULL, SHMEM_CMP_NE, v) == SIZE_MAX, #T " any_vector"); \
        CHECK(shmem_test_some(w_##n, n_, idx, NULL, SHMEM_CMP_EQ, (T)1) == 1 && idx[0] == 0, #T " test_some"); \
        CHECK(shmem_test_some_vector(w_##n, n_, idx, NULL, SHMEM_CMP_EQ, v) == n_, #T " test_some_v"); \
        shmem_barrier_all();                                                                          \
    }
SYNC_TYPES(SYNC_DEF)

/* ---- data-movement collectives over the world ---- */
#define COLL_DEF(T, n)                                                                                \
    static T c_src_##n[MAXPE * 2], c_dst_##n[MAXPE * 4];                                              \
    static void coll_##n(void) {                                                                      \
        for (int i = 0; i < 2 * MAXPE; i++) c_src_##n[i] = (T)(me * 10 + i % 10);                     \
        CHECK(shmem_broadcast(SHMEM_TEAM_WORLD, c_dst_##n, c_src_##n, 2, 0) == 0, #T " broadcast");   \
        CHECK(c_dst_##n[1] == (T)1, #T " broadcast value");                                           \
        CHECK(shmem_fcollect(SHMEM_TEAM_WORLD, c_dst_##n, c_src_##n, 1) == 0, #T " fcollect");        \
        for (int p = 0; p < npes; p++) CHECK(c_dst_##n[p] == (T)(p * 10), #T " fcollect [%d]", p);    \
        CHECK(shmem_collect(SHMEM_TEAM_WORLD, c_dst_##n, c_src_##n, 1) == 0, #T " collect");          \
        for (int p = 0; p < npes; p++) CHECK(c_dst_##n[p] == (T)(p * 10), #T " collect [%d]", p);     \
        CHECK(shmem_alltoall(SHMEM_TEAM_WORLD, c_dst_##n, c_src_##n, 1) == 0, #T " alltoall");        \
        for (int p = 0; p < npes; p++) CHECK(c_dst_##n[p] == (T)(p * 10 + me), #T " alltoall [%d]", p); \
        CHECK(shmem_alltoalls(SHMEM_TEAM_WORLD, c_dst_##n, c_src_##n, 2, 1, 1) == 0, #T " alltoalls"); \
        for (int p = 0; p < npes; p++) CHECK(c_dst_##n[2 * p] == (T)(p * 10 + me), #T " alltoalls [%d]", p); \
    }
RMA_TYPES(COLL_DEF)

/* ---- reductions over the world ---- */
#define RBIT_DEF(T, n)                                                                                \
    static T rb_src_##n[2], rb_dst_##n[2];                                                            \
    static void rbit_##n(void) {                                                                      \
        rb_src_##n[0] = (T)(1 << me), rb_src_##n[1] = (T)0x7f;                                        \
        CHECK(shmem_or_reduce(SHMEM_TEAM_WORLD, rb_dst_##n, rb_src_##n, 2) == 0, #T " or_reduce");    \
        CHECK(rb_dst_##n[0] == (T)((1 << npes) - 1) && rb_dst_##n[1] == (T)0x7f, #T " or");           \
        CHECK(shmem_and_reduce(SHMEM_TEAM_WORLD, rb_dst_##n, rb_src_##n, 2) == 0, #T " and_reduce");  \
        CHECK(rb_dst_##n[0] == (T)(npes == 1) && rb_dst_##n[1] == (T)0x7f, #T " and");                \
        CHECK(shmem_xor_reduce(SHMEM_TEAM_WORLD, rb_dst_##n, rb_src_##n, 2) == 0, #T " xor_reduce");  \
        CHECK(rb_dst_##n[0] == (T)((1 << npes) - 1) && rb_dst_##n[1] == (T)(npes % 2 ? 0x7f : 0), #T " xor"); \
    }
RBIT_TYPES(RBIT_DEF)

#define RARITH_DEF(T, n)                                                                              \
    static T ra_src_##n[2], ra_dst_##n[2];                                                            \
    static void rarith_##n(void) {                                                                    \
        ra_src_##n[0] = (T)(me + 1), ra_src_##n[1] = (T)(me % 2 + 1);                                 \
        CHECK(shmem_sum_reduce(SHMEM_TEAM_WORLD, ra_dst_##n, ra_src_##n, 2) == 0, #T " sum_reduce");  \
        CHECK(ra_dst_##n[0] == (T)(npes * (npes + 1) / 2), #T " sum");                                \
        CHECK(shmem_prod_reduce(SHMEM_TEAM_WORLD, ra_dst_##n, ra_src_##n, 2) == 0, #T " prod_reduce"); \
        CHECK(ra_dst_##n[1] == (T)(1 << (npes / 2)), #T " prod");                                      \
        CHECK(shmem_min_reduce(SHMEM_TEAM_WORLD, ra_dst_##n, ra_src_##n, 2) == 0, #T " min_reduce");  \
        CHECK(ra_dst_##n[0] == (T)1, #T " min");                                                      \
        CHECK(shmem_max_reduce(SHMEM_TEAM_WORLD, ra_dst_##n, ra_src_##n, 2) == 0, #T " max_reduce");  \
        CHECK(ra_dst_##n[0] == (T)npes, #T " max");                                                   \
    }
RARITH_TYPES(RARITH_DEF)

#define COMPLEX_DEF(T, n)                                                                             \
    static T z_src_##n[1], z_dst_##n[1];                                                              \
    static void complex_##n(void) {                                                                   \
        z_src_##n[0] = (T)(1 + I);                                                                    \
        CHECK(shmem_sum_reduce(SHMEM_TEAM_WORLD, z_dst_##n, z_src_##n, 1) == 0, #T " sum_reduce");    \
        CHECK(z_dst_##n[0] == (T)(npes + npes * I), #T " sum");                                       \
        CHECK(shmem_prod_reduce(SHMEM_TEAM_WORLD, z_dst_##n, z_src_##n, 1) == 0, #T " prod_reduce");  \
        T want = 1;                                                                                   \
        for (int p = 0; p < npes; p++) want *= (T)(1 + I);                                            \
        CHECK(z_dst_##n[0] == want, #T " prod");                                                      \
    }
COMPLEX_TYPES(COMPLEX_DEF)

#define CALL(T, n) rma_##n();
#define CALL_AMO(T, n) amo_##n();
#define CALL_EXT(T, n) ext_##n();
#define CALL_BIT(T, n) bit_##n();
#define CALL_SYNC(T, n) sync_##n();
#define CALL_COLL(T, n) coll_##n();
#define CALL_RBIT(T, n) rbit_##n();
#define CALL_RARITH(T, n) rarith_##n();
#define CALL_COMPLEX(T, n) complex_##n();

int main(void) {
    shmem_init();
    me = shmem_my_pe(), npes = shmem_n_pes();
    CHECK(npes <= MAXPE, "at most %d PEs", MAXPE);
    right = (me + 1) % npes, left = (me + npes - 1) % npes;
    shmem_pcontrol(1); /* the profiling control call: accepted, nothing to change */
    CHECK(shmem_ctx_create(0, &ctx) == 0, "ctx_create");
    RMA_TYPES(CALL)
    shmem_signal_wait_until(&sig, SHMEM_CMP_EQ, (uint64_t)nsig);
    AMO_TYPES(CALL_AMO)
    EXT_TYPES(CALL_EXT)
    BIT_TYPES(CALL_BIT)
    SYNC_TYPES(CALL_SYNC)
    RMA_TYPES(CALL_COLL)
    RBIT_TYPES(CALL_RBIT)
    RARITH_TYPES(CALL_RARITH)
    COMPLEX_TYPES(CALL_COMPLEX)
    shmem_ctx_destroy(ctx);
    shmem_barrier_all();
    PASS("generics");
    shmem_finalize();
    return 0;
}
