/* The PMIx client calls xpushmem's PMIx bootstrap makes, as plain functions over plain C types: the shim hides
 * PMIx's value and info structures (their layout comes from the system's headers at build time) and loads
 * libpmix at run time (dlopen), so nothing links against it. Every call but xpmix_load and xpmix_error_string
 * needs xpmix_load to have succeeded. Functions return a PMIx status (0 = PMIX_SUCCESS). */
#ifndef XPUSHMEM_PMIX_SHIM_H
#define XPUSHMEM_PMIX_SHIM_H
#include <stddef.h>
#include <stdint.h>

/** Bytes of a namespace name, terminating NUL included (PMIX_MAX_NSLEN + 1). */
#define XPMIX_NSLEN 256

/** Load libpmix.so.2 once per process: NULL, or a message saying why it could not be loaded. */
const char *xpmix_load(void);
/** PMIx_Init: this process's namespace (NUL-terminated, into nspace[XPMIX_NSLEN]) and rank. */
int xpmix_init(char *nspace, uint32_t *rank);
/** PMIx_Finalize. */
int xpmix_finalize(void);
/** An unsigned integer attribute (any integer type the server stores) of (nspace, rank), waiting at most
 * timeout_s seconds (0: the server's default). rank UINT32_MAX - 1 is PMIX_RANK_WILDCARD (job attributes). */
int xpmix_get_uint(const char *nspace, uint32_t rank, const char *key, int timeout_s, uint64_t *out);
/** A string attribute, copied into malloc'd memory (*out, freed with xpmix_free). */
int xpmix_get_string(const char *nspace, uint32_t rank, const char *key, int timeout_s, char **out);
/** PMIx_Put of a byte object under key, in the global scope (local and remote peers). */
int xpmix_put_bytes(const char *key, const void *data, size_t len);
/** PMIx_Commit. */
int xpmix_commit(void);
/** PMIx_Fence over every process of the namespace, collecting the committed data when collect != 0, giving up
 * after timeout_s seconds (0: no limit). */
int xpmix_fence(int collect, int timeout_s);
/** A byte object another process put, copied into malloc'd memory (*out, *len; free with xpmix_free). */
int xpmix_get_bytes(const char *nspace, uint32_t rank, const char *key, int timeout_s, void **out, size_t *len);
/** free() for what the calls above returned. */
void xpmix_free(void *p);
/** PMIx_Error_string when libpmix is loaded, else a generic text; never NULL. */
const char *xpmix_error_string(int status);
#endif
