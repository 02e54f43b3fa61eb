// Package containerd is the enclosure driver for a conversation's existing
// containerd container: one made by nerdctl, by Kubernetes' CRI (namespace
// k8s.io) or by a harness with ctr. It attaches through containerd's Go
// client, github.com/containerd/containerd/v2/client, which speaks to
// containerd 1.6 and newer, and never creates, starts or deletes a
// container or a task.
//
// The package is split as Nomad splits a task driver:
//
//   - Driver (driver.go) finds and attaches, and owns the client;
//   - container (container.go) is one attached container: the
//     relayed-exec core's Container (enclosure/relayexec: Start, LookPath,
//     the stdio socket, the process handle) with containerd's side: its
//     task, its OCI spec (the process spec every exec starts from, the
//     mounts for MapPath and HostPath);
//   - proc (handle.go) is one exec'd process and its FIFOs;
//   - owner (owner.go) names each exec and its FIFO directory after the
//     driver that made it, so that Attach can remove what a Berth that
//     died (SIGKILL) left: its execs' records in the shim, and its FIFOs.
//
// Every process runs under Berth's relay (cmd/berth-relay), as with
// Docker. containerd has no copy API, so the relay is the image's own
// (baked in at relay.InstallPath) or streamed through an exec of sh
// (relayexec.Installer, from Attach). A process started in a directory Berth sees too gets
// its stdin and stdout over a unix socket there (containerd.stdio:
// socket), as with Docker. An exec's other stdio (all of it without a
// socket) are FIFOs between Berth and the task's shim, not a connection
// through containerd, so:
//
//   - stdin is closed with CloseIO right after the exec started (earlier
//     is lost, since the shim opens the FIFO at start): the shim then
//     holds no writer of its own, and the relay reads EOF as soon as
//     Berth's end closes, whether Berth closed it or died;
//   - a process keeps running across a restart of containerd; only its
//     exit status waits for containerd to answer again;
//   - every exec'd process is deleted once it has exited (what is left of
//     its output moves to memory first), which removes its FIFOs and the
//     shim's state of it; a Berth that dies cannot, so the next Attach
//     does, for every owner whose lock is free (owner.go).
package containerd
