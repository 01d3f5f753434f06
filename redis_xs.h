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
                 UV span_bits, UV piece_bits, SV *masks_out, uint32_t *width, uint32_t *per)
{
    if (hashes < 1 || hashes > 32)
        bfs_croak(aTHX_ cv, "hashes %" UVuf " is out of range", hashes);
    r->layout = layout;
    r->seed = (uint64_t)seed;
    r->bits = (uint64_t)bits;
    r->hashes = (uint32_t)hashes;
    r->span_bits = (uint64_t)span_bits;
    r->piece_bits = (uint64_t)piece_bits;
    *width = 1;
    *per = (uint32_t)hashes;
    if (verb)
        return;
    if (!SvROK(masks_out) || SvTYPE(SvRV(masks_out)) > SVt_PVMG || SvREADONLY(SvRV(masks_out)))
        bfs_croak(aTHX_ cv, "masks must be a scalar reference");
    BFS_CALL(bfs_remote_query_shape(r, width, per, bfs_err));
}
