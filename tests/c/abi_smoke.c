/* A pure C99 consumer: create a cache, read the layout, allocate slots, and
 * check that errors come back as codes with messages. Compiled with
 * -std=c99 -Wall -Wextra -Werror -pedantic. */
#include <stdio.h>
#include <string.h>

#include "swacache.h"

static int failures = 0;
#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n",   \
              __FILE__, __LINE__, #cond, swa_last_error());           \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

int main(void) {
  swa_layer_desc_t layers[3];
  swa_config_t config;
  swa_cache_t* cache = NULL;
  swa_layout_t layout;
  swa_layer_layout_t ll;
  swa_tensor_view_t view;
  swa_slot_info_t info;
  uint32_t slots[4];
  uint32_t extra = 0;
  swa_store_memory_config_t mc;
  swa_store_memory_stats_t ms;
  swa_kv_store_t store;
  swa_iov_t iov;
  static const uint8_t key[3] = {'s', 'e', 'q'};
  int i;

  for (i = 0; i < 3; ++i) swa_layer_desc_init(&layers[i]);
  layers[2].role = SWA_LAYER_DROPPED;
  swa_config_init(&config);
  config.draft_tokens = 5;
  config.max_slots = 4;
  config.backend = SWA_BACKEND_CPU;
  config.num_layers = 3;
  config.layers = layers;

  /* An invalid configuration first: a code and a message naming the field. */
  layers[1].head_dim = 40;
  CHECK(swa_cache_create(&config, &cache) == SWA_INVALID_ARGUMENT);
  CHECK(cache == NULL);
  CHECK(strstr(swa_last_error(), "layers[1].head_dim = 40") != NULL);
  CHECK(strcmp(swa_status_string(SWA_INVALID_ARGUMENT), "INVALID_ARGUMENT") == 0);
  layers[1].head_dim = 512;

  CHECK(swa_cache_create(&config, &cache) == SWA_OK);
  if (cache == NULL) return 1;

  layout.struct_size = sizeof layout;
  CHECK(swa_cache_layout(cache, &layout) == SWA_OK);
  CHECK(layout.ring_len == 134);
  CHECK(layout.slot_bytes == 3u * 134u * 528u);
  CHECK(layout.stored_bytes == 2u * 134u * 528u);
  CHECK(layout.num_stored_layers == 2);
  CHECK(layout.max_ring_tokens == 7);

  ll.struct_size = sizeof ll;
  CHECK(swa_cache_layer_layout(cache, 2, &ll) == SWA_OK);
  CHECK(ll.ring_offset == 2u * 134u * 528u);
  CHECK(ll.vec_bytes == 528 && ll.heads_per_token == 1);

  view.struct_size = sizeof view;
  CHECK(swa_cache_layer_view(cache, 1, &view) == SWA_OK);
  CHECK(view.ndim == 4 && view.shape[1] == 134 && view.strides[1] == 528);
  CHECK(swa_cache_layer_view(cache, 3, &view) == SWA_OUT_OF_RANGE);

  for (i = 0; i < 4; ++i) CHECK(swa_slot_alloc(cache, &slots[i]) == SWA_OK);
  CHECK(swa_slot_alloc(cache, &extra) == SWA_RESOURCE_EXHAUSTED);
  CHECK(swa_slot_copy(cache, slots[0], slots[1]) == SWA_OK);
  CHECK(swa_slot_free(cache, slots[3]) == SWA_OK);
  CHECK(swa_slot_free(cache, slots[3]) == SWA_FAILED_PRECONDITION);
  info.struct_size = sizeof info;
  CHECK(swa_slot_info(cache, slots[3], &info) == SWA_OK && info.allocated == 0);
  CHECK(swa_slot_info(cache, slots[0], &info) == SWA_OK && info.allocated == 1);
  info.struct_size = 1;
  CHECK(swa_slot_info(cache, slots[0], &info) == SWA_INVALID_ARGUMENT);

  /* The built-in memory store through its C names; swa_iov_t is a plain pair. */
  CHECK(sizeof iov == sizeof iov.data + sizeof iov.size);
  swa_store_memory_config_init(&mc);
  CHECK(mc.struct_size == sizeof mc && mc.budget_bytes == (uint64_t)1 << 30);
  swa_kv_store_init(&store);
  CHECK(swa_store_memory_create(&mc, &store) == SWA_OK);
  CHECK(swa_cache_set_store(cache, &store) == SWA_OK);
  CHECK(swa_slot_save(cache, slots[0], key, sizeof key) == SWA_OK);
  CHECK(swa_slot_restore(cache, slots[1], key, sizeof key) == SWA_OK);
  ms.struct_size = sizeof ms;
  CHECK(swa_store_memory_stats(&store, &ms) == SWA_OK);
  CHECK(ms.puts == 1 && ms.hits == 1 && ms.entries == 1);

  swa_cache_destroy(cache);
  if (failures == 0) printf("abi_smoke: OK (libswacache %s)\n", swa_version_string());
  return failures == 0 ? 0 : 1;
}
