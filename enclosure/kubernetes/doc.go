// Package kubernetes is the enclosure driver for a conversation's pod on
// Kubernetes. It reaches the pod through the API server with
// k8s.io/client-go (client-go, api and apimachinery at one release) and
// never creates, deletes or patches a pod.
//
// The package is split as Nomad splits a task driver:
//
//   - Driver (driver.go) finds and attaches, and owns the client and its
//     configuration (in-cluster, $KUBECONFIG, or kubernetes.kubeconfig);
//   - pod (pod.go) is one attached container of a pod: the relayed-exec
//     core's Container (enclosure/relayexec: Start, LookPath, the stdio
//     socket, the process handle) with the API server's side: the mounts
//     of its workspace volume for MapPath and HostPath (paths.go), whether
//     Berth is its sidecar, and an exec through the exec subresource whose
//     exit code comes from the stream's error.
//
// Execs use the WebSocket executor (v5.channel.k8s.io, which can close
// stdin alone) and fall back to SPDY when the API server refuses the
// upgrade (exec.go). The exec API has no kill: closing the stream leaves
// the process running. So every process runs under Berth's relay
// (cmd/berth-relay), which ends the process group when its stdin closes
// or when told: by a signal frame in its stdin, or by a second exec
// (relay signal) for SIGINT or a stalled stream; the relay is the image's
// own or streamed in through an exec of sh (relayexec.Installer), since there is no
// archive API. The exec API has no working directory or environment
// either: the relay sets them itself, with no shell
// (relayexec.Container.RelaySetsDirEnv).
//
// A process started in the workspace volume gets its stdin and stdout
// over a unix socket there (kubernetes.stdio: socket, relay.Sockets),
// which Berth reads and writes directly; the socket's token is the first
// line of the relay's stdin, since the exec takes no environment and a
// command line is readable by every process in the pod. Where Berth does
// not see the directory, or the relay cannot reach the socket (a volume
// mounted on another node), the exec's stream carries them.
//
// Dial (dial.go) port-forwards, with a connection of its own per Dial,
// since one failed forward closes the whole session; a Berth that is a
// sidecar in the same pod dials plain loopback instead.
package kubernetes
