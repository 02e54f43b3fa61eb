#include "stats.h"

static int total;

void stats_add(int v) {
	total += v;
}

int stats_total(void) {
	return total;
}
