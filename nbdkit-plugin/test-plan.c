/* gpuraid - unit test for plan.c: the touched ranges of a stripe piece,
 * the aligned coding range, and the RMW/RCW/degraded write choice,
 * checked by brute force over small geometries. */
#undef NDEBUG
#include <stdio.h>
#include <string.h>

#include "plan.h"

static int failures;

#define CHECK(cond, ...)                                                \
  do {                                                                  \
    if (!(cond)) {                                                      \
      if (failures++ < 20) {                                            \
        fprintf (stderr, "%s:%d: FAIL: %s: ", __FILE__, __LINE__, #cond); \
        fprintf (stderr, __VA_ARGS__);                                  \
        fprintf (stderr, "\n");                                         \
      }                                                                 \
    }                                                                   \
  } while (0)

static void
check_piece (uint32_t chunk, uint32_t lm, int k, uint32_t so, uint32_t len)
{
  struct gr_piece pc;
  uint32_t mina = chunk, maxb = 0, total = 0;
  size_t expect_off = 0;
  int i;

  gr_piece_init (&pc, chunk, lm, 7, so, len);
  CHECK (pc.s == 7 && pc.i0 == (int) (so / chunk)
         && pc.i1 == (int) ((so + len - 1) / chunk) && pc.i1 < k,
         "chunk=%u so=%u len=%u: i0=%d i1=%d", chunk, so, len, pc.i0, pc.i1);
  for (i = pc.i0; i <= pc.i1; i++) {
    uint32_t a = gr_piece_a (&pc, i), b = gr_piece_b (&pc, i);

    /* Exactly the request's bytes, in order, contiguous in the buffer. */
    CHECK (a < b && b <= chunk, "chunk %d: [%u,%u)", i, a, b);
    CHECK ((uint64_t) i * chunk + a == (i == pc.i0 ? so : (uint64_t) i * chunk),
           "chunk %d starts at %u", i, a);
    CHECK (gr_piece_bufoff (&pc, i, a) == expect_off,
           "chunk %d: bufoff %zu, want %zu", i,
           gr_piece_bufoff (&pc, i, a), expect_off);
    CHECK (i == pc.i1 || b == chunk, "inner chunk %d ends at %u", i, b);
    expect_off += b - a;
    total += b - a;
    if (a < mina)
      mina = a;
    if (b > maxb)
      maxb = b;
  }
  CHECK (total == len, "so=%u len=%u: %u bytes covered", so, len, total);
  /* [lo, hi): the union, widened to lm, no wider than needed. */
  CHECK (pc.lo <= mina && pc.lo % lm == 0 && mina - pc.lo < lm,
         "lo=%u mina=%u lm=%u", pc.lo, mina, lm);
  CHECK (pc.hi >= maxb && (pc.hi % lm == 0 || pc.hi == chunk)
         && pc.hi - maxb < lm && pc.hi <= chunk,
         "hi=%u maxb=%u lm=%u", pc.hi, maxb, lm);
}

/* Brute-force the read counts and check gr_plan_write's choice. */
static void
check_plan (uint32_t chunk, uint32_t lm, int k, int m, uint32_t so,
            uint32_t len, unsigned failmask)
{
  struct gr_piece pc;
  bool failed[16];
  int i, nfd = 0, nfp = 0, rcw = 0, rmw, reads;
  enum gr_write_plan p;

  gr_piece_init (&pc, chunk, lm, 0, so, len);
  for (i = 0; i < k + m; i++) {
    failed[i] = (failmask >> i) & 1;
    if (failed[i])
      i < k ? nfd++ : nfp++;
  }
  p = gr_plan_write (&pc, k, m, failed, &reads);
  if (nfd + nfp > m) {
    CHECK (p == GR_WRITE_TOO_MANY, "k=%d m=%d mask=%x: plan %d", k, m,
           failmask, p);
    return;
  }
  if (nfd > 0) {
    CHECK (p == GR_WRITE_DEGRADED && reads == k,
           "k=%d m=%d mask=%x: plan %d", k, m, failmask, p);
    return;
  }
  for (i = 0; i < k; i++) {
    bool touched = i >= pc.i0 && i <= pc.i1;
    bool covers = touched && gr_piece_a (&pc, i) <= pc.lo &&
      gr_piece_b (&pc, i) >= pc.hi;
    CHECK (covers == gr_piece_covers (&pc, i), "covers(%d)", i);
    if (!covers)
      rcw++;
  }
  rmw = pc.i1 - pc.i0 + 1 + m - nfp;
  if (rmw < rcw)
    CHECK (p == GR_WRITE_RMW && reads == rmw,
           "k=%d m=%d so=%u len=%u: want RMW (%d < %d), got %d/%d",
           k, m, so, len, rmw, rcw, p, reads);
  else
    CHECK (p == GR_WRITE_RCW && reads == rcw,
           "k=%d m=%d so=%u len=%u: want RCW (%d <= %d), got %d/%d",
           k, m, so, len, rcw, rmw, p, reads);
}

int
main (void)
{
  static const uint32_t chunks[] = { 4096, 16384 };
  static const uint32_t lms[] = { 1, 512, 4096 };
  static const uint32_t lens[] = { 1, 7, 511, 512, 4095, 4096, 4097, 5000,
                                   16383, 16384, 16385, 40000 };
  struct gr_piece pc;
  bool none[16] = { false };
  size_t ci, li, ni;
  uint32_t so;
  int k, m, reads;
  unsigned mask;
  long npieces = 0;

  for (ci = 0; ci < 2; ci++)
    for (li = 0; li < 3; li++)
      for (k = 1; k <= 5; k++) {
        uint32_t chunk = chunks[ci], lm = lms[li], width = k * chunk;

        for (so = 0; so < width; so += 509)
          for (ni = 0; ni < sizeof lens / sizeof lens[0]; ni++) {
            uint32_t len = lens[ni];

            if (so + len > width)
              len = width - so;
            check_piece (chunk, lm, k, so, len);
            npieces++;
            for (m = 1; m <= 3; m++)
              for (mask = 0; mask < (1u << (k + m)); mask++)
                if (so % 4 == 0 || mask == 0)
                  check_plan (chunk, lm, k, m, so, len, mask);
          }
      }

  /* Known cases. */
  /* 4+2, 4K into a 64K chunk: RMW reads 1 + 2, RCW 3: tie goes to RCW. */
  gr_piece_init (&pc, 65536, 1, 0, 8192, 4096);
  CHECK (gr_plan_write (&pc, 4, 2, none, &reads) == GR_WRITE_RCW
         && reads == 3, "4+2 4K");
  /* 6+1, 4K: RMW reads 2 < RCW 5. */
  CHECK (gr_plan_write (&pc, 6, 1, none, &reads) == GR_WRITE_RMW
         && reads == 2, "6+1 4K");
  /* CRS widening: 100 bytes at 5000 work on [4096, 8192). */
  gr_piece_init (&pc, 65536, 4096, 0, 5000, 100);
  CHECK (pc.lo == 4096 && pc.hi == 8192, "crs widening %u %u", pc.lo, pc.hi);
  /* Across two chunks: end of chunk 0 and start of chunk 1 -> union. */
  gr_piece_init (&pc, 65536, 1, 0, 60000, 10000);
  CHECK (pc.i0 == 0 && pc.i1 == 1 && pc.lo == 0 && pc.hi == 65536,
         "two chunks %u %u", pc.lo, pc.hi);
  CHECK (gr_piece_a (&pc, 0) == 60000 && gr_piece_b (&pc, 1) == 4464,
         "two chunks a/b");

  if (failures) {
    printf ("test-plan: %d checks FAILED\n", failures);
    return 1;
  }
  printf ("test-plan: PASS (%ld pieces)\n", npieces);
  return 0;
}
