package vulkan

// TuneEnv names the environment variable of the Vulkan GEMM autotuner
// (tune.go): "1" times the GEMM shapes that the device's tuning cache does
// not hold yet, as they are lowered (Device.Supports, Prepare or
// Stream.Launch), and caches the picks; "0" uses no picks; anything else
// uses the cached picks alone. Without cgo there is no Vulkan backend and
// it does nothing.
const TuneEnv = "VRUN_VK_TUNE"
