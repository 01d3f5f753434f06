/*
 * Data::BloomFilter::Shared: the XS glue over the Rust core (bloomfilter_shared.h).
 *
 * Every XSUB follows the same four steps:
 *   (a) resolve and validate every SV argument: get magic exactly once, then the
 *       _nomg forms; this may run Perl code (FETCH, overloading) and may croak;
 *   (b) re-check the handle when (a) may have run Perl code, because that code
 *       may have DESTROYed the object or replaced the invocant;
 *   (c) call Rust;
 *   (d) croak with Rust's message on a non-zero status (BFS_CALL; a
 *       constructor returns it instead, BFS_MAKE).
 * Nothing Rust hands out (other than the handle itself) outlives a call, so a
 * croak can never leak a Rust allocation or leave a lock held.
 *
 * The object is a blessed scalar carrying ext magic whose vtable is ours
 * (bfs_vtbl): the BfsFilter pointer is the magic's mg_ptr. Perl code cannot
 * attach or copy such magic, so a handle cannot be forged, and the scalar
 * itself stays an ordinary one (it can be re-blessed into a subclass).
 * DESTROY, or the vtable's free hook when the scalar goes without DESTROY
 * (re-blessed into a class that has none), frees the handle and clears
 * mg_ptr, which every later call reports as "destroyed handle".
 *
 * A new ithread gets a copy of every object, our magic included: the dup
 * hook clears the copy's mg_ptr and marks it (mg_private) as a handle of
 * another thread, so the new thread never reaches the first thread's
 * BfsFilter (nor frees it at its exit), and a call on the copy croaks
 * saying to open the filter in each thread.
 *
 * The XSUBs of Data::BloomFilter::Shared::Redis are in Redis.xsh (pulled in
 * by the INCLUDE line at the end), their C helpers in redis_xs.h.
 */
#define PERL_NO_GET_CONTEXT
#include "EXTERN.h"
#include "perl.h"
#include "XSUB.h"

#include <math.h>
#include <string.h>

#include "bloomfilter_shared.h"

#define BFS_CLASS "Data::BloomFilter::Shared"

#ifndef G_LIST
#  define G_LIST G_ARRAY
#endif

/* ---------------------------------------------------------------- constants */

/*
 * The C API's numbers, in one place: _constants hands them to the Perl side
 * (Shared.pm, Redis.pm, the command line tool), which retypes none of them.
 * The layouts' names and codes are the C API's own table (bfs_layout_at),
 * which _layouts hands on as it is; the names are those the Rust core takes
 * for a remote filter's layout (bfs_remote_geometry).
 */

#define BFS_CONSTANT(c) { #c + 4, (UV)(c) } /* the name without "BFS_" */

static const struct {
    const char *name;
    UV value;
} bfs_constants[] = {
    BFS_CONSTANT(BFS_OK),
    BFS_CONSTANT(BFS_ERR_ARG),
    BFS_CONSTANT(BFS_ERR_IO),
    BFS_CONSTANT(BFS_ERR_FORMAT),
    BFS_CONSTANT(BFS_ERR_FROZEN),
    BFS_CONSTANT(BFS_ERR_READONLY),
    BFS_CONSTANT(BFS_ERR_MISMATCH),
    BFS_CONSTANT(BFS_ERR_PANIC),
    BFS_CONSTANT(BFS_ERR_BUSY),
    BFS_CONSTANT(BFS_ERR_FULL),
    BFS_CONSTANT(BFS_ERRBUF_LEN),
    BFS_CONSTANT(BFS_LAYOUT_DEFAULT),
    BFS_CONSTANT(BFS_LAYOUT_STANDARD),
    BFS_CONSTANT(BFS_LAYOUT_BLOCKED),
    BFS_CONSTANT(BFS_LAYOUT_DATASKETCHES),
    BFS_CONSTANT(BFS_DATASKETCHES_SEED),
    BFS_CONSTANT(BFS_GENERATIONS_DEFAULT),
    BFS_CONSTANT(BFS_REPLY_INCOMPLETE),
    BFS_CONSTANT(BFS_REPLY_INTS),
    BFS_CONSTANT(BFS_REPLY_ERROR),
    BFS_CONSTANT(BFS_REPLY_STATUS),
    BFS_CONSTANT(BFS_REPLY_OTHER),
};

#undef BFS_CONSTANT

/* The name of a layout code from bfs_info; the default layout's (the C
   API's first) for a code it does not know. */
static const char *
bfs_layout_name(uint32_t code)
{
    uint32_t i, c;
    const char *name;
    for (i = 0; bfs_layout_at(i, &name, &c); i++)
        if (c == code)
            return name;
    bfs_layout_at(0, &name, NULL);
    return name;
}

/* A layout code from Perl as the C API takes it: BFS_LAYOUT_DEFAULT and
   the codes of the C API's layouts as they are, any other (too large for
   32 bits among them) UINT32_MAX, which the C API refuses. */
static uint32_t
bfs_layout_arg(UV layout)
{
    uint32_t i, c;
    if (layout == BFS_LAYOUT_DEFAULT)
        return BFS_LAYOUT_DEFAULT;
    for (i = 0; bfs_layout_at(i, NULL, &c); i++)
        if ((UV)c == layout)
            return c;
    return UINT32_MAX;
}

/* ---------------------------------------------------------------- croaking */

/* The name the method was called by, for messages; private XSUBs drop "_xs_". */
static const char *
bfs_method(pTHX_ CV *cv)
{
    GV *gv = cv ? CvGV(cv) : NULL;
    const char *name = gv ? GvNAME(gv) : "?";
    if (strncmp(name, "_xs_", 4) == 0)
        name += 4;
    return name;
}

/* Every croak of this module: "Data::BloomFilter::Shared->METHOD: message". */
static void bfs_croak(pTHX_ CV *cv, const char *fmt, ...)
    __attribute__noreturn__ __attribute__format__(__printf__, pTHX_2, pTHX_3);

static void
bfs_croak(pTHX_ CV *cv, const char *fmt, ...)
{
    SV *msg = sv_2mortal(newSVpvf(BFS_CLASS "->%s: ", bfs_method(aTHX_ cv)));
    va_list ap;
    va_start(ap, fmt);
    sv_vcatpvf(msg, fmt, &ap);
    va_end(ap);
    croak_sv(msg);
}

/*
 * A failed system call reads in Rust's messages as Rust's io::Error prints
 * it: the strerror text, then " (os error N)". Perl's $! has the text
 * alone, and so do this module's messages: the number is cut out of msg, in
 * place, wherever it occurs (a message may quote two errors). Anything else
 * in parentheses stays.
 */
static void
bfs_os_words(char *msg)
{
    static const char mark[] = " (os error ";
    char *in = msg, *out = msg, *at;
    while ((at = strstr(in, mark)) != NULL) {
        char *digits = at + sizeof mark - 1, *end = digits;
        while (*end == '-' || (*end >= '0' && *end <= '9'))
            end++;
        if (end > digits && *end == ')') {
            Move(in, out, at - in, char);
            out += at - in;
            in = end + 1;
        }
        else {
            Move(in, out, digits - in, char);
            out += digits - in;
            in = digits;
        }
    }
    Move(in, out, strlen(in) + 1, char);
}

/* A failed Rust call: its message, or the status when it wrote none. */
static void bfs_croak_status(pTHX_ CV *cv, BfsStatus st, char *err)
    __attribute__noreturn__;

static void
bfs_croak_status(pTHX_ CV *cv, BfsStatus st, char *err)
{
    bfs_os_words(err);
    if (err[0])
        bfs_croak(aTHX_ cv, "%s", err);
    bfs_croak(aTHX_ cv, "error (status %u)", (unsigned)st);
}

/*
 * Step (d), written once. A Rust call that can fail takes an error buffer
 * (bfs_err, declared here) as its last argument: BFS_CALL croaks with its
 * message, BFS_CALL_OR_RETURN and BFS_MAKE make a constructor return
 * (undef, message) with Rust's message, or fallback when it wrote none;
 * either way in Perl's words for a system call's error (bfs_os_words).
 * The buffer lives in the macro's block only: every message leaves it as a
 * new SV before the XSUB returns or croaks.
 */
#define BFS_CALL(call) \
    STMT_START { \
        char bfs_err[BFS_ERRBUF_LEN]; \
        BfsStatus bfs_st_; \
        bfs_err[0] = '\0'; \
        bfs_st_ = (call); \
        if (UNLIKELY(bfs_st_ != BFS_OK)) \
            bfs_croak_status(aTHX_ cv, bfs_st_, bfs_err); \
    } STMT_END

/* After a Rust call that answers with a value: croak when the handle lost
   pages meanwhile, or before (another process truncated the file), its
   answer being void then. */
#define BFS_CHECK(h) BFS_CALL(bfs_check((h), bfs_err))

/* As BFS_CALL, also failing when it gave no handle in h. */
#define BFS_MAKE(call, h, fallback) \
    STMT_START { \
        char bfs_err[BFS_ERRBUF_LEN]; \
        bfs_err[0] = '\0'; \
        if ((call) != BFS_OK || !(h)) { \
            bfs_os_words(bfs_err); \
            BFS_RETURN_ERROR(bfs_err[0] ? bfs_err : (fallback)); \
        } \
    } STMT_END

#define BFS_CALL_OR_RETURN(call, fallback) \
    STMT_START { \
        char bfs_err[BFS_ERRBUF_LEN]; \
        bfs_err[0] = '\0'; \
        if ((call) != BFS_OK) { \
            bfs_os_words(bfs_err); \
            BFS_RETURN_ERROR(bfs_err[0] ? bfs_err : (fallback)); \
        } \
    } STMT_END

/* An item that cannot be used; idx < 0 for a single-item method. */
static void bfs_croak_item(pTHX_ CV *cv, const char *what, SSize_t idx)
    __attribute__noreturn__;

static void
bfs_croak_item(pTHX_ CV *cv, const char *what, SSize_t idx)
{
    if (idx < 0)
        bfs_croak(aTHX_ cv, "%s", what);
    bfs_croak(aTHX_ cv, "%s at index %" IVdf, what, (IV)idx);
}

/* A character string where bytes are wanted: say how to make them. */
static void bfs_croak_wide(pTHX_ CV *cv, SSize_t idx)
    __attribute__noreturn__;

static void
bfs_croak_wide(pTHX_ CV *cv, SSize_t idx)
{
#define BFS_ENCODE_FIRST ": encode first (e.g. Encode::encode_utf8)"
    if (idx < 0)
        bfs_croak(aTHX_ cv, "Wide character" BFS_ENCODE_FIRST);
    bfs_croak(aTHX_ cv, "Wide character at index %" IVdf BFS_ENCODE_FIRST, (IV)idx);
#undef BFS_ENCODE_FIRST
}

/*
 * How a croak shows an argument given, as Data::BloomFilter::Shared::Args'
 * shown does: undef; a reference by its type (never stringified: no
 * overloading runs); a number as Perl prints it; a string quoted, cut at 40
 * characters, control and non-ASCII characters as \x{..}. Reads no magic
 * (the caller has fetched it once). A mortal.
 */
static SV *
bfs_shown(pTHX_ SV *sv)
{
    SV *out;
    const U8 *p, *end;
    STRLEN len, n;
    if (!SvOK(sv))
        return sv_2mortal(newSVpvs("undef"));
    if (SvROK(sv)) {
        SV *r = SvRV(sv);
        const char *t = sv_reftype(r, SvOBJECT(r));
        if (SvOBJECT(r))
            return sv_2mortal(newSVpvf("a %s object", t));
        return sv_2mortal(newSVpvf("a%s %s reference", strchr("AEIOU", t[0]) ? "n" : "", t));
    }
    p = (const U8 *)SvPV_nomg_const(sv, len);
    end = p + len;
    if (len && looks_like_number(sv)) {
        const U8 *q;
        for (q = p; q < end && strchr("0123456789+-.eE", *q); q++)
            ;
        if (q == end)
            return sv_2mortal(newSVpvn((const char *)p, len));
    }
    out = sv_2mortal(newSVpvs("'"));
    for (n = 0; p < end; n++) {
        UV c;
        STRLEN skip = 1;
        if (n == 37 && (SvUTF8(sv) ? utf8_length(p, end) : (STRLEN)(end - p)) > 3) {
            sv_catpvs(out, "...");
            break;
        }
        c = SvUTF8(sv) ? utf8n_to_uvchr(p, end - p, &skip, UTF8_ALLOW_ANY) : *p;
        if (skip < 1)
            skip = 1;
        p += skip;
        if (c == '\'' || c == '\\')
            sv_catpvf(out, "\\%c", (int)c);
        else if (c >= 0x20 && c <= 0x7e)
            sv_catpvf(out, "%c", (int)c);
        else
            sv_catpvf(out, "\\x{%" UVxf "}", c);
    }
    sv_catpvs(out, "'");
    return out;
}

static void bfs_croak_usage(pTHX_ CV *cv, const char *usage)
    __attribute__noreturn__;

static void
bfs_croak_usage(pTHX_ CV *cv, const char *usage)
{
    bfs_croak(aTHX_ cv, "usage: %s", usage);
}

/* ---------------------------------------------------------------- handles */

/* The free hook: a handle whose scalar goes without DESTROY is freed too. */
static int
bfs_mg_free(pTHX_ SV *sv, MAGIC *mg)
{
    BfsFilter *h = (BfsFilter *)mg->mg_ptr;
    PERL_UNUSED_ARG(sv);
    mg->mg_ptr = NULL;
    bfs_free(h); /* NULL is fine */
    return 0;
}

/* mg_private of a handle copied into a new ithread (0 on the original). */
#define BFS_MG_OTHER_THREAD 0x4246

#ifdef USE_ITHREADS
/* The dup hook, run on the new thread's copy of the magic while the thread
   is being made (perl copied mg_ptr as it was, mg_len being 0): the copy
   gets no pointer. The handle stays the first thread's, freed by it alone;
   nothing here reads or writes what it points at. A handle destroyed
   before the thread was made stays a destroyed handle; a copy of a copy
   keeps its mark. */
static int
bfs_mg_dup(pTHX_ MAGIC *mg, CLONE_PARAMS *param)
{
    PERL_UNUSED_ARG(param);
    if (mg->mg_ptr)
        mg->mg_private = BFS_MG_OTHER_THREAD;
    mg->mg_ptr = NULL;
    return 0;
}
#  define BFS_MG_DUP bfs_mg_dup
#else
#  define BFS_MG_DUP NULL
#endif

/* Its address is what marks our handles: only this file can attach it. */
static MGVTBL bfs_vtbl = { NULL, NULL, NULL, NULL, bfs_mg_free, NULL, BFS_MG_DUP, NULL };

PERL_STATIC_INLINE MAGIC *bfs_magic(pTHX_ SV *obj);

/* The croak for a handle that holds no filter (ok but NULL from bfs_peek):
   destroyed, or copied from another thread. which is "" for the invocant,
   " (other filter)" for merge's argument and the like. Runs no Perl code. */
static void bfs_croak_dead(pTHX_ SV *sv, CV *cv, const char *which)
    __attribute__noreturn__;

static void
bfs_croak_dead(pTHX_ SV *sv, CV *cv, const char *which)
{
    MAGIC *mg = SvROK(sv) ? bfs_magic(aTHX_ SvRV(sv)) : NULL;
    if (mg && mg->mg_private == BFS_MG_OTHER_THREAD)
        bfs_croak(aTHX_ cv, "this handle%s was opened in another thread; open the filter in"
            " each thread (new with the path, new_from_fd, ...)", which);
    bfs_croak(aTHX_ cv, "destroyed handle%s", which);
}

/* Our magic on obj, or NULL. The magic is attached first and usually alone
   (weaken, for one, adds its own in front), so the head is looked at first. */
PERL_STATIC_INLINE MAGIC *
bfs_magic(pTHX_ SV *obj)
{
    MAGIC *mg;
    if (UNLIKELY(SvTYPE(obj) < SVt_PVMG))
        return NULL;
    mg = SvMAGIC(obj);
    if (LIKELY(mg != NULL && mg->mg_virtual == &bfs_vtbl))
        return mg;
    return mg ? mg_findext(obj, PERL_MAGIC_ext, &bfs_vtbl) : NULL;
}

/* NULL when sv is not one of our objects; the stored pointer (NULL once
   destroyed) otherwise. *ok tells the two NULLs apart. Runs no Perl code. */
PERL_STATIC_INLINE BfsFilter *
bfs_peek(pTHX_ SV *sv, bool *ok)
{
    MAGIC *mg;
    *ok = FALSE;
    if (UNLIKELY(!SvROK(sv)))
        return NULL;
    mg = bfs_magic(aTHX_ SvRV(sv));
    if (UNLIKELY(mg == NULL))
        return NULL;
    *ok = TRUE;
    return (BfsFilter *)mg->mg_ptr;
}

/* The typemap's check: a live handle, or a croak. */
PERL_STATIC_INLINE BfsFilter *
bfs_handle(pTHX_ SV *sv, CV *cv)
{
    bool ok;
    BfsFilter *h = bfs_peek(aTHX_ sv, &ok);
    if (LIKELY(h != NULL))
        return h;
    if (ok)
        bfs_croak_dead(aTHX_ sv, cv, "");
    bfs_croak(aTHX_ cv, "not a " BFS_CLASS " object");
}

/* After Perl code ran while resolving arguments: the invocant must still be a
   live handle. Whatever it has become, the call cannot go on with the old one. */
static BfsFilter *
bfs_recheck(pTHX_ SV *sv, CV *cv)
{
    bool ok;
    BfsFilter *h = bfs_peek(aTHX_ sv, &ok);
    if (UNLIKELY(h == NULL))
        bfs_croak_dead(aTHX_ sv, cv, "");
    return h;
}

/* The other filter of merge/intersect/is_compatible: get magic once, then check. */
static BfsFilter *
bfs_other(pTHX_ SV *sv, CV *cv)
{
    bool ok;
    BfsFilter *h;
    SvGETMAGIC(sv);
    h = bfs_peek(aTHX_ sv, &ok);
    if (h)
        return h;
    if (ok)
        bfs_croak_dead(aTHX_ sv, cv, " (other filter)");
    bfs_croak(aTHX_ cv, "other filter is not a " BFS_CLASS " object");
}

/* A new object of class klass around h. Cannot croak (but for out of memory). */
static SV *
bfs_wrap(pTHX_ SV *klass, BfsFilter *h)
{
    HV *stash = gv_stashsv(klass, GV_ADD);
    SV *obj = newSV_type(SVt_PVMG);
    SV *rv = sv_2mortal(newRV_noinc(obj)); /* from here a croak frees h too */
    MAGIC *mg;
    mg = sv_magicext(obj, NULL, PERL_MAGIC_ext, &bfs_vtbl, (const char *)h, 0);
    mg->mg_flags |= MGf_DUP; /* a new ithread's copy goes through bfs_mg_dup */
    sv_bless(rv, stash);
    return rv;
}

/* ---------------------------------------------------------------- call sites */

/*
 * The per-item methods (add, contains, add_many, contains_many) are called in
 * tight loops, where the generic entersub costs more than the work: it opens
 * and closes a scope (ENTER, SAVETMPS, LEAVE) and re-checks what a method call
 * site never changes. On its first call from a call site, such a method swaps
 * that site's entersub for bfs_pp_entersub (the technique of
 * Class::XSAccessor), which calls the XSUB directly while the site keeps
 * resolving to one of them, and gives the site back to the generic entersub
 * for good the first time it resolves to anything else (another class's
 * method, a Perl override in a subclass, a plain function call).
 *
 * What is skipped is safe for these XSUBs: they take their arguments from the
 * stack of a method call (OPf_STACKED); any savestack entries they leave (the
 * slow paths' buffers) are popped right after the call, as LEAVE would; the
 * mortals they return live until the caller's next FREETMPS, as usual. Call
 * sites compiled for the debugger (OPpENTERSUB_DB) are never swapped.
 * Optrees are shared between ithreads: a site may be written by two threads
 * at once, each storing the same pointer.
 */
static OP *(*bfs_generic_entersub)(pTHX);
static XSUBADDR_t bfs_fast_xsubs[3];
static UV bfs_swaps; /* sites swapped so far (for the tests; not exact under threads) */

static bool
bfs_fast_xsub(const CV *cv)
{
    return CvISXSUB(cv)
        && (CvXSUB(cv) == bfs_fast_xsubs[0] || CvXSUB(cv) == bfs_fast_xsubs[1]
            || CvXSUB(cv) == bfs_fast_xsubs[2]);
}

static OP *
bfs_pp_entersub(pTHX)
{
    SV *sv = *PL_stack_sp; /* the method that method_named resolved */
    if (LIKELY(sv && SvTYPE(sv) == SVt_PVCV && bfs_fast_xsub((CV *)sv))) {
        const I32 oldsave = PL_savestack_ix;
        PL_stack_sp--;
        CvXSUB((CV *)sv)(aTHX_ (CV *)sv);
        LEAVE_SCOPE(oldsave);
        return NORMAL;
    }
    PL_op->op_spare = 1; /* this site is not ours to speed up */
    PL_op->op_ppaddr = bfs_generic_entersub;
    return bfs_generic_entersub(aTHX);
}

/* At the top of each per-item method: swap the calling site's entersub. */
#define BFS_SWAP_ENTERSUB() \
    STMT_START { \
        if (UNLIKELY(PL_op->op_ppaddr == bfs_generic_entersub)) \
            bfs_swap_entersub(aTHX); \
    } STMT_END

static void
bfs_swap_entersub(pTHX)
{
    OP *o = PL_op;
    if (o->op_type == OP_ENTERSUB && !o->op_spare && (o->op_flags & OPf_STACKED)
        && !(o->op_private & OPpENTERSUB_DB)) {
        o->op_ppaddr = bfs_pp_entersub;
        bfs_swaps++;
    }
}

/* ---------------------------------------------------------------- items */

/* Bytes of a UTF-8 flagged string: itself when ASCII, else a downgraded copy
   freed at scope exit; a character above 0xFF croaks. */
static const char *
bfs_downgrade(pTHX_ CV *cv, const char *p, STRLEN *lenp, SSize_t idx)
{
    const U8 *s = (const U8 *)p;
    const U8 *const e = s + *lenp;
    bool is_utf8 = TRUE;
    U8 *copy;
    while (s < e && !(*s & 0x80))
        s++;
    if (s == e)
        return p; /* ASCII: the same bytes in either encoding */
    copy = bytes_from_utf8((const U8 *)p, lenp, &is_utf8);
    if (is_utf8) /* then copy is p itself, nothing to free */
        bfs_croak_wide(aTHX_ cv, idx);
    SAVEFREEPV(copy);
    return (const char *)copy;
}

/*
 * A reference given as an item is taken as Perl stringifies it, as the
 * original module took it: without overloading that is its address
 * ("HASH(0x...)"), a different item in every process and run, so almost
 * always a mistake (add($event) for add($event->{id})). Said once per call,
 * in this module's warnings category, by warnings::warnif called from
 * Shared.pm (so that the caller's lexical warnings decide, and FATAL makes
 * it a croak before anything is added). Only the slow paths test for a
 * reference: plain strings never get here.
 */

/* Whether Perl takes the string of reference rv from its overloading ("",
   or failing that 0+ or bool, as amagic_call does) rather than its address. */
static bool
bfs_overloads_string(pTHX_ SV *rv)
{
    HV *stash;
    if (!SvAMAGIC(rv))
        return FALSE;
    stash = SvSTASH(SvRV(rv));
    return gv_handler(stash, string_amg) || gv_handler(stash, numer_amg)
        || gv_handler(stash, bool__amg);
}

/* The warning for the reference item sv (idx < 0: of a single-item method;
   else the first of refs references in a batch). May run Perl code (a
   __WARN__ handler) and may die (FATAL warnings). */
static void
bfs_warn_reference(pTHX_ CV *cv, SV *shown, SSize_t idx, SSize_t refs)
{
    dSP;
    SV *msg = newSVpvf(BFS_CLASS "->%s: item", bfs_method(aTHX_ cv));
    sv_2mortal(msg);
    if (idx >= 0)
        sv_catpvf(msg, " at index %" IVdf, (IV)idx);
    sv_catpvf(msg, " is %" SVf ", taken as its address string (give a string, such as one of its fields",
        SVfARG(shown));
    if (refs > 1)
        sv_catpvf(msg, "; %" IVdf " items of this batch are references", (IV)refs);
    sv_catpvs(msg, ")");
    ENTER;
    SAVETMPS;
    PUSHMARK(SP);
    XPUSHs(msg);
    PUTBACK;
    call_pv(BFS_CLASS "::_warn_reference_item", G_DISCARD);
    FREETMPS;
    LEAVE;
}

/* One item that is not a plain byte string: magic, overloading, numbers,
   UTF-8, references. May run Perl code; the caller re-checks its handle
   afterwards. */
static const char *
bfs_item_slow(pTHX_ CV *cv, SV *sv, STRLEN *lenp)
{
    const char *p;
    SvGETMAGIC(sv);
    if (!SvOK(sv))
        bfs_croak_item(aTHX_ cv, "undefined item", -1);
    p = SvPV_nomg(sv, *lenp);
    if (SvUTF8(sv))
        p = bfs_downgrade(aTHX_ cv, p, lenp, -1);
    /* After the bytes are taken: a reference's string is a buffer of its
       own (freed at scope exit) or an overload's mortal result, which the
       warning's handler cannot reach. */
    if (UNLIKELY(SvROK(sv)) && !bfs_overloads_string(aTHX_ sv))
        bfs_warn_reference(aTHX_ cv, bfs_shown(aTHX_ sv), -1, 1);
    return p;
}

/* n bytes freed at scope exit (n of the caller's items, which exist). */
static void *
bfs_alloc(pTHX_ size_t n)
{
    char *block;
    Newx(block, n ? n : 1, char);
    SAVEFREEPV(block);
    return block;
}

/*
 * Resolve an array ref of items into slices, validating every element before
 * anything is added. Returns n; *ran_perl is set when Perl code may have run.
 *
 * Fast path (a plain, unmagical array of plain strings): slices point straight
 * into SvPVX; nothing can run between here and the Rust call, so nothing can
 * move them. Otherwise every element's bytes are copied into a buffer we own,
 * because Perl code run for a later element may change or free an earlier one.
 */
static SSize_t
bfs_items(pTHX_ CV *cv, SV *arg, BfsSlice **slicesp, bool *ran_perl)
{
    AV *av;
    SSize_t n, i, cap;
    BfsSlice *slices;
    SV *buf, *sbuf;
    SV *first_ref = NULL; /* how the first reference item is shown */
    SSize_t first_ref_at = 0, refs = 0;
    const char *base;

    if (SvGMAGICAL(arg)) {
        *ran_perl = TRUE;
        mg_get(arg);
    }
    if (SvAMAGIC(arg)) {
        *ran_perl = TRUE;
        arg = amagic_deref_call(arg, to_av_amg);
    }
    if (!SvROK(arg) || SvTYPE(SvRV(arg)) != SVt_PVAV)
        bfs_croak(aTHX_ cv, "argument is not an array reference, got %" SVf " (give \\@items)",
            SVfARG(bfs_shown(aTHX_ arg)));
    av = (AV *)SvRV(arg);

    if (LIKELY(!SvMAGICAL(av))) {
        SV **elems = AvARRAY(av);
        n = AvFILLp(av) + 1;
        slices = (BfsSlice *)bfs_alloc(aTHX_ (size_t)n * sizeof(BfsSlice));
        for (i = 0; i < n; i++) {
            SV *e = elems[i];
            if (UNLIKELY(!e || (SvFLAGS(e) & (SVf_POK | SVs_GMG)) != SVf_POK))
                goto slow;
            slices[i].ptr = (const uint8_t *)SvPVX(e);
            slices[i].len = SvCUR(e);
            if (UNLIKELY(SvUTF8(e))) /* no Perl code runs; a copy or a croak */
                slices[i].ptr = (const uint8_t *)bfs_downgrade(
                    aTHX_ cv, (const char *)slices[i].ptr, &slices[i].len, i);
        }
        *slicesp = slices;
        return n;
    }

slow:
    *ran_perl = TRUE;
    SvREFCNT_inc_simple_void_NN(av); /* Perl code below may drop the last reference */
    SAVEFREESV(av);
    n = av_top_index(av) + 1; /* FETCHSIZE for a tied array */
    /* The slices grow with the elements really fetched: a tied array's
       FETCHSIZE may claim far more than it will give (2**31-1, say), and
       memory must follow what is there, not the claim. */
    sbuf = sv_2mortal(newSV(1)); /* a PV, so that SvGROW has a body to look at */
    cap = 0;
    slices = NULL;
    buf = sv_2mortal(newSV(64));
    SvPOK_only(buf);
    SvCUR_set(buf, 0);
    for (i = 0; i < n; i++) {
        SV **svp;
        SV *e;
        const char *p;
        STRLEN len, off;
        if (i == cap) {
            cap = cap ? (cap > n / 2 ? n : 2 * cap) : (n < 64 ? n : 64);
            slices = (BfsSlice *)SvGROW(sbuf, (STRLEN)cap * sizeof(BfsSlice));
        }
        svp = av_fetch(av, i, 0);
        e = svp ? *svp : NULL;
        if (!e)
            bfs_croak_item(aTHX_ cv, "undefined item", i);
        if (SvGMAGICAL(e) || SvROK(e)) {
            /* its own FETCH or overload method may free it */
            SvREFCNT_inc_simple_void_NN(e);
            SAVEFREESV(e);
        }
        SvGETMAGIC(e);
        if (!SvOK(e))
            bfs_croak_item(aTHX_ cv, "undefined item", i);
        if (SvROK(e) && !bfs_overloads_string(aTHX_ e) && refs++ == 0) {
            first_ref = bfs_shown(aTHX_ e);
            first_ref_at = i;
        }
        p = SvPV_nomg(e, len);
        off = SvCUR(buf);
        sv_catpvn_nomg(buf, p, len);
        if (SvUTF8(e)) {
            STRLEN blen = len;
            if (!utf8_to_bytes((U8 *)SvPVX(buf) + off, &blen))
                bfs_croak_wide(aTHX_ cv, i);
            len = blen;
            SvCUR_set(buf, off + len);
        }
        /* an offset for now: buf may still move */
        slices[i].ptr = (const uint8_t *)(uintptr_t)off;
        slices[i].len = len;
    }
    /* Every item is checked and its bytes are in buf, which no Perl code
       can reach: the warning may run some now. */
    if (refs)
        bfs_warn_reference(aTHX_ cv, first_ref, first_ref_at, refs);
    base = SvPVX(buf);
    for (i = 0; i < n; i++)
        slices[i].ptr = (const uint8_t *)base + (uintptr_t)slices[i].ptr;
    *slicesp = slices;
    return n;
}

/* The whole-filter operations of the clear XSUB and its aliases, by ix. */
static BfsStatus
bfs_whole_op(BfsFilter *h, I32 ix, char *err)
{
    switch (ix) {
    case 0: return bfs_clear(h, err);
    case 1: return bfs_invert(h, err);
    case 2: return bfs_freeze(h, err);
    case 4: return bfs_rotate(h, err);
    default: return bfs_sync(h, err);
    }
}

/* ---------------------------------------------------------------- constructors */

/* A path or name from the .pm (already validated there; checked again because
   the XSUB can be called directly). NULL for undef; *bad set on a bad string.
   A path is the scalar's own bytes, UTF-8 flagged or not: the bytes Perl's
   open and -e use for the same scalar. */
static const char *
bfs_cstr(pTHX_ SV *sv, const char **bad)
{
    const char *p;
    STRLEN len;
    *bad = NULL;
    if (!SvOK(sv))
        return NULL;
    p = SvPV_nomg(sv, len);
    if (memchr(p, '\0', len))
        *bad = "path contains a NUL byte";
    return p;
}

/* Constructors return (object) or (undef, message): the .pm croaks with Carp so
   the message points at the caller's line, not at Shared.pm. */
#define BFS_RETURN_ERROR(msg) \
    STMT_START { \
        XSprePUSH; \
        EXTEND(SP, 2); \
        PUSHs(&PL_sv_undef); \
        mPUSHs(newSVpv((msg), 0)); \
        XSRETURN(2); \
    } STMT_END

#define BFS_RETURN_OBJECT(klass, h) \
    STMT_START { \
        ST(0) = bfs_wrap(aTHX_ (klass), (h)); \
        XSRETURN(1); \
    } STMT_END

#include "redis_xs.h"

MODULE = Data::BloomFilter::Shared    PACKAGE = Data::BloomFilter::Shared

PROTOTYPES: DISABLE

BOOT:
{
    bfs_generic_entersub = PL_ppaddr[OP_ENTERSUB];
    bfs_fast_xsubs[0] = CvXSUB(get_cv(BFS_CLASS "::add", GV_ADD));
    bfs_fast_xsubs[1] = CvXSUB(get_cv(BFS_CLASS "::contains", GV_ADD));
    bfs_fast_xsubs[2] = CvXSUB(get_cv(BFS_CLASS "::add_many", GV_ADD)); /* and its alias */
}

void
_xs_new(klass, path, capacity, fp_rate, mode, seed, layout = 0, generations = 0, window = 0.0, bits = 0, hashes = 0, grow = 0, max_capacity = 0)
    SV *klass
    SV *path
    UV capacity
    NV fp_rate
    UV mode
    UV seed
    UV layout
    UV generations
    NV window
    UV bits
    UV hashes
    UV grow
    UV max_capacity
  ALIAS:
    _xs_new_memfd = 1
  PREINIT:
    const char *p, *bad;
    BfsOptions opts;
    BfsFilter *h = NULL;
  CODE:
    p = bfs_cstr(aTHX_ path, &bad);
    if (bad)
        BFS_RETURN_ERROR(bad);
    if (mode > 07777)
        BFS_RETURN_ERROR("mode must be an integer between 0 and 07777");
    opts.mode = (uint32_t)mode;
    opts.seed = (uint64_t)seed;
    opts.layout = bfs_layout_arg(layout);
    opts.generations = generations > 16 ? UINT32_MAX : (uint32_t)generations;
    opts.window = (double)window;
    opts.bits = (uint64_t)bits;
    opts.hashes = hashes > UINT32_MAX ? UINT32_MAX : (uint32_t)hashes;
    opts.grow = grow > 16 ? UINT32_MAX : (uint32_t)grow;
    opts.max_capacity = (uint64_t)max_capacity;
    opts.max_bytes = 0;
    BFS_MAKE(ix == 1 ? bfs_new_memfd(p, capacity, fp_rate, &opts, &h, bfs_err)
                 : bfs_new(p, capacity, fp_rate, &opts, &h, bfs_err), h, "cannot create the filter");
    BFS_RETURN_OBJECT(klass, h);

void
_xs_parse_duration(text)
    SV *text
  PREINIT:
    const char *t, *bad;
    uint64_t ns = 0;
  PPCODE:
    t = bfs_cstr(aTHX_ text, &bad);
    if (bad || !t)
        BFS_RETURN_ERROR(bad ? bad : "duration is missing");
    BFS_CALL_OR_RETURN(bfs_parse_duration(t, &ns, bfs_err), "bad duration");
    mXPUSHn((NV)ns / 1e9);
    XSRETURN(1);

void
_xs_new_from_fd(klass, fd)
    SV *klass
    IV fd
  PREINIT:
    BfsFilter *h = NULL;
  CODE:
    if (fd < 0 || fd > INT_MAX)
        BFS_RETURN_ERROR("fd must be a non-negative integer or an open file handle");
    BFS_MAKE(bfs_new_from_fd((int)fd, &h, bfs_err), h, "cannot open the filter");
    BFS_RETURN_OBJECT(klass, h);

void
_xs_new_readonly(klass, path)
    SV *klass
    SV *path
  PREINIT:
    const char *p, *bad;
    BfsFilter *h = NULL;
  CODE:
    p = bfs_cstr(aTHX_ path, &bad);
    if (bad)
        BFS_RETURN_ERROR(bad);
    if (!p)
        BFS_RETURN_ERROR("undefined path");
    BFS_MAKE(bfs_new_readonly(p, &h, bfs_err), h, "cannot open the filter");
    BFS_RETURN_OBJECT(klass, h);

void
_xs_deserialize(klass, bytes, path, mode, layout = 0, generations = 0, window = 0, to_memfd = 0, grow = 0, max_capacity = 0, max_bytes = 0)
    SV *klass
    SV *bytes
    SV *path
    UV mode
    UV layout
    UV generations
    NV window
    IV to_memfd
    UV grow
    UV max_capacity
    UV max_bytes
  PREINIT:
    const char *p, *bad, *b;
    STRLEN len;
    BfsOptions opts;
    BfsFilter *h = NULL;
  CODE:
    /* bytes is the caller's own SV (the .pm passes $_[1] untouched), so that a
       large string is not copied and its get magic runs exactly once, here. */
    SvGETMAGIC(bytes);
    if (!SvOK(bytes))
        BFS_RETURN_ERROR("undefined bytes");
    /* A plain reference can only stringify to "ARRAY(0x...)": say so rather
       than report that text's bad magic. Overloaded objects give their string. */
    if (SvROK(bytes) && !SvAMAGIC(bytes))
        BFS_RETURN_ERROR("bytes must be a string, not a reference");
    b = SvPV_nomg(bytes, len);
    if (SvUTF8(bytes)) {
        bool is_utf8 = TRUE;
        U8 *copy = bytes_from_utf8((const U8 *)b, &len, &is_utf8);
        if (is_utf8)
            BFS_RETURN_ERROR("Wide character in bytes");
        SAVEFREEPV(copy);
        b = (const char *)copy;
    }
    p = bfs_cstr(aTHX_ path, &bad);
    if (bad)
        BFS_RETURN_ERROR(bad);
    if (mode > 07777)
        BFS_RETURN_ERROR("mode must be an integer between 0 and 07777");
    opts.mode = (uint32_t)mode;
    opts.seed = 0; /* the seed travels in the bytes */
    opts.layout = bfs_layout_arg(layout);
    opts.generations = generations > 16 ? UINT32_MAX : (uint32_t)generations;
    opts.window = (double)window;
    opts.bits = 0;
    opts.hashes = 0;
    /* the growth travels in the bytes; one asked for must match it */
    opts.grow = grow > 16 ? UINT32_MAX : (uint32_t)grow;
    opts.max_capacity = (uint64_t)max_capacity;
    opts.max_bytes = (uint64_t)max_bytes; /* 0: the default ceiling */
    /* to_memfd: path is the new memfd's name */
    BFS_MAKE(to_memfd ? bfs_deserialize_memfd((const uint8_t *)b, len, p, &opts, &h, bfs_err)
                      : bfs_deserialize((const uint8_t *)b, len, p, &opts, &h, bfs_err),
             h, "cannot deserialize the filter");
    BFS_RETURN_OBJECT(klass, h);

void
_constants()
  PREINIT:
    size_t i;
  PPCODE:
    /* The C API's constants as name => value pairs, their names without
       "BFS_" (LAYOUT_BLOCKED, GENERATIONS_DEFAULT, ERR_FROZEN, ...). */
    EXTEND(SP, (SSize_t)(2 * C_ARRAY_LENGTH(bfs_constants)));
    for (i = 0; i < C_ARRAY_LENGTH(bfs_constants); i++) {
        mPUSHp(bfs_constants[i].name, strlen(bfs_constants[i].name));
        mPUSHu(bfs_constants[i].value);
    }

void
_layouts()
  PREINIT:
    uint32_t i, code;
    const char *name;
  PPCODE:
    /* The layouts as name => BFS_LAYOUT_* code pairs, the default first:
       the C API's table. */
    for (i = 0; bfs_layout_at(i, &name, &code); i++) {
        EXTEND(SP, 2);
        mPUSHp(name, strlen(name));
        mPUSHu((UV)code);
    }

UV
_entersub_swaps(...)
  CODE:
    PERL_UNUSED_VAR(items);
    RETVAL = bfs_swaps;
  OUTPUT:
    RETVAL

void
DESTROY(self)
    SV *self
  PREINIT:
    bool ok;
    BfsFilter *h;
  CODE:
    /* Lenient: never croaks (it may run during global destruction, or on a
       subclass object that is not ours), and a second call is a no-op. */
    h = bfs_peek(aTHX_ self, &ok);
    if (h) {
        bfs_magic(aTHX_ SvRV(self))->mg_ptr = NULL; /* first: nothing reaches it freed */
        bfs_free(h);
    }

int
add(h, ...)
    BfsFilter *h
  PREINIT:
    SV *item;
    const char *p;
    STRLEN len;
    uint8_t was_new = 0;
    int fast;
  CODE:
    BFS_SWAP_ENTERSUB();
    if (UNLIKELY(items != 2))
        bfs_croak_usage(aTHX_ cv, "$filter->add($item)");
    item = ST(1);
    if (LIKELY((SvFLAGS(item) & (SVf_POK | SVf_UTF8 | SVs_GMG)) == SVf_POK)) {
        p = SvPVX(item);
        len = SvCUR(item);
    }
    else {
        p = bfs_item_slow(aTHX_ cv, item, &len);
        h = bfs_recheck(aTHX_ ST(0), cv);
    }
    fast = bfs_try_add(h, (const uint8_t *)p, len);
    if (LIKELY(fast >= 0)) {
        RETVAL = fast;
    }
    else {
        BFS_CALL(bfs_add(h, (const uint8_t *)p, len, &was_new, bfs_err));
        RETVAL = was_new != 0;
    }
  OUTPUT:
    RETVAL

int
contains(h, ...)
    const BfsFilter *h
  PREINIT:
    SV *item;
    const char *p;
    STRLEN len;
  CODE:
    BFS_SWAP_ENTERSUB();
    if (UNLIKELY(items != 2))
        bfs_croak_usage(aTHX_ cv, "$filter->contains($item)");
    item = ST(1);
    if (LIKELY((SvFLAGS(item) & (SVf_POK | SVf_UTF8 | SVs_GMG)) == SVf_POK)) {
        p = SvPVX(item);
        len = SvCUR(item);
    }
    else {
        p = bfs_item_slow(aTHX_ cv, item, &len);
        h = bfs_recheck(aTHX_ ST(0), cv);
    }
    RETVAL = bfs_contains(h, (const uint8_t *)p, len);
    if (UNLIKELY(RETVAL < 0))
        BFS_CHECK(h);
  OUTPUT:
    RETVAL

void
add_many(h, ...)
    BfsFilter *h
  ALIAS:
    contains_many = 1
  PREINIT:
    BfsSlice *slices;
    U8 *results = NULL;
    AV *out = NULL;
    SSize_t n, i;
    bool ran_perl = FALSE;
    U8 gimme;
    uint64_t count = 0;
  PPCODE:
    BFS_SWAP_ENTERSUB();
    if (UNLIKELY(items != 2 && items != 3))
        bfs_croak_usage(aTHX_ cv, ix ? "$filter->contains_many(\\@items, \\@present)"
                                     : "$filter->add_many(\\@items, \\@was_new)");
    gimme = GIMME_V;
    if (items == 3) {
        /* The out array: checked before anything is added, filled after. */
        SV *o = ST(2);
        SvGETMAGIC(o);
        if (!SvROK(o) || SvTYPE(SvRV(o)) != SVt_PVAV || SvOBJECT(SvRV(o)))
            bfs_croak(aTHX_ cv, "second argument is not an array reference, got %" SVf
                " (give \\@out, an array to fill)", SVfARG(bfs_shown(aTHX_ o)));
        out = (AV *)SvRV(o);
        if (SvREADONLY(out))
            bfs_croak(aTHX_ cv, "second argument is a read-only array");
        SvREFCNT_inc_simple_void_NN(out); /* item magic may drop the last reference */
        SAVEFREESV(out);
        ran_perl = TRUE;
    }
    n = bfs_items(aTHX_ cv, ST(1), &slices, &ran_perl);
    if (out || (ix == 1 && gimme == G_LIST))
        results = (U8 *)bfs_alloc(aTHX_ (size_t)n);
    if (ran_perl)
        h = bfs_recheck(aTHX_ ST(0), cv);
    if (ix == 0) {
        BFS_CALL(bfs_add_many(h, slices, (size_t)n, results, &count, bfs_err));
    }
    else {
        count = bfs_contains_many(h, slices, (size_t)n, results);
        BFS_CHECK(h);
    }
    if (out) {
        /* No lock is held any more: a tied array's CLEAR and STORE may run. */
        av_clear(out);
        if (n > 0)
            av_extend(out, n - 1);
        for (i = 0; i < n; i++)
            av_push(out, newSViv(results[i] != 0));
    }
    SP = PL_stack_base + ax - 1; /* Perl code may have moved the stack */
    if (ix == 1 && gimme == G_LIST) {
        EXTEND(SP, n);
        for (i = 0; i < n; i++)
            mPUSHi(results[i] != 0);
    }
    else if (gimme != G_VOID) {
        /* add_many: the count in every context, as the original */
        dXSTARG;
        PUSHu((UV)count);
    }

void
merge(h, ...)
    BfsFilter *h
  ALIAS:
    intersect = 1
  PREINIT:
    const BfsFilter *other;
  PPCODE:
    if (items != 2)
        bfs_croak_usage(aTHX_ cv, ix ? "$filter->intersect($other)" : "$filter->merge($other)");
    other = bfs_other(aTHX_ ST(1), cv);
    h = bfs_recheck(aTHX_ ST(0), cv);
    BFS_CALL(ix ? bfs_intersect(h, other, bfs_err) : bfs_merge(h, other, bfs_err));
    XSRETURN_YES;

int
is_compatible(h, ...)
    const BfsFilter *h
  PREINIT:
    const BfsFilter *other;
  CODE:
    if (items != 2)
        bfs_croak_usage(aTHX_ cv, "$filter->is_compatible($other)");
    other = bfs_other(aTHX_ ST(1), cv);
    h = bfs_recheck(aTHX_ ST(0), cv);
    RETVAL = bfs_is_compatible(h, other) != 0;
    BFS_CHECK(h);
    BFS_CHECK(other);
  OUTPUT:
    RETVAL

void
clear(h, ...)
    BfsFilter *h
  ALIAS:
    invert = 1
    freeze = 2
    sync = 3
    rotate = 4
  PPCODE:
    if (items != 1)
        bfs_croak(aTHX_ cv, "takes no arguments");
    BFS_CALL(bfs_whole_op(h, ix, bfs_err));
    XSRETURN_YES;

void
capacity(h, ...)
    const BfsFilter *h
  ALIAS:
    fp_rate = 1
    bits = 2
    hashes = 3
    seed = 4
    memfd = 5
    frozen = 6
    readonly = 7
    count = 8
    bits_set = 9
    fill_ratio = 10
    estimated_fpp = 11
    is_empty = 12
    layout = 13
    window = 14
    generations = 15
    grow = 16
    stages = 17
    max_capacity = 18
    _first_capacity = 19
  PREINIT:
    BfsInfo info;
    BfsStage st;
    dXSTARG;
  PPCODE:
    if (items != 1)
        bfs_croak(aTHX_ cv, "takes no arguments");
    if (ix <= 7 || (ix >= 10 && ix <= 18))
        bfs_info(h, &info);
    switch (ix) {
    case 0: PUSHu((UV)info.capacity); break;
    case 1: PUSHn((NV)info.fp_rate); break;
    case 2: PUSHu((UV)info.bits); break;
    case 3: PUSHu((UV)info.hashes); break;
    case 4: PUSHu((UV)info.seed); break;
    case 5: PUSHi((IV)info.memfd); break;
    case 6: PUSHi(info.frozen != 0); break;
    case 7: PUSHi(info.readonly != 0); break;
    case 8: PUSHu((UV)bfs_count(h)); break;
    case 9: PUSHu((UV)bfs_bits_set(h)); break;
    case 10: {
        NV fill = info.bits ? (NV)bfs_bits_set(h) / (NV)info.bits : 0.0;
        PUSHn(fill);
        break;
    }
    case 11: PUSHn((NV)bfs_fpp_for_bits_set(h, bfs_bits_set(h))); break;
    case 13:
        PUSHs(sv_2mortal(newSVpv(bfs_layout_name(info.layout), 0)));
        break;
    case 14:
        if (info.window_ns)
            PUSHn((NV)info.window_ns / 1e9);
        else
            PUSHs(&PL_sv_undef);
        break;
    case 15:
        if (info.generations)
            PUSHu((UV)info.generations);
        else
            PUSHs(&PL_sv_undef);
        break;
    case 16:
        if (info.grow)
            PUSHu((UV)info.grow);
        else
            PUSHs(&PL_sv_undef);
        break;
    case 17: PUSHu((UV)info.stages); break;
    case 18:
        if (info.max_capacity)
            PUSHu((UV)info.max_capacity);
        else
            PUSHs(&PL_sv_undef);
        break;
    /* Stage 0's capacity, from the header alone: what the filter was
       made with, read without touching a bit (new's reopen warning) */
    case 19:
        PUSHu(bfs_stage(h, 0, &st) ? (UV)st.capacity : 0);
        break;
    default: PUSHi(bfs_is_empty(h) != 0); break;
    }
    BFS_CHECK(h);

SV *
path(h, ...)
    const BfsFilter *h
  PREINIT:
    const char *p;
  CODE:
    if (items != 1)
        bfs_croak(aTHX_ cv, "takes no arguments");
    p = bfs_path(h);
    BFS_CHECK(h);
    RETVAL = p ? newSVpv(p, 0) : &PL_sv_undef;
  OUTPUT:
    RETVAL

SV *
stats(h, ...)
    const BfsFilter *h
  PREINIT:
    BfsInfo info;
    HV *hv;
    uint64_t set, count;
    NV fill;
  CODE:
    if (items != 1)
        bfs_croak(aTHX_ cv, "takes no arguments");
    bfs_info(h, &info);
    set = bfs_bits_set(h); /* one reading, so the ratios agree with bits_set */
    count = bfs_count(h);
    fill = info.bits ? (NV)set / (NV)info.bits : 0.0;
    hv = newHV();
    RETVAL = newRV_noinc((SV *)hv);
    (void)hv_stores(hv, "capacity", newSVuv((UV)info.capacity));
    (void)hv_stores(hv, "fp_rate", newSVnv((NV)info.fp_rate));
    (void)hv_stores(hv, "bits", newSVuv((UV)info.bits));
    (void)hv_stores(hv, "hashes", newSVuv((UV)info.hashes));
    (void)hv_stores(hv, "seed", newSVuv((UV)info.seed));
    (void)hv_stores(hv, "bits_set", newSVuv((UV)set));
    (void)hv_stores(hv, "count", newSVuv((UV)count));
    (void)hv_stores(hv, "fill_ratio", newSVnv(fill));
    (void)hv_stores(hv, "estimated_fpp", newSVnv((NV)bfs_fpp_for_bits_set(h, set)));
    (void)hv_stores(hv, "ops", newSVuv((UV)bfs_ops(h)));
    sv_2mortal(RETVAL); /* freed by a croak of BFS_CHECK below */
    (void)hv_stores(hv, "mmap_size", newSVuv((UV)info.mmap_size));
    (void)hv_stores(hv, "frozen", newSViv(info.frozen != 0));
    (void)hv_stores(hv, "readonly", newSViv(info.readonly != 0));
    /* past capacity; a saturated filter's count stops at capacity */
    /* a filter that grows adds a stage instead (and refuses new items at its bound) */
    (void)hv_stores(hv, "overfull", newSViv(!info.grow && (count > info.capacity || set == info.bits)));
    (void)hv_stores(hv, "layout", newSVpv(bfs_layout_name(info.layout), 0));
    if (info.generations) {
        (void)hv_stores(hv, "window",
            info.window_ns ? newSVnv((NV)info.window_ns / 1e9) : newSV(0));
        (void)hv_stores(hv, "generations", newSVuv((UV)info.generations));
        (void)hv_stores(hv, "generation", newSVuv((UV)info.generation));
        (void)hv_stores(hv, "generation_start",
            info.window_ns ? newSVnv((NV)info.generation_start_ns / 1e9) : newSV(0));
    }
    if (info.grow) {
        AV *av = newAV();
        BfsStage st;
        uint32_t i;
        (void)hv_stores(hv, "grow", newSVuv((UV)info.grow));
        (void)hv_stores(hv, "max_capacity",
            info.max_capacity ? newSVuv((UV)info.max_capacity) : newSV(0));
        for (i = 0; bfs_stage(h, i, &st); i++) {
            HV *sh = newHV();
            (void)hv_stores(sh, "capacity", newSVuv((UV)st.capacity));
            (void)hv_stores(sh, "bits", newSVuv((UV)st.bits));
            (void)hv_stores(sh, "hashes", newSVuv((UV)st.hashes));
            (void)hv_stores(sh, "fill", newSVuv((UV)st.fill));
            av_push(av, newRV_noinc((SV *)sh));
        }
        (void)hv_stores(hv, "stages", newSVuv((UV)info.stages));
        (void)hv_stores(hv, "stage_info", newRV_noinc((SV *)av));
    }
    BFS_CHECK(h);
    SvREFCNT_inc_simple_void_NN(RETVAL); /* OUTPUT mortalises it again */
  OUTPUT:
    RETVAL

SV *
serialize(h, ...)
    const BfsFilter *h
  PREINIT:
    uint64_t size;
    char *buf;
    SV *out;
    int ds = 0, tries = 0;
    size_t written = 0;
  CODE:
    if (items == 3) {
        /* format => 'datasketches': Apache DataSketches' image. */
        const char *k, *v, *format;
        STRLEN klen, vlen;
        /* Magic once each, then the values as they are. */
        SvGETMAGIC(ST(1));
        SvGETMAGIC(ST(2));
        if (!SvOK(ST(1)) || !SvOK(ST(2)))
            bfs_croak(aTHX_ cv, "format must be 'datasketches', got undef");
        k = SvPV_nomg_const(ST(1), klen);
        if (klen != 6 || memcmp(k, "format", 6) != 0)
            bfs_croak(aTHX_ cv, "unknown option '%.*s' (the one option is format)", (int)(klen > 40 ? 40 : klen), k);
        v = SvPV_nomg_const(ST(2), vlen);
        /* The format is named as the layout it is the image of. */
        format = bfs_layout_name(BFS_LAYOUT_DATASKETCHES);
        if (vlen != strlen(format) || memcmp(v, format, vlen) != 0)
            bfs_croak(aTHX_ cv, "format must be 'datasketches', got '%.*s'", (int)(vlen > 40 ? 40 : vlen), v);
        ds = 1;
        h = bfs_recheck(aTHX_ ST(0), cv);
    }
    else if (items != 1)
        bfs_croak_usage(aTHX_ cv, "$filter->serialize or $filter->serialize(format => 'datasketches')");
again:
    size = ds ? bfs_datasketches_max_size(h) : bfs_serialized_size(h);
    if (size >= (uint64_t)(SSize_t_MAX))
        bfs_croak(aTHX_ cv, "serialized size %" UVuf " is too large", (UV)size);
    /* Perl's own allocator ends the process ("Out of memory!") when it
       fails; ask the one it uses underneath, which answers NULL, and hand
       the block to the string. Not with perl's own malloc or a debugging
       build's memory pool, whose blocks are not plain malloc's. */
    /* A large block is asked of the address space first: a failed malloc
       in a process with threads keeps a new arena's worth of it. */
    if (size >= ((uint64_t)1 << 20) && !bfs_address_space_has_room(size + 1))
        bfs_croak(aTHX_ cv, "cannot allocate %" UVuf " bytes for the serialized filter", (UV)size);
#if defined(MYMALLOC) || defined(PERL_TRACK_MEMPOOL)
    buf = (char *)safemalloc((size_t)size + 1);
#else
    buf = (char *)PerlMem_malloc((size_t)size + 1);
#endif
    if (!buf)
        bfs_croak(aTHX_ cv, "cannot allocate %" UVuf " bytes for the serialized filter", (UV)size);
    /* the string owns the block from here: a croak below frees it */
    buf[size] = '\0';
    out = sv_2mortal(newSV(0));
    sv_usepvn_flags(out, buf, (STRLEN)size, SV_HAS_TRAILING_NUL);
    if (ds) {
        BFS_CALL(bfs_serialize_datasketches(h, (uint8_t *)SvPVX(out), (size_t)size, &written, bfs_err));
        SvCUR_set(out, (STRLEN)written);
        *SvEND(out) = '\0';
    }
    else {
        /* A filter that grows and added a stage since its size was asked
           says so (BFS_ERR_BUSY): size it again. A stage is added at most
           32 times in a filter's life. A windowed filter's BFS_ERR_BUSY is
           its copy's own 16 tries, all overtaken by steps: it croaks as
           the POD says, not after 16 times as many. */
        char bfs_err[BFS_ERRBUF_LEN];
        BfsStatus st;
        BfsInfo info;
        bfs_err[0] = '\0';
        st = bfs_serialize(h, (uint8_t *)SvPVX(out), (size_t)size, bfs_err);
        if (st == BFS_ERR_BUSY && ++tries < 64) {
            bfs_info(h, &info);
            if (info.grow)
                goto again;
        }
        if (st != BFS_OK)
            bfs_croak_status(aTHX_ cv, st, bfs_err);
    }
    RETVAL = SvREFCNT_inc_simple_NN(out);
  OUTPUT:
    RETVAL

void
unlink(self, ...)
    SV *self
  PREINIT:
    const char *p;
    STRLEN len;
    uint8_t removed = 0;
  PPCODE:
    if (SvROK(self)) {
        /* $filter->unlink: its own path; none is nothing to remove */
        BfsFilter *h = bfs_handle(aTHX_ self, cv);
        if (items != 1)
            bfs_croak_usage(aTHX_ cv, "$filter->unlink or " BFS_CLASS "->unlink($path)");
        p = bfs_path(h);
        BFS_CHECK(h);
        if (!p)
            XSRETURN_IV(0);
    }
    else {
        /* Class->unlink($path) */
        SV *path;
        if (items != 2)
            bfs_croak_usage(aTHX_ cv, "$filter->unlink or " BFS_CLASS "->unlink($path)");
        path = ST(1);
        SvGETMAGIC(path);
        if (!SvOK(path))
            bfs_croak(aTHX_ cv, "undefined path");
        p = SvPV_nomg(path, len); /* its own bytes, as Perl's unlink takes them */
        if (memchr(p, '\0', len))
            bfs_croak(aTHX_ cv, "path contains a NUL byte");
    }
    BFS_CALL(bfs_unlink_path(p, &removed, bfs_err));
    XSRETURN_IV(removed != 0);

void
_xs_upgrade(klass, path)
    SV *klass
    SV *path
  PREINIT:
    const char *p, *bad;
    BfsUpgraded u;
    HV *hv;
  PPCODE:
    PERL_UNUSED_VAR(klass);
    p = bfs_cstr(aTHX_ path, &bad);
    if (bad)
        BFS_RETURN_ERROR(bad);
    if (!p)
        BFS_RETURN_ERROR("path required");
    BFS_CALL_OR_RETURN(bfs_upgrade(p, &u, bfs_err), "cannot upgrade the file");
    hv = newHV();
    ST(0) = sv_2mortal(newRV_noinc((SV *)hv));
    (void)hv_stores(hv, "from_version", newSVuv((UV)u.from_version));
    if (!u.from_original)
        (void)hv_stores(hv, "earlier_release", newSVuv(1));
    (void)hv_stores(hv, "bits", newSVuv((UV)u.bits));
    (void)hv_stores(hv, "hashes", newSVuv((UV)u.hashes));
    (void)hv_stores(hv, "capacity", newSVuv((UV)u.capacity));
    (void)hv_stores(hv, "fp_rate", newSVnv((NV)u.fp_rate));
    (void)hv_stores(hv, "bits_set", newSVuv((UV)u.bits_set));
    XSRETURN(1);

INCLUDE: Redis.xsh
