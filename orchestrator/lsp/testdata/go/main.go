package main

import (
	"fmt"

	"example.com/demo/greet"
)

func main() {
	var g greet.Greeter = greet.English{Excited: true}
	fmt.Println(g.Greet("world"))
	fmt.Println("héllo 🌍", greet.Hello("wörld"))
	fmt.Println(greet.Hello("again"), greet.Hello("twice"))
}
