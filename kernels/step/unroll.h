// `#pragma unroll` for loops of host+device helpers: on the device a loop over
// a small array must unroll, or the array lives in local memory (a stack
// frame, spills); host compilers do not know the pragma (-Wunknown-pragmas).
#pragma once

#if defined(__CUDA_ARCH__)
#define SWA_DEVICE_UNROLL _Pragma("unroll")
#else
#define SWA_DEVICE_UNROLL
#endif
