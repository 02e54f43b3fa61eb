// Package docker is the enclosure driver for a conversation's existing
// Docker container. It attaches to a running container (by id or name, or
// the one labelled berth.conversation=<id>) through the Engine API client
// github.com/moby/moby/client, with API version negotiation (Debian's
// engine speaks API 1.41), and never creates, starts, stops or removes
// one.
//
// The package is split as Nomad splits a task driver:
//
//   - Driver (driver.go) finds and attaches, and owns the engine client;
//   - container (container.go) is one attached container: the
//     relayed-exec core's Container (enclosure/relayexec: Start, LookPath,
//     the stdio socket, the process handle) with the engine's side, an
//     exec whose stream is split into stdout and stderr and whose exit
//     code the engine reports.
//
// Every process runs under Berth's relay (cmd/berth-relay), installed
// into the container at Attach (install.go): the Engine API cannot kill
// an exec'd process, and a dropped attach connection leaves it running,
// so the relay puts the program in a process group of its own and ends
// the group when told (relay signal) or when its stdin closes. Execs use
// Tty: false, since a TTY merges stdout and stderr and rewrites newlines,
// breaking Content-Length framing.
//
// A process started in a directory that Berth sees too (the workdir's
// bind mount) gets its stdin and stdout over a unix socket there
// (docker.stdio: socket, relay.StdioListener), straight between Berth
// and the program; the exec's stream then carries stderr, the relay's
// signals and the run's end. Elsewhere, or where the relay cannot reach
// the socket, the exec's stream carries stdin and stdout too.
//
// Dial reaches a port on the container's loopback through an exec of
// "relay dial" (dial.go), which works with --network none and needs no
// privileges; a Berth that runs as root on the engine's host can instead
// enter the container's network namespace (docker.dial: netns).
package docker
