/* The experimental part of include/swacache.h is declared only under
 * SWACACHE_EXPERIMENTAL (docs/api.md, "API stability"). Compiled twice by
 * ctest, as a C99 syntax check:
 *  - without the macro, this file declares the experimental names itself with
 *    other meanings, which compiles only if the header did not declare them;
 *  - with it, this file uses them, which compiles only if the header did. */
#include "swacache.h"

#ifndef SWACACHE_EXPERIMENTAL

typedef int swa_decode_graph_t;
typedef double swa_graph_error_t;
enum { SWA_GRAPH_OK = 7 };
int swa_decode_graph_create(void);
int swa_slot_set_lengths(int);
int swa_decode_graph_step;

#else

static swa_status_t (*const create)(swa_cache_t*, uint32_t, uint32_t,
                                    swa_decode_graph_t**) = swa_decode_graph_create;
static swa_status_t (*const set_lengths)(swa_cache_t*, const uint32_t*, const int32_t*,
                                         const int32_t*, size_t) = swa_slot_set_lengths;
int experimental_gate_sizes[sizeof(swa_graph_error_t) > 0 && SWA_GRAPH_OK == 0 ? 1 : -1];
void experimental_gate_use(void) {
  (void)create;
  (void)set_lengths;
}

#endif

/* The stable part is declared either way. */
static swa_status_t (*const stable)(const swa_config_t*, swa_cache_t**) = swa_cache_create;
void experimental_gate_stable(void) { (void)stable; }
