/* Real functions for libfabric's static-inline calls (see shim.h). Each forwards its arguments unchanged. */
#include "shim.h"

uint32_t xfi_header_version(void) { return FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION); }
struct fi_info *xfi_allocinfo(void) { return fi_allocinfo(); }
int xfi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context) {
    return fi_fabric(attr, fabric, context);
}
int xfi_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain, void *context) {
    return fi_domain(fabric, info, domain, context);
}
int xfi_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep, void *context) {
    return fi_endpoint(domain, info, ep, context);
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
