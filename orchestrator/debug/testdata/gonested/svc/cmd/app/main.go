package main

import (
	"fmt"

	"example.com/svc/internal/greet"
)

func main() {
	msg := greet.Hello("svc")
	fmt.Println(msg)
}
