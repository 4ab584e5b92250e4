/* Checks the conformance library's own guard: two threads run one handle at the same time,
 * which a binding must never do. Usage: concurrency_probe <libdlr.so> <slow model> <stats model>
 * Prints one JSON line: both run statuses, the error of the failed run and the library's count
 * of concurrent uses read through its stats model. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

typedef void* DLRModelHandle;
typedef int (*CreateFn)(DLRModelHandle*, const char*, int, int);
typedef int (*DeleteFn)(DLRModelHandle*);
typedef int (*RunFn)(DLRModelHandle*);
typedef int (*SetInputFn)(DLRModelHandle*, const char*, const int64_t*, const void*, int);
typedef int (*GetOutputFn)(DLRModelHandle*, int, void*);
typedef const char* (*LastErrorFn)(void);

static RunFn run;
static LastErrorFn last_error;
static DLRModelHandle shared_handle;

struct RunResult {
  int status;
  char error[512];
};

static void* RunOnce(void* arg) {
  struct RunResult* result = (struct RunResult*)arg;
  result->status = run(&shared_handle);
  snprintf(result->error, sizeof(result->error), "%s", result->status == 0 ? "" : last_error());
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) return 3;
  CreateFn create = (CreateFn)dlsym(lib, "CreateDLRModel");
  DeleteFn destroy = (DeleteFn)dlsym(lib, "DeleteDLRModel");
  SetInputFn set_input = (SetInputFn)dlsym(lib, "SetDLRInput");
  GetOutputFn get_output = (GetOutputFn)dlsym(lib, "GetDLROutput");
  run = (RunFn)dlsym(lib, "RunDLRModel");
  last_error = (LastErrorFn)dlsym(lib, "DLRGetLastError");
  if (!create || !destroy || !set_input || !get_output || !run || !last_error) return 4;

  if (create(&shared_handle, argv[2], 1, 0) != 0) return 5;
  const int64_t shape[2] = {1, 4};
  const float x[4] = {1, 2, 3, 4};
  if (set_input(&shared_handle, "x", shape, x, 2) != 0) return 6;
  struct RunResult results[2];
  pthread_t threads[2];
  for (int i = 0; i < 2; ++i) pthread_create(&threads[i], NULL, RunOnce, &results[i]);
  for (int i = 0; i < 2; ++i) pthread_join(threads[i], NULL);
  destroy(&shared_handle);

  DLRModelHandle stats;
  int64_t counters[6] = {0};
  if (create(&stats, argv[3], 1, 0) != 0 || run(&stats) != 0 || get_output(&stats, 0, counters) != 0) return 7;
  destroy(&stats);
  const char* error = results[0].status != 0 ? results[0].error : results[1].error;
  printf("{\"statuses\":[%d,%d],\"concurrentUses\":%lld,\"error\":\"", results[0].status, results[1].status,
         (long long)counters[0]);
  for (const char* c = error; *c; ++c) {
    if (*c == '"' || *c == '\\') putchar('\\');
    putchar(*c);
  }
  printf("\"}\n");
  return 0;
}
