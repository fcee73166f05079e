/* PMIx client calls over plain C types (see shim.h), with libpmix loaded on first use.
 *
 * libpmix is opened with dlopen by xpmix_load, not linked, as libfabric is (fabric-sys): a program that never
 * starts under a PMIx server never loads it, and builds need no -lpmix. The value and info structures are laid
 * out by the system's pmix_common.h at build time; every libpmix function is called through a pointer (the
 * headers' macros that call into the library are not used). */
#define _GNU_SOURCE
#include "shim.h"

#include <dlfcn.h>
#include <pmix.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    pmix_status_t (*init)(pmix_proc_t *, pmix_info_t *, size_t);
    pmix_status_t (*finalize)(const pmix_info_t *, size_t);
    pmix_status_t (*put)(pmix_scope_t, const char *, pmix_value_t *);
    pmix_status_t (*commit)(void);
    pmix_status_t (*fence)(const pmix_proc_t *, size_t, const pmix_info_t *, size_t);
    pmix_status_t (*get)(const pmix_proc_t *, const char *, const pmix_info_t *, size_t, pmix_value_t **);
    const char *(*error_string)(pmix_status_t);
    void (*value_destruct)(pmix_value_t *);
} px;
static int load_status = -1; /* -1 not tried, 0 loaded, 1 failed */
static char load_error[512];
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

static int load_locked(void) {
    void *h = dlopen("libpmix.so.2", RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL) {
        const char *e = dlerror();
        snprintf(load_error, sizeof load_error, "dlopen(libpmix.so.2): %s", e ? e : "unknown error");
        return 1;
    }
#define XPMIX_SYM(field, name)                                                                                   \
    do {                                                                                                         \
        *(void **)&px.field = dlsym(h, name);                                                                    \
        if (px.field == NULL) {                                                                                  \
            snprintf(load_error, sizeof load_error, "libpmix.so.2 has no symbol %s", name);                      \
            return 1;                                                                                            \
        }                                                                                                        \
    } while (0)
    XPMIX_SYM(init, "PMIx_Init");
    XPMIX_SYM(finalize, "PMIx_Finalize");
    XPMIX_SYM(put, "PMIx_Put");
    XPMIX_SYM(commit, "PMIx_Commit");
    XPMIX_SYM(fence, "PMIx_Fence");
    XPMIX_SYM(get, "PMIx_Get");
    XPMIX_SYM(error_string, "PMIx_Error_string");
    XPMIX_SYM(value_destruct, "PMIx_Value_destruct");
#undef XPMIX_SYM
    return 0;
}

const char *xpmix_load(void) {
    pthread_mutex_lock(&load_lock);
    if (load_status < 0) {
        load_status = load_locked();
    }
    int s = load_status;
    pthread_mutex_unlock(&load_lock);
    return s == 0 ? NULL : load_error;
}

/* The process's own identity, kept by xpmix_init for the fence (every process of the namespace). */
static pmix_proc_t self;

int xpmix_init(char *nspace, uint32_t *rank) {
    memset(&self, 0, sizeof self);
    pmix_status_t rc = px.init(&self, NULL, 0);
    if (rc == PMIX_SUCCESS) {
        memcpy(nspace, self.nspace, XPMIX_NSLEN < sizeof self.nspace ? XPMIX_NSLEN : sizeof self.nspace);
        nspace[XPMIX_NSLEN - 1] = '\0';
        *rank = self.rank;
    }
    return rc;
}

int xpmix_finalize(void) { return px.finalize(NULL, 0); }

static void info_int(pmix_info_t *info, const char *key, int v) {
    memset(info, 0, sizeof *info);
    strncpy(info->key, key, PMIX_MAX_KEYLEN);
    info->value.type = PMIX_INT;
    info->value.data.integer = v;
}

static void info_bool(pmix_info_t *info, const char *key, bool v) {
    memset(info, 0, sizeof *info);
    strncpy(info->key, key, PMIX_MAX_KEYLEN);
    info->value.type = PMIX_BOOL;
    info->value.data.flag = v;
}

static pmix_status_t get(const char *nspace, uint32_t rank, const char *key, int timeout_s, pmix_value_t **val) {
    pmix_proc_t p;
    memset(&p, 0, sizeof p);
    strncpy(p.nspace, nspace, PMIX_MAX_NSLEN);
    p.rank = rank;
    pmix_info_t info[1];
    size_t n = 0;
    if (timeout_s > 0) {
        info_int(&info[n++], PMIX_TIMEOUT, timeout_s);
    }
    *val = NULL;
    return px.get(&p, key, n ? info : NULL, n, val);
}

static void release(pmix_value_t *val) {
    if (val != NULL) {
        px.value_destruct(val);
        free(val);
    }
}

int xpmix_get_uint(const char *nspace, uint32_t rank, const char *key, int timeout_s, uint64_t *out) {
    pmix_value_t *val;
    pmix_status_t rc = get(nspace, rank, key, timeout_s, &val);
    if (rc != PMIX_SUCCESS) {
        return rc;
    }
    switch (val->type) {
    case PMIX_UINT8: *out = val->data.uint8; break;
    case PMIX_UINT16: *out = val->data.uint16; break;
    case PMIX_UINT32: *out = val->data.uint32; break;
    case PMIX_UINT64: *out = val->data.uint64; break;
    case PMIX_SIZE: *out = val->data.size; break;
    case PMIX_PROC_RANK: *out = val->data.rank; break;
    case PMIX_INT:
        if (val->data.integer < 0) {
            rc = PMIX_ERR_BAD_PARAM;
        } else {
            *out = (uint64_t)val->data.integer;
        }
        break;
    default: rc = PMIX_ERR_TYPE_MISMATCH;
    }
    release(val);
    return rc;
}

int xpmix_get_string(const char *nspace, uint32_t rank, const char *key, int timeout_s, char **out) {
    pmix_value_t *val;
    pmix_status_t rc = get(nspace, rank, key, timeout_s, &val);
    if (rc != PMIX_SUCCESS) {
        return rc;
    }
    if (val->type != PMIX_STRING || val->data.string == NULL) {
        rc = PMIX_ERR_TYPE_MISMATCH;
    } else if ((*out = strdup(val->data.string)) == NULL) {
        rc = PMIX_ERR_NOMEM;
    }
    release(val);
    return rc;
}

int xpmix_put_bytes(const char *key, const void *data, size_t len) {
    pmix_value_t v;
    memset(&v, 0, sizeof v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = (char *)data; /* PMIx_Put copies the value */
    v.data.bo.size = len;
    return px.put(PMIX_GLOBAL, key, &v);
}

int xpmix_commit(void) { return px.commit(); }

int xpmix_fence(int collect, int timeout_s) {
    pmix_proc_t all;
    memset(&all, 0, sizeof all);
    memcpy(all.nspace, self.nspace, sizeof all.nspace);
    all.rank = PMIX_RANK_WILDCARD;
    pmix_info_t info[2];
    size_t n = 0;
    info_bool(&info[n++], PMIX_COLLECT_DATA, collect != 0);
    if (timeout_s > 0) {
        info_int(&info[n++], PMIX_TIMEOUT, timeout_s);
    }
    return px.fence(&all, 1, info, n);
}

int xpmix_get_bytes(const char *nspace, uint32_t rank, const char *key, int timeout_s, void **out, size_t *len) {
    pmix_value_t *val;
    pmix_status_t rc = get(nspace, rank, key, timeout_s, &val);
    if (rc != PMIX_SUCCESS) {
        return rc;
    }
    if (val->type != PMIX_BYTE_OBJECT) {
        rc = PMIX_ERR_TYPE_MISMATCH;
    } else {
        *len = val->data.bo.size;
        *out = malloc(*len ? *len : 1);
        if (*out == NULL) {
            rc = PMIX_ERR_NOMEM;
        } else if (*len) {
            memcpy(*out, val->data.bo.bytes, *len);
        }
    }
    release(val);
    return rc;
}

void xpmix_free(void *p) { free(p); }

const char *xpmix_error_string(int status) {
    if (xpmix_load() == NULL) {
        const char *s = px.error_string(status);
        if (s != NULL) {
            return s;
        }
    }
    return "PMIx error (libpmix not loaded)";
}
