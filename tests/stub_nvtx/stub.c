/*
 * An NVTX tool for tests that run without Nsight Systems. NVTX (nvToolsExt.h, compiled into
 * the application by the `nvtx` crate) loads the library named by NVTX_INJECTION64_PATH on the
 * first NVTX call, calls its InitializeInjectionNvtx2 with NvtxGetExportTable, and the tool
 * fills the slots of the function tables it wants to receive, exactly as Nsight Systems does.
 * The declarations below follow nvToolsExt.h and nvtxDetail/nvtxTypes.h (NVTX v3 headers).
 *
 * Every call is appended as one tab-separated line to the file named by STUB_NVTX_LOG
 * (default "<path of this .so>.calls"):
 *   init
 *   domain    <tid> <domain>
 *   start     <tid> <domain> <range id> <message> <payload> <color>
 *   end       <tid> <domain> <range id>
 *   push      <tid> <domain> <message> <payload> <color>
 *   pop       <tid> <domain>
 *   mark      <tid> <domain> <message> <payload> <color>
 *   thread    <tid> <named tid> <name>
 * Calls without a domain log the domain "-".
 *
 * Build: cc -shared -fPIC -o libstub_nvtx.so stub.c -ldl -lpthread
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <wchar.h>

/* ---- from nvToolsExt.h / nvtxTypes.h ---------------------------------------------------- */

typedef struct stub_domain *nvtxDomainHandle_t;
typedef struct stub_string *nvtxStringHandle_t;
typedef uint64_t nvtxRangeId_t;

typedef union nvtxMessageValue_t {
    const char *ascii;
    const wchar_t *unicode;
    nvtxStringHandle_t registered;
} nvtxMessageValue_t;

typedef struct nvtxEventAttributes_v2 {
    uint16_t version;
    uint16_t size;
    uint32_t category;
    int32_t colorType;
    uint32_t color;
    int32_t payloadType;
    int32_t reserved0;
    union {
        uint64_t ullValue;
        int64_t llValue;
        double dValue;
        uint32_t uiValue;
        int32_t iValue;
        float fValue;
    } payload;
    int32_t messageType;
    nvtxMessageValue_t message;
} nvtxEventAttributes_t;

enum { MSG_ASCII = 1, MSG_UNICODE = 2, MSG_REGISTERED = 3 };
enum { PAY_U64 = 1, PAY_I64 = 2, PAY_DOUBLE = 3, PAY_U32 = 4, PAY_I32 = 5, PAY_FLOAT = 6 };
enum { COLOR_ARGB = 1 };

typedef void (*NvtxFunctionPointer)(void);
typedef NvtxFunctionPointer **NvtxFunctionTable;
typedef struct NvtxExportTableCallbacks {
    size_t struct_size;
    int (*GetModuleFunctionTable)(int module, NvtxFunctionTable *out_table,
                                  unsigned int *out_size);
} NvtxExportTableCallbacks;
typedef const void *(*NvtxGetExportTableFunc_t)(uint32_t exportTableId);

enum { ETID_CALLBACKS = 1 };
enum { MODULE_CORE = 1, MODULE_CORE2 = 5 };
enum {
    CORE_MarkEx = 1, CORE_RangeStartEx = 4, CORE_RangeEnd = 7, CORE_RangePushEx = 8,
    CORE_RangePop = 11, CORE_NameOsThreadA = 14
};
enum {
    CORE2_DomainMarkEx = 1, CORE2_DomainRangeStartEx = 2, CORE2_DomainRangeEnd = 3,
    CORE2_DomainRangePushEx = 4, CORE2_DomainRangePop = 5, CORE2_DomainRegisterStringA = 10,
    CORE2_DomainRegisterStringW = 11, CORE2_DomainCreateA = 12
};

/* ---- the log ---------------------------------------------------------------------------- */

struct stub_domain { char name[256]; struct stub_domain *next; };
struct stub_string { char text[1]; };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char log_path[4096] = "stub_nvtx.calls";
static struct stub_domain *domains = NULL;
static nvtxRangeId_t next_range = 1;

static long tid(void) { return (long)syscall(SYS_gettid); }

static void log_line(const char *fmt, ...)
{
    pthread_mutex_lock(&lock);
    FILE *f = fopen(log_path, "a");
    if (f) {
        va_list ap;
        va_start(ap, fmt);
        vfprintf(f, fmt, ap);
        va_end(ap);
        fputc('\n', f);
        fclose(f);
    }
    pthread_mutex_unlock(&lock);
}

static void put_utf8(char **out, char *end, uint32_t c)
{
    char buf[4];
    int n;
    if (c < 0x80) { buf[0] = (char)c; n = 1; }
    else if (c < 0x800) { buf[0] = 0xC0 | (c >> 6); buf[1] = 0x80 | (c & 0x3F); n = 2; }
    else if (c < 0x10000) {
        buf[0] = 0xE0 | (c >> 12); buf[1] = 0x80 | ((c >> 6) & 0x3F);
        buf[2] = 0x80 | (c & 0x3F); n = 3;
    } else {
        buf[0] = 0xF0 | (c >> 18); buf[1] = 0x80 | ((c >> 12) & 0x3F);
        buf[2] = 0x80 | ((c >> 6) & 0x3F); buf[3] = 0x80 | (c & 0x3F); n = 4;
    }
    if (*out + n >= end)
        return;
    memcpy(*out, buf, n);
    *out += n;
}

/* The message as UTF-8 (tabs and newlines become spaces, so that a line stays a line). */
static void message_of(const nvtxEventAttributes_t *a, char *out, size_t cap)
{
    char *p = out, *end = out + cap;
    const char *s = NULL;
    if (!a) { snprintf(out, cap, "(null)"); return; }
    switch (a->messageType) {
    case MSG_ASCII: s = a->message.ascii; break;
    case MSG_REGISTERED: s = a->message.registered ? a->message.registered->text : NULL; break;
    case MSG_UNICODE:
        for (const wchar_t *w = a->message.unicode; w && *w; w++)
            put_utf8(&p, end, (uint32_t)*w);
        *p = 0;
        goto clean;
    default: snprintf(out, cap, "(none)"); return;
    }
    snprintf(out, cap, "%s", s ? s : "(null)");
clean:
    for (p = out; *p; p++)
        if (*p == '\t' || *p == '\n')
            *p = ' ';
}

static void payload_of(const nvtxEventAttributes_t *a, char *out, size_t cap)
{
    if (!a) { snprintf(out, cap, "-"); return; }
    switch (a->payloadType) {
    case PAY_U64: snprintf(out, cap, "u:%llu", (unsigned long long)a->payload.ullValue); break;
    case PAY_I64: snprintf(out, cap, "i:%lld", (long long)a->payload.llValue); break;
    case PAY_DOUBLE: snprintf(out, cap, "d:%g", a->payload.dValue); break;
    case PAY_U32: snprintf(out, cap, "u:%u", a->payload.uiValue); break;
    case PAY_I32: snprintf(out, cap, "i:%d", a->payload.iValue); break;
    case PAY_FLOAT: snprintf(out, cap, "d:%g", (double)a->payload.fValue); break;
    default: snprintf(out, cap, "-");
    }
}

static void color_of(const nvtxEventAttributes_t *a, char *out, size_t cap)
{
    if (a && a->colorType == COLOR_ARGB)
        snprintf(out, cap, "%06x", a->color & 0xFFFFFF);
    else
        snprintf(out, cap, "-");
}

static const char *dname(nvtxDomainHandle_t d) { return d ? d->name : "-"; }

#define DESCRIBE(a)                                                                          \
    char msg[4096], pay[64], col[16];                                                       \
    message_of(a, msg, sizeof msg);                                                          \
    payload_of(a, pay, sizeof pay);                                                          \
    color_of(a, col, sizeof col)

/* ---- the tool's functions --------------------------------------------------------------- */

static nvtxDomainHandle_t domain_create(const char *name)
{
    pthread_mutex_lock(&lock);
    struct stub_domain *d;
    for (d = domains; d; d = d->next)
        if (strcmp(d->name, name) == 0)
            break;
    if (!d) {
        d = calloc(1, sizeof *d);
        snprintf(d->name, sizeof d->name, "%s", name);
        d->next = domains;
        domains = d;
    }
    pthread_mutex_unlock(&lock);
    log_line("domain\t%ld\t%s", tid(), name);
    return d;
}

static nvtxStringHandle_t register_string(nvtxDomainHandle_t d, const char *s)
{
    (void)d;
    struct stub_string *h = malloc(strlen(s) + 1);
    strcpy(h->text, s);
    return h;
}

static nvtxStringHandle_t register_string_w(nvtxDomainHandle_t d, const wchar_t *s)
{
    char buf[4096], *p = buf;
    (void)d;
    for (; s && *s; s++)
        put_utf8(&p, buf + sizeof buf, (uint32_t)*s);
    *p = 0;
    return register_string(d, buf);
}

static nvtxRangeId_t domain_start(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    DESCRIBE(a);
    pthread_mutex_lock(&lock);
    nvtxRangeId_t id = next_range++;
    pthread_mutex_unlock(&lock);
    log_line("start\t%ld\t%s\t%llu\t%s\t%s\t%s", tid(), dname(d), (unsigned long long)id, msg, pay,
             col);
    return id;
}

static void domain_end(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
    log_line("end\t%ld\t%s\t%llu", tid(), dname(d), (unsigned long long)id);
}

static int domain_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    DESCRIBE(a);
    log_line("push\t%ld\t%s\t%s\t%s\t%s", tid(), dname(d), msg, pay, col);
    return 0;
}

static int domain_pop(nvtxDomainHandle_t d)
{
    log_line("pop\t%ld\t%s", tid(), dname(d));
    return 0;
}

static void domain_mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    DESCRIBE(a);
    log_line("mark\t%ld\t%s\t%s\t%s\t%s", tid(), dname(d), msg, pay, col);
}

static void core_mark(const nvtxEventAttributes_t *a) { domain_mark(NULL, a); }
static nvtxRangeId_t core_start(const nvtxEventAttributes_t *a) { return domain_start(NULL, a); }
static void core_end(nvtxRangeId_t id) { domain_end(NULL, id); }
static int core_push(const nvtxEventAttributes_t *a) { return domain_push(NULL, a); }
static int core_pop(void) { return domain_pop(NULL); }
static void name_os_thread(uint32_t t, const char *name)
{
    log_line("thread\t%ld\t%u\t%s", tid(), t, name);
}

static int set_slot(NvtxFunctionTable table, unsigned int size, unsigned int slot,
                    NvtxFunctionPointer f)
{
    if (slot >= size || !table[slot])
        return 0;
    *table[slot] = f;
    return 1;
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table)
{
    const char *path = getenv("STUB_NVTX_LOG");
    Dl_info info;
    if (path && *path)
        snprintf(log_path, sizeof log_path, "%s", path);
    else if (dladdr((void *)&InitializeInjectionNvtx2, &info) && info.dli_fname)
        snprintf(log_path, sizeof log_path, "%s.calls", info.dli_fname);
    log_line("init");

    const NvtxExportTableCallbacks *cb = get_export_table(ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof *cb)
        return 0;
    NvtxFunctionTable t;
    unsigned int n;
    if (!cb->GetModuleFunctionTable(MODULE_CORE, &t, &n))
        return 0;
    set_slot(t, n, CORE_MarkEx, (NvtxFunctionPointer)core_mark);
    set_slot(t, n, CORE_RangeStartEx, (NvtxFunctionPointer)core_start);
    set_slot(t, n, CORE_RangeEnd, (NvtxFunctionPointer)core_end);
    set_slot(t, n, CORE_RangePushEx, (NvtxFunctionPointer)core_push);
    set_slot(t, n, CORE_RangePop, (NvtxFunctionPointer)core_pop);
    set_slot(t, n, CORE_NameOsThreadA, (NvtxFunctionPointer)name_os_thread);
    if (!cb->GetModuleFunctionTable(MODULE_CORE2, &t, &n))
        return 0;
    set_slot(t, n, CORE2_DomainMarkEx, (NvtxFunctionPointer)domain_mark);
    set_slot(t, n, CORE2_DomainRangeStartEx, (NvtxFunctionPointer)domain_start);
    set_slot(t, n, CORE2_DomainRangeEnd, (NvtxFunctionPointer)domain_end);
    set_slot(t, n, CORE2_DomainRangePushEx, (NvtxFunctionPointer)domain_push);
    set_slot(t, n, CORE2_DomainRangePop, (NvtxFunctionPointer)domain_pop);
    set_slot(t, n, CORE2_DomainRegisterStringA, (NvtxFunctionPointer)register_string);
    set_slot(t, n, CORE2_DomainRegisterStringW, (NvtxFunctionPointer)register_string_w);
    set_slot(t, n, CORE2_DomainCreateA, (NvtxFunctionPointer)domain_create);
    return 1; /* success */
}
