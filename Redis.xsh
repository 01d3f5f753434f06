 # ---------------------------------------------------------------- remote copies
 #
 # Helpers of Data::BloomFilter::Shared::Redis (lib/.../Shared/Redis.pm): the
 # Rust core's probe offsets and fold for a filter kept in Redis, and a local
 # filter built from its bytes. Cold argument checks live in the .pm; these
 # take plain values. Items go through bfs_items like add_many's.
 #
 # This file is pulled into Shared.xs by its INCLUDE line; the C helpers
 # these XSUBs share are in redis_xs.h.

MODULE = Data::BloomFilter::Shared    PACKAGE = Data::BloomFilter::Shared::Redis

void
_xs_geometry(layout, capacity, fp_rate)
    const char *layout
    UV capacity
    NV fp_rate
  PREINIT:
    BfsRemoteGeometry g;
  PPCODE:
    BFS_CALL_OR_RETURN(bfs_remote_geometry(layout, (uint64_t)capacity, (double)fp_rate, &g, bfs_err), "bad geometry");
    EXTEND(SP, 3);
    mPUSHu((UV)g.bits);
    mPUSHu((UV)g.hashes);
    mPUSHu((UV)g.span_bits);

void
_xs_stage(layout, capacity, fp_rate, grow, max_capacity, stage, bits_set)
    const char *layout
    UV capacity
    NV fp_rate
    UV grow
    UV max_capacity
    UV stage
    UV bits_set
  PREINIT:
    BfsRemoteStage g;
  PPCODE:
    /* Stage `stage` of a filter that grows, as a local one's (bits 0 past
       its limit): (limit, bits, hashes, span, capacity, count, fpp), or
       (undef, why such a filter cannot be). */
    if (grow > 16 || stage > 32)
        bfs_croak(aTHX_ cv, "grow %" UVuf " or stage %" UVuf " is out of range", grow, stage);
    BFS_CALL_OR_RETURN(bfs_remote_stage(layout, (uint64_t)capacity, (double)fp_rate, (uint32_t)grow,
                                        (uint64_t)max_capacity, (uint32_t)stage, (uint64_t)bits_set, &g, bfs_err),
                       "bad growth");
    EXTEND(SP, 7);
    mPUSHu((UV)g.limit);
    mPUSHu((UV)g.bits);
    mPUSHu((UV)g.hashes);
    mPUSHu((UV)g.span_bits);
    mPUSHu((UV)g.capacity);
    mPUSHu((UV)g.count);
    mPUSHn((NV)g.fpp);

void
_xs_grown_image(layout, capacity, fp_rate, grow, max_capacity, seed, fills_ref, bits)
    const char *layout
    UV capacity
    NV fp_rate
    UV grow
    UV max_capacity
    UV seed
    SV *fills_ref
    SV *bits
  PREINIT:
    AV *av;
    SSize_t n, i;
    uint64_t *fills;
    STRLEN len;
    const char *b;
    size_t need = 0;
    SV *img;
  PPCODE:
    /* The portable bytes of a filter that grows holding a Redis copy's
       stages (fills_ref: each stage's count; bits: their strings one after
       another), or (undef, why not). */
    if (!SvROK(fills_ref) || SvTYPE(SvRV(fills_ref)) != SVt_PVAV)
        bfs_croak(aTHX_ cv, "fills is not an array reference");
    if (grow > 16)
        bfs_croak(aTHX_ cv, "grow %" UVuf " is out of range", grow);
    av = (AV *)SvRV(fills_ref);
    n = av_top_index(av) + 1;
    Newx(fills, n + 1, uint64_t);
    SAVEFREEPV(fills);
    for (i = 0; i < n; i++) {
        SV **e = av_fetch(av, i, 0);
        fills[i] = e ? (uint64_t)SvUV(*e) : 0;
    }
    b = SvPVbyte(bits, len);
    BFS_CALL_OR_RETURN(bfs_remote_grown_image(layout, (uint64_t)capacity, (double)fp_rate, (uint32_t)grow,
                                              (uint64_t)max_capacity, (uint64_t)seed, fills, (size_t)n,
                                              (const uint8_t *)b, (size_t)len, NULL, 0, &need, bfs_err),
                       "bad stages");
    img = sv_2mortal(newSV(need + 1));
    SvPOK_only(img);
    BFS_CALL_OR_RETURN(bfs_remote_grown_image(layout, (uint64_t)capacity, (double)fp_rate, (uint32_t)grow,
                                              (uint64_t)max_capacity, (uint64_t)seed, fills, (size_t)n,
                                              (const uint8_t *)b, (size_t)len, (uint8_t *)SvPVX(img), need,
                                              &need, bfs_err),
                       "bad stages");
    SvCUR_set(img, need);
    XPUSHs(img);

SV *
_xs_offsets_packed(layout, seed, bits, hashes, span_bits, piece_bits, stage, items_ref, from, count)
    const char *layout
    UV seed
    UV bits
    UV hashes
    UV span_bits
    UV piece_bits
    UV stage
    SV *items_ref
    UV from
    UV count
  PREINIT:
    BfsRemote r;
    BfsSlice *slices;
    uint64_t *off;
    size_t i, total;
    uint32_t width = 1, per = (uint32_t)hashes;
    unsigned char *p;
  CODE:
    /* The probe offsets (as an add's BITFIELD SETs them) of items from ..
       from + count - 1, hashes per item in item order, each a 32-bit
       little-endian number (a piece holds at most 2^32 bits): what a
       script of a filter that grows takes, one string per stage. stage:
       0, or s + 1 for stage s of a filter that grows. */
    if (piece_bits > ((UV)1 << 32))
        bfs_croak(aTHX_ cv, "a piece of %" UVuf " bits is past 2^32", piece_bits);
    bfs_remote_setup(aTHX_ cv, &r, 1, layout, seed, bits, hashes, span_bits, piece_bits, stage, NULL, &width, &per);
    slices = bfs_items_range(aTHX_ cv, items_ref, from, count);
    total = (size_t)count * per;
    Newx(off, total + 1, uint64_t);
    SAVEFREEPV(off);
    BFS_CALL(bfs_remote_offsets(&r, slices, (size_t)count, off, NULL, bfs_err));
    RETVAL = newSV(4 * total + 1);
    SvPOK_on(RETVAL);
    p = (unsigned char *)SvPVX(RETVAL);
    for (i = 0; i < total; i++) {
        uint64_t v = off[i];
        p[4 * i] = (unsigned char)(v & 0xff);
        p[4 * i + 1] = (unsigned char)((v >> 8) & 0xff);
        p[4 * i + 2] = (unsigned char)((v >> 16) & 0xff);
        p[4 * i + 3] = (unsigned char)((v >> 24) & 0xff);
    }
    SvCUR_set(RETVAL, 4 * total);
    *SvEND(RETVAL) = '\0';
  OUTPUT:
    RETVAL

void
_xs_estimates(layout, capacity, fp_rate, bits_set)
    const char *layout
    UV capacity
    NV fp_rate
    UV bits_set
  PREINIT:
    uint64_t count;
    double fpp;
  PPCODE:
    BFS_CALL(bfs_remote_estimates(layout, (uint64_t)capacity, (double)fp_rate, (uint64_t)bits_set,
                              &count, &fpp, bfs_err));
    EXTEND(SP, 2);
    mPUSHu((UV)count);
    mPUSHn((NV)fpp);

UV
_xs_items(items_ref)
    SV *items_ref
  PREINIT:
    BfsSlice *slices;
    bool ran_perl = FALSE;
  CODE:
    /* Validate a batch (every element a byte string) before any of it is
       sent: the count, or the croak add_many would give. */
    RETVAL = (UV)bfs_items(aTHX_ cv, items_ref, &slices, &ran_perl);
  OUTPUT:
    RETVAL

bool
_xs_plain(items_ref)
    SV *items_ref
  PREINIT:
    AV *av;
    SSize_t i, n;
  CODE:
    /* Whether a batch can be used as it is: an array reference without
       magic or overloading whose every element is a plain string (no
       magic, not a reference), so that reading it runs no Perl code and
       gives the same bytes every time. Looks at flags only. */
    RETVAL = SvROK(items_ref) && !SvAMAGIC(items_ref) && SvTYPE(SvRV(items_ref)) == SVt_PVAV
             && !SvMAGICAL(SvRV(items_ref));
    if (RETVAL) {
        av = (AV *)SvRV(items_ref);
        n = AvFILLp(av) + 1;
        for (i = 0; i < n && RETVAL; i++)
            RETVAL = bfs_plain_string(AvARRAY(av)[i]);
    }
  OUTPUT:
    RETVAL

void
_xs_args(verb, layout, seed, bits, hashes, span_bits, piece_bits, items_ref, pieces_out, masks_out, stage = 0)
    IV verb
    const char *layout
    UV seed
    UV bits
    UV hashes
    UV span_bits
    UV piece_bits
    SV *items_ref
    SV *pieces_out
    SV *masks_out
    UV stage
  PREINIT:
    BfsSlice *slices;
    SSize_t n, i, total;
    bool ran_perl = FALSE;
    uint64_t *offsets, *masks, *pieces = NULL;
    uint32_t width = 1, per = (uint32_t)hashes;
    AV *pav = NULL;
    SV *op, *type, *one;
    BfsRemote r;
  PPCODE:
    /* The BITFIELD arguments of a batch, in item order. verb 1 (add):
       SET u1 OFFSET 1 for each of an item's k probes. verb 0 (query): GET
       u1 OFFSET per probe, or GET i64 OFFSET per word of a blocked item,
       with the bits each field must hold packed (native u64s) into
       masks_out, a scalar ref. pieces_out, an array ref or undef, gets
       each item's piece number. stage: 0, or s + 1 for stage s of a
       filter that grows. */
    if (SvROK(pieces_out) && SvTYPE(SvRV(pieces_out)) == SVt_PVAV)
        pav = (AV *)SvRV(pieces_out);
    bfs_remote_setup(aTHX_ cv, &r, verb, layout, seed, bits, hashes, span_bits, piece_bits, stage, masks_out, &width, &per);
    n = bfs_items(aTHX_ cv, items_ref, &slices, &ran_perl);
    total = n * (SSize_t)per;
    Newx(offsets, 2 * total + (pav ? n : 0) + 1, uint64_t);
    SAVEFREEPV(offsets);
    masks = offsets + total;
    if (pav)
        pieces = masks + total;
    if (verb) {
        BFS_CALL(bfs_remote_offsets(&r, slices, (size_t)n, offsets, pieces, bfs_err));
    }
    else {
        BFS_CALL(bfs_remote_queries(&r, slices, (size_t)n, offsets, masks, pieces, bfs_err));
        sv_setpvn(SvRV(masks_out), (const char *)masks, (STRLEN)total * 8);
    }
    if (pav) {
        av_clear(pav);
        av_extend(pav, n);
        for (i = 0; i < n; i++)
            av_push(pav, newSVuv((UV)pieces[i]));
    }
    SP = PL_stack_base + ax - 1; /* Perl code may have moved the stack */
    op = sv_2mortal(verb ? newSVpvs_share("SET") : newSVpvs_share("GET"));
    type = sv_2mortal(width == 1 ? newSVpvs_share("u1") : newSVpvs_share("i64"));
    one = sv_2mortal(newSVpvs_share("1"));
    EXTEND(SP, total * (verb ? 4 : 3));
    for (i = 0; i < total; i++) {
        /* decimal strings: the client sends them as they are, where an
           integer SV would be stringified (and upgraded) there */
        char dec[24], *e = dec + sizeof dec, *d = e;
        uint64_t v = offsets[i];
        do {
            *--d = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        PUSHs(op);
        PUSHs(type);
        mPUSHp(d, (STRLEN)(e - d));
        if (verb)
            PUSHs(one);
    }

UV
_xs_fold(reply_ref, per_item, masks, out_ref)
    SV *reply_ref
    UV per_item
    SV *masks
    SV *out_ref
  PREINIT:
    AV *av, *out = NULL;
    SSize_t n, i;
    uint64_t *values, count = 0;
    const uint64_t *m;
    size_t nm;
    U8 *full;
  CODE:
    /* A BITFIELD reply (per_item fields per item) to the number of items
       whose every field holds its mask's bits (masks: the packed string
       _xs_args gave, or undef for one-bit fields that must be 1); out_ref,
       an array ref or undef, gets one 0/1 per item appended. */
    if (!SvROK(reply_ref) || SvTYPE(SvRV(reply_ref)) != SVt_PVAV)
        bfs_croak(aTHX_ cv, "reply is not an array reference");
    if (per_item < 1 || per_item > 32)
        bfs_croak(aTHX_ cv, "fields per item %" UVuf " is out of range", per_item);
    if (SvROK(out_ref) && SvTYPE(SvRV(out_ref)) == SVt_PVAV)
        out = (AV *)SvRV(out_ref);
    av = (AV *)SvRV(reply_ref);
    n = av_top_index(av) + 1;
    m = bfs_packed_u64s(aTHX_ masks, &nm);
    if (m && SvCUR(masks) != (STRLEN)n * 8)
        bfs_croak(aTHX_ cv, "the reply has %" IVdf " fields where %" UVuf " were asked", (IV)n, (UV)nm);
    Newx(values, n + 1, uint64_t);
    SAVEFREEPV(values);
    Newx(full, n + 1, U8);
    SAVEFREEPV(full);
    for (i = 0; i < n; i++) {
        /* an integer (Redis::Fast) or its decimal string (Redis.pm) */
        SV **e = av_fetch(av, i, 0);
        if (e && SvIOK(*e))
            values[i] = (uint64_t)SvIVX(*e);
        else if (!(e && SvPOK(*e) && bfs_decimal_i64((const uint8_t *)SvPVX(*e), SvCUR(*e), &values[i])))
            bfs_croak(aTHX_ cv, "reply field %" IVdf " is not an integer", (IV)i);
    }
    BFS_CALL(bfs_remote_fold(values, (size_t)n, (uint32_t)per_item, m, out ? full : NULL, &count, bfs_err));
    if (out)
        bfs_push_flags(aTHX_ out, full, (size_t)n / per_item);
    RETVAL = (UV)count;
  OUTPUT:
    RETVAL

UV
_xs_query_fields(layout, bits, hashes, span_bits)
    const char *layout
    UV bits
    UV hashes
    UV span_bits
  PREINIT:
    BfsRemote r;
    uint32_t width, per;
    SV *none = sv_2mortal(newRV_noinc(newSV(0)));
  CODE:
    /* The fields a query reads per item (see _xs_args). */
    bfs_remote_setup(aTHX_ cv, &r, 0, layout, 0, bits, hashes, span_bits, bits, 0, none, &width, &per);
    RETVAL = per;
  OUTPUT:
    RETVAL

SV *
_xs_command(verb, layout, seed, bits, hashes, span_bits, piece_bits, key, items_ref, from, count, masks_out, stage = 0)
    IV verb
    const char *layout
    UV seed
    UV bits
    UV hashes
    UV span_bits
    UV piece_bits
    SV *key
    SV *items_ref
    UV from
    UV count
    SV *masks_out
    UV stage
  PREINIT:
    uint64_t *masks = NULL;
    uint32_t width = 1, per = (uint32_t)hashes;
    BfsRemote r;
  CODE:
    /* One BITFIELD command in the Redis protocol, as bytes, for items
       from .. from + count - 1 of the array (all in one piece): verb 1 an
       add, 0 a query, whose field masks (native u64s) go to masks_out, a
       scalar ref; stage as _xs_args takes it. */
    bfs_remote_setup(aTHX_ cv, &r, verb, layout, seed, bits, hashes, span_bits, piece_bits, stage, masks_out, &width, &per);
    RETVAL = bfs_bf_command(aTHX_ cv, &r, verb, per, key, items_ref, from, count, &masks);
    if (!verb)
        sv_setpvn(SvRV(masks_out), (const char *)masks, (STRLEN)count * per * 8);
    SvREFCNT_inc_simple_void_NN(RETVAL);
  OUTPUT:
    RETVAL

SV *
_xs_probe_command(key, packed, k, from, to, sel)
    SV *key
    SV *packed
    UV k
    UV from
    UV to
    SV *sel
  PREINIT:
    const char *kp, *pp, *sp;
    STRLEN klen, plen, slen = 0;
    uint32_t *ix = NULL;
    size_t cap = 0, len = 0;
  CODE:
    /* One BITFIELD_RO command in the Redis protocol, as bytes: a GET u1 of
       probes from .. to - 1 of the items sel names (a string of 32-bit
       native numbers, item indexes; undef: all), from packed (the offsets
       _xs_offsets_packed gives, k per item). */
    if (k < 1 || k > 32 || from >= to || to > k)
        bfs_croak(aTHX_ cv, "probes %" UVuf " .. %" UVuf " of %" UVuf " are out of range", from, to, k);
    kp = SvPVbyte(key, klen);
    pp = SvPVbyte(packed, plen);
    if (SvOK(sel)) {
        sp = SvPVbyte(sel, slen);
        if (slen % 4)
            bfs_croak(aTHX_ cv, "the selection is not whole 32-bit numbers");
        /* copied: the string's buffer need not be aligned for u32s */
        Newx(ix, slen / 4 + 1, uint32_t);
        SAVEFREEPV(ix);
        Copy(sp, ix, slen, char);
    }
    BFS_CALL(bfs_remote_probe_command((const uint8_t *)kp, klen, (const uint8_t *)pp, plen, (uint32_t)k,
                                      (uint32_t)from, (uint32_t)to, ix, slen / 4, NULL, 0, &cap, bfs_err));
    RETVAL = sv_2mortal(newSV(cap + 1));
    SvPOK_on(RETVAL);
    BFS_CALL(bfs_remote_probe_command((const uint8_t *)kp, klen, (const uint8_t *)pp, plen, (uint32_t)k,
                                      (uint32_t)from, (uint32_t)to, ix, slen / 4, (uint8_t *)SvPVX(RETVAL), cap,
                                      &len, bfs_err));
    SvCUR_set(RETVAL, len);
    *SvEND(RETVAL) = '\0';
    SvREFCNT_inc_simple_void_NN(RETVAL);
  OUTPUT:
    RETVAL

SV *
_xs_offsets_bulk(layout, seed, bits, hashes, span_bits, piece_bits, items_ref, from, count)
    const char *layout
    UV seed
    UV bits
    UV hashes
    UV span_bits
    UV piece_bits
    SV *items_ref
    UV from
    UV count
  PREINIT:
    BfsRemote r;
    BfsSlice *slices;
    uint64_t *offsets;
    uint32_t width = 1, per = (uint32_t)hashes;
    size_t i, total;
    char *d;
  CODE:
    /* The probe offsets of items from .. from + count - 1 of the array
       (all in one piece), k per item in item order, each as a bulk string
       of the Redis protocol, concatenated: a windowed script's arguments
       (Redis.pm, _window_wire). */
    bfs_remote_setup(aTHX_ cv, &r, 1, layout, seed, bits, hashes, span_bits, piece_bits, 0, NULL, &width, &per);
    slices = bfs_items_range(aTHX_ cv, items_ref, from, count);
    total = (size_t)count * per;
    Newx(offsets, total + 1, uint64_t);
    SAVEFREEPV(offsets);
    BFS_CALL(bfs_remote_offsets(&r, slices, (size_t)count, offsets, NULL, bfs_err));
    /* "$N\r\n" + at most 20 digits + "\r\n" per offset */
    RETVAL = newSV(total * 28 + 1);
    SvPOK_on(RETVAL);
    d = SvPVX(RETVAL);
    for (i = 0; i < total; i++) {
        char dec[24], *e = dec + sizeof dec, *b = e;
        uint64_t v = offsets[i];
        do {
            *--b = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        *d++ = '$';
        if (e - b >= 10)
            *d++ = (char)('0' + (e - b) / 10);
        *d++ = (char)('0' + (e - b) % 10);
        *d++ = '\r';
        *d++ = '\n';
        Copy(b, d, e - b, char);
        d += e - b;
        *d++ = '\r';
        *d++ = '\n';
    }
    SvCUR_set(RETVAL, d - SvPVX(RETVAL));
    *SvEND(RETVAL) = '\0';
  OUTPUT:
    RETVAL

void
_xs_reply(buf_ref, per_item, masks, out_ref)
    SV *buf_ref
    UV per_item
    SV *masks
    SV *out_ref
  PREINIT:
    SV *buf;
    AV *out = NULL;
    const char *p;
    STRLEN len;
    const uint64_t *m;
    uint64_t count = 0;
    size_t used = 0, items = 0, nm, cap;
    uint32_t kind = 0;
    U8 *full;
    char msg[BFS_ERRBUF_LEN];
  PPCODE:
    /* Take one reply off the front of $$buf_ref: () until it has all
       arrived; (1, full items, items) for a BITFIELD reply, folded as
       _xs_fold folds (out_ref gets one 0/1 per item appended); (2, text)
       for an error reply, (3, text) for a status, (4) for anything else. */
    if (!SvROK(buf_ref) || SvTYPE(SvRV(buf_ref)) > SVt_PVMG || SvREADONLY(SvRV(buf_ref)))
        bfs_croak(aTHX_ cv, "buffer must be a scalar reference");
    if (per_item < 1 || per_item > 32)
        bfs_croak(aTHX_ cv, "fields per item %" UVuf " is out of range", per_item);
    if (SvROK(out_ref) && SvTYPE(SvRV(out_ref)) == SVt_PVAV)
        out = (AV *)SvRV(out_ref);
    buf = SvRV(buf_ref);
    if (!SvOK(buf))
        XSRETURN_EMPTY;
    p = SvPVbyte(buf, len);
    m = bfs_packed_u64s(aTHX_ masks, &nm);
    /* a reply of len bytes holds at most len / 4 integers, so at most
       len / (4 * per_item) items */
    cap = len / (4 * per_item) + 1;
    Newx(full, cap, U8);
    SAVEFREEPV(full);
    msg[0] = '\0';
    BFS_CALL(bfs_remote_reply((const uint8_t *)p, len, (uint32_t)per_item, m, nm, full, cap,
                              &used, &kind, &count, &items, msg, bfs_err));
    if (kind == BFS_REPLY_INCOMPLETE)
        XSRETURN_EMPTY;
    sv_chop(buf, SvPVX(buf) + used);
    EXTEND(SP, 3);
    mPUSHu((UV)kind);
    if (kind == BFS_REPLY_INTS) {
        mPUSHu((UV)count);
        mPUSHu((UV)items);
        if (out)
            bfs_push_flags(aTHX_ out, full, items);
    }
    else if (kind == BFS_REPLY_ERROR || kind == BFS_REPLY_STATUS) {
        mPUSHp(msg, strlen(msg));
    }

void
_xs_roundtrip(fd, buf_ref, write_timeout, read_timeout, verb, layout, seed, bits, hashes, span_bits, piece_bits, key, items_ref, from, count, out_ref)
    IV fd
    SV *buf_ref
    NV write_timeout
    NV read_timeout
    IV verb
    const char *layout
    UV seed
    UV bits
    UV hashes
    UV span_bits
    UV piece_bits
    SV *key
    SV *items_ref
    UV from
    UV count
    SV *out_ref
  PREINIT:
    SV *buf, *cmd;
    AV *out = NULL;
    uint64_t *masks = NULL;
    uint64_t full_items = 0;
    size_t used = 0, items = 0, cap;
    uint32_t width = 1, per = (uint32_t)hashes, kind = BFS_REPLY_INCOMPLETE;
    int broke, e = 0;
    double deadline;
    U8 *full = NULL;
    BfsRemote r;
    char msg[BFS_ERRBUF_LEN], err[BFS_ERRBUF_LEN];
  PPCODE:
    /* The BITFIELD command _xs_command makes (the same arguments, but for
       masks_out: its masks stay here) written on descriptor fd and its
       reply read onto $$buf_ref and taken off it, as _xs_reply takes it:
       (1, full items, items), (2, text), (3, text) or (4); or (0, how,
       detail) when the exchange broke: how a BFS_IO_*, detail the errno,
       or the text of a reply that cannot be taken. */
    if (!SvROK(buf_ref) || SvTYPE(SvRV(buf_ref)) > SVt_PVMG || SvREADONLY(SvRV(buf_ref)) || SvMAGICAL(SvRV(buf_ref)))
        bfs_croak(aTHX_ cv, "buffer must be a scalar reference");
    if (fd < 0 || fd > INT_MAX)
        bfs_croak(aTHX_ cv, "descriptor %" IVdf " is out of range", fd);
    if (SvROK(out_ref) && SvTYPE(SvRV(out_ref)) == SVt_PVAV)
        out = (AV *)SvRV(out_ref);
    bfs_remote_setup(aTHX_ cv, &r, verb, layout, seed, bits, hashes, span_bits, piece_bits, 0, NULL, &width, &per);
    cmd = bfs_bf_command(aTHX_ cv, &r, verb, per, key, items_ref, from, count, &masks);
    buf = SvRV(buf_ref);
    if (!SvPOK(buf))
        sv_setpvs(buf, "");
    (void)SvPV_force_nolen(buf);
    broke = bfs_io_put(aTHX_ (int)fd, SvPVX(cmd), SvCUR(cmd), (double)write_timeout, &e);
    deadline = bfs_io_now() + (double)read_timeout;
    while (!broke) {
        STRLEN len = SvCUR(buf);
        if (len) {
            BfsStatus st;
            /* a reply of len bytes holds at most len / 4 integers, so at
               most len / (4 * per) items */
            cap = len / (4 * per) + 1;
            Newx(full, cap, U8);
            SAVEFREEPV(full);
            msg[0] = err[0] = '\0';
            st = bfs_remote_reply((const uint8_t *)SvPVX(buf), len, per, masks, masks ? (size_t)count * per : 0,
                                  full, cap, &used, &kind, &full_items, &items, msg, err);
            if (st != BFS_OK) {
                broke = BFS_IO_UNREADABLE;
                break;
            }
            if (kind != BFS_REPLY_INCOMPLETE)
                break;
        }
        broke = bfs_io_get(aTHX_ (int)fd, buf, deadline, &e);
    }
    SP = PL_stack_base + ax - 1; /* the key's magic (Perl code) may have moved the stack */
    if (broke) {
        EXTEND(SP, 3);
        mPUSHu(0);
        mPUSHu((UV)broke);
        if (broke == BFS_IO_UNREADABLE)
            mPUSHp(err, strlen(err));
        else
            mPUSHi((IV)e);
        XSRETURN(3);
    }
    if (used == SvCUR(buf))
        SvCUR_set(buf, 0);
    else
        sv_chop(buf, SvPVX(buf) + used);
    EXTEND(SP, 3);
    mPUSHu((UV)kind);
    if (kind == BFS_REPLY_INTS) {
        mPUSHu((UV)full_items);
        mPUSHu((UV)items);
        if (out)
            bfs_push_flags(aTHX_ out, full, items);
    }
    else if (kind == BFS_REPLY_ERROR || kind == BFS_REPLY_STATUS) {
        mPUSHp(msg, strlen(msg));
    }

SV *
_xs_fd_id(fd)
    IV fd
  CODE:
    /* The device and inode of the socket behind descriptor fd, "dev:ino",
       or undef (Link.pm's _socket_id). */
    RETVAL = bfs_fd_id(aTHX_ fd);
  OUTPUT:
    RETVAL

bool
_xs_quiet(fd)
    IV fd
  CODE:
    /* Whether the socket behind descriptor fd is open with nothing to
       read (Link.pm's quiet). */
    RETVAL = bfs_fd_quiet(fd);
  OUTPUT:
    RETVAL

bool
_xs_wait(fd, write, seconds)
    IV fd
    bool write
    NV seconds
  CODE:
    /* Whether descriptor fd can be read (write false) or written within
       seconds: bfs_io_wait, whose signal handlers run while it waits
       (Link.pm's _ready). */
    RETVAL = bfs_io_wait(aTHX_ (int)fd, write ? POLLOUT : POLLIN, bfs_io_now() + seconds);
  OUTPUT:
    RETVAL

bool
_xs_fit(fd, id, ours)
    IV fd
    SV *id
    IV ours
  PREINIT:
    SV *now;
  CODE:
    /* Whether descriptor fd still names the socket id names ("dev:ino",
       _xs_fd_id's) and descriptor ours (its duplicate) is quiet, as
       _xs_quiet says (Link.pm's fit). */
    now = sv_2mortal(bfs_fd_id(aTHX_ fd));
    RETVAL = SvOK(now) && sv_eq(now, id) && bfs_fd_quiet(ours);
  OUTPUT:
    RETVAL

void
_xs_from_bits(klass, path, capacity, fp_rate, mode, seed, layout, bytes)
    SV *klass
    SV *path
    UV capacity
    NV fp_rate
    UV mode
    UV seed
    const char *layout
    SV *bytes
  PREINIT:
    const char *p, *bad, *b;
    STRLEN len;
    BfsOptions opts;
    BfsFilter *h = NULL;
  PPCODE:
    if (!SvPOK(bytes) || SvUTF8(bytes))
        BFS_RETURN_ERROR("bits must be a byte string");
    b = SvPV_nomg(bytes, len);
    p = bfs_cstr(aTHX_ path, &bad);
    if (bad)
        BFS_RETURN_ERROR(bad);
    if (mode > 07777)
        BFS_RETURN_ERROR("mode must be an integer between 0 and 07777");
    opts.mode = (uint32_t)mode;
    opts.seed = (uint64_t)seed;
    opts.layout = BFS_LAYOUT_DEFAULT; /* the layout argument decides */
    opts.generations = 0;
    opts.window = 0.0;
    opts.bits = 0;
    opts.hashes = 0;
    opts.grow = 0;
    opts.max_capacity = 0;
    opts.max_bytes = 0;
    BFS_MAKE(bfs_new_from_bits(p, (uint64_t)capacity, (double)fp_rate, &opts, layout,
                           (const uint8_t *)b, len, &h, bfs_err), h, "cannot build the filter");
    BFS_RETURN_OBJECT(klass, h);
