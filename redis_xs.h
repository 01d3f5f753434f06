/*
 * The C side of the Redis XSUBs (Redis.xsh), included by Shared.xs after its
 * own helpers (croaks, items, BFS_CALL), which these use.
 */

/* A plain string: no magic, not a reference; reading it runs no Perl code. */
static bool
bfs_plain_string(SV *e)
{
    return e && (SvFLAGS(e) & (SVf_POK | SVf_ROK | SVs_GMG | SVs_SMG | SVs_RMG)) == SVf_POK;
}

/* Packed native u64s (masks from _xs_args or _xs_command) copied where they
   are aligned, freed at scope exit; NULL for undef. *n gets their number. */
static const uint64_t *
bfs_packed_u64s(pTHX_ SV *packed, size_t *n)
{
    STRLEN len;
    uint64_t *copy;
    *n = 0;
    if (!SvOK(packed))
        return NULL;
    (void)SvPVbyte(packed, len);
    *n = len / 8;
    Newx(copy, *n + 1, uint64_t);
    SAVEFREEPV(copy);
    Copy(SvPVX(packed), copy, *n * 8, char);
    return copy;
}

/* Append n 0/1 flags to an array. */
static void
bfs_push_flags(pTHX_ AV *out, const U8 *flags, size_t n)
{
    size_t i;
    av_extend(out, av_top_index(out) + 1 + (SSize_t)n);
    for (i = 0; i < n; i++)
        av_push(out, newSViv(flags[i]));
}

/*
 * Items from .. from + count - 1 of a plain array of plain strings (what
 * _xs_plain accepts): slices into the strings themselves, UTF-8 ones
 * downgraded. Nothing runs Perl code, and only these elements are looked at,
 * so a batch cut into commands costs one pass over its items.
 */
static BfsSlice *
bfs_items_range(pTHX_ CV *cv, SV *arg, UV from, UV count)
{
    AV *av;
    SSize_t n;
    UV i;
    BfsSlice *slices;
    if (!SvROK(arg) || SvTYPE(SvRV(arg)) != SVt_PVAV || SvMAGICAL(SvRV(arg)))
        bfs_croak(aTHX_ cv, "items must be a reference to a plain array");
    av = (AV *)SvRV(arg);
    n = AvFILLp(av) + 1;
    if (from > (UV)n || count > (UV)n - from)
        bfs_croak(aTHX_ cv, "items %" UVuf " .. %" UVuf " are not in the batch of %" IVdf, from,
                  from + count, (IV)n);
    slices = (BfsSlice *)bfs_alloc(aTHX_ (size_t)count * sizeof(BfsSlice));
    for (i = 0; i < count; i++) {
        SV *e = AvARRAY(av)[from + i];
        STRLEN len;
        if (!bfs_plain_string(e))
            bfs_croak_item(aTHX_ cv, "not a plain string", (SSize_t)(from + i));
        len = SvCUR(e);
        slices[i].ptr = (const uint8_t *)SvPVX(e);
        if (SvUTF8(e))
            slices[i].ptr = (const uint8_t *)bfs_downgrade(aTHX_ cv, SvPVX(e), &len, (SSize_t)(from + i));
        slices[i].len = len;
    }
    return slices;
}

/* The description of a remote filter from a Redis XSUB's arguments, and for
   a query (verb 0) the width and number of its fields per item (an add's
   are 1 and k), its masks_out checked to be a writable scalar ref. */
static void
bfs_remote_setup(pTHX_ CV *cv, BfsRemote *r, IV verb, const char *layout, UV seed, UV bits, UV hashes,
                 UV span_bits, UV piece_bits, UV stage, SV *masks_out, uint32_t *width, uint32_t *per)
{
    if (hashes < 1 || hashes > 32)
        bfs_croak(aTHX_ cv, "hashes %" UVuf " is out of range", hashes);
    r->layout = layout;
    r->seed = (uint64_t)seed;
    r->bits = (uint64_t)bits;
    r->hashes = (uint32_t)hashes;
    r->span_bits = (uint64_t)span_bits;
    r->piece_bits = (uint64_t)piece_bits;
    if (stage > 32)
        bfs_croak(aTHX_ cv, "stage %" UVuf " is out of range", stage);
    r->stage = (uint32_t)stage;
    *width = 1;
    *per = (uint32_t)hashes;
    if (verb)
        return;
    /* (NULL: the caller keeps the masks itself.) */
    if (masks_out && (!SvROK(masks_out) || SvTYPE(SvRV(masks_out)) > SVt_PVMG || SvREADONLY(SvRV(masks_out))))
        bfs_croak(aTHX_ cv, "masks must be a scalar reference");
    BFS_CALL(bfs_remote_query_shape(r, width, per, bfs_err));
}

/* One BITFIELD command in the Redis protocol, as a new mortal, for items
   from .. from + count - 1 of items_ref (all in one piece) of filter r
   (per fields per item, as bfs_remote_setup gave): verb 1 an add, 0 a
   query, whose count * per field masks go to *masks (freed at scope exit;
   NULL for an add). */
static SV *
bfs_bf_command(pTHX_ CV *cv, const BfsRemote *r, IV verb, uint32_t per, SV *key, SV *items_ref, UV from, UV count,
               uint64_t **masks)
{
    BfsSlice *slices;
    size_t cap = 0, len = 0;
    const char *k;
    STRLEN klen;
    SV *cmd;
    k = SvPVbyte(key, klen);
    slices = bfs_items_range(aTHX_ cv, items_ref, from, count);
    BFS_CALL(bfs_remote_command(r, verb ? 1 : 0, (const uint8_t *)k, klen, slices, (size_t)count, NULL, NULL, 0,
                                &cap, bfs_err));
    *masks = NULL;
    if (!verb) {
        Newx(*masks, (size_t)count * per + 1, uint64_t);
        SAVEFREEPV(*masks);
    }
    cmd = sv_2mortal(newSV(cap + 1));
    SvPOK_on(cmd);
    BFS_CALL(bfs_remote_command(r, verb ? 1 : 0, (const uint8_t *)k, klen, slices, (size_t)count, *masks,
                                (uint8_t *)SvPVX(cmd), cap, &len, bfs_err));
    SvCUR_set(cmd, len);
    *SvEND(cmd) = '\0';
    return cmd;
}

/*
 * One command's round trip on a connection's socket, for the single add or
 * contains (Redis/Link.pm, roundtrip): the command written, the reply read
 * and taken off the front of the buffer, all in C, with the bounds of the
 * Perl reader (Link.pm's put and reply): every wait bounded by the
 * filter's timeouts, the reply by resp.rs's bounds. A signal's handler runs
 * where it interrupts a wait (PERL_ASYNC_CHECK: it may die, and nothing
 * here is left to free) and the wait goes on to the same deadline.
 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

/* How a round trip broke (the second value _xs_roundtrip returns when its
   first is 0); the numbers are Link.pm's too. */
#define BFS_IO_WRITE_TIMEOUT 1 /* the command not all written within write_timeout */
#define BFS_IO_READ_TIMEOUT 2  /* the reply not all come within read_timeout */
#define BFS_IO_CLOSED 3        /* the server closed the connection */
#define BFS_IO_WRITE_ERRNO 4   /* a write failed: errno */
#define BFS_IO_READ_ERRNO 5    /* a read failed: errno */
#define BFS_IO_UNREADABLE 6    /* bytes that are no reply, or a reply past the bounds */

/* Bytes asked of the kernel per read: as Link.pm's $READ once a reply
   has grown past the first read's; the first (all a usual reply needs)
   less, so that a kept connection's buffer stays small. */
#define BFS_IO_READ (1 << 20)
#define BFS_IO_FIRST_READ (1 << 16)

static double
bfs_io_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Wait until fd can be read (POLLIN) or written (POLLOUT), until deadline
   (bfs_io_now's clock): 1 when it can (or the descriptor has an error, which
   the read or write then says), 0 when the time ran out.

   Perl's handler of a signal only marks it pending (PL_sig_pending); the
   Perl code runs at PERL_ASYNC_CHECK. A signal that came after the last
   check and before a plain poll would wait, unseen, until the reply or the
   timeout. So the signals are blocked, the pending mark read, and ppoll
   unblocks them for the wait alone, atomically: a signal either was seen
   by the check or ends the ppoll (EINTR). The faults a thread raises
   itself (SIGSEGV, SIGBUS, ...) stay unblocked: nothing between the two
   masks touches more than the stack and PL_sig_pending. */
static int
bfs_io_wait(pTHX_ int fd, short events, double deadline)
{
    sigset_t all, old;
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    sigdelset(&all, SIGTRAP);
    for (;;) {
        struct pollfd p;
        struct timespec ts;
        double left = deadline - bfs_io_now();
        int n, e;
        if (left <= 0)
            return 0;
        if (left > 1e6)
            left = 1e6;
        ts.tv_sec = (time_t)left;
        ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
        p.fd = fd;
        p.events = events;
        p.revents = 0;
        pthread_sigmask(SIG_BLOCK, &all, &old);
        if (PL_sig_pending) {
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            PERL_ASYNC_CHECK();
            continue;
        }
        n = ppoll(&p, 1, &ts, &old);
        e = errno;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (n > 0)
            return 1;
        if (n < 0 && e != EINTR)
            return 1;
        if (n < 0)
            PERL_ASYNC_CHECK();
    }
}

/* Write len bytes of p within write_timeout (each stall bounded by it, as
   Link.pm's put): 0, or a BFS_IO_* with *err the errno. MSG_DONTWAIT, not
   the descriptor's flag: a client's socket is shared with the client, which
   reads it blocking. MSG_NOSIGNAL: a closed connection is an error, not a
   SIGPIPE. */
static int
bfs_io_put(pTHX_ int fd, const char *p, size_t len, double timeout, int *err)
{
    size_t off = 0;
    double deadline = -1;
    while (off < len) {
        ssize_t w = send(fd, p + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR) {
                PERL_ASYNC_CHECK();
                continue;
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                *err = errno;
                return errno == EPIPE || errno == ECONNRESET ? BFS_IO_CLOSED : BFS_IO_WRITE_ERRNO;
            }
            if (deadline < 0)
                deadline = bfs_io_now() + timeout;
            if (!bfs_io_wait(aTHX_ fd, POLLOUT, deadline))
                return BFS_IO_WRITE_TIMEOUT;
            continue;
        }
        off += (size_t)w;
        deadline = -1; /* the server took some: the next stall has its own bound */
    }
    return 0;
}

/* Read what has come (waiting for it, up to deadline) onto the end of buf:
   0, or a BFS_IO_* with *err the errno. */
static int
bfs_io_get(pTHX_ int fd, SV *buf, double deadline, int *err)
{
    for (;;) {
        STRLEN cur = SvCUR(buf);
        size_t want;
        ssize_t got;
        /* Waiting first: a reply is seldom there the moment it is asked for. */
        if (!bfs_io_wait(aTHX_ fd, POLLIN, deadline))
            return BFS_IO_READ_TIMEOUT;
        want = cur < BFS_IO_FIRST_READ ? BFS_IO_FIRST_READ : BFS_IO_READ;
        SvGROW(buf, cur + want + 1);
        got = recv(fd, SvPVX(buf) + cur, want, MSG_DONTWAIT);
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) {
                if (errno == EINTR)
                    PERL_ASYNC_CHECK();
                continue;
            }
            *err = errno;
            return BFS_IO_READ_ERRNO;
        }
        if (got == 0)
            return BFS_IO_CLOSED;
        SvCUR_set(buf, cur + (STRLEN)got);
        *SvEND(buf) = '\0';
        return 0;
    }
}

/* The device and inode of the file behind descriptor fd, as "dev:ino", or
   undef: a new SV. */
static SV *
bfs_fd_id(pTHX_ IV fd)
{
    struct stat st;
    if (fd < 0 || fd > INT_MAX || fstat((int)fd, &st) != 0)
        return newSV(0);
    return newSVpvf("%" UVuf ":%" UVuf, (UV)st.st_dev, (UV)st.st_ino);
}

/* Whether socket fd is open and quiet: nothing to read (a reply nobody
   asked for) and not closed by the other end (Link.pm's quiet). */
static bool
bfs_fd_quiet(IV fd)
{
    char c;
    ssize_t got;
    if (fd < 0 || fd > INT_MAX)
        return FALSE;
    do
        got = recv((int)fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    while (got < 0 && errno == EINTR);
    return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}
