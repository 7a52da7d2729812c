/* The library is linked with -z nodelete: dlclose() never unmaps it. The
 * store layer's hash workers (src/store/hash_workers.cc) are started once and
 * never joined, parked in the library's code; unmapping that code under them
 * would crash the process at their next wake-up. This checks that the loader
 * keeps the library after its last dlclose(). Argument: the library's path. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s LIBSWACACHE_SO\n", argv[0]);
    return 2;
  }
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    fprintf(stderr, "dlopen(%s): %s\n", argv[1], dlerror());
    return 1;
  }
  if (dlsym(h, "swa_status_string") == NULL) {
    fprintf(stderr, "dlsym(swa_status_string): %s\n", dlerror());
    return 1;
  }
  if (dlclose(h) != 0) {
    fprintf(stderr, "dlclose: %s\n", dlerror());
    return 1;
  }
  void* again = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
  if (again == NULL) {
    fprintf(stderr,
            "%s was unmapped by its last dlclose(): it must be linked with -z nodelete "
            "(its hash worker threads outlive every handle)\n",
            argv[1]);
    return 1;
  }
  dlclose(again);
  printf("dlopen_nodelete: the library stays mapped after its last dlclose()\n");
  return 0;
}
