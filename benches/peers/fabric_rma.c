/* Raw libfabric reference for the fabric transport: the RMA patterns of xpushmem-perf's put_lat, put_bw and
 * put_signal_pp written directly against libfabric, between two processes (fork) on one RDM endpoint each, with
 * the same provider choice (FI_PROVIDER / first RDM provider with RMA and atomics), the same registration of one
 * region per process and the same completion rules as shmem/src/transport/fabric.rs:
 *   - a put is fi_writemsg with FI_DELIVERY_COMPLETE; quiet = wait for every completion;
 *   - put_signal = the data's write, its delivery, then the signal (fi_atomicmsg, FI_ATOMIC_WRITE of the sequence
 *     number on a 64-bit word); the receiver polls its completion queue (manual progress) until its flag reaches
 *     the number, checks the stamps and answers the same way. One-way time = round trip / 2.
 * Endpoint names and keys travel over a socketpair made before the fork; the untimed barrier between repeats goes
 * over it too while both sides keep polling their completion queues. Options and CSV rows as in common.h; impl
 * "libfabric" (provider name in the header line on stderr), npes 2.
 *
 * Build: gcc -O2 -o fabric_rma fabric_rma.c -lfabric
 * Compare: XPUSHMEM_TRANSPORT=fabric xpushmem-run -n 2 xpushmem-perf put_lat put_bw put_signal_pp
 */
#include "common.h"
#include <errno.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(call)                                                                                                  \
  do {                                                                                                               \
    int _r = (int)(call);                                                                                            \
    if (_r < 0) { fprintf(stderr, "fabric_rma: %s: %s\n", #call, fi_strerror(-_r)); exit(1); }                     \
  } while (0)

typedef struct { uint64_t key, addr; } remote_t;

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_ep *ep;
static struct fid_cq *cq;
static struct fid_av *av;
static struct fid_mr *mr_region, *mr_src;
static void *desc_src;
static fi_addr_t peer_addr;
static remote_t peer;
static int sock, me;
static long outstanding;
static uint64_t dc_flags;
static unsigned char *region; /* [flag (8 bytes, padded to 64) | data] */
static unsigned char *src;    /* source of every put (registered when the provider needs local registration) */
static size_t region_len;

static void poll_cq(void) {
  struct fi_cq_entry e[16];
  ssize_t r = fi_cq_read(cq, e, 16);
  if (r > 0) outstanding -= r;
  else if (r == -FI_EAVAIL) {
    struct fi_cq_err_entry err = {0};
    fi_cq_readerr(cq, &err, 0);
    fprintf(stderr, "fabric_rma: completion error: %s\n", fi_strerror(err.err));
    exit(1);
  } else if (r != -FI_EAGAIN) CHECK(r);
}

static void quiet(void) { while (outstanding > 0) poll_cq(); }

static void post_write(size_t off, const void *buf, size_t len) {
  struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
  struct fi_rma_iov rma = {.addr = peer.addr + off, .len = len, .key = peer.key};
  struct fi_msg_rma msg = {.msg_iov = &iov, .desc = &desc_src, .iov_count = 1, .addr = peer_addr,
                           .rma_iov = &rma, .rma_iov_count = 1, .context = NULL};
  ssize_t r;
  while ((r = fi_writemsg(ep, &msg, dc_flags)) == -FI_EAGAIN) poll_cq();
  CHECK(r);
  outstanding++;
}

static uint64_t sig_operand;
static void post_signal(uint64_t v) {
  sig_operand = v;
  struct fi_ioc ioc = {.addr = &sig_operand, .count = 1};
  struct fi_rma_ioc rioc = {.addr = peer.addr, .count = 1, .key = peer.key};
  struct fi_msg_atomic msg = {.msg_iov = &ioc, .desc = NULL, .iov_count = 1, .addr = peer_addr, .rma_iov = &rioc,
                              .rma_iov_count = 1, .datatype = FI_UINT64, .op = FI_ATOMIC_WRITE, .context = NULL};
  ssize_t r;
  while ((r = fi_atomicmsg(ep, &msg, dc_flags)) == -FI_EAGAIN) poll_cq();
  CHECK(r);
  outstanding++;
}

/* Untimed barrier over the socket; both sides keep serving the fabric meanwhile. */
static void barrier(void) {
  char b = 1;
  if (write(sock, &b, 1) != 1) { perror("barrier write"); exit(1); }
  for (;;) {
    poll_cq();
    ssize_t r = recv(sock, &b, 1, MSG_DONTWAIT);
    if (r == 1) break;
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) { fprintf(stderr, "barrier: peer gone\n"); exit(1); }
  }
  quiet();
}

static volatile uint64_t *flag(void) { return (volatile uint64_t *)region; }
static unsigned char *data(void) { return region + 64; }

static void wait_flag(uint64_t q) {
  while (__atomic_load_n(flag(), __ATOMIC_ACQUIRE) < q) poll_cq();
}

static void setup(size_t data_len) {
  struct fi_info *hints = fi_allocinfo();
  hints->caps = FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
  dc_flags = FI_DELIVERY_COMPLETE;
  if (fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info)) {
    hints->tx_attr->op_flags = 0;
    dc_flags = 0;
    CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
  }
  fi_freeinfo(hints);
  struct fi_info *pick = info;
  while (pick && !strcmp(pick->fabric_attr->prov_name, "shm")) pick = pick->next;
  if (!pick) { fprintf(stderr, "fabric_rma: no provider\n"); exit(1); }
  if (me == 0) fprintf(stderr, "fabric_rma: provider %s, domain %s, delivery-complete %s\n",
                       pick->fabric_attr->prov_name, pick->domain_attr->name, dc_flags ? "yes" : "no");
  int mr_mode = pick->domain_attr->mr_mode;
  CHECK(fi_fabric(pick->fabric_attr, &fabric, NULL));
  CHECK(fi_domain(fabric, pick, &domain, NULL));
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE};
  CHECK(fi_cq_open(domain, &cq_attr, &cq, NULL));
  struct fi_av_attr av_attr = {.type = FI_AV_TABLE, .count = 2};
  CHECK(fi_av_open(domain, &av_attr, &av, NULL));
  CHECK(fi_endpoint(domain, pick, &ep, NULL));
  CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
  CHECK(fi_ep_bind(ep, &av->fid, 0));
  CHECK(fi_enable(ep));
  region_len = 64 + data_len;
  region = aligned_alloc(4096, (region_len + 4095) / 4096 * 4096);
  src = aligned_alloc(4096, (data_len + 4095) / 4096 * 4096);
  memset(region, 0, region_len);
  CHECK(fi_mr_reg(domain, region, region_len, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 1, 0, &mr_region, NULL));
  CHECK(fi_mr_reg(domain, src, data_len, FI_READ | FI_WRITE, 0, 2, 0, &mr_src, NULL));
  if (mr_mode & FI_MR_ENDPOINT) {
    CHECK(fi_mr_bind(mr_region, &ep->fid, 0));
    CHECK(fi_mr_enable(mr_region));
    CHECK(fi_mr_bind(mr_src, &ep->fid, 0));
    CHECK(fi_mr_enable(mr_src));
  }
  desc_src = (mr_mode & FI_MR_LOCAL) ? fi_mr_desc(mr_src) : NULL;
  /* exchange: name length, name, key, address */
  char name[256];
  size_t len = sizeof name;
  CHECK(fi_getname(&ep->fid, name, &len));
  remote_t mine = {.key = fi_mr_key(mr_region), .addr = (mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)region : 0};
  char peer_name[256];
  size_t peer_len;
  if (write(sock, &len, sizeof len) != sizeof len || write(sock, name, len) != (ssize_t)len ||
      write(sock, &mine, sizeof mine) != sizeof mine || read(sock, &peer_len, sizeof peer_len) != sizeof peer_len ||
      peer_len > sizeof peer_name || read(sock, peer_name, peer_len) != (ssize_t)peer_len ||
      read(sock, &peer, sizeof peer) != sizeof peer) {
    fprintf(stderr, "fabric_rma: exchange failed\n");
    exit(1);
  }
  if (fi_av_insert(av, peer_name, 1, &peer_addr, 0, NULL) != 1) { fprintf(stderr, "fabric_rma: av_insert\n"); exit(1); }
}

/* put (blocking) + quiet, PE 0 -> PE 1 */
static double put_lat(size_t sz, long it) {
  double t = 0;
  if (me == 0) {
    double t0 = now_s();
    for (long i = 0; i < it; i++) { post_write(64, src, sz); quiet(); }
    t = (now_s() - t0) / it;
  }
  return t;
}

/* windows of w puts, then quiet, PE 0 -> PE 1 */
static double put_bw(size_t sz, long it, long w) {
  double t = 0;
  if (me == 0) {
    double t0 = now_s();
    for (long i = 0; i < it; i += w) {
      for (long k = 0; k < w; k++) post_write(64, src, sz);
      quiet();
    }
    t = (now_s() - t0) / it;
  }
  return t;
}

static uint64_t seq;
/* put_signal ping-pong; seconds one way */
static double put_signal_pp(size_t sz, long it) {
  uint64_t b = seq;
  seq += it;
  unsigned char probe[16];
  size_t k = sz < 8 ? sz : 8;
  double t0 = now_s();
  for (long i = 1; i <= it; i++) {
    uint64_t q = b + i;
    if (me == 1) {
      wait_flag(q);
      memcpy(probe, data(), k);
      if (sz >= 16) { memcpy(probe + 8, data() + sz - 8, 8); check_stamp("received message", probe, 16, q); }
      else check_stamp("received message", probe, k, q);
    }
    stamp(src, sz, q);
    post_write(64, src, sz);
    quiet(); /* delivered: now the signal */
    post_signal(q);
    if (me == 0) {
      wait_flag(q);
      memcpy(probe, data(), k);
      if (sz >= 16) { memcpy(probe + 8, data() + sz - 8, 8); check_stamp("received message", probe, 16, q); }
      else check_stamp("received message", probe, k, q);
    }
  }
  double t = (now_s() - t0) / it / 2;
  quiet();
  return t;
}

static void run(const opts_t *o, FILE *csv, const char *name, int windowed, int pingpong) {
  if (!selected(o, name, pingpong ? "sync" : "rma")) return;
  for (size_t sz = o->begin; sz <= o->end; sz *= (size_t)o->factor) {
    plan_t p = make_plan(sz, sz, o, windowed);
    cur_bench = name;
    cur_size = sz;
    double secs[o->reps];
    for (int r = -1; r < o->reps; r++) {
      long it = r < 0 ? p.warmup : p.iters;
      if (it == 0) continue;
      fill(src, sz, 0x5eed + (uint64_t)r);
      barrier();
      double t = pingpong ? put_signal_pp(sz, it) : windowed ? put_bw(sz, it, p.window) : put_lat(sz, it);
      barrier();
      if (!pingpong && me == 1) {
        /* the last put's whole payload landed */
        unsigned char *want = malloc(sz);
        fill(want, sz, 0x5eed + (uint64_t)r);
        check_bytes("last put, whole payload", data(), want, sz);
        free(want);
      }
      if (r >= 0) secs[r] = t;
    }
    if (me == 0) csv_row(csv, "libfabric", name, 2, sz, p.iters, (int)o->reps, secs, sz);
    if (sz * (size_t)o->factor > o->end) break;
  }
}

int main(int argc, char **argv) {
  opts_t o;
  parse_opts(argc, argv, &o);
  inject_fault = o.fault;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) { perror("socketpair"); return 1; }
  FILE *csv = csv_open(o.csv);
  pid_t pid = fork();
  me = pid == 0 ? 1 : 0;
  sock = sv[me];
  close(sv[1 - me]);
  bind_cpu(o.bind, me, 2);
  setup(o.end);
  run(&o, csv, "put_lat", 0, 0);
  run(&o, csv, "put_bw", 1, 0);
  run(&o, csv, "put_signal_pp", 0, 1);
  barrier();
  if (me == 1) _exit(0);
  int st;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st)) { fprintf(stderr, "fabric_rma: child failed\n"); return 1; }
  if (csv != stdout) fclose(csv);
  return 0;
}
