package main

import (
	"fmt"
	"os"
	"strings"
)

func square(n int) int {
	result := n * n
	return result
}

func main() {
	items := make([]int, 500)
	for i := range items {
		items[i] = i
	}
	text := strings.Repeat("x", 10000)
	name := "berth"

	total := square(7)
	fmt.Println("total", total, len(items), len(text), name)
	fmt.Fprintln(os.Stderr, "to stderr")
}
