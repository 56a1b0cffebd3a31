/*
 * fakecuda: a CUDA driver (libcuda.so.1) made of host memory, so that
 * tensorlife's CUDA code runs in CI, where there is no GPU.
 *
 * Build it with scripts/fakecuda.sh, which also generates a stub returning
 * CUDA_ERROR_NOT_SUPPORTED for every other cu* function the real driver
 * exports (symbols.txt), so that any binary linked against the real driver
 * starts with this one first on LD_LIBRARY_PATH.
 *
 * What it implements is what tensor/cuda and gorgonia.org/cu's init call,
 * with the real driver's rules, so that the bugs the real driver would
 * report are reported here too:
 *
 *   - Nothing works before cuInit(0): CUDA_ERROR_NOT_INITIALIZED.
 *   - The current context is kept per OS thread, as a stack (thread-local
 *     storage, as the real driver keeps it). A call that needs a context,
 *     made on a thread with none current, fails with
 *     CUDA_ERROR_INVALID_CONTEXT; with a destroyed context, or a primary
 *     context released by its last holder, current, it fails with
 *     CUDA_ERROR_CONTEXT_IS_DESTROYED. Goroutines that are not locked to
 *     their thread, or a missing cuCtxSetCurrent, show up as these errors.
 *   - Primary contexts are retained and released with a count; the handle
 *     stays the same across a release and a later retain, as the real
 *     driver's does, and the last release frees the context's memory.
 *   - Device memory is host memory behind addresses in a range of their
 *     own (never valid host addresses, so dereferencing one on the host
 *     crashes), 512-byte aligned (cuMemAlloc guarantees 256) with a gap
 *     after each block, never reused, filled with 0xA5 (device memory is not
 *     zeroed). A copy or memset must lie inside one live block, and a free
 *     must name the start of one, or the call fails with
 *     CUDA_ERROR_INVALID_VALUE, as the real driver's checks do.
 *   - Memory is accounted per device in 512-byte units against a capacity;
 *     cuMemGetInfo reports it.
 *
 * Set by environment variables, read once, at the first call:
 *
 *   TENSORLIFE_FAKECUDA_DEVICES    number of devices (default 1, at most 16;
 *                                  0 makes cuInit fail with
 *                                  CUDA_ERROR_NO_DEVICE)
 *   TENSORLIFE_FAKECUDA_MEMORY     bytes per device (default 2G; K, M, G
 *                                  suffixes are powers of 1024)
 *   TENSORLIFE_FAKECUDA_OOM_AFTER  allocations fail with
 *                                  CUDA_ERROR_OUT_OF_MEMORY once the bytes
 *                                  allocated since the start (freed or not)
 *                                  would exceed this
 *   TENSORLIFE_FAKECUDA_FAIL       comma-separated rules NAME:N:CODE: the Nth
 *                                  call of function NAME returns CODE (a
 *                                  number or a name such as
 *                                  CUDA_ERROR_ILLEGAL_ADDRESS); N+ fails the
 *                                  Nth call and every later one. NAME is the
 *                                  exported name (cuMemFree_v2) or the one
 *                                  cuda.h #defines to it (cuMemFree).
 *   TENSORLIFE_FAKECUDA_LOG        1: log every call and its result to stderr
 *
 * A value it cannot parse makes cuInit fail with CUDA_ERROR_INVALID_VALUE
 * after saying why on stderr.
 *
 * When scripts/fakecuda.sh finds cuda.h it compiles this file a second time
 * with FAKECUDA_CHECK_HEADER defined, so the compiler checks every
 * implemented function against the real prototype.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FAKECUDA_CHECK_HEADER
#include <cuda.h>
#else
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef int CUdevice_attribute;
typedef struct CUuuid_st {
	char bytes[16];
} CUuuid;
#endif

#define API __attribute__((visibility("default")))

/* CUresult values from cuda.h. */
enum {
	R_SUCCESS = 0,
	R_INVALID_VALUE = 1,
	R_OUT_OF_MEMORY = 2,
	R_NOT_INITIALIZED = 3,
	R_NO_DEVICE = 100,
	R_INVALID_DEVICE = 101,
	R_INVALID_CONTEXT = 201,
	R_INVALID_HANDLE = 400,
	R_NOT_FOUND = 500,
	R_PRIMARY_CONTEXT_ACTIVE = 708,
	R_CONTEXT_IS_DESTROYED = 709,
	R_NOT_SUPPORTED = 801,
	R_UNKNOWN = 999,
};

/* The driver version reported: CUDA 11.8, the headers CI builds with. */
#define DRIVER_VERSION 11080

#define MAX_DEVICES 16
#define MAX_STACK 64
#define ALIGN 512
/* Device addresses: 16 TiB up, 1 TiB per device; no host mapping there. */
#define ADDR_BASE 0x100000000000ULL
#define ADDR_SPAN 0x10000000000ULL
#define POISON 0xA5

/* ---- result names ------------------------------------------------------ */

struct result_name {
	int code;
	const char *name;
};

/* Generated from cuda.h by scripts/fakecuda.sh (results.txt). */
static const struct result_name result_names[] = {
#include "results.inc"
};

static const char *result_name(int code) {
	for (size_t i = 0; i < sizeof result_names / sizeof result_names[0]; i++) {
		if (result_names[i].code == code) {
			return result_names[i].name;
		}
	}
	return NULL;
}

/* The real driver's descriptions of the codes tensorlife meets; the rest
 * are described by their names. */
static const char *result_string(int code) {
	switch (code) {
	case 0: return "no error";
	case 1: return "invalid argument";
	case 2: return "out of memory";
	case 3: return "initialization error";
	case 4: return "driver shutting down";
	case 100: return "no CUDA-capable device is detected";
	case 101: return "invalid device ordinal";
	case 201: return "invalid device context";
	case 400: return "invalid resource handle";
	case 700: return "an illegal memory access was encountered";
	case 708: return "primary context active";
	case 709: return "context is destroyed";
	case 801: return "operation not supported";
	case 999: return "unknown error";
	}
	return result_name(code);
}

/* ---- configuration ----------------------------------------------------- */

struct fault {
	char name[64];
	unsigned long nth;
	int from_nth; /* N+: the Nth and every later call */
	int code;
	unsigned long calls;
};

#define MAX_FAULTS 16

static struct {
	int devices;
	unsigned long long memory;
	unsigned long long oom_after; /* 0: none */
	int log;
	struct fault faults[MAX_FAULTS];
	int nfaults;
	char error[256]; /* why the environment was refused; "" if it was not */
} cfg;

static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;

static int parse_bytes(const char *s, unsigned long long *out) {
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *s == '-') {
		return -1;
	}
	unsigned long long mult = 1;
	switch (*end) {
	case 'K': mult = 1ULL << 10; end++; break;
	case 'M': mult = 1ULL << 20; end++; break;
	case 'G': mult = 1ULL << 30; end++; break;
	case 'T': mult = 1ULL << 40; end++; break;
	}
	if (*end != '\0' || v > ~0ULL / mult) {
		return -1;
	}
	*out = v * mult;
	return 0;
}

static int parse_code(const char *s, int *code) {
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno == 0 && end != s && *end == '\0' && v >= 0 && v < 100000) {
		*code = (int)v;
		return 0;
	}
	for (size_t i = 0; i < sizeof result_names / sizeof result_names[0]; i++) {
		if (strcmp(result_names[i].name, s) == 0) {
			*code = result_names[i].code;
			return 0;
		}
	}
	return -1;
}

/* parse_faults reads NAME:N:CODE[,NAME:N:CODE...]. */
static int parse_faults(const char *spec) {
	char buf[1024];
	if (strlen(spec) >= sizeof buf) {
		snprintf(cfg.error, sizeof cfg.error, "TENSORLIFE_FAKECUDA_FAIL is too long");
		return -1;
	}
	strcpy(buf, spec);
	char *save = NULL;
	for (char *rule = strtok_r(buf, ",", &save); rule; rule = strtok_r(NULL, ",", &save)) {
		if (cfg.nfaults == MAX_FAULTS) {
			snprintf(cfg.error, sizeof cfg.error, "TENSORLIFE_FAKECUDA_FAIL: more than %d rules", MAX_FAULTS);
			return -1;
		}
		struct fault *f = &cfg.faults[cfg.nfaults];
		char whole[sizeof buf];
		strcpy(whole, rule); /* rule is cut up below */
		char *name = rule, *nth = strchr(rule, ':'), *code = NULL;
		if (nth) {
			*nth++ = '\0';
			code = strchr(nth, ':');
		}
		if (code) {
			*code++ = '\0';
		}
		char *end = NULL;
		if (nth) {
			errno = 0;
			f->nth = strtoul(nth, &end, 10);
		}
		if (!code || name[0] == '\0' || strlen(name) >= sizeof f->name || errno != 0 || end == nth ||
		    f->nth == 0 || (*end != '\0' && strcmp(end, "+") != 0) || parse_code(code, &f->code) != 0) {
			snprintf(cfg.error, sizeof cfg.error,
			         "TENSORLIFE_FAKECUDA_FAIL: bad rule %.60s: want NAME:N:CODE or NAME:N+:CODE, "
			         "N from 1, CODE a number or a CUDA_ERROR_ name",
			         whole);
			return -1;
		}
		f->from_nth = *end == '+';
		strcpy(f->name, name);
		cfg.nfaults++;
	}
	return 0;
}

static void load_config(void) {
	cfg.devices = 1;
	cfg.memory = 2ULL << 30;
	const char *s;
	if ((s = getenv("TENSORLIFE_FAKECUDA_DEVICES")) && *s) {
		char *end;
		long n = strtol(s, &end, 10);
		if (*end != '\0' || n < 0 || n > MAX_DEVICES) {
			snprintf(cfg.error, sizeof cfg.error, "TENSORLIFE_FAKECUDA_DEVICES=%.40s: want 0..%d", s, MAX_DEVICES);
			return;
		}
		cfg.devices = (int)n;
	}
	if ((s = getenv("TENSORLIFE_FAKECUDA_MEMORY")) && *s) {
		if (parse_bytes(s, &cfg.memory) != 0 || cfg.memory == 0 || cfg.memory > ADDR_SPAN / 2) {
			snprintf(cfg.error, sizeof cfg.error,
			         "TENSORLIFE_FAKECUDA_MEMORY=%.40s: want bytes from 1 to 512G (K, M, G, T suffixes)", s);
			return;
		}
	}
	if ((s = getenv("TENSORLIFE_FAKECUDA_OOM_AFTER")) && *s) {
		if (parse_bytes(s, &cfg.oom_after) != 0) {
			snprintf(cfg.error, sizeof cfg.error, "TENSORLIFE_FAKECUDA_OOM_AFTER=%.40s: want bytes", s);
			return;
		}
	}
	if ((s = getenv("TENSORLIFE_FAKECUDA_FAIL")) && *s) {
		if (parse_faults(s) != 0) {
			return;
		}
	}
	s = getenv("TENSORLIFE_FAKECUDA_LOG");
	cfg.log = s && *s && strcmp(s, "0") != 0;
}

/* ---- state --------------------------------------------------------------- */

struct CUctx_st {
	int device;
	int primary;
	int alive;          /* a primary context is alive while retained */
	unsigned flags;
};

struct device {
	char name[64];
	CUuuid uuid;
	unsigned long long used; /* bytes charged, in ALIGN units */
	CUdeviceptr next;        /* the next address to hand out */
	struct CUctx_st *primary; /* one handle for the process's life */
	int primary_refs;
	unsigned primary_flags;
};

struct block {
	CUdeviceptr addr;
	size_t size;
	size_t charged;
	unsigned char *mem;
	struct CUctx_st *ctx;
};

/* One lock guards everything below; calls are short, and copies under it
 * cannot race with a free. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int initialized;
static struct device devices[MAX_DEVICES];
static unsigned long long allocated_total; /* for TENSORLIFE_FAKECUDA_OOM_AFTER */

/* Every context ever made. */
static struct CUctx_st **contexts;
static size_t ncontexts, capcontexts;

/* Live blocks, sorted by address. */
static struct block *blocks;
static size_t nblocks, capblocks;

/* The calling thread's context stack: the top is its current context. */
static __thread struct CUctx_st *stack[MAX_STACK];
static __thread int depth;

/* ---- call bookkeeping ------------------------------------------------------ */

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	fputs("fakecuda: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* rule_matches reports whether a rule's NAME names function fn: the same
 * name, or fn's name without its _vN suffix (cuMemFree for cuMemFree_v2). */
static int rule_matches(const char *rule, const char *fn) {
	size_t n = strlen(rule);
	if (strncmp(rule, fn, n) != 0) {
		return 0;
	}
	return fn[n] == '\0' || (fn[n] == '_' && fn[n + 1] == 'v' && isdigit((unsigned char)fn[n + 2]));
}

/* injected counts a call of fn and returns the code a rule makes it fail
 * with, or R_SUCCESS. */
static int injected(const char *fn) {
	pthread_once(&cfg_once, load_config);
	int code = R_SUCCESS;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < cfg.nfaults; i++) {
		struct fault *f = &cfg.faults[i];
		if (!rule_matches(f->name, fn)) {
			continue;
		}
		f->calls++;
		if (code == R_SUCCESS && (f->calls == f->nth || (f->from_nth && f->calls > f->nth))) {
			code = f->code;
		}
	}
	pthread_mutex_unlock(&mu);
	return code;
}

static CUresult done(const char *fn, int code) {
	if (cfg.log) {
		const char *name = result_name(code);
		logf_("%s -> %s (%d)", fn, name ? name : "?", code);
	}
	return (CUresult)code;
}

/* BEGIN opens every implemented function: fault injection first, then, for
 * all but the few the driver answers before cuInit, the init check. */
#define BEGIN(needs_init)                                                   \
	do {                                                                \
		int injected_ = injected(__func__);                         \
		if (injected_ != R_SUCCESS) {                               \
			return done(__func__, injected_);                   \
		}                                                           \
		if ((needs_init) && !__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) { \
			return done(__func__, R_NOT_INITIALIZED);           \
		}                                                           \
	} while (0)

#define RETURN(code) return done(__func__, (code))

/* fakecuda_unsupported is what every generated stub returns. */
__attribute__((visibility("hidden"))) CUresult fakecuda_unsupported(const char *fn) {
	int code = injected(fn);
	return done(fn, code != R_SUCCESS ? code : R_NOT_SUPPORTED);
}

/* ---- contexts ------------------------------------------------------------ */

static int valid_device(CUdevice dev) { return dev >= 0 && dev < cfg.devices; }

/* context_known reports whether a handle passed in by the caller is one
 * this driver made, without dereferencing it. mu held. */
static int context_known(struct CUctx_st *c) {
	for (size_t i = 0; i < ncontexts; i++) {
		if (contexts[i] == c) {
			return 1;
		}
	}
	return 0;
}

/* context_usable reports whether a handle passed in by the caller may be
 * made current: one this driver made that is alive or primary. mu held. */
static int context_usable(struct CUctx_st *c) {
	return context_known(c) && (c->alive || c->primary);
}

/* current returns the calling thread's context for a call that needs one,
 * or sets *code to why there is none it can use. mu held. */
static struct CUctx_st *current(int *code) {
	if (depth == 0 || stack[depth - 1] == NULL) {
		*code = R_INVALID_CONTEXT;
		return NULL;
	}
	struct CUctx_st *c = stack[depth - 1];
	if (!c->alive) {
		*code = R_CONTEXT_IS_DESTROYED;
		return NULL;
	}
	return c;
}

/* new_context makes a context and registers it for good: handles are never
 * freed, so a thread that still has a destroyed one current can be told so.
 * mu held. */
static struct CUctx_st *new_context(int dev, int primary, unsigned flags) {
	if (ncontexts == capcontexts) {
		size_t cap = capcontexts ? 2 * capcontexts : 64;
		struct CUctx_st **grown = realloc(contexts, cap * sizeof *grown);
		if (!grown) {
			return NULL;
		}
		contexts = grown;
		capcontexts = cap;
	}
	struct CUctx_st *c = calloc(1, sizeof *c);
	if (c) {
		c->device = dev;
		c->primary = primary;
		c->flags = flags;
		contexts[ncontexts++] = c;
	}
	return c;
}

/* free_blocks_of frees every block allocated in context c. mu held. */
static void free_blocks_of(struct CUctx_st *c) {
	size_t kept = 0;
	for (size_t i = 0; i < nblocks; i++) {
		if (blocks[i].ctx == c) {
			devices[c->device].used -= blocks[i].charged;
			free(blocks[i].mem);
			continue;
		}
		blocks[kept++] = blocks[i];
	}
	nblocks = kept;
}

/* ---- blocks -------------------------------------------------------------- */

/* find_block returns the index of the first block whose address is >= p. */
static size_t find_block(CUdeviceptr p) {
	size_t lo = 0, hi = nblocks;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (blocks[mid].addr < p) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo;
}

/* block_containing returns the index of the live block that holds address
 * p, or nblocks when none does. mu held. */
static size_t block_containing(CUdeviceptr p) {
	size_t i = find_block(p);
	if (i < nblocks && blocks[i].addr == p) {
		return i;
	}
	if (i == 0 || p - blocks[i - 1].addr >= blocks[i - 1].size) {
		return nblocks;
	}
	return i - 1;
}

/* span returns the host memory of the n bytes at p, if they lie in one live
 * block, or NULL. mu held. */
static unsigned char *span(CUdeviceptr p, size_t n) {
	size_t i = block_containing(p);
	if (i == nblocks) {
		return NULL;
	}
	size_t off = (size_t)(p - blocks[i].addr);
	return n <= blocks[i].size - off ? blocks[i].mem + off : NULL;
}

/* ---- initialization and devices --------------------------------------------- */

API CUresult cuInit(unsigned int flags) {
	BEGIN(0);
	if (cfg.error[0] != '\0') {
		logf_("%s", cfg.error);
		RETURN(R_INVALID_VALUE);
	}
	if (flags != 0) {
		RETURN(R_INVALID_VALUE);
	}
	if (cfg.devices == 0) {
		RETURN(R_NO_DEVICE);
	}
	pthread_mutex_lock(&mu);
	if (!initialized) {
		for (int i = 0; i < cfg.devices; i++) {
			struct device *d = &devices[i];
			snprintf(d->name, sizeof d->name, "tensorlife fakecuda %d", i);
			memcpy(d->uuid.bytes, "fakecuda-device", 15);
			d->uuid.bytes[15] = (char)i;
			d->next = ADDR_BASE + (CUdeviceptr)i * ADDR_SPAN;
			d->primary = new_context(i, 1, 0);
			if (!d->primary) {
				pthread_mutex_unlock(&mu);
				RETURN(R_OUT_OF_MEMORY);
			}
		}
		__atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&mu);
	RETURN(R_SUCCESS);
}

API CUresult cuDriverGetVersion(int *version) {
	BEGIN(0);
	if (!version) {
		RETURN(R_INVALID_VALUE);
	}
	*version = DRIVER_VERSION;
	RETURN(R_SUCCESS);
}

API CUresult cuGetErrorName(CUresult error, const char **str) {
	BEGIN(0);
	if (!str) {
		RETURN(R_INVALID_VALUE);
	}
	*str = result_name(error);
	RETURN(*str ? R_SUCCESS : R_INVALID_VALUE);
}

API CUresult cuGetErrorString(CUresult error, const char **str) {
	BEGIN(0);
	if (!str) {
		RETURN(R_INVALID_VALUE);
	}
	*str = result_string(error);
	RETURN(*str ? R_SUCCESS : R_INVALID_VALUE);
}

API CUresult cuDeviceGetCount(int *count) {
	BEGIN(1);
	if (!count) {
		RETURN(R_INVALID_VALUE);
	}
	*count = cfg.devices;
	RETURN(R_SUCCESS);
}

API CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
	BEGIN(1);
	if (!dev) {
		RETURN(R_INVALID_VALUE);
	}
	if (!valid_device(ordinal)) {
		RETURN(R_INVALID_DEVICE);
	}
	*dev = ordinal;
	RETURN(R_SUCCESS);
}

API CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
	BEGIN(1);
	if (!name || len <= 0) {
		RETURN(R_INVALID_VALUE);
	}
	if (!valid_device(dev)) {
		RETURN(R_INVALID_DEVICE);
	}
	snprintf(name, (size_t)len, "%s", devices[dev].name);
	RETURN(R_SUCCESS);
}

static CUresult device_uuid(const char *fn, CUuuid *uuid, CUdevice dev) {
	if (!uuid) {
		return done(fn, R_INVALID_VALUE);
	}
	if (!valid_device(dev)) {
		return done(fn, R_INVALID_DEVICE);
	}
	*uuid = devices[dev].uuid;
	return done(fn, R_SUCCESS);
}

API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) {
	BEGIN(1);
	return device_uuid(__func__, uuid, dev);
}

API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
	BEGIN(1);
	return device_uuid(__func__, uuid, dev);
}

API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
	BEGIN(1);
	if (!bytes) {
		RETURN(R_INVALID_VALUE);
	}
	if (!valid_device(dev)) {
		RETURN(R_INVALID_DEVICE);
	}
	*bytes = (size_t)cfg.memory;
	RETURN(R_SUCCESS);
}

/* Attributes a caller may ask for; the rest are not supported here. */
API CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attr, CUdevice dev) {
	BEGIN(1);
	if (!value) {
		RETURN(R_INVALID_VALUE);
	}
	if (!valid_device(dev)) {
		RETURN(R_INVALID_DEVICE);
	}
	switch ((int)attr) {
	case 16: /* MULTIPROCESSOR_COUNT */
		*value = 1;
		break;
	case 41: /* UNIFIED_ADDRESSING */
		*value = 1;
		break;
	case 75: /* COMPUTE_CAPABILITY_MAJOR */
		*value = 9;
		break;
	case 76: /* COMPUTE_CAPABILITY_MINOR */
		*value = 0;
		break;
	default:
		RETURN(R_NOT_SUPPORTED);
	}
	RETURN(R_SUCCESS);
}

/* ---- primary contexts ----------------------------------------------------- */

API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
	BEGIN(1);
	if (!pctx) {
		RETURN(R_INVALID_VALUE);
	}
	if (!valid_device(dev)) {
		RETURN(R_INVALID_DEVICE);
	}
	pthread_mutex_lock(&mu);
	struct device *d = &devices[dev];
	d->primary_refs++;
	d->primary->alive = 1;
	d->primary->flags = d->primary_flags;
	*pctx = d->primary;
	pthread_mutex_unlock(&mu);
	RETURN(R_SUCCESS);
}

/* release_primary drops one hold on dev's primary context, or all of them
 * (reset); the last one frees the context's memory. It is the body of
 * cuDevicePrimaryCtxRelease and cuDevicePrimaryCtxReset, which differ only
 * in all. */
static int release_primary(CUdevice dev, int all) {
	if (!valid_device(dev)) {
		return R_INVALID_DEVICE;
	}
	pthread_mutex_lock(&mu);
	struct device *d = &devices[dev];
	int code = R_SUCCESS;
	if (d->primary_refs == 0 && !all) {
		code = R_INVALID_CONTEXT;
	} else {
		d->primary_refs = all ? 0 : d->primary_refs - 1;
		if (d->primary_refs == 0) {
			d->primary->alive = 0;
			free_blocks_of(d->primary);
		}
	}
	pthread_mutex_unlock(&mu);
	return code;
}

API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
	BEGIN(1);
	RETURN(release_primary(dev, 0));
}

API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
	BEGIN(1);
	RETURN(release_primary(dev, 1));
}

API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
	BEGIN(1);
	if (!flags || !active) {
		RETURN(R_INVALID_VALUE);
	}
	if (!valid_device(dev)) {
		RETURN(R_INVALID_DEVICE);
	}
	pthread_mutex_lock(&mu);
	*flags = devices[dev].primary_flags;
	*active = devices[dev].primary->alive;
	pthread_mutex_unlock(&mu);
	RETURN(R_SUCCESS);
}

API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
	BEGIN(1);
	if (!valid_device(dev)) {
		RETURN(R_INVALID_DEVICE);
	}
	if (flags & ~0x1fu) {
		RETURN(R_INVALID_VALUE);
	}
	pthread_mutex_lock(&mu);
	devices[dev].primary_flags = flags;
	pthread_mutex_unlock(&mu);
	RETURN(R_SUCCESS);
}

/* ---- the context stack ------------------------------------------------------ */

API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
	BEGIN(1);
	if (!pctx || (flags & ~0x1fu)) {
		RETURN(R_INVALID_VALUE);
	}
	if (!valid_device(dev)) {
		RETURN(R_INVALID_DEVICE);
	}
	if (depth == MAX_STACK) {
		RETURN(R_UNKNOWN);
	}
	pthread_mutex_lock(&mu);
	struct CUctx_st *c = new_context(dev, 0, flags);
	if (c) {
		c->alive = 1;
	}
	pthread_mutex_unlock(&mu);
	if (!c) {
		RETURN(R_OUT_OF_MEMORY);
	}
	stack[depth++] = c; /* the new context is made current */
	*pctx = c;
	RETURN(R_SUCCESS);
}

API CUresult cuCtxDestroy_v2(CUcontext ctx) {
	BEGIN(1);
	pthread_mutex_lock(&mu);
	if (!context_known(ctx) || ctx->primary || !ctx->alive) {
		pthread_mutex_unlock(&mu);
		RETURN(R_INVALID_CONTEXT);
	}
	ctx->alive = 0;
	free_blocks_of(ctx);
	pthread_mutex_unlock(&mu);
	/* Destroying a context current to this thread pops it; other threads
	 * keep the dead handle current and fail with CONTEXT_IS_DESTROYED.
	 * The handle is never freed, so those threads can still look at it. */
	if (depth > 0 && stack[depth - 1] == ctx) {
		depth--;
	}
	RETURN(R_SUCCESS);
}

API CUresult cuCtxGetCurrent(CUcontext *pctx) {
	BEGIN(1);
	if (!pctx) {
		RETURN(R_INVALID_VALUE);
	}
	*pctx = depth > 0 ? stack[depth - 1] : NULL;
	RETURN(R_SUCCESS);
}

/* cuCtxSetCurrent replaces the top of the thread's stack; NULL pops it. */
API CUresult cuCtxSetCurrent(CUcontext ctx) {
	BEGIN(1);
	if (ctx == NULL) {
		if (depth > 0) {
			depth--;
		}
		RETURN(R_SUCCESS);
	}
	pthread_mutex_lock(&mu);
	int ok = context_usable(ctx);
	pthread_mutex_unlock(&mu);
	if (!ok) {
		RETURN(R_INVALID_CONTEXT);
	}
	if (depth == 0) {
		depth = 1;
	}
	stack[depth - 1] = ctx;
	RETURN(R_SUCCESS);
}

API CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
	BEGIN(1);
	pthread_mutex_lock(&mu);
	int ok = context_usable(ctx);
	pthread_mutex_unlock(&mu);
	if (!ok) {
		RETURN(R_INVALID_CONTEXT);
	}
	if (depth == MAX_STACK) {
		RETURN(R_UNKNOWN);
	}
	stack[depth++] = ctx;
	RETURN(R_SUCCESS);
}

API CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
	BEGIN(1);
	if (depth == 0) {
		RETURN(R_INVALID_CONTEXT);
	}
	struct CUctx_st *c = stack[--depth];
	if (pctx) {
		*pctx = c;
	}
	RETURN(R_SUCCESS);
}

API CUresult cuCtxGetDevice(CUdevice *dev) {
	BEGIN(1);
	if (!dev) {
		RETURN(R_INVALID_VALUE);
	}
	int code = R_SUCCESS;
	pthread_mutex_lock(&mu);
	struct CUctx_st *c = current(&code);
	if (c) {
		*dev = c->device;
	}
	pthread_mutex_unlock(&mu);
	RETURN(code);
}

/* Every call is synchronous here; all it can report is a missing context. */
API CUresult cuCtxSynchronize(void) {
	BEGIN(1);
	int code = R_SUCCESS;
	pthread_mutex_lock(&mu);
	current(&code);
	pthread_mutex_unlock(&mu);
	RETURN(code);
}

/* ---- memory ------------------------------------------------------------------ */

API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
	BEGIN(1);
	if (!free_bytes || !total_bytes) {
		RETURN(R_INVALID_VALUE);
	}
	int code = R_SUCCESS;
	pthread_mutex_lock(&mu);
	struct CUctx_st *c = current(&code);
	if (c) {
		*total_bytes = (size_t)cfg.memory;
		*free_bytes = (size_t)(cfg.memory - devices[c->device].used);
	}
	pthread_mutex_unlock(&mu);
	RETURN(code);
}

API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes) {
	BEGIN(1);
	int code = R_SUCCESS;
	pthread_mutex_lock(&mu);
	struct CUctx_st *c = current(&code);
	if (!c) {
		goto out;
	}
	if (!dptr || bytes == 0) {
		code = R_INVALID_VALUE;
		goto out;
	}
	struct device *d = &devices[c->device];
	unsigned long long charged = ((unsigned long long)bytes + ALIGN - 1) / ALIGN * ALIGN;
	if (bytes > cfg.memory || charged > cfg.memory - d->used ||
	    (cfg.oom_after && (charged > cfg.oom_after || allocated_total > cfg.oom_after - charged))) {
		code = R_OUT_OF_MEMORY;
		goto out;
	}
	if (nblocks == capblocks) {
		size_t cap = capblocks ? 2 * capblocks : 256;
		struct block *grown = realloc(blocks, cap * sizeof *grown);
		if (!grown) {
			code = R_OUT_OF_MEMORY;
			goto out;
		}
		blocks = grown;
		capblocks = cap;
	}
	unsigned char *mem = malloc(bytes);
	if (!mem) {
		code = R_OUT_OF_MEMORY;
		goto out;
	}
	memset(mem, POISON, bytes);
	CUdeviceptr p = d->next;
	d->next += charged + ALIGN; /* a gap: the byte after a block is in none */
	size_t i = find_block(p);
	memmove(&blocks[i + 1], &blocks[i], (nblocks - i) * sizeof *blocks);
	blocks[i] = (struct block){.addr = p, .size = bytes, .charged = charged, .mem = mem, .ctx = c};
	nblocks++;
	d->used += charged;
	allocated_total += charged;
	*dptr = p;
out:
	pthread_mutex_unlock(&mu);
	RETURN(code);
}

API CUresult cuMemFree_v2(CUdeviceptr dptr) {
	BEGIN(1);
	int code = R_SUCCESS;
	pthread_mutex_lock(&mu);
	if (!current(&code)) {
		goto out;
	}
	size_t i = find_block(dptr);
	if (i == nblocks || blocks[i].addr != dptr) {
		code = R_INVALID_VALUE;
		goto out;
	}
	/* With unified addressing a block may be freed from any context. */
	devices[blocks[i].ctx->device].used -= blocks[i].charged;
	free(blocks[i].mem);
	memmove(&blocks[i], &blocks[i + 1], (nblocks - i - 1) * sizeof *blocks);
	nblocks--;
out:
	pthread_mutex_unlock(&mu);
	RETURN(code);
}

API CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr dptr) {
	BEGIN(1);
	int code = R_SUCCESS;
	pthread_mutex_lock(&mu);
	if (!current(&code)) {
		goto out;
	}
	size_t i = block_containing(dptr);
	if (i == nblocks) {
		code = R_NOT_FOUND;
		goto out;
	}
	if (base) {
		*base = blocks[i].addr;
	}
	if (size) {
		*size = blocks[i].size;
	}
out:
	pthread_mutex_unlock(&mu);
	RETURN(code);
}

/* copy moves n bytes between device ranges and host memory; a NULL host
 * side means that side is device memory at its address. */
static int copy(void *dst_host, CUdeviceptr dst, const void *src_host, CUdeviceptr src, size_t n) {
	int code = R_SUCCESS;
	pthread_mutex_lock(&mu);
	if (!current(&code)) {
		goto out;
	}
	if (n == 0) {
		goto out;
	}
	unsigned char *to = dst_host ? dst_host : span(dst, n);
	const unsigned char *from = src_host ? src_host : span(src, n);
	if (!to || !from) {
		code = R_INVALID_VALUE;
		goto out;
	}
	memmove(to, from, n);
out:
	pthread_mutex_unlock(&mu);
	return code;
}

API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
	BEGIN(1);
	if (!src && n > 0) {
		RETURN(R_INVALID_VALUE);
	}
	RETURN(copy(NULL, dst, src, 0, n));
}

API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	BEGIN(1);
	if (!dst && n > 0) {
		RETURN(R_INVALID_VALUE);
	}
	RETURN(copy(dst, 0, NULL, src, n));
}

API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
	BEGIN(1);
	RETURN(copy(NULL, dst, NULL, src, n));
}

/* cuMemcpy takes unified addresses: either side may be device or host
 * memory, told apart by whether it lies in a block. */
API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
	BEGIN(1);
	pthread_mutex_lock(&mu);
	int dst_dev = span(dst, 1) != NULL, src_dev = span(src, 1) != NULL;
	pthread_mutex_unlock(&mu);
	if ((!dst_dev && dst == 0) || (!src_dev && src == 0)) {
		RETURN(n ? R_INVALID_VALUE : R_SUCCESS);
	}
	RETURN(copy(dst_dev ? NULL : (void *)(uintptr_t)dst, dst, src_dev ? NULL : (const void *)(uintptr_t)src, src,
	            n));
}

/* memset sets n elements of width bytes (1, 2 or 4) to value. */
static int memset_n(CUdeviceptr dst, unsigned value, size_t n, size_t width) {
	int code = R_SUCCESS;
	pthread_mutex_lock(&mu);
	if (!current(&code) || n == 0) {
		goto out;
	}
	if (dst % width != 0 || n > SIZE_MAX / width) {
		code = R_INVALID_VALUE;
		goto out;
	}
	unsigned char *to = span(dst, n * width);
	if (!to) {
		code = R_INVALID_VALUE;
		goto out;
	}
	if (width == 1) {
		memset(to, (int)value, n);
	} else {
		for (size_t i = 0; i < n; i++) {
			memcpy(to + i * width, &value, width); /* little-endian: the low bytes */
		}
	}
out:
	pthread_mutex_unlock(&mu);
	return code;
}

API CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t n) {
	BEGIN(1);
	RETURN(memset_n(dst, value, n, 1));
}

API CUresult cuMemsetD16_v2(CUdeviceptr dst, unsigned short value, size_t n) {
	BEGIN(1);
	RETURN(memset_n(dst, value, n, 2));
}

API CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int value, size_t n) {
	BEGIN(1);
	RETURN(memset_n(dst, value, n, 4));
}
