// The Version section: swa_version_number, swa_version_string.
#include "swacache.h"

extern "C" {

SWA_API uint32_t swa_version_number(void) { return SWA_VERSION_NUMBER; }

SWA_API const char* swa_version_string(void) {
#define SWA_STR2_(x) #x
#define SWA_STR_(x) SWA_STR2_(x)
  return SWA_STR_(SWA_VERSION_MAJOR) "." SWA_STR_(SWA_VERSION_MINOR) "." SWA_STR_(SWA_VERSION_PATCH);
}

}  // extern "C"
