/* ep.cl: expert-parallel MoE dispatch and combine (PyTorch's TokenSwitch, issue #29) as kernels over the device
 * library. Part of the op kernels' module: xpushmem_ops.cl includes it after its group sync step, status record,
 * element conversions and symm_sync (symm_mem.cl), which these kernels share. The host side is ops/src/ep/device.rs
 * (checks, digests, the routing state's layout); the algorithm and the verdicts are the host path's
 * (ops/src/ep/switch.rs, the rules of ops/src/ep/route.rs), and the tests compare the two paths.
 *
 * Vocabulary (route.rs): W ranks of the group, E experts, L = E / W per rank; a slot is one token on one
 * destination rank, a pair one (token, expert) entry of topk_idx.
 *
 * The switch's symmetric buffers (allocated once by TokenSwitch::new): `counts` (W rows of 2W + L words: slots and
 * pairs to every rank, pairs for the destination's experts), `recv` (max_recv rows, then each slot's metadata:
 * k f32 weights padded to 8 bytes, k int64 global expert ids), `comb` (the rows that come back) and `stage` (what
 * this rank sends ranks of other nodes, built here because the host proxy reads a put's source from this PE's
 * heap only: a count row, or up to max_dispatch * min(max_topk, W) rows and their metadata). A rank this device
 * maps is written directly; a rank on another node (xpushmem_ptr 0) gets the same bytes through the host proxy (the
 * device library's puts), and the sync steps reach it the same way (sync_send). A routing's
 * state (device memory the caller keeps with the routing): the counts table, scratch, slot_of[t * W + d] (the
 * token's slot index among those this rank sends rank d, or -1) and pos[i * k + j] (the expert-major output row
 * of received pair (slot i, column j), or -1). Every op starts with a sync step (the host verdict, the digest of
 * the arguments every rank must agree on); a second sync step after the puts says that every rank's data has
 * arrived; the next op's entry step is the point after which no rank still reads the buffers.
 *
 * Launch: one work-group of XPO_GROUP_SIZE items per PE. Every loop whose body copies with the whole work-group has
 * bounds that are the same on every work-item. Each loop nest is a function of its own (noinline; see
 * xpushmem_ops.cl), and no function divides and takes the remainder of the same values (llvm-spirv-14). */

/* Rows of rank d's count row: [0, W) slots to each rank, [W, 2W) pairs to each rank, [2W, 2W + L) pairs for the
 * destination's experts. */
#define EP_ROW(w, l) (2l * (long)(w) + (long)(l))

/* Slots rank s sends rank d. */
static long ep_slots(__global const long *ct, int w, long l, int s, int d) { return ct[s * EP_ROW(w, l) + d]; }

/* The first slot of rank s's tokens in rank d's receive area (sources in rank order): route.rs dispatch_base. */
__attribute__((noinline)) static long ep_dispatch_base(__global const long *ct, int w, long l, int s, int d) {
  long b = 0;
  for (int s2 = 0; s2 < s; s2++) b += ep_slots(ct, w, l, s2, d);
  return b;
}

/* The first row of rank d's returns in rank s's combine area (destinations in rank order): combine_base. */
__attribute__((noinline)) static long ep_combine_base(__global const long *ct, int w, long l, int s, int d) {
  long b = 0;
  for (int d2 = 0; d2 < d; d2++) b += ep_slots(ct, w, l, s, d2);
  return b;
}

/* Slots (layout 0) or pairs (layout 1) rank d receives. */
__attribute__((noinline)) static long ep_recv_rows(__global const long *ct, int w, long l, int d, int pairs) {
  long r = 0;
  for (int s = 0; s < w; s++) r += ct[s * EP_ROW(w, l) + (pairs ? w : 0) + d];
  return r;
}

/* Copy `bytes` from src to dst with the whole work-group (16-, 4-byte or byte granules, as aligned). */
static void ep_copy(ulong dst, ulong src, long bytes) {
  long id = get_local_id(0), g = get_local_size(0);
  if (((dst | src | (ulong)bytes) & 15ul) == 0) {
    for (long i = id; i < bytes / 16; i += g) ((__global uint4 *)dst)[i] = ((__global const uint4 *)src)[i];
  } else if (((dst | src | (ulong)bytes) & 3ul) == 0) {
    for (long i = id; i < bytes / 4; i += g) ((__global uint *)dst)[i] = ((__global const uint *)src)[i];
  } else {
    for (long i = id; i < bytes; i += g) ((__global uchar *)dst)[i] = ((__global const uchar *)src)[i];
  }
}

/* A failed verdict: code and its three arguments. */
static verdict_t ep_fail(long code, long a, long b, long c) {
  verdict_t v;
  v.code = code;
  v.a = a;
  v.b = b;
  v.c = c;
  return v;
}

/* The entry sync step of an EP kernel: this rank's verdict `mine` (the host's rejection first), the digest of what
 * every rank must agree on. Returns 1 (the status record written) when the op fails on this rank. */
static int ep_enter(__local long *slot, long region, __global const int *pes, int w, int me, uint host_err,
                    verdict_t mine, ulong digest, long status, ulong seq) {
  if (host_err) mine = ep_fail(XPO_ERR_HOST_REJECT, 0, 0, 0);
  verdict_t v = symm_sync(slot, region, pes, w, me, mine, digest);
  if (v.code && get_local_id(0) == 0) finish(status, seq, v);
  return v.code != 0;
}

/* ---- create_routing ------------------------------------------------------------------------------------------- */

/* The first bad entry of topk_idx in row-major order (route.rs plan_send): -1 or an id in [0, E). */
__attribute__((noinline)) static verdict_t ep_check_idx(__global const long *idx, long n, long k, long e) {
  for (long t = 0; t < n; t++) {
    for (long j = 0; j < k; j++) {
      long x = idx[t * k + j];
      if (x != -1 && (x < 0 || x >= e)) return ep_fail(XPO_ERR_EP_EXPERT, x, t, j);
    }
  }
  return ok();
}

__attribute__((noinline)) static void ep_fill_long(__global long *p, long len, long val) {
  for (long i = 0; i < len; i++) p[i] = val;
}

__attribute__((noinline)) static void ep_fill_int(__global int *p, long len, int val) {
  for (long i = 0; i < len; i++) p[i] = val;
}

/* This rank's send plan: send[0, W) slots and send[W, 2W) pairs for every rank, send[2W, 2W + E) pairs for every
 * expert; slot_of[t * W + d] the token's index among those sent to rank d (tokens in order), else -1. */
__attribute__((noinline)) static void ep_plan(__global const long *idx, long n, long k, int w, long l,
                                              __global long *send, __global int *slot_of) {
  for (long t = 0; t < n; t++) {
    for (long j = 0; j < k; j++) {
      long x = idx[t * k + j];
      if (x < 0) continue;
      long d = x / l;
      send[w + d] += 1;
      send[2l * w + x] += 1;
      if (slot_of[t * w + d] < 0) {
        slot_of[t * w + d] = (int)send[d];
        send[d] += 1;
      }
    }
  }
}

/* Rank d's copy of this rank's count row: slots and pairs to every rank, then pairs for d's experts. */
__attribute__((noinline)) static void ep_put_row(__global long *r, __global const long *send, int w, long l, int d) {
  for (long x = 0; x < EP_ROW(w, l); x++) r[x] = x < 2l * w ? send[x] : send[x + d * l];
}

/* Put this rank's count row into every rank's count area (row me): stored directly on a mapped rank, built in
 * the stage and put through the host proxy to another node's; 0, or the first unreachable PE + 1. */
__attribute__((noinline)) static int ep_put_counts(__global const int *pes, int w, int me, long l,
                                                   __global const long *send, long counts, long stage) {
  long at = counts + 8l * me * EP_ROW(w, l);
  for (int d = 0; d < w; d++) {
    long row = xpushmem_ptr(at, pes[d]);
    if (row != 0) {
      ep_put_row((__global long *)row, send, w, l, d);
    } else {
      ep_put_row((__global long *)stage, send, w, l, d);
      if (xpushmem_putmem(at, stage, 8ul * (ulong)EP_ROW(w, l), pes[d])) return pes[d] + 1;
    }
  }
  return 0;
}

__attribute__((noinline)) static void ep_copy_longs(__global long *dst, __global const long *src, long len) {
  for (long x = 0; x < len; x++) dst[x] = src[x];
}

/* Pairs local expert e of rank `me` receives from every rank (before: pairs of its experts 0..e). */
__attribute__((noinline)) static long ep_expert_pairs(__global const long *ct, int w, long l, long e) {
  long c = 0;
  for (int s = 0; s < w; s++) c += ct[s * EP_ROW(w, l) + 2l * w + e];
  return c;
}

__attribute__((noinline)) static void ep_expert_counts(__global const long *ct, int w, long l, __global long *out) {
  for (long e = 0; e < l; e++) out[e] = ep_expert_pairs(ct, w, l, e);
}

/* The overflow verdict (route.rs Counts::overflow: the first rank over max_recv, the same on every rank). */
__attribute__((noinline)) static verdict_t ep_overflow(__global const long *ct, int w, long l, int layout,
                                                       long max_recv) {
  for (int d = 0; d < w; d++) {
    long rows = ep_recv_rows(ct, w, l, d, layout);
    if (rows > max_recv) return ep_fail(XPO_ERR_EP_OVERFLOW, d, rows, max_recv);
  }
  return ok();
}

/* Keep the counts table in the routing's state; info[0] = received rows in the layout, info[1] = received slots,
 * info[2 + e] = pairs local expert e receives. Returns the overflow verdict. */
static verdict_t ep_take_counts(__global const long *counts, int w, int me, long l, int layout, long max_recv,
                                __global long *ct, __global long *info) {
  ep_copy_longs(ct, counts, w * EP_ROW(w, l));
  info[0] = ep_recv_rows(ct, w, l, me, layout);
  info[1] = ep_recv_rows(ct, w, l, me, 0);
  ep_expert_counts(ct, w, l, info + 2);
  return ep_overflow(ct, w, l, layout, max_recv);
}

/* create_routing: check topk_idx [n, k] (entry verdict), plan the sends, exchange the count rows, keep every
 * rank's counts in the routing's state and decide the overflow verdict (the same on every rank). */
XPO_KERNEL void xpo_ep_route(long region, long pes_addr, int w, int me, long idx_addr, long n, long k, long e,
                             int layout, long max_recv, long counts, long ct, long info, long send, long slot_of,
                             long pos, long stage, ulong digest, uint host_err, long status, ulong seq) {
  __local long slot[4];
  __global const int *pes = (__global const int *)pes_addr;
  __global const long *idx = (__global const long *)idx_addr;
  long l = e / w;
  verdict_t v = !host_err && get_local_id(0) == 0 ? ep_check_idx(idx, n, k, e) : ok();
  if (ep_enter(slot, region, pes, w, me, host_err, v, digest, status, seq)) return;
  if (get_local_id(0) == 0) {
    ep_fill_long((__global long *)send, 2l * w + e, 0);
    ep_fill_int((__global int *)slot_of, n * w, -1);
    ep_plan(idx, n, k, w, l, (__global long *)send, (__global int *)slot_of);
    int bad = ep_put_counts(pes, w, me, l, (__global const long *)send, counts, stage);
    if (bad) {
      v.code = XPO_ERR_DEVICE;
      v.a = bad - 1;
    }
  }
  v = symm_sync(slot, region, pes, w, me, v, 0);
  if (get_local_id(0) == 0) {
    if (!v.code)
      v = ep_take_counts((__global const long *)counts, w, me, l, layout, max_recv, (__global long *)ct,
                         (__global long *)info);
    finish(status, seq, v);
  }
}

/* ---- dispatch ------------------------------------------------------------------------------------------------- */

/* Put every token this rank sends rank d into d's receive area (row, then the slot's k weights and k global expert
 * ids at meta0 + slot * ms, the ids at byte wo of the slot's metadata: switch.rs meta_bytes): the row with the whole work-group, the metadata by work-item 0. */
__attribute__((noinline)) static void ep_send_rows(__global const long *idx, __global const float *wts, ulong tokens,
                                                   long n, long k, long rb, long ms, long wo, int w, int d,
                                                   __global const int *slot_of, long base, ulong rows, ulong meta) {
  for (long t = 0; t < n; t++) {
    long i = slot_of[t * w + d];
    if (i < 0) continue;
    ep_copy(rows + (ulong)((base + i) * rb), tokens + (ulong)(t * rb), rb);
    if (get_local_id(0) == 0) {
      ulong m = meta + (ulong)((base + i) * ms);
      for (long j = 0; j < k; j++) {
        ((__global float *)m)[j] = wts[t * k + j];
        ((__global long *)(m + (ulong)wo))[j] = idx[t * k + j];
      }
    }
  }
}

/* The sends to every rank; 0, or the first unreachable PE + 1. A mapped rank's slots are stored directly; another
 * node's are built in the stage (this PE's heap, where the host proxy reads sources), each rank's in a part of its
 * own: rows from byte 0, rank d's from row combine_base(me, d) (the slots this rank sends the ranks before d; all
 * of them fit: at most n * min(k, W) rows, switch.rs sizes the stage for that), metadata likewise from the first
 * 8-aligned byte past n * min(k, W) rows. Each part goes with two non-blocking work-group puts, so the proxy moves
 * one rank's while the next one's is built; one quiet after them all (ep_quiet_sends) completes them before the
 * sync step after the sends signals behind them. */
__attribute__((noinline)) static int ep_sends(__global const int *pes, int w, int me, long l,
                                              __global const long *ct, __global const long *idx,
                                              __global const float *wts, ulong tokens, long n, long k, long rb,
                                              long ms, long wo, __global const int *slot_of, long recv,
                                              long meta0, long stage) {
  int bad = 0;
  long cap = n * (k < (long)w ? k : (long)w);
  long smeta = stage + ((cap * rb + 7l) & ~7l);
  for (int d = 0; d < w; d++) {
    long base = ep_dispatch_base(ct, w, l, me, d);
    long rows = xpushmem_ptr(recv, pes[d]);
    if (rows != 0) {
      long meta = xpushmem_ptr(recv + meta0, pes[d]);
      ep_send_rows(idx, wts, tokens, n, k, rb, ms, wo, w, d, slot_of, base, (ulong)rows, (ulong)meta);
      continue;
    }
    long cnt = ep_slots(ct, w, l, me, d);
    if (cnt == 0) continue;
    long at = ep_combine_base(ct, w, l, me, d);
    ep_send_rows(idx, wts, tokens, n, k, rb, ms, wo, w, d, slot_of, at, (ulong)stage, (ulong)smeta);
    wg_barrier();
    int e = xpushmemx_putmem_nbi_work_group(recv + base * rb, stage + at * rb, (ulong)(cnt * rb), pes[d]);
    e |= xpushmemx_putmem_nbi_work_group(recv + meta0 + base * ms, smeta + at * ms, (ulong)(cnt * ms), pes[d]);
    if (e && !bad) bad = pes[d] + 1;
  }
  return bad;
}

/* The first rank on another node (not mapped here) this rank sends slots to: its PE + 1, or 0. */
__attribute__((noinline)) static int ep_first_proxied(__global const int *pes, int w, int me, long l,
                                                      __global const long *ct, long recv) {
  for (int d = 0; d < w; d++) {
    if (ep_slots(ct, w, l, me, d) != 0 && xpushmem_ptr(recv, pes[d]) == 0) return pes[d] + 1;
  }
  return 0;
}

/* After ep_sends: complete its non-blocking puts (one quiet of the proxy, work-item 0) when it made any; `bad`, or
 * on a failed quiet the first proxied PE + 1. */
__attribute__((noinline)) static int ep_quiet_sends(__global const int *pes, int w, int me, long l,
                                                    __global const long *ct, long recv, int bad) {
  int far = ep_first_proxied(pes, w, me, l, ct, recv);
  if (far == 0) return bad;
  wg_barrier();
  int e = get_local_id(0) == 0 ? xpushmem_quiet() : 0;
  wg_barrier();
  return bad ? bad : (e ? far : 0);
}

/* Flat: each received slot's k local expert ids (-1 and weight 0 where the expert lives elsewhere). */
__attribute__((noinline)) static void ep_flat_meta(ulong meta, long slots, long k, long ms, long wo, long first,
                                                   long l, __global float *ow, __global long *oi) {
  for (long i = get_local_id(0); i < slots; i += get_local_size(0)) {
    ulong m = meta + (ulong)(i * ms);
    for (long j = 0; j < k; j++) {
      long x = ((__global const long *)(m + (ulong)wo))[j];
      int mine = x >= first && x < first + l;
      oi[i * k + j] = mine ? x - first : -1;
      ow[i * k + j] = mine ? ((__global const float *)m)[j] : 0.0f;
    }
  }
}

__attribute__((noinline)) static void ep_pos_clear(__global int *pos, long len) {
  for (long i = get_local_id(0); i < len; i += get_local_size(0)) pos[i] = -1;
}

/* The first expert-major row of local expert le: the pairs of experts 0..le. */
__attribute__((noinline)) static long ep_expert_start(__global const long *info, long le) {
  long cur = 0;
  for (long e = 0; e < le; e++) cur += info[2 + e];
  return cur;
}

/* Expert-major: the output row of every received local pair (route.rs pair_layout): local expert le's rows start
 * after the pairs of experts 0..le and follow slot order, then column order. One work-item per expert. */
__attribute__((noinline)) static void ep_pos(ulong meta, long slots, long k, long ms, long wo, long first, long l,
                                             __global const long *info, __global int *pos) {
  for (long le = get_local_id(0); le < l; le += get_local_size(0)) {
    long cur = ep_expert_start(info, le);
    for (long i = 0; i < slots; i++) {
      __global const long *x = (__global const long *)(meta + (ulong)(i * ms + wo));
      for (long j = 0; j < k; j++) {
        if (x[j] == first + le) pos[i * k + j] = (int)cur++;
      }
    }
  }
}

/* Expert-major: each received pair's row (the slot's row, whole work-group) and weight (work-item 0). */
__attribute__((noinline)) static void ep_em_rows(ulong recv, ulong meta, long slots, long k, long rb, long ms,
                                                 __global const int *pos, ulong out, __global float *ow) {
  for (long i = 0; i < slots; i++) {
    for (long j = 0; j < k; j++) {
      long p = pos[i * k + j];
      if (p < 0) continue;
      ep_copy(out + (ulong)(p * rb), recv + (ulong)(i * rb), rb);
      if (get_local_id(0) == 0) ow[p] = ((__global const float *)(meta + (ulong)(i * ms)))[j];
    }
  }
}

/* dispatch: each token once per destination rank into that rank's receive slots (sources in rank order), a sync
 * step (every rank's slots have arrived), then the received slots copied out in the routing's layout. layout 0:
 * out_tokens [slots, hidden], out_w and out_idx [slots, k]; layout 1: out_tokens [pairs, hidden] expert-major,
 * out_w [pairs], and pos (the routing's state) for combine. */
XPO_KERNEL void xpo_ep_dispatch(long region, long pes_addr, int w, int me, long idx_addr, long wts_addr, long tokens,
                                long n, long k, long e, long rb, int layout, long recv, long meta0, long ms, long wo,
                                long ct_addr, long info_addr, long send, long slot_of, long pos, long out, long ow,
                                long oi, long stage, ulong digest, uint host_err, long status, ulong seq) {
  __local long slot[4];
  __global const int *pes = (__global const int *)pes_addr;
  __global const long *ct = (__global const long *)ct_addr;
  __global const long *info = (__global const long *)info_addr;
  long l = e / w, first = l * me;
  if (ep_enter(slot, region, pes, w, me, host_err, ok(), digest, status, seq)) return;
  verdict_t v = ok();
  int bad = ep_sends(pes, w, me, l, ct, (__global const long *)idx_addr, (__global const float *)wts_addr,
                     (ulong)tokens, n, k, rb, ms, wo, (__global const int *)slot_of, recv, meta0, stage);
  bad = ep_quiet_sends(pes, w, me, l, ct, recv, bad);
  if (bad) {
    v.code = XPO_ERR_DEVICE;
    v.a = bad - 1;
  }
  v = symm_sync(slot, region, pes, w, me, v, 0);
  if (v.code) {
    if (get_local_id(0) == 0) finish(status, seq, v);
    return;
  }
  long slots = info[1];
  ulong meta = (ulong)(recv + meta0);
  if (layout == 0) {
    ep_copy((ulong)out, (ulong)recv, slots * rb);
    ep_flat_meta(meta, slots, k, ms, wo, first, l, (__global float *)ow, (__global long *)oi);
  } else {
    ep_pos_clear((__global int *)pos, slots * k);
    wg_barrier();
    ep_pos(meta, slots, k, ms, wo, first, l, info, (__global int *)pos);
    wg_barrier();
    ep_em_rows((ulong)recv, meta, slots, k, rb, ms, (__global const int *)pos, (ulong)out, (__global float *)ow);
  }
  xpushmem_fence();
  wg_barrier();
  if (get_local_id(0) == 0) finish(status, seq, v);
}

/* ---- combine -------------------------------------------------------------------------------------------------- */

/* Expert-major: the f32 sum of slot i's pairs (in column order), element by element, rounded into dst. */
__attribute__((noinline)) static void ep_sum_pairs(int dtype, long esz, long hidden, long k, long rb, ulong src,
                                                   __global const int *pos, long i, ulong dst) {
  for (long c = get_local_id(0); c < hidden; c += get_local_size(0)) {
    float acc = 0.0f;
    for (long j = 0; j < k; j++) {
      long p = pos[i * k + j];
      if (p >= 0) acc += load_elem(dtype, src + (ulong)(p * rb + c * esz));
    }
    store_elem(dtype, dst + (ulong)(c * esz), acc);
  }
}

/* The rows rank me returns to rank s: one per slot s sent it (flat: the slot's row; expert-major: the sum of the
 * slot's pairs), at s's combine area from row combine_base(s, me). */
__attribute__((noinline)) static void ep_return_rows(int dtype, long esz, long hidden, long k, long rb, int layout,
                                                     ulong src, __global const int *pos, long first, long cnt,
                                                     ulong dst) {
  for (long i = 0; i < cnt; i++) {
    if (layout == 0)
      ep_copy(dst + (ulong)(i * rb), src + (ulong)((first + i) * rb), rb);
    else
      ep_sum_pairs(dtype, esz, hidden, k, rb, src, pos, first + i, dst + (ulong)(i * rb));
  }
}

/* The returns to every rank; 0, or the first unreachable PE + 1. A mapped rank's rows are stored directly;
 * another node's are built in the stage and put through the host proxy, one source at a time with a blocking
 * put (the stage is reused: a rank may return up to max_recv rows, more than the stage holds). */
__attribute__((noinline)) static int ep_returns(__global const int *pes, int w, int me, long l,
                                                __global const long *ct, int dtype, long esz, long hidden, long k,
                                                long rb, int layout, ulong src, __global const int *pos,
                                                long comb, long stage) {
  int bad = 0;
  for (int s = 0; s < w; s++) {
    long first = ep_dispatch_base(ct, w, l, s, me);
    long at = ep_combine_base(ct, w, l, s, me);
    long cnt = ep_slots(ct, w, l, s, me);
    long dst = xpushmem_ptr(comb, pes[s]);
    if (dst != 0) {
      ep_return_rows(dtype, esz, hidden, k, rb, layout, src, pos, first, cnt, (ulong)dst + (ulong)(at * rb));
      continue;
    }
    if (cnt == 0) continue;
    ep_return_rows(dtype, esz, hidden, k, rb, layout, src, pos, first, cnt, (ulong)stage);
    wg_barrier();
    int e = xpushmemx_putmem_work_group(comb + at * rb, stage, (ulong)(cnt * rb), pes[s]);
    wg_barrier();
    if (e && !bad) bad = pes[s] + 1;
  }
  return bad;
}

/* out[t] = the f32 sum of the rows token t's destinations returned (destinations in rank order), rounded once. */
__attribute__((noinline)) static void ep_sum_tokens(int dtype, long esz, long hidden, long n, long rb, int w, int me,
                                                    long l, __global const long *ct, __global const int *slot_of,
                                                    ulong comb, ulong out) {
  for (long t = 0; t < n; t++) {
    for (long c = get_local_id(0); c < hidden; c += get_local_size(0)) {
      float acc = 0.0f;
      long base = 0;
      for (int d = 0; d < w; d++) {
        long i = slot_of[t * w + d];
        if (i >= 0) acc += load_elem(dtype, comb + (ulong)((base + i) * rb + c * esz));
        base += ep_slots(ct, w, l, me, d);
      }
      store_elem(dtype, out + (ulong)(t * rb + c * esz), acc);
    }
  }
}

/* combine: every expert rank returns one row per received slot into the source's combine area, a sync step, then
 * each token's rows summed in f32 into out [n, hidden]. dtype: XPO_DTYPE_*. */
XPO_KERNEL void xpo_ep_combine(long region, long pes_addr, int w, int me, long src, long n, long hidden, int dtype,
                               long k, long e, int layout, long comb, long ct_addr, long info, long send, long slot_of,
                               long pos, long out, long stage, ulong digest, uint host_err, long status, ulong seq) {
  __local long slot[4];
  __global const int *pes = (__global const int *)pes_addr;
  __global const long *ct = (__global const long *)ct_addr;
  long l = e / w;
  long esz = dtype == XPO_DTYPE_F32 ? 4 : 2;
  long rb = hidden * esz;
  if (ep_enter(slot, region, pes, w, me, host_err, ok(), digest, status, seq)) return;
  verdict_t v = ok();
  int bad = ep_returns(pes, w, me, l, ct, dtype, esz, hidden, k, rb, layout, (ulong)src, (__global const int *)pos,
                       comb, stage);
  if (bad) {
    v.code = XPO_ERR_DEVICE;
    v.a = bad - 1;
  }
  v = symm_sync(slot, region, pes, w, me, v, 0);
  if (!v.code)
    ep_sum_tokens(dtype, esz, hidden, n, rb, w, me, l, ct, (__global const int *)slot_of, (ulong)comb, (ulong)out);
  xpushmem_fence();
  wg_barrier();
  if (get_local_id(0) == 0) finish(status, seq, v);
}
