#include <stdio.h>

#include "greet.h"

int greet(const char *name, char *out, int size) {
	return snprintf(out, size, "Hello, %s", name);
}
