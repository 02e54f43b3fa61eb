package enclosure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Spec names an enclosure as run/start gives it: Driver "host", "auto", or
// a driver with an ID.
type Spec struct {
	Driver string `json:"driver"`
	ID     string `json:"id,omitempty"`
}

// Lookup finds the enclosure a run should use, from a table of drivers.
// It never creates one.
type Lookup struct {
	// Host is the host enclosure, used for "host" and as auto's fallback.
	Host Enclosure
	// Drivers are the container drivers by name.
	Drivers map[string]Driver
	// Auto names the drivers "auto" tries, in order (enclosure.auto).
	Auto []string
	// NoHostFallback forbids the host (enclosure.host_fallback: false):
	// "auto" finding no container is an error, and so is asking for the
	// host, so that a sandboxed platform's tools never run on Berth's own
	// machine.
	NoHostFallback bool
	// Log receives a line for each engine auto skipped.
	Log *slog.Logger
}

// Find returns the enclosure for spec:
//   - "" or "host": the host, unless NoHostFallback;
//   - "auto": the one running enclosure labelled
//     berth.conversation=<conversationID> that a driver in Auto finds,
//     else the host (or an error with NoHostFallback); several found is an
//     error naming them; an engine that does not answer is skipped;
//   - a driver's name with an id: that driver's enclosure, or an error.
func (l *Lookup) Find(ctx context.Context, spec Spec, conversationID string) (Enclosure, error) {
	switch spec.Driver {
	case "", "host":
		if l.NoHostFallback {
			return nil, fmt.Errorf("the host enclosure is disabled here (enclosure.host_fallback is false): pass \"auto\" or {driver, id} to attach to the conversation's container: %w", ErrInvalidConfig)
		}
		if spec.ID != "" && spec.ID != l.Host.ID() {
			return nil, fmt.Errorf("host enclosure has no id %q: omit the id or use %q: %w", spec.ID, l.Host.ID(), ErrInvalidConfig)
		}
		return l.Host, nil
	case "auto":
		if spec.ID != "" {
			return nil, fmt.Errorf("\"auto\" takes no id (it finds the container labelled %s=<conversationId>): omit the id, or name the driver: %w", ConversationLabel, ErrInvalidConfig)
		}
		return l.auto(ctx, conversationID)
	}
	d, ok := l.Drivers[spec.Driver]
	if !ok {
		return nil, fmt.Errorf("unknown enclosure driver %q: use one of %s: %w", spec.Driver, strings.Join(l.names(), ", "), ErrInvalidConfig)
	}
	if spec.ID == "" {
		return nil, fmt.Errorf("driver %q needs an id: pass {driver: %q, id: <container id or name>}, or \"auto\": %w", spec.Driver, spec.Driver, ErrInvalidConfig)
	}
	return d.Attach(ctx, spec.ID)
}

func (l *Lookup) auto(ctx context.Context, conversationID string) (Enclosure, error) {
	if conversationID == "" {
		// No container can carry the label of no conversation: the host,
		// as when none is found.
		if !l.NoHostFallback {
			return l.Host, nil
		}
		return nil, fmt.Errorf("\"auto\" needs the run's conversationId to find the container labelled %s=<conversationId>: pass conversationId, or name the enclosure: %w", ConversationLabel, ErrInvalidConfig)
	}
	var found []string
	var hits []Driver
	var tried []string
	for _, name := range l.Auto {
		d, ok := l.Drivers[name]
		if !ok {
			continue
		}
		ids, err := d.Find(ctx, conversationID)
		if err != nil {
			why := "did not answer"
			if errors.Is(err, ErrRefused) {
				why = "refused Berth"
			}
			if l.Log != nil {
				l.Log.Warn("enclosure auto: skipping a driver whose engine "+why, "driver", name, "err", err)
			}
			tried = append(tried, name+" ("+why+")")
			continue
		}
		tried = append(tried, name)
		for _, id := range ids {
			found = append(found, name+":"+id)
			hits = append(hits, d)
		}
	}
	switch len(found) {
	case 1:
		_, id, _ := strings.Cut(found[0], ":")
		return hits[0].Attach(ctx, id)
	case 0:
		if l.NoHostFallback {
			return nil, fmt.Errorf("no running container is labelled %s=%s (tried: %s) and enclosure.host_fallback is false: label the conversation's container, or name it with {driver, id}: %w", ConversationLabel, conversationID, strings.Join(tried, ", "), ErrNotFound)
		}
		return l.Host, nil
	}
	return nil, fmt.Errorf("%d running containers are labelled %s=%s (%s): a conversation has one; name it with {driver, id}: %w", len(found), ConversationLabel, conversationID, strings.Join(found, ", "), ErrInvalidConfig)
}

func (l *Lookup) names() []string {
	names := []string{`"host"`, `"auto"`}
	for _, n := range slices.Sorted(maps.Keys(l.Drivers)) {
		names = append(names, strconv.Quote(n))
	}
	return names
}
