/*
 * stamp.c: the record clock (stamp.h): what timestamp each record gets. Owns the note of
 * what it trusts (journal_clock_note_t, kept in the LOCK page by the journal); not the
 * record's frame (commit.c lays it), nor the rule that timestamps never decrease (the caller
 * passes the last one; the journal checks it).
 *
 * The offset: wall time minus boot time is constant while nobody sets the clock. A reading
 * whose offset is within tolerance of the trusted one (STAMP_STEP_NS, plus STAMP_SLEW_PPM of
 * the time since the two last agreed: more than the kernel's fastest slew) is the clock
 * running right: the trusted offset follows it. Any other is a step: stamps stay on the
 * trusted offset (the pre-step timeline, measured by boot time), and the step's offset is
 * remembered; once readings have kept it for STAMP_STEP_TRUST_NS it becomes the trusted
 * one. A different boot (boot id) has no common boot time with the note: its first reading
 * is trusted. An unknown boot id keeps the note in this process only.
 *
 * Threads: every call is made under the caller's lock (commit.mu); no lock of its own.
 */
#include "stamp.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A change of the offset up to this is the clock running, beyond it a step: NTP steps
 * (rather than slews) only past 128 ms, and no scheduler delay between the two readings of
 * stamp_machine_clock comes near a second. */
#define STAMP_STEP_NS 1000000000ll
/* ...plus this share of the boot time since the offsets last agreed, in parts per million:
 * twice the kernel's largest slew (500 ppm), so a clock NTP slews for days is still
 * followed after hours without appends. */
#define STAMP_SLEW_PPM 1000ll
/* A step is believed once the wall clock kept it this long (boot time): a correction that
 * holds (NTP stepping the clock after boot) is followed then, while one set by mistake and
 * set back within this time never reaches a record. */
#define STAMP_STEP_TRUST_NS (600ll * 1000000000ll)
/* The note is kept in the LOCK page at most this often while nothing but slewing happens. */
#define STAMP_KEEP_NS 1000000000ull

static int
stamp_has_boot_id(const uint8_t id[16])
{
    static const uint8_t zero[16];
    return memcmp(id, zero, 16) != 0;
}

/* The kernel's boot id (/proc/sys/kernel/random/boot_id, a UUID), or all zero. */
static void
stamp_read_boot_id(uint8_t out[16])
{
    memset(out, 0, 16);
    char text[64] = "";
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    size_t k = 0;
    for (ssize_t i = 0; i < n && k < 32; i++) {
        char c = text[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0)
            continue;
        out[k / 2] = (uint8_t)(out[k / 2] | (v << (k % 2 ? 0 : 4)));
        k++;
    }
    if (k != 32)
        memset(out, 0, 16);
}

void
stamp_machine_clock(void *ctx, stamp_reading_t *out)
{
    const stamp_t *s = ctx;
    struct timespec wall, boot;
    clock_gettime(CLOCK_REALTIME, &wall);
    clock_gettime(CLOCK_BOOTTIME, &boot);
    out->wall_ns = (int64_t)wall.tv_sec * 1000000000 + wall.tv_nsec;
    out->boot_ns = (uint64_t)boot.tv_sec * 1000000000u + (uint64_t)boot.tv_nsec;
    memcpy(out->boot_id, s->machine_boot_id, 16);
}

void
stamp_init(stamp_t *s, journal_t *journal, stamp_clock_fn clock, void *clock_ctx)
{
    memset(s, 0, sizeof *s);
    s->journal = journal;
    s->clock = clock ? clock : stamp_machine_clock;
    s->clock_ctx = clock ? clock_ctx : s;
    if (!clock)
        stamp_read_boot_id(s->machine_boot_id);
    s->has_note =
        journal_clock_note_load(journal, &s->note) == 0 && stamp_has_boot_id(s->note.boot_id);
}

static int64_t
stamp_abs(int64_t v)
{
    return v < 0 ? -v : v;
}

/* How far an offset may move in `elapsed_ns` of boot time and still be the same clock. */
static int64_t
stamp_tolerance_ns(uint64_t since_ns, uint64_t now_ns)
{
    uint64_t elapsed = now_ns > since_ns ? now_ns - since_ns : 0;
    return STAMP_STEP_NS + (int64_t)(elapsed / 1000000u * STAMP_SLEW_PPM);
}

/* Trusts the reading's offset from now on. */
static void
stamp_trust(stamp_t *s, const stamp_reading_t *r, int64_t offset)
{
    memcpy(s->note.boot_id, r->boot_id, 16);
    s->note.trusted_offset_ns = offset;
    s->note.confirmed_boot_ns = r->boot_ns;
    s->note.flags &= ~JOURNAL_CLOCK_STEP;
    s->has_note = true;
}

/* Updates what the record clock trusts from one reading (see the top of the file). Returns
 * whether a step began or was believed (the note must be kept at once). */
static bool
stamp_follow(stamp_t *s, const stamp_reading_t *r)
{
    journal_clock_note_t *n = &s->note;
    int64_t offset = r->wall_ns - (int64_t)r->boot_ns;
    if (!s->has_note || memcmp(n->boot_id, r->boot_id, 16) != 0) {
        stamp_trust(s, r, offset);
        return true;
    }
    if (stamp_abs(offset - n->trusted_offset_ns) <=
        stamp_tolerance_ns(n->confirmed_boot_ns, r->boot_ns)) {
        bool was_step = n->flags & JOURNAL_CLOCK_STEP;
        stamp_trust(s, r, offset);
        return was_step;
    }
    bool is_same_step = (n->flags & JOURNAL_CLOCK_STEP) &&
                        stamp_abs(offset - n->step_offset_ns) <=
                            stamp_tolerance_ns(n->step_since_boot_ns, r->boot_ns);
    if (is_same_step && r->boot_ns - n->step_since_boot_ns >= (uint64_t)STAMP_STEP_TRUST_NS) {
        stamp_trust(s, r, offset);
        return true;
    }
    if (is_same_step)
        return false;
    n->flags |= JOURNAL_CLOCK_STEP;
    n->step_offset_ns = offset;
    n->step_since_boot_ns = r->boot_ns;
    return true;
}

void
stamp_keep(stamp_t *s)
{
    if (s->has_note && stamp_has_boot_id(s->note.boot_id))
        journal_clock_note_store(s->journal, &s->note);
}

int64_t
stamp_next(stamp_t *s, int64_t last_ts_ns)
{
    stamp_reading_t r;
    s->clock(s->clock_ctx, &r);
    bool is_news = stamp_follow(s, &r);
    if (is_news || r.boot_ns - s->stored_boot_ns >= STAMP_KEEP_NS) {
        stamp_keep(s);
        s->stored_boot_ns = r.boot_ns;
    }
    int64_t ts = (int64_t)r.boot_ns + s->note.trusted_offset_ns;
    return ts < last_ts_ns ? last_ts_ns : ts;
}
