#include <swacache.h>

int main(void) { return swa_version_number() == SWA_VERSION_NUMBER ? 0 : 1; }
