// Package errclass is Berth's one set of error classes, as containerd's
// errdefs is containerd's: a sentinel per class, wrapped with %w from the
// drivers up, so that each layer adds its own words and none loses the
// class; and Of, which finds an error's class again. The protocol layer
// maps a class to a JSON-RPC code, or to a tool result's errorClass, once
// (orchestrator/rpc).
//
// An error's class is the first class found in its chain, outermost
// first (as errors.As finds): a layer that knows better may wrap an error
// in another class. context.Canceled is Canceled and
// context.DeadlineExceeded is Timeout.
package errclass

import (
	"context"
	"errors"
	"strings"
)

// Class names a kind of failure: what happened, not where. Its string is
// the name the protocol sends (a tool result's errorClass).
type Class string

// The classes.
const (
	// Invalid: the request is wrong (a bad argument, a path that is
	// not absolute, a workdir the container does not mount); fix it.
	Invalid Class = "invalid"
	// NotFound: what the request names does not exist (an unknown run, a
	// missing executable, a file outside every mount); name another.
	NotFound Class = "not_found"
	// Gone: it existed and no longer serves (a run that ended, a stopped
	// or removed container); only a new one helps. Gone is also NotFound.
	Gone Class = "gone"
	// Unavailable: it exists but cannot serve now (an engine that does
	// not answer, a paused container); the same call can succeed later.
	Unavailable Class = "unavailable"
	// Conflict: the request clashes with the state (a run id in use, a
	// debug session another connection owns).
	Conflict Class = "conflict"
	// Permission: the caller may not do this (a write tool on a
	// read-only surface, a cluster that refuses Berth's identity).
	Permission Class = "permission"
	// Timeout: the call's deadline passed before it was done.
	Timeout Class = "timeout"
	// Canceled: the caller cancelled the call.
	Canceled Class = "canceled"
	// Restarting: Berth is restarting; call again once it is back.
	Restarting Class = "restarting"
	// OutcomeUnknown: the call may or may not have taken effect (its
	// answer was lost); look before repeating it.
	OutcomeUnknown Class = "outcome_unknown"
)

// All is every class, in the order the docs list them.
var All = []Class{Invalid, NotFound, Gone, Unavailable, Conflict, Permission, Timeout, Canceled, Restarting, OutcomeUnknown}

// classError is a class's sentinel.
type classError struct {
	class Class
	word  string
	// also is the broader class this one is a case of (Gone of NotFound).
	also error
	// sentence: a Case, whose words Say keeps.
	sentence bool
}

func (e *classError) Error() string { return e.word }

// Is makes a narrower class also its broader one: errors.Is(gone,
// ErrNotFound) holds.
func (e *classError) Is(target error) bool { return e.also != nil && errors.Is(e.also, target) }

// The sentinels: wrap them with %w. Their words are what errors.Error
// appends; Say drops them again for a person.
var (
	ErrInvalid        error = &classError{class: Invalid, word: "invalid"}
	ErrNotFound       error = &classError{class: NotFound, word: "not found"}
	ErrGone           error = &classError{class: Gone, word: "gone", also: ErrNotFound}
	ErrUnavailable    error = &classError{class: Unavailable, word: "unavailable"}
	ErrConflict       error = &classError{class: Conflict, word: "conflict"}
	ErrPermission     error = &classError{class: Permission, word: "permission denied"}
	ErrTimeout        error = &classError{class: Timeout, word: "timed out"}
	ErrCanceled       error = &classError{class: Canceled, word: "canceled"}
	ErrRestarting     error = &classError{class: Restarting, word: "restarting"}
	ErrOutcomeUnknown error = &classError{class: OutcomeUnknown, word: "outcome unknown"}
)

// Sentinel is class c's sentinel error (nil for a name that is no class).
func (c Class) Sentinel() error {
	for _, s := range sentinels {
		if s.class == c {
			return s
		}
	}
	return nil
}

// Kind is a narrower sentinel of a class, with words of its own
// ("paused", a case of unavailable; "run ended", a case of gone): Of gives
// its class, errors.Is holds for it and for class, and Say drops its words
// too, as a class's.
func Kind(word string, class error) error {
	c, ok := class.(*classError)
	if !ok {
		panic("errclass.Kind: " + word + " is not of a class")
	}
	return &classError{class: c.class, word: word, also: c}
}

// Case is a sentinel of a class whose words say what happened ("file too
// large", "adapter did not answer in time"): Of gives its class and
// errors.Is holds for it and for class, as for a Kind, but Say keeps its
// words, which are the sentence's own, not a class's appended to it.
func Case(text string, class error) error {
	c, ok := class.(*classError)
	if !ok {
		panic("errclass.Case: " + text + " is not of a class")
	}
	return &classError{class: c.class, word: text, also: c, sentence: true}
}

// sentinels are the classes' own sentinels.
var sentinels = []*classError{
	ErrInvalid.(*classError), ErrNotFound.(*classError), ErrGone.(*classError),
	ErrUnavailable.(*classError), ErrConflict.(*classError), ErrPermission.(*classError),
	ErrTimeout.(*classError), ErrCanceled.(*classError), ErrRestarting.(*classError),
	ErrOutcomeUnknown.(*classError),
}

// Of is err's class: the first class sentinel, context.Canceled or
// context.DeadlineExceeded found in its chain, depth first; "" when it
// has none (an internal error).
func Of(err error) Class {
	c, _ := find(err)
	return c
}

// find walks err's chain depth first, as errors.As does.
func find(err error) (Class, bool) {
	for err != nil {
		switch e := err.(type) {
		case *classError:
			return e.class, true
		}
		switch err {
		case context.Canceled:
			return Canceled, true
		case context.DeadlineExceeded:
			return Timeout, true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if c, ok := find(e); ok {
					return c, true
				}
			}
			return "", false
		default:
			return "", false
		}
	}
	return "", false
}

// Reclass is err in class: its message and its chain stay (errors.Is
// still finds the sentinels it wraps) but Of finds class first, for a
// layer that knows better (a workdir the container does not mount is a
// bad run/start, invalid, though the path lookup said not found). class
// is a class's or a kind's sentinel; nil err is nil.
func Reclass(err error, class error) error {
	if err == nil {
		return nil
	}
	if _, ok := class.(*classError); !ok {
		panic("errclass.Reclass: " + class.Error() + " is not a class")
	}
	return &reclassed{err: err, class: class}
}

// reclassed is Reclass's error: its class first in the chain.
type reclassed struct{ err, class error }

func (r *reclassed) Error() string   { return r.err.Error() }
func (r *reclassed) Unwrap() []error { return []error{r.class, r.err} }

// Bare says whether err is a class's or kind's sentinel itself, with no
// words of a caller around it: a message that says nothing but its class.
func Bare(err error) bool {
	_, ok := err.(*classError)
	return ok
}

// Is-helpers, as errdefs has: each holds for its class and every class
// that is a case of it (IsNotFound holds for Gone).
func IsInvalid(err error) bool     { return errors.Is(err, ErrInvalid) }
func IsNotFound(err error) bool    { return errors.Is(err, ErrNotFound) }
func IsGone(err error) bool        { return errors.Is(err, ErrGone) }
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }
func IsConflict(err error) bool    { return errors.Is(err, ErrConflict) }
func IsPermission(err error) bool  { return errors.Is(err, ErrPermission) }
func IsTimeout(err error) bool {
	return errors.Is(err, ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
}
func IsCanceled(err error) bool {
	return errors.Is(err, ErrCanceled) || errors.Is(err, context.Canceled)
}
func IsRestarting(err error) bool     { return errors.Is(err, ErrRestarting) }
func IsOutcomeUnknown(err error) bool { return errors.Is(err, ErrOutcomeUnknown) }

// Say is err's message for a person: without the words of the classes
// and kinds that %w appended (": gone", ": paused"), which tell code what
// happened and only make a sentence longer. Only the words of sentinels
// in err's chain go, so an operating system's "open x: permission
// denied" stays whole; a Case's words, and those of a class Reclass put
// on (which appended none), stay too.
func Say(err error) string {
	if err == nil {
		return ""
	}
	words := map[string]bool{}
	appended(err, words)
	msg := err.Error()
	for {
		cut := false
		for w := range words {
			if t, ok := strings.CutSuffix(msg, ": "+w); ok {
				msg, cut = t, true
			}
		}
		if !cut {
			return msg
		}
	}
}

// appended collects the words of the class sentinels in err's chain
// whose words its message carries.
func appended(err error, words map[string]bool) {
	for err != nil {
		switch e := err.(type) {
		case *classError:
			if !e.sentence {
				words[e.word] = true
			}
			return
		case *reclassed:
			err = e.err
			continue
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				appended(e, words)
			}
			return
		default:
			return
		}
	}
}
