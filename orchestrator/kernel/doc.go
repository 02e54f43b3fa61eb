// Package kernel provides eval: persistent Python and JavaScript kernels,
// one per (run, language), each an interpreter running a driver embedded in
// the binary and spoken to over its own stdin and stdout with the bridge
// protocol. It owns the kernel factory, cells (output, displays, the last
// value, errors), the idle budget that interrupts a silent cell, tool()
// re-entry into the run's harness, and the culling of unused kernels.
//
// It must never open a port or socket to a kernel, never start a process
// other than through the run's enclosure, and never let a kernel outlive
// its run.
package kernel
