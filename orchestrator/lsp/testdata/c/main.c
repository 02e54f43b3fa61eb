#include <stdio.h>

#include "greet.h"

struct point {
	int x, y;
};

int main(void) {
	char buf[64];
	struct point p = {1, 2};
	greet("wörld 🌍", buf, sizeof buf); greet("x", buf, p.x);
	puts(buf);
	return 0;
}
