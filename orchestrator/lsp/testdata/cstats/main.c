#include <stdio.h>

#include "stats.h"

int main(void) {
	stats_add(1);
	stats_add(2);
	printf("%d\n", stats_total());
	return 0;
}
