#ifndef GREET_H
#define GREET_H

/* greet writes a greeting for name into out. */
int greet(const char *name, char *out, int size);

#endif
