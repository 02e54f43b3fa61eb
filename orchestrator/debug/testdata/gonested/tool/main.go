package main

import "fmt"

func main() {
	n := 6 * 7
	fmt.Println("tool", n)
}
