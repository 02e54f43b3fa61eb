package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/host"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// failingDial is the real host enclosure with a Dial that fails, the
// fault an engine gives when its container went away.
type failingDial struct{ enclosure.Enclosure }

func (failingDial) Dial(context.Context, int) (net.Conn, error) { return nil, errors.New("injected") }

// Issue 15 item 1: the enclosure hook times process starts and counts
// failed operations by driver and op, without the driver knowing.
func TestEnclosureHookTimesStartsAndCountsFailures(t *testing.T) {
	m := NewForTest()
	enc := m.Enclosure(host.New())
	if enc.Driver() != DriverHost || enc.ID() != host.New().ID() {
		t.Fatalf("the wrapper changed the enclosure's identity: %s/%s", enc.Driver(), enc.ID())
	}
	p, err := enc.Start(context.Background(), enclosure.Cmd{Path: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := enc.Start(context.Background(), enclosure.Cmd{Path: "/nonexistent/berth-no-such-binary"}); err == nil {
		t.Fatal("starting a missing binary succeeded")
	}
	if _, err := enc.LookPath(context.Background(), "berth-no-such-binary"); err == nil {
		t.Fatal("LookPath found a missing binary")
	}
	if n := testutil.CollectAndCount(m.EnclosureExec); n != len(Drivers) {
		t.Errorf("exec histogram has %d series, want %d", n, len(Drivers))
	}
	if got := histogramCount(t, m, DriverHost); got != 2 {
		t.Errorf("exec duration observed %d starts, want 2", got)
	}
	for op, want := range map[string]float64{OpStart: 1, OpLookPath: 0, OpAttach: 0} {
		if got := testutil.ToFloat64(m.EnclosureErrors.WithLabelValues(DriverHost, op)); got != want {
			t.Errorf("errors{host,%s} = %v, want %v (a missing executable is an answer, not a failure)", op, got, want)
		}
	}
	if _, err := m.Enclosure(failingDial{host.New()}).Dial(context.Background(), 1); err == nil {
		t.Fatal("the injected Dial failure was lost")
	}
	if got := testutil.ToFloat64(m.EnclosureErrors.WithLabelValues(DriverHost, OpDial)); got != 1 {
		t.Errorf("errors{host,dial} = %v, want 1", got)
	}
	m.AttachFailed(DriverDocker, fmt.Errorf("container gone: %w", enclosure.ErrNotFound))
	m.AttachFailed(DriverDocker, fmt.Errorf("needs an id: %w", enclosure.ErrInvalidConfig))
	m.AttachFailed("no-such-driver", errors.New("unknown"))
	if got := testutil.ToFloat64(m.EnclosureErrors.WithLabelValues(DriverDocker, OpAttach)); got != 1 {
		t.Errorf("errors{docker,attach} = %v, want 1 (the caller's own mistake is not counted)", got)
	}
}

func histogramCount(t *testing.T, m *Metrics, driver string) uint64 {
	t.Helper()
	var out dto.Metric
	if err := m.EnclosureExec.WithLabelValues(driver).(prometheus.Metric).Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetHistogram().GetSampleCount()
}
