/* SPDX-License-Identifier: BSD-3-Clause */
/* gpuraid - the plugin's options.  See config.h. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <sys/stat.h>
#include <sys/un.h>

#include "config.h"
#include "common/size.h"
#include "log.h"
#include "storage/storage.h"

/* Keys that may be given once (bits of cfg->seen). */
enum {
  SEEN_M = 1, SEEN_CHUNK = 2, SEEN_CODE = 4, SEEN_CREATE = 8,
  SEEN_FORCE = 16, SEEN_BACKEND = 32, SEEN_ACCEL = 64, SEEN_DEV = 128,
  SEEN_SALVAGE = 256, SEEN_SCRATCH = 512, SEEN_RATE = 1024,
  SEEN_BITMAP = 2048, SEEN_CONTROL = 4096, SEEN_TIMEOUT = 8192,
  SEEN_RETRIES = 16384, SEEN_INTEGRITY = 32768, SEEN_READ_ERRORS = 65536,
  SEEN_HOOK = 131072, SEEN_UUID = 262144, SEEN_DIRECT = 524288,
};

/* A member's path as the key gave it: an NBD URI as it is, a file made
 * absolute (nbdkit changes directory).  NULL after nbdkit_error. */
static char *
member_path (const char *value)
{
  char *p;

  if (!gr_disk_is_uri (value))
    return nbdkit_absolute_path (value);
  p = strdup (value);
  if (p == NULL)
    nbdkit_error ("strdup: %m");
  return p;
}

static int
once (struct gr_config *cfg, const char *key, unsigned bit)
{
  if (cfg->seen & bit) {
    nbdkit_error ("%s= given more than once", key);
    return -1;
  }
  cfg->seen |= bit;
  return 0;
}

/* The errors name key=value (nbdkit's own parsers do not). */
static int
parse_nonneg_int (const char *key, const char *value, int *out)
{
  char *end;
  long v;

  errno = 0;
  v = strtol (value, &end, 10);
  if (value[0] == '\0' || *end != '\0') {
    nbdkit_error ("%s=%s: not a number", key, value);
    return -1;
  }
  if (v < 0) {
    nbdkit_error ("%s=%s: must not be negative", key, value);
    return -1;
  }
  if (errno == ERANGE || v > INT_MAX) {
    nbdkit_error ("%s=%s: too large", key, value);
    return -1;
  }
  *out = (int) v;
  return 0;
}

/* key=value, a whole number given once, from min to max; else an error
 * saying what it must be (rule). */
static int
int_key (struct gr_config *cfg, const char *key, const char *value,
         unsigned seen, int min, int max, const char *rule, int *out)
{
  int v;

  if (once (cfg, key, seen) == -1 || parse_nonneg_int (key, value, &v) == -1)
    return -1;
  if (v < min || v > max) {
    nbdkit_error ("%s=%s: %s", key, value, rule);
    return -1;
  }
  *out = v;
  return 0;
}

/* The words nbdkit_parse_bool takes. */
static int
parse_bool (struct gr_config *cfg, const char *key, const char *value,
            unsigned bit, bool *out)
{
  static const char *const yes[] = { "1", "true", "t", "yes", "y", "on" };
  static const char *const no[] = { "0", "false", "f", "no", "n", "off" };
  size_t i;

  if (once (cfg, key, bit) == -1)
    return -1;
  for (i = 0; i < sizeof yes / sizeof yes[0]; i++)
    if (strcasecmp (value, yes[i]) == 0 || strcasecmp (value, no[i]) == 0) {
      *out = strcasecmp (value, yes[i]) == 0;
      return 0;
    }
  nbdkit_error ("%s=%s: must be true or false", key, value);
  return -1;
}

static int
parse_member (struct gr_config *cfg, const char *value)
{
  if (cfg->npaths >= GR_MAX_MEMBERS) {
    nbdkit_error ("member=%s: too many members (at most %d)", value,
                  GR_MAX_MEMBERS);
    return -1;
  }
  if (value[0] == '\0') {
    nbdkit_error ("member=: empty path");
    return -1;
  }
  cfg->paths[cfg->npaths] = member_path (value);
  if (cfg->paths[cfg->npaths] == NULL)
    return -1;
  cfg->npaths++;
  return 0;
}

/* spare=PATH (member < 0) or replace=INDEX:PATH. */
static int
parse_spare (struct gr_config *cfg, const char *key, const char *value)
{
  const char *path = value;
  int member = -1;

  if (cfg->nspares >= GR_CONFIG_MAX_SPARES) {
    nbdkit_error ("%s=%s: too many spares and replacements (at most %d)",
                  key, value, GR_CONFIG_MAX_SPARES);
    return -1;
  }
  if (strcmp (key, "replace") == 0) {
    char *end;

    errno = 0;
    member = (int) strtol (value, &end, 10);
    if (*value < '0' || *value > '9' || errno || *end != ':' ||
        member >= GR_MAX_MEMBERS) {
      nbdkit_error ("replace=%s: give INDEX:PATH, the index of a missing "
                    "member and the file or device to rebuild it onto",
                    value);
      return -1;
    }
    path = end + 1;
  }
  if (path[0] == '\0') {
    nbdkit_error ("%s=%s: empty path", key, value);
    return -1;
  }
  cfg->spares[cfg->nspares].path = member_path (path);
  if (cfg->spares[cfg->nspares].path == NULL)
    return -1;
  cfg->spares[cfg->nspares++].member = member;
  return 0;
}

static int
parse_chunk (struct gr_config *cfg, const char *value)
{
  uint64_t c;

  if (once (cfg, "chunk", SEEN_CHUNK) == -1)
    return -1;
  if (!gr_size_parse (value, &c)) {
    nbdkit_error ("chunk=%s: not a size (a number with an optional k, M or "
                  "G suffix)", value);
    return -1;
  }
  if (c < 4096 || c > GR_MAX_CHUNK || (c & (c - 1)) != 0) {
    nbdkit_error ("chunk=%s: must be a power of two between 4096 and %"
                  PRIu32, value, GR_MAX_CHUNK);
    return -1;
  }
  cfg->chunk = (uint32_t) c;
  return 0;
}

/* value must be one of names[0..n-1]; *out = its position. */
static int
parse_choice (struct gr_config *cfg, const char *key, const char *value,
              unsigned bit, const char *const *names, int n,
              const char *expect, int *out)
{
  int i;

  if (once (cfg, key, bit) == -1)
    return -1;
  for (i = 0; i < n; i++)
    if (strcmp (value, names[i]) == 0) {
      *out = i;
      return 0;
    }
  nbdkit_error ("%s=%s: must be %s", key, value, expect);
  return -1;
}

/* key=value, a size given once: at least min, a power of two if pow2;
 * else an error saying what it must be (rule). */
static int
size_key (struct gr_config *cfg, const char *key, const char *value,
          unsigned seen, int64_t min, bool pow2, const char *rule,
          uint64_t *out)
{
  uint64_t v;

  if (once (cfg, key, seen) == -1)
    return -1;
  if (!gr_size_parse (value, &v) || v < (uint64_t) min ||
      (pow2 && (v & (v - 1)) != 0)) {
    nbdkit_error ("%s=%s: must be %s", key, value, rule);
    return -1;
  }
  *out = v;
  return 0;
}

int
gr_config_parse (struct gr_config *cfg, const char *key, const char *value)
{
  static const char *const codes[] = { "rs", "crs" };
  static const char *const backends[] = { "ref", "isal", "gfc", "cuda" };
  static const char *const accels[] = { "auto", "cpu", "gpu" };
  static const char *const directs[] = {
    [GR_DIRECT_OFF] = "off", [GR_DIRECT_ON] = "on", [GR_DIRECT_AUTO] = "auto",
  };
  int i;

  if (strcmp (key, "member") == 0)
    return parse_member (cfg, value);
  if (strcmp (key, "scan") == 0) {
    if (cfg->nscans >= GR_CONFIG_MAX_SCANS) {
      nbdkit_error ("scan=%s: too many patterns (at most %d)", value,
                    GR_CONFIG_MAX_SCANS);
      return -1;
    }
    if (value[0] == '\0') {
      nbdkit_error ("scan=: empty pattern");
      return -1;
    }
    /* A relative pattern is the start-up directory's (nbdkit changes
     * directory). */
    cfg->scans[cfg->nscans] = nbdkit_absolute_path (value);
    if (cfg->scans[cfg->nscans] == NULL)
      return -1;
    cfg->nscans++;
    return 0;
  }
  if (strcmp (key, "uuid") == 0) {
    if (once (cfg, key, SEEN_UUID) == -1)
      return -1;
    if (!gr_sb_uuid_parse (value, cfg->uuid)) {
      nbdkit_error ("uuid=%s: not a UUID (8-4-4-4-12 hex digits, as "
                    "gpuraidctl examine and scan print it)", value);
      return -1;
    }
    cfg->have_uuid = true;
    return 0;
  }
  if (strcmp (key, "spare") == 0 || strcmp (key, "replace") == 0)
    return parse_spare (cfg, key, value);
  if (strcmp (key, "m") == 0) {
    if (once (cfg, key, SEEN_M) == -1 ||
        parse_nonneg_int (key, value, &cfg->m) == -1)
      return -1;
    if (cfg->m < 1) {
      nbdkit_error ("m=%s: the parity count must be at least 1", value);
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "chunk") == 0)
    return parse_chunk (cfg, value);
  if (strcmp (key, "code") == 0) {
    if (parse_choice (cfg, key, value, SEEN_CODE, codes, 2, "rs or crs",
                      &i) == -1)
      return -1;
    cfg->code = i == 0 ? GR_CODE_RS : GR_CODE_CRS;
    return 0;
  }
  if (strcmp (key, "create") == 0)
    return parse_bool (cfg, key, value, SEEN_CREATE, &cfg->create);
  if (strcmp (key, "force") == 0)
    return parse_bool (cfg, key, value, SEEN_FORCE, &cfg->force);
  if (strcmp (key, "salvage") == 0)
    return parse_bool (cfg, key, value, SEEN_SALVAGE, &cfg->salvage);
  if (strcmp (key, "integrity") == 0) {
    bool on;

    if (parse_bool (cfg, key, value, SEEN_INTEGRITY, &on) == -1)
      return -1;
    cfg->integrity = on ? GR_INTEGRITY_ON : GR_INTEGRITY_OFF;
    return 0;
  }
  if (strcmp (key, "backend") == 0) {
    if (parse_choice (cfg, key, value, SEEN_BACKEND, backends, 4,
                      "ref, isal, gfc or cuda", &i) == -1)
      return -1;
    cfg->backend = strdup (value);
    if (cfg->backend == NULL) {
      nbdkit_error ("strdup: %m");
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "accel") == 0) {
    if (parse_choice (cfg, key, value, SEEN_ACCEL, accels, 3,
                      "auto, cpu or gpu", &i) == -1)
      return -1;
    cfg->accel = (enum gr_accel) i;
    return 0;
  }
  if (strcmp (key, "direct") == 0) {
    if (parse_choice (cfg, key, value, SEEN_DIRECT, directs, 3,
                      "on, off or auto", &i) == -1)
      return -1;
    cfg->direct = (enum gr_disk_direct) i;
    return 0;
  }
  if (strcmp (key, "scratch-max") == 0)
    return size_key (cfg, key, value, SEEN_SCRATCH, (int64_t) 1 << 20, false,
                     "a size of at least 1M", &cfg->scratch_max);
  if (strcmp (key, "bitmap-chunk") == 0)
    return size_key (cfg, key, value, SEEN_BITMAP, 4096, true,
                     "a power of two of at least 4K", &cfg->bitmap_chunk);
  if (strcmp (key, "resync-rate") == 0) {
    if (strcmp (value, "auto") == 0) {
      cfg->resync_rate = GR_PACE_AUTO;
      return once (cfg, key, SEEN_RATE);
    }
    return size_key (cfg, key, value, SEEN_RATE, 0, false,
                     "auto or a size (bytes a second; 0 for no limit)",
                     &cfg->resync_rate);
  }
  if (strcmp (key, "control") == 0) {
    struct sockaddr_un sa;

    if (once (cfg, key, SEEN_CONTROL) == -1)
      return -1;
    if (value[0] == '\0') {
      nbdkit_error ("control=: empty path");
      return -1;
    }
    cfg->control = nbdkit_absolute_path (value);
    if (cfg->control == NULL)
      return -1;
    if (strlen (cfg->control) >= sizeof sa.sun_path) {
      nbdkit_error ("control=%s: a socket path must be shorter than %zu "
                    "bytes", cfg->control, sizeof sa.sun_path);
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "event-hook") == 0) {
    struct stat st;

    if (once (cfg, key, SEEN_HOOK) == -1)
      return -1;
    if (value[0] == '\0') {
      nbdkit_error ("event-hook=: empty path");
      return -1;
    }
    cfg->event_hook = nbdkit_absolute_path (value);
    if (cfg->event_hook == NULL)
      return -1;
    if (stat (cfg->event_hook, &st) == -1) {
      nbdkit_error ("event-hook=%s: %m", cfg->event_hook);
      return -1;
    }
    if (!S_ISREG (st.st_mode) || access (cfg->event_hook, X_OK) == -1) {
      nbdkit_error ("event-hook=%s: not an executable file (a program to "
                    "run once per event)", cfg->event_hook);
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "remote-timeout") == 0)
    return int_key (cfg, key, value, SEEN_TIMEOUT, 1, 86400,
                    "give seconds, from 1 to 86400", &cfg->remote_timeout);
  if (strcmp (key, "remote-retries") == 0)
    return int_key (cfg, key, value, SEEN_RETRIES, 0, 20, "at most 20",
                    &cfg->remote_retries);
  if (strcmp (key, "max-read-errors") == 0)
    return int_key (cfg, key, value, SEEN_READ_ERRORS, 0, 1000000,
                    "at most 1000000", &cfg->max_read_errors);
  if (strcmp (key, "gpu-device") == 0)
    return once (cfg, key, SEEN_DEV) == -1 ? -1
      : parse_nonneg_int (key, value, &cfg->gpu_device);
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

int
gr_config_check (const struct gr_config *cfg)
{
  int i, j;

  if (cfg->npaths == 0 && cfg->nscans == 0) {
    nbdkit_error ("no members: give member=PATH once per member, or "
                  "scan=GLOB with uuid=UUID");
    return -1;
  }
  if (cfg->nscans > 0 && !cfg->have_uuid) {
    nbdkit_error ("scan=%s needs uuid=UUID: the array to assemble "
                  "(gpuraidctl scan lists the arrays found)", cfg->scans[0]);
    return -1;
  }
  if (cfg->have_uuid && cfg->create) {
    nbdkit_error ("uuid= names an existing array; create=true makes a new "
                  "one (its UUID is new): leave uuid= out");
    return -1;
  }
  if (cfg->nscans > 0 && cfg->create) {
    nbdkit_error ("scan=%s: create=true makes a new array: give its "
                  "members as member=", cfg->scans[0]);
    return -1;
  }
  for (i = 0; i < cfg->npaths; i++)
    for (j = 0; j < i; j++)
      if (strcmp (cfg->paths[i], cfg->paths[j]) == 0) {
        nbdkit_error ("member=%s is given twice", cfg->paths[i]);
        return -1;
      }
  for (i = 0; i < cfg->nspares; i++) {
    const char *key = cfg->spares[i].member < 0 ? "spare" : "replace";

    for (j = 0; j < cfg->npaths; j++)
      if (strcmp (cfg->spares[i].path, cfg->paths[j]) == 0) {
        nbdkit_error ("%s=%s is also given as member=", key,
                      cfg->spares[i].path);
        return -1;
      }
    for (j = 0; j < i; j++) {
      if (strcmp (cfg->spares[i].path, cfg->spares[j].path) == 0) {
        nbdkit_error ("%s=%s: the path is given twice", key,
                      cfg->spares[i].path);
        return -1;
      }
      if (cfg->spares[i].member >= 0 &&
          cfg->spares[i].member == cfg->spares[j].member) {
        nbdkit_error ("replace=%d: two replacements for one member",
                      cfg->spares[i].member);
        return -1;
      }
    }
    if (cfg->spares[i].member >= 0 && cfg->create) {
      nbdkit_error ("replace=%d:%s: create=true makes a new array: give "
                    "the path as member=", cfg->spares[i].member,
                    cfg->spares[i].path);
      return -1;
    }
    if (cfg->salvage) {
      nbdkit_error ("%s=%s: salvage=true brings the array up read-only: "
                    "nothing can be rebuilt", key, cfg->spares[i].path);
      return -1;
    }
  }
  if (cfg->create && cfg->salvage) {
    nbdkit_error ("salvage=true brings up an existing array; it cannot be "
                  "given with create=true");
    return -1;
  }
  if (cfg->create) {
    if (cfg->m < 0) {
      nbdkit_error ("create=true needs m=N (the number of parity members)");
      return -1;
    }
    if (cfg->m >= cfg->npaths) {
      nbdkit_error ("m=%d: must be less than the number of members (%d)",
                    cfg->m, cfg->npaths);
      return -1;
    }
  }
  else if (cfg->force)
    gr_debug ("force=true without create=true has no effect");
  if (!cfg->create && (cfg->seen & SEEN_BITMAP)) {
    nbdkit_error ("bitmap-chunk= is set when the array is created: give it "
                  "with create=true, or leave it out");
    return -1;
  }
  return 0;
}

void
gr_config_free (struct gr_config *cfg)
{
  int i;

  for (i = 0; i < cfg->npaths; i++)
    free (cfg->paths[i]);
  cfg->npaths = 0;
  free (cfg->backend);
  cfg->backend = NULL;
  free (cfg->control);
  cfg->control = NULL;
  free (cfg->event_hook);
  cfg->event_hook = NULL;
  for (i = 0; i < cfg->nscans; i++)
    free (cfg->scans[i]);
  cfg->nscans = 0;
  for (i = 0; i < cfg->nspares; i++)
    free (cfg->spares[i].path);
  cfg->nspares = 0;
}
