/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the executor: each thread's plans and I/O vector; a
 * request's plans begun together.  See exec.h. */
#include <errno.h>
#include <stdlib.h>

#include "exec.h"
#include "exec-internal.h"
#include "log.h"
#include "scratch.h"
#include "steps.h"

_Static_assert (GR_EXEC_BEGUN_MAX <= GR_SCRATCH_BEGUN_SLOTS,
                "each begun plan has a scratch region of its own");

void
gr_exec_work_free (void *v)
{
  struct gr_exec_work *w = v;

  if (w) {
    gr_plan_free (w->plan);
    for (int i = 0; i < GR_EXEC_BEGUN_MAX; i++)
      gr_plan_free (w->begun[i]);
    free (w->mio);
    free (w);
  }
}

struct gr_exec_work *
gr_exec_work (struct gr_exec *x, const struct gr_plan *p)
{
  struct gr_exec_work *w = pthread_getspecific (x->work_key);

  if (w == NULL) {
    w = calloc (1, sizeof *w);
    if (w)
      w->plan = gr_plan_new (&x->g);
    if (w == NULL || w->plan == NULL ||
        pthread_setspecific (x->work_key, w) != 0)
      goto nomem;
  }
  if (p == NULL)
    p = w->plan;
  if (w->cap < p->cap_io) {
    struct gr_mio *v = realloc (w->mio, p->cap_io * sizeof *v);

    if (v == NULL)
      goto nomem;
    w->mio = v;
    w->cap = p->cap_io;
  }
  return w;
 nomem:
  if (w && pthread_getspecific (x->work_key) != w)
    gr_exec_work_free (w);
  nbdkit_error ("plan: out of memory");
  errno = ENOMEM;
  return NULL;
}

struct gr_plan *
gr_exec_plan (struct gr_exec *x)
{
  struct gr_exec_work *w = gr_exec_work (x, NULL);

  return w ? w->plan : NULL;
}

struct gr_plan *
gr_exec_begun_plan (struct gr_exec *x, int slot)
{
  struct gr_exec_work *w = gr_exec_work (x, NULL);

  if (w == NULL || slot < 0 || slot >= GR_EXEC_BEGUN_MAX)
    return NULL;
  if (w->begun[slot] == NULL &&
      (w->begun[slot] = gr_plan_new (&x->g)) == NULL) {
    nbdkit_error ("plan: out of memory");
    errno = ENOMEM;
  }
  return w->begun[slot];
}

bool
gr_exec_begin (struct gr_exec *x, struct gr_plan *p, int slot, uint8_t *req,
               uint8_t *peer, struct gr_exec_begun *bg)
{
  const struct gr_plan_coder coder = gr_exec_coder (x, NULL);
  struct gr_bufs b = { .req = req, .zero = x->zero, .peer = peer };
  void *enc;

  if ((p->kind != GR_PLAN_WRITE_FULL && p->kind != GR_PLAN_WRITE_JOINED) ||
      p->nread > 0 || p->journal || p->scratch_len > GR_SCRATCH_BEGUN_SIZE ||
      slot < 0 || slot >= GR_EXEC_BEGUN_MAX)
    return false;
  if (p->scratch_len > 0 &&
      (b.scratch = gr_scratch_get_begun (x->scratch, slot,
                                         p->scratch_len)) == NULL)
    return false;
  enc = gr_steps_begin (p, &x->g, &b, &coder);
  if (enc == NULL)
    return false;
  *bg = (struct gr_exec_begun) { .p = p, .req = req, .peer = peer,
                                 .scratch = b.scratch, .enc = enc };
  return true;
}

enum gr_exec_outcome
gr_exec_finish (struct gr_exec *x, struct gr_exec_begun *bg,
                enum gr_mio_policy policy, struct gr_exec_result *res)
{
  const struct gr_plan_coder coder = gr_exec_coder (x, NULL);
  struct gr_plan *p = bg->p;
  const struct gr_bufs b = { .req = bg->req, .zero = x->zero,
                             .peer = bg->peer, .scratch = bg->scratch };
  double s[GR_EXEC_NSTAGES] = { 0 }, t = gr_now ();
  enum gr_exec_outcome r = GR_EXEC_DONE;
  struct gr_exec_work *w = NULL;
  bool locked = false;

  /* Its encode: its batch led if none has taken it yet. */
  __atomic_add_fetch (&x->begun, 1, __ATOMIC_RELAXED);
  if (gr_steps_end (&coder, bg->enc) == -1)
    r = GR_EXEC_ERROR;
  s[GR_EXEC_CODE] = gr_exec_lap (&t);
  if (r == GR_EXEC_DONE && (w = gr_exec_work (x, p)) == NULL)
    r = GR_EXEC_ERROR;
  if (r == GR_EXEC_DONE)
    r = gr_exec_write_held (x, p, &b, w->mio, policy, res, s, &t, &locked);
  if (locked)
    gr_exec_unlock_plan (x, p);
  return r;
}
