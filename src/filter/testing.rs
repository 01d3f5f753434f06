//! Crash-test hooks: leave a lock held as a process killed inside an
//! operation would. For the project's own multi-process tests only: built
//! with the `test-hooks` feature (cargo test's), never into the library.

use super::*;

/// Take the stripe `item` hashes to and never release it.
pub fn hold_stripe(f: &Filter, item: &[u8]) {
    let c = f.claim().expect("slot").c;
    let s = with_probe!(&f.probing, p => p.stripe(&p.locate(&p.hash(f.seed, item))));
    let s = s.expect("only the standard and DataSketches layouts have stripes");
    assert_eq!(f.shared().begin_add(s, c), Ok(true));
}

/// Take the exclusive lock, run `op` (`PENDING_CLEAR`, `PENDING_INVERT`)
/// over half the words and into the middle of the next chunk, and never
/// release it (an operation killed midway).
fn hold_half_transform(f: &Filter, op: u32) {
    let c = f.claim().expect("slot").c;
    let g = f.shared().lock_exclusive(c).expect("fenced");
    g.transform_partly(op, (f.words + sync::CHUNK - 1) / sync::CHUNK / 2);
    std::mem::forget(g);
}

/// A `clear` killed midway (see hold_half_transform).
pub fn hold_half_clear(f: &Filter) {
    hold_half_transform(f, PENDING_CLEAR);
}

/// An `invert` killed midway (see hold_half_transform).
pub fn hold_half_invert(f: &Filter) {
    hold_half_transform(f, PENDING_INVERT);
}

/// The index of the slot this handle writes under.
pub fn slot_of(f: &Filter) -> u32 {
    f.claim().expect("slot").c.idx
}

/// Whether the slot this handle's next write goes under is this
/// thread's, claimed and not given back since (its token's generation
/// is the slot's): a claim cached by a thread that has ended fails it.
pub fn writes_under_a_current_slot(f: &Filter) -> bool {
    let c = f.claim().expect("slot").c;
    let gen = f.shared().slots[c.idx as usize].gen.load(Ordering::Acquire);
    sync::untoken(c.token) == Some((c.idx, gen))
}

/// The value that tells this thread from every other live thread of
/// the process (see `claims`).
pub fn thread_pointer() -> usize {
    claims::thread_pointer()
}

/// Start a lock-free add of a blocked filter and never finish it (an
/// adder stopped or killed between its slot mark and its update).
pub fn hold_lockfree_add(f: &Filter) {
    let c = f.claim().expect("slot").c;
    assert_eq!(f.shared().begin_lockfree_add(c), Ok(true));
}

thread_local! {
    /// Set by `stop_journaled`: where this thread's next journaled
    /// operation stops as if killed: None after the copy, before it
    /// takes the exclusive lock; Some(c) after applying c chunks.
    static STOP: Cell<Option<Option<usize>>> = const { Cell::new(None) };
}

/// Stop this process (SIGSTOP) until it is killed, holding everything
/// its caller took (the journal word, and `excl` and pending when taken),
/// as a process killed there would: the caller never goes on to give
/// them back.
fn stop_here() -> ! {
    loop {
        crate::sys::fork::stop_self();
    }
}

/// Where a journaled operation's owner has copied its operand into the
/// journal: stop here if `stop_journaled(None)` asked to.
pub(super) fn stop_after_copy() {
    if STOP.with(|s| s.get()) == Some(None) {
        stop_here();
    }
}

/// Where the owner holds `g` and is about to apply journaled `op` from
/// `journal`: if `stop_journaled(Some(chunks))` asked to, apply that many
/// chunks and stop here, `g` and pending held (the caller never goes on,
/// so never gives them back).
pub(super) fn stop_part_applied(g: &sync::Exclusive<'_>, op: u32, journal: &[AtomicU64]) {
    if let Some(Some(chunks)) = STOP.with(|s| s.get()) {
        g.apply_journal_partly(op, journal, chunks);
        stop_here();
    }
}

/// Make this thread's next merge or intersect stop after copying the
/// operand to the journal (`chunks` None) or after applying `chunks`
/// chunks of it, holding what it holds, and stop the process there
/// (SIGSTOP): the caller's parent sees it stopped and kills it.
pub fn stop_journaled(chunks: Option<usize>) {
    STOP.with(|s| s.set(Some(chunks)));
}

/// Where the journal is in the file or memfd: (offset, bytes).
pub fn journal_range(f: &Filter) -> Option<(u64, u64)> {
    format::journal(&f.region.header)
}

/// Mark this handle's slot busy (a merge killed midway).
pub fn hold_merge(f: &Filter) {
    let c = f.claim().expect("slot").c;
    assert_eq!(f.shared().begin_merge(c), Ok(true));
}

/// Run `during` holding the exclusive lock, then release it as an
/// exclusive operation does (waking whoever waits).
pub fn while_exclusive(f: &Filter, during: impl FnOnce()) {
    let c = f.claim().expect("slot").c;
    let g = f.shared().lock_exclusive(c).expect("fenced");
    during();
    drop(g);
}
