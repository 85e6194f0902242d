/*
 * A stand-in for ROCm's librpd_tracer.so (rocmProfileData rpd_tracer) for tests that run
 * without ROCm. It exports the same extern "C" functions with the same signatures
 * (rpd_tracer.h) and appends one line per call to "<path of this .so>.calls", so that every
 * copy of the library loaded by a test writes its own log. Like the real tracer it reads
 * RPDT_AUTOSTART and RPDT_FILENAME in a constructor, i.e. when it is loaded; it logs what it
 * saw there.
 *
 * Build: cc -shared -fPIC -o librpd_tracer.so stub.c -ldl
 * -DSTUB_NO_FLUSH leaves rpdflush out (a broken or foreign library).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char log_path[4096] = "stub_rpd_tracer.calls";
static int active_count = 0;

static void log_line(const char *fmt, ...)
{
    FILE *f = fopen(log_path, "a");
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

__attribute__((constructor)) static void stub_init(void)
{
    Dl_info info;
    if (dladdr((void *)&stub_init, &info) && info.dli_fname)
        snprintf(log_path, sizeof log_path, "%s.calls", info.dli_fname);
    const char *autostart = getenv("RPDT_AUTOSTART");
    const char *file = getenv("RPDT_FILENAME");
    log_line("init autostart=%s file_exists=%d", autostart ? autostart : "(unset)",
             file != NULL && access(file, R_OK) == 0);
}

/* Reference-counted like the real rpdstart/rpdstop. */
void rpdstart(void)
{
    active_count++;
    log_line("rpdstart");
}

void rpdstop(void)
{
    if (active_count > 0)
        active_count--;
    else
        log_line("UNBALANCED");
    log_line("rpdstop");
}

#ifndef STUB_NO_FLUSH
void rpdflush(void)
{
    log_line("rpdflush");
}
#endif

void rpd_rangePush(const char *domain, const char *apiName, const char *args)
{
    log_line("rpd_rangePush %s %s %s", domain ? domain : "", apiName ? apiName : "",
             args ? args : "");
}

void rpd_rangePop(void)
{
    log_line("rpd_rangePop");
}
