/*
 * bench/gen_loads.c: what a windowed query's look in g generations costs
 * the memory, without the filter. Loads of random words, in one of three
 * shapes, with `filler` dependent multiplies after each lookup (the rest of
 * a call, which waits for the lookup's answer):
 *
 *   plain  seven words of one 128 KiB array (a standard item's probes);
 *   gens   two words (a standard item's gate) in each of g such arrays,
 *          placed one after another, with a spare after the last;
 *   digest (with SHRINK given) the gate in the first array, and for each of
 *          the other g - 1 one word of a digest SHRINK times smaller (BITS
 *          bits of the item in it, 2 or 4; a third of a digest's bits are
 *          set, as in a half-full one), the gate of that array read only
 *          where all of them are set: a smaller filter of each
 *          generation's items looked at before the generation itself.
 *
 * And one shape of another design, a generation stamp per cell instead of
 * a bit per generation (an add writes the current generation's number, a
 * query takes the item's cells' smallest and compares it with the oldest
 * live one): `gen_loads stamps FILLER` times seven bytes of a 1 MiB array
 * (the cells of a 128 KiB filter) against seven bits of the 128 KiB one.
 *
 * Small pages: the arrays are shared anonymous memory (shmem), as a
 * filter's are. Huge pages: private anonymous memory inside one 2 MiB page
 * (MADV_HUGEPAGE; "AnonHugePages" is printed to show it was given).
 *
 *   gcc -O2 -o /tmp/gen_loads bench/gen_loads.c
 *   /tmp/gen_loads HUGE G FILLER [SHRINK [BITS]]   e.g. /tmp/gen_loads 0 4 10 2 4
 *   /tmp/gen_loads stamps FILLER                   e.g. /tmp/gen_loads stamps 10
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static uint64_t state = 88172645463325252ull;

static inline uint64_t next(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* An item's gate in array `b` of `words` words: its first two words. */
static inline uint64_t gate(const uint64_t *b, size_t words, uint64_t h, uint64_t h2) {
    return b[(h >> 20) % words] & b[((h + h2) >> 20) % words];
}

/* Seven random bits of a 128 KiB array against seven random bytes of a
 * 1 MiB one, `filler` dependent multiplies after each lookup. */
static int stamps(int filler) {
    const size_t cells = (size_t)1 << 20, words = cells / 64;
    uint64_t *bits = mmap(0, cells / 8, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    uint8_t *stamp = mmap(0, cells, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (bits == MAP_FAILED || stamp == MAP_FAILED)
        return perror("mmap"), 1;
    for (size_t i = 0; i < words; i++)
        bits[i] = next() & next() & next();
    for (size_t i = 0; i < cells; i++)
        stamp[i] = (uint8_t)next();
    const long n = 20000000;
    uint64_t acc = 0;
    for (int mode = 0; mode < 2; mode++) {
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            uint64_t h = next(), h2 = h * 0x9E3779B97F4A7C15ull, r = ~0ull;
            unsigned least = 255;
            for (int k = 0; k < 7; k++) {
                uint64_t cell = (h + k * h2) >> 44; /* < 2**20 */
                if (mode) {
                    unsigned v = stamp[cell];
                    least = v < least ? v : least;
                } else {
                    r &= bits[cell / 64] >> (cell % 64);
                }
            }
            acc += mode ? least >= 200 : r & 1;
            for (int f = 0; f < filler; f++) {
                acc = acc * 31 + f;
                __asm__ volatile("" ::"r"(acc));
            }
        }
        printf("filler=%d  %-13s %6.2f ns per lookup\n", filler, mode ? "stamps (1 MiB)" : "bits (128 KiB)",
               (now_ns() - t0) / n);
    }
    return acc == 42;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "stamps"))
        return stamps(atoi(argv[2]));
    if (argc < 4 || argc > 6) {
        fprintf(stderr, "usage: gen_loads HUGE(0|1) G FILLER [SHRINK [BITS]]\n");
        return 2;
    }
    int huge = atoi(argv[1]), g = atoi(argv[2]), filler = atoi(argv[3]);
    int shrink = argc >= 5 ? atoi(argv[4]) : 0, bits = argc == 6 ? atoi(argv[5]) : 2;
    if (g < 1 || g > 15 || filler < 0 || (argc >= 5 && shrink != 2 && shrink != 4 && shrink != 8 && shrink != 16) ||
        (bits != 2 && bits != 4)) {
        fprintf(stderr, "gen_loads: G from 1 to 15, FILLER 0 or more, SHRINK 2, 4, 8 or 16, BITS 2 or 4\n");
        return 2;
    }
    const size_t gen = 128 * 1024, words = gen / 8;
    const size_t dwords = shrink ? words / shrink : 0;
    const size_t total = (size_t)(g + 1) * gen + (size_t)g * dwords * 8;
    const size_t page2m = (size_t)2 << 20;
    char *m;
    if (huge) {
        char *raw = mmap(0, total + 2 * page2m, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED)
            return perror("mmap"), 1;
        m = (char *)(((uintptr_t)raw + page2m - 1) & ~(uintptr_t)(page2m - 1));
        madvise(m, total < page2m ? page2m : total, MADV_HUGEPAGE);
    } else {
        m = mmap(0, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return perror("mmap"), 1;
    }
    uint64_t *a = (uint64_t *)m;
    const size_t ring_words = (size_t)(g + 1) * words;
    for (size_t i = 0; i < total / 8; i++) {
        uint64_t r1 = next(), r2 = next(), r3 = next();
        /* Generations: about one bit in eight set (their loads are ANDed
         * without a branch, so this does not matter); digests: about one
         * in three. */
        a[i] = i < ring_words ? r1 & r2 & r3 : (r1 & r2) | (r3 & next() & next());
    }
    const uint64_t *digests = a + ring_words;

    const long n = 20000000;
    uint64_t acc = 0;
    static const char *const names[] = {"plain", "gens", "digest"};
    for (int mode = 0; mode < (shrink ? 3 : 2); mode++) {
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            uint64_t h = next(), h2 = h * 0x9E3779B97F4A7C15ull, r = ~0ull;
            if (mode == 2) {
                r = gate(a, words, h, h2);
                uint64_t mask = (1ull << (h2 >> 58)) | (1ull << ((h2 >> 52) & 63));
                if (bits == 4)
                    mask |= (1ull << ((h2 >> 46) & 63)) | (1ull << ((h2 >> 40) & 63));
                for (int s = 1; s < g; s++) {
                    uint64_t d = digests[(size_t)s * dwords + (h2 >> 20) % dwords];
                    if ((d & mask) == mask)
                        r &= gate(a + (size_t)s * words, words, h, h2);
                }
            } else if (mode == 1) {
                for (int s = 0; s < g; s++)
                    r &= gate(a + (size_t)s * words, words, h, h2);
            } else {
                for (int k = 0; k < 7; k++)
                    r &= a[((h + k * h2) >> 20) % words];
            }
            acc += r;
            for (int f = 0; f < filler; f++) {
                acc = acc * 31 + f;
                __asm__ volatile("" ::"r"(acc));
            }
        }
        printf("pages %s  g=%d  filler=%d  %-6s %6.2f ns per lookup\n", huge ? "2 MiB" : "4 KiB", g, filler,
               names[mode], (now_ns() - t0) / n);
    }
    if (huge) {
        FILE *f = fopen("/proc/self/smaps_rollup", "r");
        char line[256];
        while (f && fgets(line, sizeof line, f))
            if (strstr(line, "AnonHuge"))
                fputs(line, stdout);
        if (f)
            fclose(f);
    }
    return acc == 42; /* keeps the loads */
}
