// Package ask implements ask_user: the one way a run asks the human
// something. It validates the card, numbers it per conversation, hands it to
// the harness through Run.Harness.Ask and turns the outcome (answered,
// skipped, timed out, no human) into a result the model can act on.
//
// It must never block without a bound (every wait ends at the configured
// timeout, which also cancels the card at the harness) and never import the
// protocol package: the harness is reached only through orchestrator.Harness.
package ask
