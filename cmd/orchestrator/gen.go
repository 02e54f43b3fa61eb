package main

// docs/configuration.md is generated from the configuration structs and
// their doc comments (internal/configdoc); TestConfigurationDocMatchesTheCode
// fails when the two disagree, and with -update rewrites the file.
//go:generate go test -run ^TestConfigurationDocMatchesTheCode$ . -args -update
