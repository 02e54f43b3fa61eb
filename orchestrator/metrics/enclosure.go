package metrics

import (
	"context"
	"errors"
	"net"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-dev/berth/enclosure"
)

// Enclosure returns enc with its Start, Dial and LookPath timed and their
// errors counted by driver and op, so that no driver imports this package.
// A driver outside Drivers is returned as it is: its name would be an
// unbounded label.
func (m *Metrics) Enclosure(enc enclosure.Enclosure) enclosure.Enclosure {
	if enc == nil || !slices.Contains(Drivers, enc.Driver()) {
		return enc
	}
	d := enc.Driver()
	return &timedEnclosure{Enclosure: enc, m: m, driver: d, exec: m.EnclosureExec.WithLabelValues(d)}
}

// AttachFailed counts a run/start whose enclosure could not be attached.
// Errors the caller made (an unknown driver, a missing id: ErrInvalidConfig)
// are not enclosure failures and are not counted; an enclosure that cannot
// host Berth's processes (ErrNotSupported, also of the invalid class) is.
func (m *Metrics) AttachFailed(driver string, err error) {
	if err == nil || errors.Is(err, enclosure.ErrInvalidConfig) && !errors.Is(err, enclosure.ErrNotSupported) || !slices.Contains(Drivers, driver) {
		return
	}
	m.EnclosureErrors.WithLabelValues(driver, OpAttach).Inc()
}

// timedEnclosure is an enclosure whose calls feed the enclosure metrics;
// MapPath and HostPath are pure path arithmetic and pass through. Its
// exec histogram is looked up once, at wrapping, not at every Start.
type timedEnclosure struct {
	enclosure.Enclosure
	m      *Metrics
	driver string
	exec   prometheus.Observer
}

// Check passes through: it asks the enclosure itself, not a wrapper
// that would hide its Checker.
func (e *timedEnclosure) Check(ctx context.Context) error {
	return enclosure.Check(ctx, e.Enclosure)
}

func (e *timedEnclosure) Start(ctx context.Context, cmd enclosure.Cmd) (enclosure.Process, error) {
	start := time.Now()
	p, err := e.Enclosure.Start(ctx, cmd)
	e.exec.Observe(time.Since(start).Seconds())
	e.failed(OpStart, err)
	return p, err
}

func (e *timedEnclosure) LookPath(ctx context.Context, name string) (string, error) {
	p, err := e.Enclosure.LookPath(ctx, name)
	// A missing executable is an answer (detect asks for servers that
	// may not be installed), not a failing enclosure.
	if !errors.Is(err, enclosure.ErrNotFound) {
		e.failed(OpLookPath, err)
	}
	return p, err
}

func (e *timedEnclosure) Dial(ctx context.Context, port int) (net.Conn, error) {
	c, err := e.Enclosure.Dial(ctx, port)
	e.failed(OpDial, err)
	return c, err
}

func (e *timedEnclosure) failed(op string, err error) {
	if err != nil {
		e.m.EnclosureErrors.WithLabelValues(e.driver, op).Inc()
	}
}
