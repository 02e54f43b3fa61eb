// Package greet says hello.
package greet

// Greeter greets people.
type Greeter interface {
	Greet(name string) string
}

// English greets in English.
type English struct{ Excited bool }

// Greet returns a greeting for name.
func (e English) Greet(name string) string {
	if e.Excited {
		return "Hello, " + name + "!"
	}
	return "Hello, " + name
}

// Hello greets name in English.
func Hello(name string) string {
	return English{}.Greet(name)
}
