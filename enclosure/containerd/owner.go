package containerd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	cerrdefs "github.com/containerd/errdefs"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// What a Berth killed with SIGKILL leaves behind, and how the next one
// removes it.
//
// containerd keeps an exec'd process's record (the shim its pid file)
// until a client Deletes it, and the FIFO directory is removed by the
// client that made it; a Berth that dies does neither, and containerd
// lists a task's running processes (Pids) but not the exited execs it
// keeps. So the FIFO directories are the record: a driver that has execs
// is an owner, with a lock file in the FIFO directory that it holds
// (flock) as long as it has any, and names each exec and its FIFO
// directory after itself:
//
//	berth-OWNER.lock                     held while the owner has execs
//	berth-OWNER-TAG@NAMESPACE@CONTAINER  one exec's FIFOs; berth-OWNER-TAG is its exec id
//	berth-OWNER-kept.TAG@...             the same for a kept process's relay (Cmd.Keep)
//
// On Attach the driver sweeps the directories of owners whose lock is
// free (the kernel let go of it when the owner died): it ends each exec
// that still runs, Deletes it and removes its FIFOs and the lock file. A
// flock, unlike a pid, is right across pid namespaces (a Berth in a
// container of its own shares the FIFO directory with the host's) and is
// never reused; and since it belongs to an open file, a driver's own
// lock is as held to another driver of the same process. A kept
// process's exec is the exception: its relay holds it for a Berth that
// comes back (issue 29), and ends it after enclosure.reattach_grace, so
// the sweep leaves it while it runs, and Deletes it once it has ended.
// An owner whose
// last exec is gone removes its lock file, so a Berth that ends cleanly
// leaves nothing.

const (
	ownerPrefix = "berth-"
	lockSuffix  = ".lock"
	dirSep      = "@" // never in a containerd identifier
)

// owner is a driver's claim on the execs it has.
type owner struct {
	token string
	lock  *os.File // flock'd LOCK_EX
	execs int      // guarded by Driver.ownMu
}

func newToken() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

func lockName(token string) string { return ownerPrefix + token + lockSuffix }

// keptMark marks the exec id of a kept process's relay.
const keptMark = "kept."

// execID is a new exec id of the owner, marked when kept: a valid
// containerd identifier.
func (o *owner) execID(kept bool) string {
	if kept {
		return ownerPrefix + o.token + "-" + keptMark + newToken()
	}
	return ownerPrefix + o.token + "-" + newToken()
}

// execDir is the name of an exec's FIFO directory.
func execDir(execID, namespace, containerID string) string {
	return execID + dirSep + namespace + dirSep + containerID
}

// acquire returns the driver's claim for one more exec, made first if
// the driver has none; release gives it back once the exec and its FIFO
// directory are gone.
func (d *Driver) acquire() (*owner, error) {
	d.ownMu.Lock()
	defer d.ownMu.Unlock()
	if d.own == nil {
		o, err := d.claim()
		if err != nil {
			return nil, err
		}
		d.own = o
	}
	d.own.execs++
	return d.own, nil
}

func (d *Driver) release(o *owner) {
	d.ownMu.Lock()
	defer d.ownMu.Unlock()
	if o.execs--; o.execs == 0 && d.own == o {
		o.drop()
		d.own = nil
	}
}

// claim makes a new owner: a lock file of its own, created and locked. A
// sweeper may take the lock between the two, find it free and remove the
// file; then the lock is on a file no longer there, and it tries again.
func (d *Driver) claim() (*owner, error) {
	dir := d.opts.FIFODir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, d.fifoDirError(err)
	}
	for range 3 {
		token := newToken()
		path := filepath.Join(dir, lockName(token))
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
		if err != nil {
			return nil, d.fifoDirError(err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			f.Close()
			return nil, d.fifoDirError(err)
		}
		if sameFile(f, path) {
			return &owner{token: token, lock: f}, nil
		}
		f.Close()
	}
	return nil, d.fifoDirError(errors.New("its lock file was removed three times while being made"))
}

func (d *Driver) fifoDirError(err error) error {
	return fmt.Errorf("containerd: the FIFO directory %s, where Berth makes each exec's FIFOs: %v: it must be writable by Berth and seen by containerd's shims at the same path (mount it into Berth's container at that path)", d.opts.FIFODir, err)
}

// sameFile says whether path still names the open file f.
func sameFile(f *os.File, path string) bool {
	a, err1 := f.Stat()
	b, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// drop removes the lock file and lets go of the lock: what is left of
// the owner's execs is free for a sweep.
func (o *owner) drop() {
	_ = os.Remove(o.lock.Name())
	_ = o.lock.Close()
}

// leftExec is an exec's FIFO directory as its name tells it.
type leftExec struct {
	dir, owner, id, namespace, container string
	kept                                 bool // a kept process's relay: left while it runs
}

// parseLeft reads a name of the FIFO directory: an owner's lock file, or
// an exec's FIFO directory; anything else (ctr's and other clients'
// directories) is not Berth's and ok is false.
func parseLeft(name string) (token string, x *leftExec, ok bool) {
	rest, ok := strings.CutPrefix(name, ownerPrefix)
	if !ok {
		return "", nil, false
	}
	if t, ok := strings.CutSuffix(rest, lockSuffix); ok && isToken(t) {
		return t, nil, true
	}
	parts := strings.Split(name, dirSep)
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return "", nil, false
	}
	t, tag, ok := strings.Cut(strings.TrimPrefix(parts[0], ownerPrefix), "-")
	tag, kept := strings.CutPrefix(tag, keptMark)
	if !ok || !isToken(t) || !isToken(tag) {
		return "", nil, false
	}
	return t, &leftExec{dir: name, owner: t, id: parts[0], namespace: parts[1], container: parts[2], kept: kept}, true
}

func isToken(s string) bool {
	if len(s) != 12 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// sweep removes what owners that are gone left in the FIFO directory:
// their execs, ended and Deleted, their FIFOs and their lock files. An
// owner whose lock is held (this driver included) lives and is left
// alone. What cannot be removed now (containerd did not answer, a
// process did not end) stays for the next sweep.
func (d *Driver) sweep(ctx context.Context, cli *client.Client) {
	entries, err := os.ReadDir(d.opts.FIFODir)
	if err != nil {
		return
	}
	left := map[string][]*leftExec{}
	for _, e := range entries {
		token, x, ok := parseLeft(e.Name())
		if !ok {
			continue
		}
		if x != nil {
			left[token] = append(left[token], x)
		} else if _, seen := left[token]; !seen {
			left[token] = nil
		}
	}
	locks := map[string]*os.File{} // gone owners' locks, held until closed; nil without a lock file
	var execs []*leftExec
	for token, xs := range left {
		if lock, gone := d.ownerGone(token); gone {
			locks[token] = lock
			execs = append(execs, xs...)
		}
	}
	kept := d.reapAll(ctx, cli, execs)
	for token, lock := range locks {
		if lock != nil {
			if !kept[token] {
				_ = os.Remove(lock.Name())
			}
			lock.Close()
		}
	}
}

// reapParallel bounds the execs reaped at once. Each may wait reapWait
// for a process that ignores SIGTERM; one at a time, a dead Berth that
// left ten of them would cost the next Attach ten times that.
const reapParallel = 8

// reapAll reaps the execs, reapParallel at a time, loading each
// container's task once, and returns the owners some of whose execs are
// left.
func (d *Driver) reapAll(ctx context.Context, cli *client.Client, execs []*leftExec) map[string]bool {
	type where struct{ namespace, container string }
	in := map[where][]*leftExec{}
	for _, x := range execs {
		w := where{x.namespace, x.container}
		in[w] = append(in[w], x)
	}
	var (
		mu   sync.Mutex
		kept = map[string]bool{}
		g    errgroup.Group
	)
	g.SetLimit(reapParallel)
	for w, xs := range in {
		nctx := namespaces.WithNamespace(ctx, w.namespace)
		task, err := d.leftTask(nctx, cli, w.container)
		for _, x := range xs {
			g.Go(func() error {
				if !d.reap(nctx, task, err, x) {
					mu.Lock()
					kept[x.owner] = true
					mu.Unlock()
				}
				return nil
			})
		}
	}
	_ = g.Wait() // reap returns no error: what is left is kept
	return kept
}

// ownerGone takes the owner's lock if it is free: the owner is gone. An
// owner without a lock file is gone too (it made its execs only once it
// held one). The lock returned, when not nil, is held until closed.
func (d *Driver) ownerGone(token string) (*os.File, bool) {
	path := filepath.Join(d.opts.FIFODir, lockName(token))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, true
	}
	if err != nil {
		return nil, false
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
}

// reapWait is how long a left process has to end after SIGTERM before
// SIGKILL: the relay ends its group at once, with SIGKILL after its
// grace (2s).
const reapWait = 5 * time.Second

// reap ends and Deletes one exec a gone owner left in task (or taskErr,
// loading it), and removes its FIFO directory; it says whether nothing
// of it is left. Its output FIFOs are drained meanwhile (cio's Attach),
// since the shim's copy of what is left there waits for a reader.
func (d *Driver) reap(ctx context.Context, task client.Task, taskErr error, x *leftExec) bool {
	dir := filepath.Join(d.opts.FIFODir, x.dir)
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	var proc client.Process
	err := taskErr
	if err == nil && x.kept {
		// Its relay holds it for a Berth that comes back, and ends it
		// after its grace: left alone, unread, while it runs; a later
		// sweep Deletes it.
		if p, lerr := task.LoadProcess(ctx, x.id, nil); lerr == nil {
			if st, serr := p.Status(ctx); serr != nil || st.Status == client.Running || st.Status == client.Paused || st.Status == client.Pausing {
				return false
			}
		}
	}
	if err == nil {
		proc, err = task.LoadProcess(ctx, x.id, cio.NewAttach(cio.WithStreams(nil, io.Discard, io.Discard)))
	}
	if cerrdefs.IsNotFound(err) {
		// Its container, its task (and every exec with it) or the exec
		// itself is gone.
		_ = os.RemoveAll(dir)
		return true
	}
	if err != nil {
		d.opts.Log.Warn("containerd: an exec left by a Berth that is gone", "container", x.container, "exec", x.id, "err", err)
		return false
	}
	// Delete closes the attached FIFOs once the shim is done with them;
	// when it fails, or is not reached, they are closed here.
	defer func() {
		proc.IO().Cancel()
		_ = proc.IO().Close()
	}()
	if !d.end(ctx, proc) {
		return false
	}
	if _, err := proc.Delete(ctx); err != nil && !cerrdefs.IsNotFound(err) {
		d.opts.Log.Warn("containerd: deleting an exec left by a Berth that is gone", "container", x.container, "exec", x.id, "err", err)
		return false
	}
	_ = os.RemoveAll(dir) // the stdin FIFO, and the directory should Delete have failed
	d.opts.Log.Debug("containerd: deleted an exec left by a Berth that is gone", "container", x.container, "exec", x.id)
	return true
}

// leftTask loads the container's task, once for all its left execs.
func (d *Driver) leftTask(ctx context.Context, cli *client.Client, container string) (client.Task, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	ctr, err := cli.LoadContainer(ctx, container)
	if err != nil {
		return nil, err
	}
	return ctr.Task(ctx, nil)
}

// end sends a process that still runs SIGTERM, which the relay passes to
// its group (SIGKILL to the relay alone would leave the group running),
// and waits reapWait for its exit; one still running then ignores
// SIGTERM (a bare exec has no relay to end it) and gets SIGKILL, or it
// would cost every later Attach reapWait and never end. It says whether
// the process has ended.
func (d *Driver) end(ctx context.Context, proc client.Process) bool {
	st, err := proc.Status(ctx)
	if err != nil {
		return cerrdefs.IsNotFound(err)
	}
	if st.Status == client.Stopped || st.Status == client.Created {
		return true // Created: made, never started (Delete takes it)
	}
	exit, err := proc.Wait(ctx) // the exit, or an error once ctx ends
	if err != nil {
		return false
	}
	if err := proc.Kill(ctx, syscall.SIGTERM); err != nil && !cerrdefs.IsNotFound(err) {
		return false
	}
	select {
	case es := <-exit:
		return es.Error() == nil
	case <-time.After(reapWait):
	}
	if err := proc.Kill(ctx, syscall.SIGKILL); err != nil && !cerrdefs.IsNotFound(err) {
		return false
	}
	return (<-exit).Error() == nil
}
