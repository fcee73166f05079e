/* The libfabric calls xpushmem uses, libfabric being loaded at run time by xfi_load (see shim.c). Most of libfabric's API is static inline functions over per-object ops
 * tables (fi_write, fi_atomic, fi_cq_read, ...), which have no symbol to link against: this shim gives each one a
 * real function, xfi_NAME, with the same arguments. bindgen reads this header (and the libfabric headers it
 * includes) to generate the Rust declarations. */
#ifndef XPUSHMEM_FABRIC_SHIM_H
#define XPUSHMEM_FABRIC_SHIM_H
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

/* Loads libfabric (dlopen) once; NULL when it is loaded, else why not. Every other xfi_ call but
 * xfi_header_version and xfi_strerror needs a successful load first. Thread-safe. */
const char *xfi_load(void);
/* The API version the headers declare (FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)). */
uint32_t xfi_header_version(void);
/* libfabric's exported functions, through the loaded library. */
uint32_t xfi_version(void);
int xfi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
                const struct fi_info *hints, struct fi_info **info);
void xfi_freeinfo(struct fi_info *info);
struct fi_info *xfi_dupinfo(const struct fi_info *info);
/* fi_strerror once loaded; libc's strerror before. */
const char *xfi_strerror(int errnum);
struct fi_info *xfi_allocinfo(void);
int xfi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
int xfi_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain, void *context);
int xfi_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep, void *context);
int xfi_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av, void *context);
int xfi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq, void *context);
int xfi_ep_bind(struct fid_ep *ep, struct fid *bfid, uint64_t flags);
int xfi_enable(struct fid_ep *ep);
int xfi_getname(struct fid *fid, void *addr, size_t *addrlen);
int xfi_av_insert(struct fid_av *av, const void *addr, size_t count, fi_addr_t *fi_addr, uint64_t flags,
                  void *context);
int xfi_mr_reg(struct fid_domain *domain, const void *buf, size_t len, uint64_t acc, uint64_t offset,
               uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context);
uint64_t xfi_mr_key(struct fid_mr *mr);
void *xfi_mr_desc(struct fid_mr *mr);
int xfi_mr_bind(struct fid_mr *mr, struct fid *bfid, uint64_t flags);
int xfi_mr_enable(struct fid_mr *mr);
int xfi_close(struct fid *fid);
ssize_t xfi_cq_read(struct fid_cq *cq, void *buf, size_t count);
ssize_t xfi_cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf, uint64_t flags);
const char *xfi_cq_strerror(struct fid_cq *cq, int prov_errno, const void *err_data, char *buf, size_t len);
ssize_t xfi_write(struct fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dest_addr, uint64_t addr,
                  uint64_t key, void *context);
ssize_t xfi_writemsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags);
ssize_t xfi_read(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src_addr, uint64_t addr,
                 uint64_t key, void *context);
ssize_t xfi_atomicmsg(struct fid_ep *ep, const struct fi_msg_atomic *msg, uint64_t flags);
ssize_t xfi_fetch_atomic(struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
                         void *result_desc, fi_addr_t dest_addr, uint64_t addr, uint64_t key,
                         enum fi_datatype datatype, enum fi_op op, void *context);
ssize_t xfi_compare_atomic(struct fid_ep *ep, const void *buf, size_t count, void *desc, const void *compare,
                           void *compare_desc, void *result, void *result_desc, fi_addr_t dest_addr,
                           uint64_t addr, uint64_t key, enum fi_datatype datatype, enum fi_op op, void *context);
int xfi_query_atomic(struct fid_domain *domain, enum fi_datatype datatype, enum fi_op op,
                     struct fi_atomic_attr *attr, uint64_t flags);
/* Registration with attributes (device memory: iface FI_HMEM_ZE), and two-sided messages (the staging path of
 * device heaps whose provider lacks FI_HMEM). */
int xfi_mr_regattr(struct fid_domain *domain, const struct fi_mr_attr *attr, uint64_t flags, struct fid_mr **mr);
ssize_t xfi_send(struct fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dest_addr, void *context);
ssize_t xfi_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src_addr, void *context);
ssize_t xfi_trecv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src_addr, uint64_t tag, uint64_t ignore, void *context);
/* Completion counters (the write counter of injected puts). */
int xfi_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr, struct fid_cntr **cntr, void *context);
uint64_t xfi_cntr_read(struct fid_cntr *cntr);
uint64_t xfi_cntr_readerr(struct fid_cntr *cntr);
#endif
