/*
 * A stand-in for Windows' bcryptprimitives.dll, for running Go programs
 * under Wine 8 (Debian 12's wine64) in CI. It is never shipped.
 *
 * Why: since Go 1.24 the runtime of every Windows program takes its random
 * bytes from ProcessPrng in bcryptprimitives.dll (Windows 10 and later) and
 * dies at start-up when the DLL or the function is missing ("fatal error:
 * bcryptprimitives.dll not found"). Wine 8.0, Debian 12's, has neither
 * (later Wine releases do). This DLL exports ProcessPrng and fills the buffer from
 * RtlGenRandom (SystemFunction036 in advapi32), which Wine 8 implements.
 * .ci/wine.sh builds it with MinGW and puts it into the Wine prefix's
 * system32, where the Go runtime looks for it.
 */
#include <windows.h>

BOOLEAN NTAPI SystemFunction036(PVOID buf, ULONG len); /* RtlGenRandom */

/* ProcessPrng fills data with n random bytes. Like Windows' own, it always
 * returns TRUE; RtlGenRandom takes a ULONG length, so large requests are
 * filled in pieces. */
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T n) {
	while (n > 0) {
		ULONG k = n > 0x40000000 ? 0x40000000 : (ULONG)n;
		if (!SystemFunction036(data, k)) {
			return FALSE;
		}
		data += k;
		n -= k;
	}
	return TRUE;
}
