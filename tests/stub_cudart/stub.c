/*
 * A stand-in for the CUDA runtime (libcudart.so) for tests that run without a GPU. It exports
 * the profiler API of cuda_profiler_api.h with its real signatures,
 *   cudaError_t cudaProfilerStart(void);  cudaError_t cudaProfilerStop(void);
 * (cudaError_t is an int-sized enum, cudaSuccess = 0), and appends one line per call,
 * "<call> <thread id> <depth after the call>", to "<path of this .so>.calls", so that every
 * copy loaded by a test writes its own log. -DSTUB_FAIL=<code> makes cudaProfilerStart return
 * that code without starting.
 *
 * -DSTUB_DRIVER builds the driver's names instead (CUresult cuProfilerStart(void), ...), as in
 * libcuda.so; -DSTUB_NO_STOP leaves the stop function out (a foreign library).
 *
 * Build: cc -shared -fPIC -o libcudart.so stub.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef STUB_DRIVER
#define START cuProfilerStart
#define STOP cuProfilerStop
#else
#define START cudaProfilerStart
#define STOP cudaProfilerStop
#endif
#define STR2(x) #x
#define STR(x) STR2(x)

static char log_path[4096] = "stub_cudart.calls";
static int depth = 0;

static void log_call(const char *what, int code)
{
    FILE *f = fopen(log_path, "a");
    if (!f)
        return;
    fprintf(f, "%s %ld %d %d\n", what, (long)syscall(SYS_gettid), depth, code);
    fclose(f);
}

__attribute__((constructor)) static void stub_init(void)
{
    Dl_info info;
    if (dladdr((void *)&stub_init, &info) && info.dli_fname)
        snprintf(log_path, sizeof log_path, "%s.calls", info.dli_fname);
    log_call("load", 0);
}

int START(void)
{
#ifdef STUB_FAIL
    log_call(STR(START), STUB_FAIL);
    return STUB_FAIL;
#endif
    depth++;
    log_call(STR(START), 0);
    return 0;
}

#ifndef STUB_NO_STOP
int STOP(void)
{
    /* The real API returns cudaSuccess for a stop without a start; the log shows it. */
    if (depth > 0)
        depth--;
    else
        log_call("UNBALANCED", 0);
    log_call(STR(STOP), 0);
    return 0;
}
#endif
