// Element storage by byte size, for kernels that only move elements.
#if ESIZE == 1
#define E_T uint8_t
#elif ESIZE == 2
#define E_T uint16_t
#elif ESIZE == 4
#define E_T uint
#else
#define E_T uvec2
#endif
