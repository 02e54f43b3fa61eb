// Package docs holds Berth's documentation: one Markdown file per reader's
// question, entered from the README. It has no code; its test checks that
// every relative link and anchor in README.md and docs/ resolves.
package docs
