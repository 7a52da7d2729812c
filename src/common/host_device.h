// Marks small arithmetic helpers that must compile for host and device.
#pragma once

#if defined(__CUDACC__)
#define SWA_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define SWA_HOST_DEVICE inline
#endif
