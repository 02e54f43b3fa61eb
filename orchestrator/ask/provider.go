package ask

import (
	"fmt"
	"sync"
	"time"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// Provider offers ask_user for runs whose harness declared the questions
// feature (it has a human destination); the registry hides the tool from
// other runs and says which feature is off if one calls it anyway.
type Provider struct {
	timeout time.Duration
	metrics *metrics.Metrics

	mu sync.Mutex
	// cards holds the last card number per conversation: conversations
	// outlive runs, so the count lives here rather than in a run.
	cards map[string]int
}

var _ orchestrator.Provider = (*Provider)(nil)

// New builds the provider. A zero or negative timeout is a configuration
// error.
func New(cfg Config, m *metrics.Metrics) (*Provider, error) {
	if cfg.Timeout <= 0 {
		return nil, fmt.Errorf("questions.timeout must be positive (for example 10m), got %s", cfg.Timeout)
	}
	return &Provider{timeout: cfg.Timeout, metrics: m, cards: map[string]int{}}, nil
}

// Feature is orchestrator.FeatureQuestions.
func (p *Provider) Feature() string { return orchestrator.FeatureQuestions }

// Tools returns ask_user.
func (p *Provider) Tools(*orchestrator.Run) []orchestrator.Tool {
	return []orchestrator.Tool{askTool{p}}
}

// runCards numbers the cards of a run that has no conversation id; it is
// dropped with the run.
type runCards struct {
	mu   sync.Mutex
	last int
}

type runCardsKey struct{}

// nextNumber returns the next card number for the run's conversation, or
// for the run itself when it has no conversation id.
func (p *Provider) nextNumber(run *orchestrator.Run) int {
	if run.ConversationID == "" {
		rc := run.Value(runCardsKey{}, func() any { return &runCards{} }).(*runCards)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.last++
		return rc.last
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cards[run.ConversationID]++
	return p.cards[run.ConversationID]
}
