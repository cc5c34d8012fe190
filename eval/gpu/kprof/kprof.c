// kprof: where a CUDA process's GPU time goes, kernel by kernel, inside the ranges the process
// marks with cuProfilerStart / cuProfilerStop (examples/device_check.rs marks each bench's timed
// updates), from CUPTI's activity records (the GPU's own start and end of every kernel, copy
// and memset). Preloaded into the process; the lent GPU machines have no Nsight Systems.
//
//   KPROF_OUT=prof.txt KPROF_DIV=10 LD_PRELOAD=libkprof.so device_check --bench-only
//
// For each range: its length, the GPU time summed over kernels (busy; more than the length
// when kernels overlap), then every kernel name with its time and launches, both divided by
// KPROF_DIV (the updates in a range), largest first. Built by eval/gpu/kprof/build.sh against
// CUPTI 13's headers (the nvidia-cuda-cupti wheel); libcupti.so.13 at run time is the GPU
// image's (PyTorch's wheels ship it).
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_SIZE (8u << 20)
#define MAX_NAMES 4096

typedef struct {
    char *name;
    uint64_t ns;
    uint64_t count;
} Entry;

static Entry entries[MAX_NAMES];
static int n_entries;
static int range_index;
static uint64_t range_start;
static FILE *out;
static double div_by = 1.0;

static Entry *entry(const char *name) {
    for (int i = 0; i < n_entries; i++)
        if (strcmp(entries[i].name, name) == 0) return &entries[i];
    if (n_entries == MAX_NAMES) return &entries[MAX_NAMES - 1];
    entries[n_entries].name = strdup(name);
    entries[n_entries].ns = 0;
    entries[n_entries].count = 0;
    return &entries[n_entries++];
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = aligned_alloc(8, BUF_SIZE);
    *size = BUF_SIZE;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *record = NULL;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
            CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)record;
            Entry *e = entry(k->name ? k->name : "?");
            e->ns += k->end - k->start;
            e->count++;
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)record;
            const char *kind = m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD   ? "[memcpy host->device]"
                               : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? "[memcpy device->host]"
                               : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD ? "[memcpy device->device]"
                                                                                  : "[memcpy other]";
            Entry *e = entry(kind);
            e->ns += m->end - m->start;
            e->count++;
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            CUpti_ActivityMemset4 *m = (CUpti_ActivityMemset4 *)record;
            Entry *e = entry("[memset]");
            e->ns += m->end - m->start;
            e->count++;
            break;
        }
        default:
            break;
        }
    }
    free(buffer);
}

static int by_time(const void *a, const void *b) {
    const Entry *x = a, *y = b;
    return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

static void enable(int on) {
    CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                  CUPTI_ACTIVITY_KIND_MEMSET};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        on ? cuptiActivityEnable(kinds[i]) : cuptiActivityDisable(kinds[i]);
}

static void report(void) {
    uint64_t end = 0;
    cuptiGetTimestamp(&end);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    qsort(entries, n_entries, sizeof(Entry), by_time);
    uint64_t busy = 0, launches = 0;
    for (int i = 0; i < n_entries; i++) {
        busy += entries[i].ns;
        launches += entries[i].count;
    }
    fprintf(out, "## range %d: %.3f ms long, GPU busy %.3f ms, %.1f launches (per %g)\n", range_index,
            (end - range_start) / 1e6 / div_by, busy / 1e6 / div_by, launches / div_by, div_by);
    for (int i = 0; i < n_entries; i++) {
        fprintf(out, "%10.3f ms %5.1f%% %8.1f  %.160s\n", entries[i].ns / 1e6 / div_by,
                busy ? 100.0 * entries[i].ns / busy : 0.0, entries[i].count / div_by, entries[i].name);
        free(entries[i].name);
    }
    fflush(out);
    n_entries = 0;
}

static void CUPTIAPI on_driver_call(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void *data) {
    (void)user;
    const CUpti_CallbackData *call = data;
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
    if (id == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart && call->callbackSite == CUPTI_API_EXIT) {
        n_entries = 0;
        cuptiGetTimestamp(&range_start);
        enable(1);
    } else if (id == CUPTI_DRIVER_TRACE_CBID_cuProfilerStop && call->callbackSite == CUPTI_API_ENTER) {
        // the process waited for the device before (device_check reads a loss): all recorded
        report();
        enable(0);
        range_index++;
    }
}

__attribute__((constructor)) static void kprof_init(void) {
    const char *path = getenv("KPROF_OUT");
    if (!path) return;
    out = fopen(path, "a");
    if (!out) return;
    const char *d = getenv("KPROF_DIV");
    if (d && atof(d) > 0) div_by = atof(d);
    CUpti_SubscriberHandle subscriber;
    if (cuptiSubscribe(&subscriber, on_driver_call, NULL) != CUPTI_SUCCESS) {
        fprintf(out, "kprof: cuptiSubscribe failed\n");
        return;
    }
    cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart);
    cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop);
    cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    fprintf(out, "kprof: ready (KPROF_DIV %g)\n", div_by);
    fflush(out);
}
