#ifndef STATS_H
#define STATS_H

void stats_add(int v);
int stats_total(void);

#endif
