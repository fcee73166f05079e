/* Real functions for libfabric's static-inline calls (see shim.h), and libfabric itself loaded on first use.
 *
 * libfabric is opened with dlopen by xfi_load, not linked: a process that never uses the fabric transport never
 * loads it, nor the provider libraries it depends on (Debian's build pulls in libpsm2, whose load-time
 * constructor installs handlers for SIGSEGV, SIGABRT, ... that turn abort() into exit(1) and write *.btr files
 * into the working directory), and static links need no -lfabric. The handlers provider libraries install while
 * they are loaded or initialised (dlopen, fi_getinfo, fi_fabric, fi_domain, fi_endpoint) are put back as they were. The few exported functions are called through pointers; every other
 * call is an inline wrapper over the objects' ops tables and forwards its arguments unchanged. */
#define _GNU_SOURCE
#include "shim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static struct {
    int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *, struct fi_info **);
    void (*freeinfo)(struct fi_info *);
    struct fi_info *(*dupinfo)(const struct fi_info *);
    const char *(*strerror)(int);
    uint32_t (*version)(void);
    int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
} fx;
static int load_status = -1; /* -1 not tried, 0 loaded, 1 failed */
static char load_error[512];
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

/* Signal dispositions around calls that load or initialise providers: their constructors and init functions
 * (libpsm2's among them) install handlers for SIGSEGV, SIGABRT, ...; every one they change is put back. */
struct xfi_signals {
    struct sigaction before[NSIG];
    int saved[NSIG];
};
static void signals_save(struct xfi_signals *g) {
    for (int s = 1; s < NSIG; s++) {
        g->saved[s] = s != SIGKILL && s != SIGSTOP && sigaction(s, NULL, &g->before[s]) == 0;
    }
}
static void signals_restore(const struct xfi_signals *g) {
    for (int s = 1; s < NSIG; s++) {
        struct sigaction now;
        if (g->saved[s] && sigaction(s, NULL, &now) == 0 && now.sa_handler != g->before[s].sa_handler) {
            sigaction(s, &g->before[s], NULL);
        }
    }
}

static int load_locked(void) {
    struct xfi_signals g;
    signals_save(&g);
    void *h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
    signals_restore(&g);
    if (h == NULL) {
        const char *e = dlerror();
        snprintf(load_error, sizeof load_error, "dlopen(libfabric.so.1): %s", e ? e : "unknown error");
        return 1;
    }
#define XFI_SYM(field, name)                                                                                     \
    do {                                                                                                         \
        *(void **)&fx.field = dlsym(h, name);                                                                    \
        if (fx.field == NULL) {                                                                                  \
            snprintf(load_error, sizeof load_error, "libfabric.so.1 has no symbol %s", name);                    \
            return 1;                                                                                            \
        }                                                                                                        \
    } while (0)
    XFI_SYM(getinfo, "fi_getinfo");
    XFI_SYM(freeinfo, "fi_freeinfo");
    XFI_SYM(dupinfo, "fi_dupinfo");
    XFI_SYM(strerror, "fi_strerror");
    XFI_SYM(version, "fi_version");
    XFI_SYM(fabric, "fi_fabric");
#undef XFI_SYM
    return 0;
}

const char *xfi_load(void) {
    pthread_mutex_lock(&load_lock);
    if (load_status < 0) {
        load_status = load_locked();
    }
    int st = load_status;
    pthread_mutex_unlock(&load_lock);
    return st == 0 ? NULL : load_error;
}

uint32_t xfi_header_version(void) { return FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION); }
uint32_t xfi_version(void) { return fx.version(); }
int xfi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
                const struct fi_info *hints, struct fi_info **info) {
    struct xfi_signals g;
    signals_save(&g);
    int r = fx.getinfo(version, node, service, flags, hints, info);
    signals_restore(&g);
    return r;
}
void xfi_freeinfo(struct fi_info *info) { fx.freeinfo(info); }
struct fi_info *xfi_dupinfo(const struct fi_info *info) { return fx.dupinfo(info); }
const char *xfi_strerror(int errnum) { return fx.strerror ? fx.strerror(errnum) : strerror(errnum); }
struct fi_info *xfi_allocinfo(void) { return fx.dupinfo(NULL); }
int xfi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context) {
    struct xfi_signals g;
    signals_save(&g);
    int r = fx.fabric(attr, fabric, context);
    signals_restore(&g);
    return r;
}
int xfi_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain, void *context) {
    struct xfi_signals g;
    signals_save(&g);
    int r = fi_domain(fabric, info, domain, context);
    signals_restore(&g);
    return r;
}
int xfi_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep, void *context) {
    struct xfi_signals g;
    signals_save(&g);
    int r = fi_endpoint(domain, info, ep, context);
    signals_restore(&g);
    return r;
}
int xfi_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av, void *context) {
    return fi_av_open(domain, attr, av, context);
}
int xfi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq, void *context) {
    return fi_cq_open(domain, attr, cq, context);
}
int xfi_ep_bind(struct fid_ep *ep, struct fid *bfid, uint64_t flags) { return fi_ep_bind(ep, bfid, flags); }
int xfi_enable(struct fid_ep *ep) { return fi_enable(ep); }
int xfi_getname(struct fid *fid, void *addr, size_t *addrlen) { return fi_getname(fid, addr, addrlen); }
int xfi_av_insert(struct fid_av *av, const void *addr, size_t count, fi_addr_t *fi_addr, uint64_t flags,
                  void *context) {
    return fi_av_insert(av, addr, count, fi_addr, flags, context);
}
int xfi_mr_reg(struct fid_domain *domain, const void *buf, size_t len, uint64_t acc, uint64_t offset,
               uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context) {
    return fi_mr_reg(domain, buf, len, acc, offset, requested_key, flags, mr, context);
}
uint64_t xfi_mr_key(struct fid_mr *mr) { return fi_mr_key(mr); }
void *xfi_mr_desc(struct fid_mr *mr) { return fi_mr_desc(mr); }
int xfi_mr_bind(struct fid_mr *mr, struct fid *bfid, uint64_t flags) { return fi_mr_bind(mr, bfid, flags); }
int xfi_mr_enable(struct fid_mr *mr) { return fi_mr_enable(mr); }
int xfi_close(struct fid *fid) { return fi_close(fid); }
ssize_t xfi_cq_read(struct fid_cq *cq, void *buf, size_t count) { return fi_cq_read(cq, buf, count); }
ssize_t xfi_cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf, uint64_t flags) {
    return fi_cq_readerr(cq, buf, flags);
}
const char *xfi_cq_strerror(struct fid_cq *cq, int prov_errno, const void *err_data, char *buf, size_t len) {
    return fi_cq_strerror(cq, prov_errno, err_data, buf, len);
}
ssize_t xfi_write(struct fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dest_addr, uint64_t addr,
                  uint64_t key, void *context) {
    return fi_write(ep, buf, len, desc, dest_addr, addr, key, context);
}
ssize_t xfi_writemsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags) {
    return fi_writemsg(ep, msg, flags);
}
ssize_t xfi_read(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src_addr, uint64_t addr,
                 uint64_t key, void *context) {
    return fi_read(ep, buf, len, desc, src_addr, addr, key, context);
}
ssize_t xfi_atomicmsg(struct fid_ep *ep, const struct fi_msg_atomic *msg, uint64_t flags) {
    return fi_atomicmsg(ep, msg, flags);
}
ssize_t xfi_fetch_atomic(struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
                         void *result_desc, fi_addr_t dest_addr, uint64_t addr, uint64_t key,
                         enum fi_datatype datatype, enum fi_op op, void *context) {
    return fi_fetch_atomic(ep, buf, count, desc, result, result_desc, dest_addr, addr, key, datatype, op, context);
}
ssize_t xfi_compare_atomic(struct fid_ep *ep, const void *buf, size_t count, void *desc, const void *compare,
                           void *compare_desc, void *result, void *result_desc, fi_addr_t dest_addr,
                           uint64_t addr, uint64_t key, enum fi_datatype datatype, enum fi_op op, void *context) {
    return fi_compare_atomic(ep, buf, count, desc, compare, compare_desc, result, result_desc, dest_addr, addr, key,
                             datatype, op, context);
}
int xfi_query_atomic(struct fid_domain *domain, enum fi_datatype datatype, enum fi_op op,
                     struct fi_atomic_attr *attr, uint64_t flags) {
    return fi_query_atomic(domain, datatype, op, attr, flags);
}
int xfi_mr_regattr(struct fid_domain *domain, const struct fi_mr_attr *attr, uint64_t flags, struct fid_mr **mr) {
    return fi_mr_regattr(domain, attr, flags, mr);
}
ssize_t xfi_send(struct fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dest_addr, void *context) {
    return fi_send(ep, buf, len, desc, dest_addr, context);
}
ssize_t xfi_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src_addr, void *context) {
    return fi_recv(ep, buf, len, desc, src_addr, context);
}
ssize_t xfi_trecv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src_addr, uint64_t tag, uint64_t ignore, void *context) {
    return fi_trecv(ep, buf, len, desc, src_addr, tag, ignore, context);
}
int xfi_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr, struct fid_cntr **cntr, void *context) {
    return fi_cntr_open(domain, attr, cntr, context);
}
uint64_t xfi_cntr_read(struct fid_cntr *cntr) { return fi_cntr_read(cntr); }
uint64_t xfi_cntr_readerr(struct fid_cntr *cntr) { return fi_cntr_readerr(cntr); }
