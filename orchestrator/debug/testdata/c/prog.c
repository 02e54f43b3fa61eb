#include <stdio.h>
#include <string.h>

static int square(int n) {
	int result = n * n;
	return result;
}

int main(void) {
	int items[500];
	for (int i = 0; i < 500; i++)
		items[i] = i;
	char text[10001];
	memset(text, 'x', 10000); text[10000] = '\0';
	const char *name = "berth";

	int total = square(7);
	printf("total %d %s %zu\n", total, name, strlen(text));
	fprintf(stderr, "to stderr\n");
	return 0;
}
