/* What one dependent load costs on this machine, by working-set size: the
 * figures docs/memory.md ("The same command three times in one day") uses
 * to explain why the simulator's cost per message steps up once the
 * flows' state leaves the caches.
 *
 *   cc -O2 -o /tmp/mem-latency bench/mem-latency.c && /tmp/mem-latency [--huge]
 *
 * For each size it links the buffer's 64-byte lines into one random cycle
 * (each line holds the index of the next), so every load depends on the
 * one before and no prefetcher can guess it, then follows the cycle for
 * a fixed number of steps and prints nanoseconds per step. With --huge
 * the buffer is 2 MiB-aligned and advised into transparent huge pages
 * (madvise mode), which takes most page walks out of the figure.
 * Deterministic: a fixed-seed generator builds the cycle.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define LINE 64
#define HUGE_PAGE (2u << 20)
#define STEPS 20000000L

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t next_random(void) {
    /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    int huge = argc > 1 && strcmp(argv[1], "--huge") == 0;
    if (argc > 2 || (argc == 2 && !huge)) {
        fprintf(stderr, "usage: mem-latency [--huge]\n");
        return 2;
    }
    static const size_t mib[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
    printf("| working set | ns per dependent load%s |\n|---|---|\n",
           huge ? " (huge pages)" : "");
    for (size_t s = 0; s < sizeof mib / sizeof mib[0]; s++) {
        size_t bytes = mib[s] << 20;
        size_t lines = bytes / LINE;
        size_t alloc = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
        uint64_t *buf = aligned_alloc(HUGE_PAGE, alloc);
        size_t *order = malloc(lines * sizeof *order);
        if (!buf || !order) {
            fprintf(stderr, "mem-latency: out of memory at %zu MiB\n", mib[s]);
            return 1;
        }
        if (huge && madvise(buf, alloc, MADV_HUGEPAGE) != 0)
            perror("mem-latency: madvise(MADV_HUGEPAGE)");
        for (size_t i = 0; i < lines; i++)
            order[i] = i;
        for (size_t i = lines - 1; i > 0; i--) {
            size_t j = next_random() % (i + 1);
            size_t t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        const size_t words = LINE / sizeof(uint64_t);
        for (size_t i = 0; i < lines; i++)
            buf[order[i] * words] = order[(i + 1) % lines] * words;
        size_t p = 0;
        for (size_t i = 0; i < lines; i++) /* touch every line once */
            p = buf[p];
        double t0 = now_ns();
        for (long i = 0; i < STEPS; i++)
            p = buf[p];
        double t1 = now_ns();
        /* p is printed so the loop cannot be dropped. */
        printf("| %zu MiB | %.1f |%s\n", mib[s], (t1 - t0) / STEPS, p == (size_t)-1 ? " " : "");
        free(order);
        free(buf);
    }
    return 0;
}
