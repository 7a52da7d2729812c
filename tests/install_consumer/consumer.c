/* Smallest useful consumer of an installed libswacache. */
#include <stdio.h>
#include <swacache.h>

int main(void) {
  swa_layer_desc_t layer;
  swa_config_t config;
  swa_cache_t* cache = NULL;
  swa_layout_t layout;
  uint32_t slot = 0;
  swa_layer_desc_init(&layer);
  swa_config_init(&config);
  config.num_layers = 1;
  config.layers = &layer;
  config.max_slots = 2;
  config.draft_tokens = 5;
  if (swa_version_number() != SWA_VERSION_NUMBER) return 1;
  if (swa_cache_create(&config, &cache) != SWA_OK) {
    fprintf(stderr, "create: %s\n", swa_last_error());
    return 1;
  }
  layout.struct_size = sizeof layout;
  if (swa_cache_layout(cache, &layout) != SWA_OK || layout.slot_bytes != 134 * 528) return 1;
  if (swa_slot_alloc(cache, &slot) != SWA_OK) return 1;
  swa_cache_destroy(cache);
  printf("consumer OK: swacache %s, slot_bytes %llu\n", swa_version_string(),
         (unsigned long long)layout.slot_bytes);
  return 0;
}
