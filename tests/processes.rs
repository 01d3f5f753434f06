//! Many processes on one filter: real `fork`, real `SIGKILL`.
//!
//! A plain `main` (no test harness): `fork` in a multi-threaded process may
//! leave the child with a malloc lock held by a thread that no longer
//! exists, so these tests run single-threaded.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use bloomfilter_shared::hooks::testing;
use bloomfilter_shared::{Filter, Layout, Options};

/// Whether this run's filters are blocked (every suite runs on every layout).
static BLOCKED: AtomicBool = AtomicBool::new(false);
/// Whether this run's filters are of the datasketches layout.
static DATASKETCHES: AtomicBool = AtomicBool::new(false);

/// This run's layout (None: the default, standard).
fn layout() -> Option<Layout> {
    if BLOCKED.load(Ordering::Relaxed) {
        Some(Layout::Blocked)
    } else if DATASKETCHES.load(Ordering::Relaxed) {
        Some(Layout::DataSketches)
    } else {
        None
    }
}
/// This run's fp rate, as f64 bits: 0.01, or 0.0001 for blocked filters of
/// 128-bit blocks (their compare-and-swap path).
static RATE: AtomicU64 = AtomicU64::new(0);

fn rate() -> f64 {
    match RATE.load(Ordering::Relaxed) {
        0 => 0.01,
        r => f64::from_bits(r),
    }
}

/// Shared scratch memory for children to report through.
struct Scratch {
    ptr: *mut u8,
    len: usize,
}

impl Scratch {
    fn new(len: usize) -> Scratch {
        // SAFETY: a fresh anonymous shared mapping; checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED);
        Scratch {
            ptr: ptr as *mut u8,
            len,
        }
    }
    fn byte(&self, i: usize) -> &AtomicU8 {
        assert!(i < self.len);
        // SAFETY: in bounds; only accessed atomically.
        unsafe { &*(self.ptr.add(i) as *const AtomicU8) }
    }
    fn word(&self, i: usize) -> &AtomicU64 {
        assert!(i * 8 + 8 <= self.len);
        // SAFETY: in bounds, 8-aligned (page-aligned base); atomics only.
        unsafe { &*(self.ptr.add(i * 8) as *const AtomicU64) }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // SAFETY: our own mapping.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// The bound on a wait the design says ends: a dead owner's hold taken
/// over, an add that does not wait for a stopped process, a child that
/// gets to the point a test needs. Far beyond any pause a loaded machine
/// puts into a test (CPU hogs on every core stretched 20 ms waits to more
/// than a second), and below the minute a holding child lives, so that a
/// wait for the holder itself still fails. The times are printed: under
/// a second on an idle machine is a measurement, not a verdict.
const NO_HANG: Duration = Duration::from_secs(30);

/// A flag in shared memory that a child raises once it holds what the
/// test needs: the parent waits for it rather than for a guessed time.
struct Ready(Scratch);

impl Ready {
    fn new() -> Ready {
        Ready(Scratch::new(4096))
    }

    /// In the child: it holds what it was to hold.
    fn set(&self) {
        // Release: pairs with `wait`'s Acquire (the hold comes first).
        self.0.byte(0).store(1, Ordering::Release);
    }

    /// In the parent: until the child says it holds, within NO_HANG.
    fn wait(&self, what: &str) {
        let until = Instant::now() + NO_HANG;
        // Acquire: pairs with `set`'s Release.
        while self.0.byte(0).load(Ordering::Acquire) == 0 {
            assert!(Instant::now() < until, "{what}: not there after {NO_HANG:?}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Run `f` in a child; returns its pid.
fn spawn(f: impl FnOnce()) -> libc::pid_t {
    // SAFETY: single-threaded process (no harness); the child runs `f` and
    // leaves with _exit, never returning into the parent's code.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_ok();
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    pid
}

fn reap(pid: libc::pid_t) -> i32 {
    let mut st = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
    st
}

fn kill9(pid: libc::pid_t) {
    // SAFETY: our own child.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

fn item(i: u64) -> Vec<u8> {
    format!("item-{i}").into_bytes()
}

fn anon(cap: u64) -> Filter {
    let layout = layout();
    let f = Filter::new_anonymous(
        cap,
        rate(),
        Options {
            layout,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(Some(f.layout()), layout.or(Some(Layout::Standard)));
    if layout == Some(Layout::Blocked) && rate() < 0.001 {
        assert_eq!(f.geometry().scheme, bloomfilter_shared::Scheme::Block128);
    }
    f
}

fn disjoint_writers_lose_nothing() {
    let f = anon(200_000);
    let kids: Vec<_> = (0..4u64)
        .map(|w| {
            let f = &f;
            spawn(move || {
                for i in 0..25_000 {
                    f.add(&item(w * 1_000_000 + i)).unwrap();
                }
            })
        })
        .collect();
    for k in kids {
        assert_eq!(reap(k), 0);
    }
    for w in 0..4u64 {
        for i in 0..25_000 {
            assert!(f.contains(&item(w * 1_000_000 + i)), "lost {w}/{i}");
        }
    }
    assert_eq!(f.ops(), 100_000, "ops summed over the exited children");
}

fn same_items_never_new_twice() {
    const N: usize = 100_000;
    for round in 0..3u64 {
        let f = anon(N as u64 * 2);
        // Answers, then a start flag: both writers begin together, so they
        // add each item at about the same moment.
        let s = Scratch::new(2 * N + 8);
        let go = s.word(2 * N / 8);
        let kids: Vec<_> = (0..2usize)
            .map(|w| {
                let (f, s) = (&f, &s);
                spawn(move || {
                    f.add(format!("warm-up {w}").as_bytes()).unwrap(); // claim a slot first
                    while s.word(2 * N / 8).load(Ordering::Acquire) == 0 {
                        std::hint::spin_loop();
                    }
                    for i in 0..N {
                        let new = f.add(&item(round * 10_000_000 + i as u64)).unwrap();
                        s.byte(w * N + i).store(new as u8, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50));
        go.store(1, Ordering::Release);
        for k in kids {
            assert_eq!(reap(k), 0);
        }
        let mut both = 0;
        let mut neither = 0;
        for i in 0..N {
            let a = s.byte(i).load(Ordering::Relaxed);
            let b = s.byte(N + i).load(Ordering::Relaxed);
            both += (a == 1 && b == 1) as usize;
            neither += (a == 0 && b == 0) as usize;
        }
        assert_eq!(both, 0, "items reported new to both writers");
        // "Neither" is a false positive at add time: rare at this fill.
        assert!(neither < N / 50, "{neither} items new to neither");
    }
}

/// A forked child's first write claims a slot of its own (§8 S6).
fn child_and_grandchild_use_inherited_handle() {
    let f = anon(1000);
    f.add(b"parent").unwrap();
    let k = spawn(|| {
        assert!(f.contains(b"parent"));
        f.add(b"child").unwrap();
        let g = spawn(|| {
            f.add(b"grandchild").unwrap();
        });
        assert_eq!(reap(g), 0);
        assert!(f.contains(b"grandchild"));
    });
    assert_eq!(reap(k), 0);
    assert!(f.contains(b"child") && f.contains(b"grandchild"));
    f.add(b"parent-again").unwrap();
    assert_eq!(f.ops(), 4);
    // Each process wrote under a slot of its own, not the one its parent's
    // handle had cached at the fork.
    let scratch = Scratch::new(4096);
    let mine = testing::slot_of(&f);
    let k = spawn(|| {
        f.add(b"child, again").unwrap();
        scratch
            .word(0)
            .store(u64::from(testing::slot_of(&f)) + 1, Ordering::SeqCst);
        let g = spawn(|| {
            f.add(b"grandchild, again").unwrap();
            scratch
                .word(1)
                .store(u64::from(testing::slot_of(&f)) + 1, Ordering::SeqCst);
        });
        assert_eq!(reap(g), 0);
    });
    assert_eq!(reap(k), 0);
    let (child, grandchild) = (
        scratch.word(0).load(Ordering::SeqCst),
        scratch.word(1).load(Ordering::SeqCst),
    );
    assert!(child != 0 && grandchild != 0, "both wrote");
    let parent = u64::from(mine) + 1;
    assert!(
        child != parent && grandchild != parent && child != grandchild,
        "slots: parent {parent}, child {child}, grandchild {grandchild} (1-based)"
    );
}

/// Time the parent's next operation after a child died holding something.
fn stall(op: impl FnOnce()) -> Duration {
    let t = Instant::now();
    op();
    t.elapsed()
}

/// A child that takes the stripe of the item `victim` and keeps it (for a
/// minute); returns once it holds it.
fn child_holding_victims_stripe(f: &Filter) -> libc::pid_t {
    let ready = Ready::new();
    let k = spawn(|| {
        testing::hold_stripe(f, b"victim");
        ready.set();
        std::thread::sleep(Duration::from_secs(60));
    });
    ready.wait("the child taking the stripe");
    k
}

fn killed_holding_a_stripe() {
    let f = anon(1000);
    let k = child_holding_victims_stripe(&f);
    kill9(k);
    // Unreaped: a zombie owner must count as dead.
    let d = stall(|| assert!(f.add(b"victim").unwrap()));
    reap(k);
    assert!(d < NO_HANG, "stalled {d:?}");
    println!("# stripe held by a killed process: next add took {d:?}");
    let d = stall(|| f.clear().unwrap());
    assert!(d < NO_HANG, "stalled {d:?}");
}

/// Run `op` in a child while process `k` holds what it needs: the child
/// must still be waiting 1.5 s later (`k` is alive, `what` says how); then
/// `k` is killed, and the child must end within the crash bound. Returns
/// how long it took after the kill.
fn waits_until_killed(k: libc::pid_t, op: impl FnOnce(), what: &str) -> Duration {
    let waiter = spawn(op);
    std::thread::sleep(Duration::from_millis(1500));
    let mut st = 0;
    // SAFETY: polling our own child.
    assert_eq!(
        unsafe { libc::waitpid(waiter, &mut st, libc::WNOHANG) },
        0,
        "did not wait for {what}"
    );
    kill9(k);
    let d = stall(|| assert_eq!(reap(waiter), 0));
    assert!(d < NO_HANG, "stalled {d:?}");
    d
}

/// A stopped owner (SIGSTOP, a debugger, a frozen cgroup) is alive: the
/// adder of its item waits for it (up to `sync::wait_limit`, 10 s); once
/// it is killed, the adder goes on within the crash bound.
fn stopped_holder_is_alive() {
    let f = anon(1000);
    let k = child_holding_victims_stripe(&f);
    // SAFETY: stopping our own child.
    assert_eq!(unsafe { libc::kill(k, libc::SIGSTOP) }, 0);
    let d = waits_until_killed(
        k,
        || {
            f.add(b"victim").unwrap();
        },
        "a stopped owner",
    );
    println!("# stopped owner: waited 1.5 s; killed, the waiter finished {d:?} later");
    assert!(f.contains(b"victim"));
    reap(k);
}

/// A child that starts a lock-free add (a blocked filter's: its slot mark
/// set, its update not yet done) and stays there for a minute; returns
/// once it is there.
fn child_inside_a_lockfree_add(f: &Filter) -> libc::pid_t {
    let ready = Ready::new();
    let k = spawn(|| {
        testing::hold_lockfree_add(f);
        ready.set();
        std::thread::sleep(Duration::from_secs(60));
    });
    ready.wait("the child inside its add");
    k
}

/// Blocked layout: an adder killed inside its add delays no adder, and an
/// exclusive operation by at most the crash bound.
fn killed_inside_a_lockfree_add() {
    let f = anon(1000);
    let k = child_inside_a_lockfree_add(&f);
    // The child stays inside its add for a minute: an add that waited for
    // it would not end within NO_HANG.
    let d = stall(|| assert!(f.add(b"victim").unwrap()));
    println!("# lock-free adder inside its add: another add took {d:?}");
    assert!(d < NO_HANG, "an add waited for another: {d:?}");
    kill9(k);
    // Unreaped: a zombie's mark is dead too.
    let d = stall(|| f.clear().unwrap());
    reap(k);
    assert!(d < NO_HANG, "stalled {d:?}");
    assert_eq!(f.bits_set(), 0);
    println!("# lock-free adder killed inside its add: next clear took {d:?}");
}

/// Blocked layout: a stopped adder blocks no other adder, of any item. An
/// exclusive operation waits for it (its update may still land, and a
/// frozen or cleared filter must not change after the operation returns);
/// once it is killed, the operation goes on within the crash bound.
fn stopped_lockfree_adder_blocks_no_adder() {
    let f = anon(1000);
    let k = child_inside_a_lockfree_add(&f);
    // SAFETY: stopping our own child.
    assert_eq!(unsafe { libc::kill(k, libc::SIGSTOP) }, 0);
    let adder = spawn(|| {
        for i in 0..1000 {
            f.add(&item(i)).unwrap();
        }
    });
    // The adder stays stopped until killed: adds that waited for it would
    // not end within NO_HANG.
    let d = stall(|| assert_eq!(reap(adder), 0));
    if d >= NO_HANG {
        kill9(k);
        panic!("adders waited for a stopped adder: {d:?}");
    }
    let clearer = spawn(|| f.clear().unwrap());
    std::thread::sleep(Duration::from_millis(1500));
    let mut st = 0;
    // SAFETY: polling our own child.
    let waited = unsafe { libc::waitpid(clearer, &mut st, libc::WNOHANG) } == 0;
    kill9(k); // before any assertion: a stopped child must not outlive us
    assert!(waited, "clear did not wait for a stopped adder");
    let d = stall(|| assert_eq!(reap(clearer), 0));
    assert!(d < NO_HANG, "stalled {d:?}");
    assert_eq!(f.bits_set(), 0);
    reap(k);
    println!("# stopped lock-free adder: 1000 adds went on; clear waited, then finished {d:?} after the kill");
}

/// A filter frozen while other processes add to it (one by one and in
/// batches) never changes after `freeze` returns: the adders in flight are
/// drained first, and every later add is refused (the adders stop at their
/// first refusal, and stop anyway after a bounded number of items: 40
/// million each, far more than they add before the parent, which freezes
/// as soon as it has seen them add, gets a CPU on a loaded host).
fn frozen_while_adders_run_never_changes() {
    for round in 0..5u64 {
        let f = anon(2_000_000);
        let kids: Vec<_> = (0..2u64)
            .map(|w| {
                let f = &f;
                spawn(move || {
                    for i in 0..40_000u64 {
                        let key = |j: u64| item(round << 50 | w << 40 | i << 10 | j);
                        let r = if i % 2 == 0 {
                            let items: Vec<Vec<u8>> = (0..1000).map(key).collect();
                            let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
                            f.add_many(&refs, None).map(|_| ())
                        } else {
                            (0..1000).try_for_each(|j| f.add(&key(j)).map(|_| ()))
                        };
                        if let Err(e) = r {
                            assert_eq!(e.kind, bloomfilter_shared::ErrorKind::Frozen, "{}", e.msg);
                            return;
                        }
                    }
                    panic!("40 000 000 adds and never refused: the freeze was not seen");
                })
            })
            .collect();
        // Once the adders are under way (however long a loaded machine
        // takes to start them), at a moment that differs by round: counted
        // in the bits they set (a round's worth more each round), not in
        // milliseconds that a busy host may stretch past their whole run.
        let until = Instant::now() + NO_HANG;
        let want = 1 + round * 20_000;
        while f.bits_set() < want {
            assert!(Instant::now() < until, "round {round}: the adders never began");
            std::thread::sleep(Duration::from_millis(1));
        }
        f.freeze().unwrap();
        let set = f.bits_set();
        std::thread::sleep(Duration::from_millis(20));
        for k in kids {
            assert_eq!(reap(k), 0, "round {round}");
        }
        assert!(set > 0, "round {round}: the adders added nothing before the freeze");
        assert_eq!(
            f.bits_set(),
            set,
            "round {round}: the filter changed after freeze returned"
        );
    }
}

fn killed_mid_clear() {
    let f = anon(100_000);
    for i in 0..1000 {
        f.add(&item(i)).unwrap();
    }
    let ready = Ready::new();
    let k = spawn(|| {
        testing::hold_half_clear(&f);
        ready.set();
        std::thread::sleep(Duration::from_secs(60));
    });
    ready.wait("the child's half clear");
    kill9(k);
    reap(k);
    let d = stall(|| {
        f.add(b"after").unwrap();
    });
    assert!(d < NO_HANG, "stalled {d:?}");
    println!("# clear killed midway: next add took {d:?}");
    // The interrupted clear was completed by the recoverer, then our add.
    assert!(f.contains(b"after"));
    assert_eq!(f.count(), 1);
}

/// A clear of a filter that grows, killed midway through its first stage:
/// the next writer finishes it, and its end drops the later stages too
/// (one stage published, every fill word 0), as the uninterrupted clear's
/// does: no item of before is seen, the new one is.
fn killed_mid_clear_of_a_grown_filter() {
    let layout = match layout() {
        Some(Layout::DataSketches) => {
            println!("# skipped: the datasketches layout does not grow");
            return;
        }
        l => l,
    };
    let opts = Options {
        layout,
        grow: Some(bloomfilter_shared::GrowOptions::new(2, None).unwrap()),
        ..Options::default()
    };
    let f = Filter::new_anonymous(100_000, rate(), opts).unwrap();
    for i in 0..400_000 {
        f.add(&item(i)).unwrap();
    }
    let stages = f.stages();
    assert!(stages >= 3, "{stages} stages");
    let ready = Ready::new();
    let k = spawn(|| {
        testing::hold_half_clear(&f);
        ready.set();
        std::thread::sleep(Duration::from_secs(60));
    });
    ready.wait("the child's half clear");
    assert_eq!(f.stages(), stages, "a clear half done leaves the stages published");
    kill9(k);
    reap(k);
    let d = stall(|| {
        f.add(b"after").unwrap();
    });
    assert!(d < NO_HANG, "stalled {d:?}");
    assert_eq!(f.stages(), 1, "the finished clear dropped the later stages");
    assert!(f.contains(b"after"));
    assert!(f.stage_stats()[0].fill <= 1);
    let seen = (0..400_000).filter(|&i| f.contains(&item(i))).count();
    assert!(seen < 100, "{seen} items of before the clear still seen");
    println!("# clear of a grown filter ({stages} stages) killed midway: next add took {d:?}");
}

/// An invert killed in the middle of a chunk: the next exclusive owner puts
/// the chunk back and finishes the rest, so every word ends inverted exactly
/// once.
fn killed_mid_invert() {
    let f = anon(1_000_000);
    for i in 0..100_000 {
        f.add(&item(i)).unwrap();
    }
    let mut before = Vec::new();
    f.for_each_word(|w| before.push(w));
    let ready = Ready::new();
    let k = spawn(|| {
        testing::hold_half_invert(&f);
        ready.set();
        std::thread::sleep(Duration::from_secs(60));
    });
    ready.wait("the child's half invert");
    kill9(k);
    reap(k);
    // A merge of an empty filter waits for the exclusive lock, so it
    // recovers the invert, and changes no bit itself.
    let empty = anon(1_000_000);
    let d = stall(|| f.merge(&empty).unwrap());
    assert!(d < NO_HANG, "stalled {d:?}");
    println!("# invert killed midway: the next merge finished it in {d:?}");
    let mut after = Vec::new();
    f.for_each_word(|w| after.push(w));
    let wrong = before.iter().zip(&after).filter(|(b, a)| !**b != **a).count();
    assert_eq!(wrong, 0, "words not inverted exactly once");
}

/// Run `f` in a grandchild that is pid 1 of a new PID namespace (a process
/// in a container); returns its pid as this process sees it and the pid of
/// the child between them (which ends with it), or None where new PID
/// namespaces are not permitted.
fn spawn_in_pid_namespace(f: impl FnOnce()) -> Option<(libc::pid_t, libc::pid_t)> {
    let mut fds = [0; 2];
    // SAFETY: a valid two-int array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let middle = spawn(|| {
        // SAFETY: the intermediate child only forks and reports; unshare
        // affects the children it makes from here on.
        unsafe {
            let pid = if libc::unshare(libc::CLONE_NEWPID) == 0 {
                libc::fork()
            } else {
                -1
            };
            if pid == 0 {
                assert_eq!(libc::getpid(), 1, "pid 1 of the new namespace");
                let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_ok();
                libc::_exit(if ok { 0 } else { 1 });
            }
            let b = pid.to_ne_bytes();
            libc::write(fds[1], b.as_ptr() as *const libc::c_void, b.len());
            if pid > 0 {
                let mut st = 0;
                libc::waitpid(pid, &mut st, 0);
            }
        }
    });
    let mut b = [0u8; 4];
    // SAFETY: reading our pipe into a 4-byte buffer.
    let n = unsafe { libc::read(fds[0], b.as_mut_ptr() as *mut libc::c_void, 4) };
    // SAFETY: closing our pipe's ends.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    assert_eq!(n, 4);
    let pid = libc::pid_t::from_ne_bytes(b);
    if pid <= 0 {
        reap(middle);
        return None;
    }
    Some((pid, middle))
}

/// An invert's holder that is pid 1 of its own PID namespace, stopped in the
/// middle: a clear from this namespace waits for it (it is alive); killed,
/// its invert is finished and then the clear runs, never a mix.
fn exclusive_holder_in_a_pid_namespace() {
    let f = anon(1_000_000);
    for i in 0..100_000 {
        f.add(&item(i)).unwrap();
    }
    let ready = Ready::new();
    let Some((k, middle)) = spawn_in_pid_namespace(|| {
        testing::hold_half_invert(&f);
        ready.set();
        std::thread::sleep(Duration::from_secs(60));
    }) else {
        println!("# skipped: new PID namespaces are not permitted here");
        return;
    };
    ready.wait("the grandchild's half invert");
    // SAFETY: stopping the grandchild we made.
    assert_eq!(unsafe { libc::kill(k, libc::SIGSTOP) }, 0);
    let d = waits_until_killed(
        k,
        || f.clear().unwrap(),
        "a stopped exclusive owner in another PID namespace",
    );
    println!("# invert's holder, pid 1 of its namespace: stopped, waited for; killed, the clear ended {d:?} later");
    assert_eq!(f.bits_set(), 0, "the clear ran after the finished invert");
    reap(middle);
}

/// A process whose main thread has exited while another of its threads
/// holds a stripe is alive (its /proc state reads as a zombie's).
fn main_thread_exited_owner_is_alive() {
    let f = anon(1000);
    let addr = &f as *const Filter as usize;
    // Shared with the child: made before the fork.
    let ready = Ready::new();
    let ready_at = &ready as *const Ready as usize;
    // A bare fork, and the main thread ends with the raw exit system call:
    // no unwinding, no exit handlers, the other thread runs on.
    // SAFETY: single-threaded process; the child never returns into the
    // parent's code (its main thread exits, its other thread sleeps).
    let k = unsafe { libc::fork() };
    assert!(k >= 0, "fork failed");
    if k == 0 {
        std::thread::spawn(move || {
            // SAFETY: the filter and the flag live in the parent's frame,
            // which this forked child never leaves (its main thread exits
            // below).
            let (f, ready) = unsafe { (&*(addr as *const Filter), &*(ready_at as *const Ready)) };
            testing::hold_stripe(f, b"victim");
            ready.set();
            std::thread::sleep(Duration::from_secs(60));
        });
        // The main thread ends once the other holds the stripe.
        ready.wait("the child's thread taking the stripe");
        // SAFETY: ends only the calling (main) thread; the holder runs on.
        unsafe { libc::syscall(libc::SYS_exit, 0) };
        unreachable!();
    }
    ready.wait("the child's thread taking the stripe");
    let d = waits_until_killed(
        k,
        || {
            f.add(b"victim").unwrap();
        },
        "an owner whose main thread exited",
    );
    println!("# owner with its main thread gone: waited for; killed, the waiter finished {d:?} later");
    reap(k);
}

fn killed_mid_merge() {
    let f = anon(1000);
    let ready = Ready::new();
    let k = spawn(|| {
        testing::hold_merge(&f);
        ready.set();
        std::thread::sleep(Duration::from_secs(60));
    });
    ready.wait("the child's merge");
    kill9(k);
    let d = stall(|| f.invert().unwrap());
    reap(k);
    assert!(d < NO_HANG, "stalled {d:?}");
    println!("# merge killed midway: next exclusive op took {d:?}");
}

/// What backs a filter of the journal tests.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Store {
    Anonymous,
    Memfd,
    File,
}

fn opts() -> Options {
    Options {
        layout: layout(),
        mode: 0o600,
        ..Options::default()
    }
}

fn store_filter(store: Store, cap: u64, path: &std::path::Path) -> Filter {
    match store {
        Store::Anonymous => anon(cap),
        Store::Memfd => Filter::new_memfd("journal test", cap, rate(), opts()).unwrap(),
        Store::File => {
            let _ = std::fs::remove_file(path);
            Filter::open_file(path, cap, rate(), opts()).unwrap()
        }
    }
}

fn words(f: &Filter) -> Vec<u64> {
    let mut v = Vec::new();
    f.for_each_word(|w| v.push(w));
    v
}

/// Size and allocated bytes of what backs `f` (None for an anonymous one).
fn backing_size(f: &Filter, store: Store, path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let md = match f.memfd() {
        _ if store == Store::Anonymous => return None,
        -1 => std::fs::metadata(path).ok()?,
        // SAFETY: the handle's own descriptor, borrowed for the fstat only.
        fd => unsafe { std::mem::ManuallyDrop::new(<std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd)) }
            .metadata()
            .unwrap(),
    };
    Some((md.len(), md.blocks() * 512))
}

/// Wait until child `k` stops (SIGSTOP), as the journal hook makes it.
fn wait_stopped(k: libc::pid_t) {
    let mut st = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(k, &mut st, libc::WUNTRACED) }, k);
    assert!(
        libc::WIFSTOPPED(st),
        "child ended ({st:#x}) instead of stopping in the operation"
    );
}

/// Kill a child stopped inside `f`'s `op` ("merge" or "intersect") with
/// the operand `other` makes in the child, after `done` chunks were applied
/// (`testing::stop_journaled`; None: before applying any).
fn killed_inside(f: &Filter, op: &str, done: Option<usize>, other: impl FnOnce() -> Filter) {
    let k = spawn(|| {
        let other = other();
        testing::stop_journaled(done);
        let r = if op == "merge" {
            f.merge(&other)
        } else {
            f.intersect(&other)
        };
        r.unwrap();
        panic!("the operation returned");
    });
    wait_stopped(k);
    kill9(k);
    reap(k);
}

/// A merge or an intersect killed part-way, on each kind of storage, with
/// its operand in the killed process's own memory: the next process that
/// touches the filter finds it as before (killed before the journal was
/// applied) or exactly as after (killed while applying: finished from the
/// journal, redoing only the chunks not done), and the journal's space is
/// kept for the next one (no process gives back pages another may map).
fn killed_mid_merge_or_intersect() {
    const CAP: u64 = 1_000_000;
    let dir = std::env::temp_dir();
    let path = dir.join(format!("bfs-journal-{}.bf", std::process::id()));
    for store in [Store::Anonymous, Store::Memfd, Store::File] {
        for op in ["merge", "intersect"] {
            for stop in [None, Some(3), Some(usize::MAX)] {
                let f = store_filter(store, CAP, &path);
                for i in 0..20_000 {
                    f.add(&item(i)).unwrap();
                }
                let before = words(&f);
                // The operand's bits, as the child will make them.
                let operand = anon(CAP);
                for i in 10_000..30_000 {
                    operand.add(&item(i)).unwrap();
                }
                let theirs = words(&operand);
                let after: Vec<u64> = before
                    .iter()
                    .zip(&theirs)
                    .map(|(a, b)| if op == "merge" { a | b } else { a & b })
                    .collect();
                assert_ne!(before, after);
                let chunks = (before.len() + 63) / 64;
                let done = stop.map(|c| c.min(chunks / 2));
                let (_, len) = testing::journal_range(&f).unwrap();
                killed_inside(&f, op, done, || {
                    let other = anon(CAP);
                    for i in 10_000..30_000 {
                        other.add(&item(i)).unwrap();
                    }
                    other
                });
                let what = format!(
                    "{store:?} {op} killed {}",
                    done.map_or("before applying".into(), |c| format!("after {c} of {chunks} chunks"))
                );
                let total = f.mmap_size();
                if let Some((size, _)) = backing_size(&f, store, &path) {
                    assert!(size >= total + len, "{what}: the journal is there ({size} bytes)");
                }
                if store == Store::File {
                    // A file left longer opens fine.
                    let g = Filter::open_file(&path, CAP, rate(), opts()).unwrap();
                    assert_eq!(g.mmap_size(), total, "{what}: mapped to the filter's size");
                    assert_eq!(words(&g), words(&f));
                }
                if store == Store::Memfd {
                    let g = Filter::from_fd(f.memfd()).unwrap();
                    assert_eq!(g.mmap_size(), total, "{what}: mapped to the filter's size");
                }
                // Touch: add an item of both filters, there before and
                // after (it changes no bit). It waits for the dead
                // exclusive owner, if any, and finishes its work.
                let resumed = bloomfilter_shared::hooks::resumed_chunks();
                let d = stall(|| {
                    f.add(&item(15_000)).unwrap();
                });
                assert!(d < NO_HANG, "{what}: stalled {d:?}");
                let redone = bloomfilter_shared::hooks::resumed_chunks() - resumed;
                let now = words(&f);
                match done {
                    None => {
                        assert!(now == before, "{what}: not as before");
                        assert_eq!(redone, 0);
                        // The next exclusive operation frees the journal
                        // word; the next merge reuses the journal.
                        f.invert().unwrap();
                        f.invert().unwrap();
                        assert!(words(&f) == before);
                    }
                    Some(c) => {
                        let wrong = now.iter().zip(&after).filter(|(a, b)| a != b).count();
                        assert_eq!(wrong, 0, "{what}: {wrong} words not as after");
                        assert_eq!(redone as usize, chunks - c, "{what}: only the chunks left were redone");
                    }
                }
                if let Some((size, alloc)) = backing_size(&f, store, &path) {
                    assert!(
                        size >= total + len,
                        "{what}: the journal's space is kept ({size} bytes)"
                    );
                    assert!(
                        alloc >= total + len,
                        "{what}: the journal's space is kept ({alloc} bytes held)"
                    );
                }
                // The operation works again, in the same space.
                let r = if op == "merge" {
                    f.merge(&operand)
                } else {
                    f.intersect(&operand)
                };
                r.unwrap();
                assert!(words(&f) == after, "{what}: redone from here");
                if let Some((size, alloc)) = backing_size(&f, store, &path) {
                    assert!(size >= total + len && alloc >= total + len);
                }
                println!("# {what}: touched after {d:?}, {redone} chunks redone");
            }
        }
    }
    let _ = std::fs::remove_file(&path);
}

/// A grown filter of first capacity `cap`, factor 2, on `store`.
fn grown_store_filter(store: Store, cap: u64, path: &std::path::Path) -> Filter {
    let opts = Options {
        grow: Some(bloomfilter_shared::GrowOptions::new(2, None).unwrap()),
        ..opts()
    };
    match store {
        Store::Anonymous => Filter::new_anonymous(cap, rate(), opts).unwrap(),
        Store::Memfd => Filter::new_memfd("grown journal test", cap, rate(), opts).unwrap(),
        Store::File => {
            let _ = std::fs::remove_file(path);
            Filter::open_file(path, cap, rate(), opts).unwrap()
        }
    }
}

/// A grown filter holding `items`, anonymous.
fn grown_holding(cap: u64, items: impl Iterator<Item = u64>) -> Filter {
    let f = grown_store_filter(Store::Anonymous, cap, std::path::Path::new(""));
    for i in items {
        f.add(&item(i)).unwrap();
    }
    f
}

/// A merge or an intersect of filters that grow, killed part-way (before
/// applying, or after some chunks, in a stage past the first), on each
/// kind of storage, the operand in the killed process's own memory: the
/// next writer finishes it from the journal, redoing only the chunks left,
/// and the filter is then bit for bit as the same operation run whole:
/// every item of both (a merge) or of both and of A's later stages (an
/// intersect) present. The stages a merge added before it was killed stay,
/// and the file is never cut back (other processes map its later ranges).
fn killed_mid_merge_of_grown_filters() {
    if layout() == Some(Layout::DataSketches) {
        println!("# skipped: the datasketches layout does not grow");
        return;
    }
    const CAP: u64 = 10_000;
    let path = std::env::temp_dir().join(format!("bfs-grown-journal-{}.bf", std::process::id()));
    // A: 0..20000 (stages 0 and 1). Merge: B of 100000..160000 (3 stages).
    // Intersect: B of one stage holding part of A's stage 0, part of its
    // stage 1, and items of its own.
    let a_items = || 0..20_000u64;
    let b_items = |op: &str| -> Vec<u64> {
        if op == "merge" {
            (100_000..160_000).collect()
        } else {
            (0..3000).chain(15_000..18_000).chain(200_000..203_000).collect()
        }
    };
    for store in [Store::Anonymous, Store::Memfd, Store::File] {
        for op in ["merge", "intersect"] {
            for stop_in_stage_1 in [false, true] {
                let f = grown_store_filter(store, CAP, &path);
                // The items A took into its stage 1: new there, not found
                // in stage 0 (an item stage 0 answers for, wrongly, is not
                // stored again: an intersect may drop it with stage 0).
                let mut in_stage_1 = Vec::new();
                for i in a_items() {
                    let later = f.stages() == 2;
                    if f.add(&item(i)).unwrap() && later {
                        in_stage_1.push(i);
                    }
                }
                assert_eq!(f.stages(), 2);
                assert!(in_stage_1.len() > 9000, "{} items in stage 1", in_stage_1.len());
                let ours = b_items(op);
                // The whole operation, run on copies, as the reference.
                let want = Filter::deserialize(&f.serialize().unwrap(), None, 0).unwrap();
                let operand = grown_holding(CAP, ours.iter().copied());
                let stages_after = want.stages().max(operand.stages());
                let before_bits = f.bits_set();
                if op == "merge" {
                    want.merge(&operand).unwrap();
                } else {
                    want.intersect(&operand).unwrap();
                }
                let words_of = |n: u32| -> u64 { f.stage_stats().iter().take(n as usize).map(|s| s.bits / 64).sum() };
                let s0_chunks = (words_of(1) as usize + 63) / 64;
                let done = stop_in_stage_1.then_some(s0_chunks + 2);
                killed_inside(&f, op, done, || grown_holding(CAP, ours.iter().copied()));
                let what = format!(
                    "{store:?} grown {op} killed {}",
                    done.map_or("before applying".into(), |c| format!("after {c} chunks"))
                );
                // A merge grows the filter before its journal: those stages
                // are published, empty, whatever happens next.
                assert_eq!(f.stages(), stages_after, "{what}: stages");
                let chunks = (words_of(stages_after) as usize + 63) / 64;
                assert!(done.map_or(true, |c| c < chunks), "{what}: stops in the middle");
                let size_at_kill = backing_size(&f, store, &path).map(|(size, _)| size);
                let resumed = bloomfilter_shared::hooks::resumed_chunks();
                let d = stall(|| {
                    f.add(&item(1)).unwrap();
                });
                assert!(d < NO_HANG, "{what}: stalled {d:?}");
                let redone = bloomfilter_shared::hooks::resumed_chunks() - resumed;
                match done {
                    None => {
                        assert_eq!(redone, 0, "{what}");
                        assert_eq!(f.bits_set(), before_bits, "{what}: not as before");
                    }
                    Some(c) => {
                        assert_eq!(redone as usize, chunks - c, "{what}: only the chunks left were redone");
                        assert_eq!(f.bits_set(), want.bits_set(), "{what}: not as after");
                        let lost = a_items()
                            .chain(ours.iter().copied())
                            .filter(|&i| want.contains(&item(i)) && !f.contains(&item(i)))
                            .count();
                        assert_eq!(lost, 0, "{what}: {lost} items lost");
                        if op == "merge" {
                            let absent = a_items()
                                .chain(ours.iter().copied())
                                .filter(|&i| !f.contains(&item(i)))
                                .count();
                            assert_eq!(absent, 0, "{what}: {absent} items of either filter lost");
                        } else {
                            let kept = (0..3000)
                                .chain(15_000..18_000)
                                .chain(in_stage_1.iter().copied())
                                .filter(|&i| !f.contains(&item(i)))
                                .count();
                            assert_eq!(kept, 0, "{what}: {kept} items of both or of A's stage 1 lost");
                        }
                    }
                }
                if let (Some(at_kill), Some((size, _))) = (size_at_kill, backing_size(&f, store, &path)) {
                    assert!(
                        size >= at_kill,
                        "{what}: the file was cut back ({at_kill} -> {size} bytes)"
                    );
                }
                // The operation runs again (a no-op if it was finished).
                if op == "merge" {
                    f.merge(&operand).unwrap();
                } else {
                    f.intersect(&operand).unwrap();
                }
                assert_eq!(f.bits_set(), want.bits_set(), "{what}: redone from here");
                println!("# {what}: touched after {d:?}, {redone} of {chunks} chunks redone");
            }
        }
    }
    let _ = std::fs::remove_file(&path);
}

/// A merger stopped while it copies the other filter into the journal
/// holds only the journal: adds go on; another merger waits for it, and
/// goes on once it is killed (leaving the filter as before its merge).
fn stopped_merger_holds_off_only_mergers() {
    let f = anon(100_000);
    f.add(b"mine").unwrap();
    let k = spawn(|| {
        let other = anon(100_000);
        other.add(b"stopped").unwrap();
        testing::stop_journaled(None);
        f.merge(&other).unwrap();
    });
    wait_stopped(k);
    let d = stall(|| {
        for i in 0..1000 {
            f.add(&item(i)).unwrap();
        }
    });
    // The merger stays stopped until killed: adds that waited for it
    // would not end within NO_HANG.
    println!("# merger stopped while copying: 1000 adds took {d:?}");
    assert!(d < NO_HANG, "adds waited for a stopped merger: {d:?}");
    let d = waits_until_killed(
        k,
        || {
            let other = anon(100_000);
            other.add(b"theirs").unwrap();
            f.merge(&other).unwrap();
            assert!(f.contains(b"theirs"));
        },
        "a merger holding the journal",
    );
    reap(k);
    assert!(f.contains(b"theirs") && f.contains(b"mine") && f.contains(&item(999)));
    assert!(!f.contains(b"stopped"), "the killed merge changed nothing");
    println!("# merger stopped while copying: adds went on, a merger waited; killed, it finished {d:?} later");
}

/// Mergers and intersecters racing on one filter, with adders, one of
/// them SIGKILLed at a random moment of its operation each round: every
/// operation is all or nothing once the filter is touched again, none that
/// completed is lost, and no add is lost.
fn journal_storm() {
    const CAP: u64 = 4_000_000; // 2^25 bits: 4 MiB
    const N: u64 = 400;
    let f = anon(CAP);
    let s = Scratch::new(4096);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut landed = 0;
    for round in 0..24u64 {
        // Three mergers (the third intersects with a filter holding
        // everything so far plus its own items), each with an operand of
        // its own that dies with it, and an adder.
        let keep: Vec<Vec<u8>> = (0..round * 3 * N).map(|i| format!("m{i}").into_bytes()).collect();
        let kids: Vec<libc::pid_t> = (0..3u64)
            .map(|k| {
                let (f, s, keep) = (&f, &s, &keep);
                spawn(move || {
                    let other = anon(CAP);
                    for i in 0..N {
                        other.add(format!("m{}", (round * 3 + k) * N + i).as_bytes()).unwrap();
                    }
                    s.word(k as usize).store(1, Ordering::Release);
                    if k == 2 {
                        // Intersect with a superset of everything added:
                        // changes nothing when whole, so a mix would show as
                        // lost items only if the AND ran against a partial
                        // copy (it never does: the copy is whole first).
                        for i in keep {
                            other.add(i).unwrap();
                        }
                        for r in 0..=round {
                            for i in 0..N {
                                other.add(format!("a{r}-{i}").as_bytes()).unwrap();
                            }
                        }
                        for i in 0..3 * N {
                            other.add(format!("m{}", round * 3 * N + i).as_bytes()).unwrap();
                        }
                        other.add(b"touch").unwrap();
                        f.intersect(&other).unwrap();
                    } else {
                        f.merge(&other).unwrap();
                    }
                })
            })
            .collect();
        let adder = spawn(|| {
            for i in 0..N {
                f.add(format!("a{round}-{i}").as_bytes()).unwrap();
            }
        });
        let victim = (round % 2) as usize; // a merger
        while s.word(victim).load(Ordering::Acquire) == 0 {
            std::thread::sleep(Duration::from_micros(100));
        }
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_micros(seed % 8_000));
        kill9(kids[victim]);
        let st: Vec<i32> = kids.iter().map(|&k| reap(k)).collect();
        assert_eq!(reap(adder), 0, "round {round}: adder failed");
        for w in 0..3 {
            s.word(w).store(0, Ordering::Relaxed);
        }
        // Touch: finishes whatever the killed one left applied in part.
        f.add(b"touch").unwrap();
        for (k, &st) in st.iter().enumerate() {
            let items = (0..N).map(|i| format!("m{}", (round * 3 + k as u64) * N + i));
            let present = items.filter(|i| f.contains(i.as_bytes())).count() as u64;
            if k != victim || st == 0 {
                assert_eq!(st, 0, "round {round}: child {k} failed");
                if k < 2 {
                    assert_eq!(present, N, "round {round}: merger {k} completed, items missing");
                }
            } else {
                assert!(
                    present <= 2 || present == N,
                    "round {round}: killed merger left {present} of {N} items: a mix"
                );
                landed += (present == N) as u32;
            }
        }
        for i in 0..N {
            assert!(
                f.contains(format!("a{round}-{i}").as_bytes()),
                "round {round}: add lost"
            );
        }
    }
    println!("# journal storm, 24 rounds: {landed} killed merges had taken effect (done, or finished by others), the rest none");
}

/// A file whose control line claims a merge under way with no journal
/// behind it (damaged, or hostile): the next exclusive operation drops the
/// claim and changes no bit for it.
fn pending_merge_without_a_journal() {
    use std::os::unix::fs::FileExt;
    let path = std::env::temp_dir().join(format!("bfs-nojournal-{}.bf", std::process::id()));
    let f = store_filter(Store::File, 100_000, &path);
    for i in 0..1000 {
        f.add(&item(i)).unwrap();
    }
    let before = words(&f);
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    for (op, cursor) in [(3u32, 0u64), (4, 0), (4, 7), (3, u64::MAX)] {
        file.write_at(&op.to_ne_bytes(), 140).unwrap();
        file.write_at(&cursor.to_ne_bytes(), 144).unwrap();
        // An exclusive operation finds it; invert twice changes nothing.
        f.invert().unwrap();
        f.invert().unwrap();
        assert!(words(&f) == before, "pending {op} at {cursor}: bits changed");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), f.mmap_size());
    }
    drop(file);
    let _ = std::fs::remove_file(&path);
}

fn sigkill_storm() {
    // Children add in a loop and report each completed add; we kill them at
    // random moments and check no completed add was lost, and that we are
    // never stalled long.
    let f = anon(400_000);
    let s = Scratch::new(4096);
    let mut worst = Duration::ZERO;
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for round in 0..40u64 {
        let mode = round % 4;
        let k = spawn(|| {
            let base = round * 100_000;
            let mut i = 0;
            loop {
                match mode {
                    0 | 1 => {
                        f.add(&item(base + i)).unwrap();
                        s.word(round as usize).store(i + 1, Ordering::Release);
                        i += 1;
                    }
                    2 => {
                        let items: Vec<Vec<u8>> = (i..i + 64).map(|j| item(base + j)).collect();
                        let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
                        f.add_many(&refs, None).unwrap();
                        i += 64;
                        s.word(round as usize).store(i, Ordering::Release);
                    }
                    _ => {
                        let other = anon(400_000);
                        other.add(&item(base + i)).unwrap();
                        f.merge(&other).unwrap();
                        s.word(round as usize).store(i + 1, Ordering::Release);
                        i += 1;
                    }
                }
            }
        });
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_micros(2_000 + seed % 20_000));
        kill9(k);
        let d = stall(|| {
            f.add(b"survivor").unwrap();
            if round % 8 == 7 {
                f.invert().unwrap();
                f.invert().unwrap();
            }
        });
        reap(k);
        worst = worst.max(d);
        let done = s.word(round as usize).load(Ordering::Acquire);
        for i in 0..done {
            assert!(
                f.contains(&item(round * 100_000 + i)),
                "round {round}: completed add {i} lost"
            );
        }
    }
    assert!(worst < NO_HANG, "worst stall {worst:?}");
    println!("# SIGKILL storm, 40 rounds: worst survivor stall {worst:?}");
}

fn main() {
    // Stripes exist only in the standard and datasketches layouts; slot
    // marks of adders only in the blocked one.
    let standard_only = [
        "killed_holding_a_stripe",
        "stopped_holder_is_alive",
        "main_thread_exited_owner_is_alive",
    ];
    let blocked_only = ["killed_inside_a_lockfree_add", "stopped_lockfree_adder_blocks_no_adder"];
    let tests: &[(&str, fn())] = &[
        ("disjoint_writers_lose_nothing", disjoint_writers_lose_nothing),
        ("same_items_never_new_twice", same_items_never_new_twice),
        (
            "child_and_grandchild_use_inherited_handle",
            child_and_grandchild_use_inherited_handle,
        ),
        ("killed_holding_a_stripe", killed_holding_a_stripe),
        ("stopped_holder_is_alive", stopped_holder_is_alive),
        ("killed_mid_clear", killed_mid_clear),
        ("killed_mid_invert", killed_mid_invert),
        ("killed_mid_clear_of_a_grown_filter", killed_mid_clear_of_a_grown_filter),
        (
            "exclusive_holder_in_a_pid_namespace",
            exclusive_holder_in_a_pid_namespace,
        ),
        ("main_thread_exited_owner_is_alive", main_thread_exited_owner_is_alive),
        ("killed_mid_merge", killed_mid_merge),
        ("killed_mid_merge_or_intersect", killed_mid_merge_or_intersect),
        ("killed_mid_merge_of_grown_filters", killed_mid_merge_of_grown_filters),
        ("pending_merge_without_a_journal", pending_merge_without_a_journal),
        (
            "stopped_merger_holds_off_only_mergers",
            stopped_merger_holds_off_only_mergers,
        ),
        ("journal_storm", journal_storm),
        ("sigkill_storm", sigkill_storm),
        ("killed_inside_a_lockfree_add", killed_inside_a_lockfree_add),
        (
            "frozen_while_adders_run_never_changes",
            frozen_while_adders_run_never_changes,
        ),
        (
            "stopped_lockfree_adder_blocks_no_adder",
            stopped_lockfree_adder_blocks_no_adder,
        ),
    ];
    // 128-bit blocks: the suites about exactly-once and lost adds.
    let block128 = [
        "disjoint_writers_lose_nothing",
        "same_items_never_new_twice",
        "sigkill_storm",
        "killed_mid_invert",
        "frozen_while_adders_run_never_changes",
    ];
    let (mut failed, mut ran) = (0, 0);
    for (blocked, rate, layout) in [
        (false, 0.01f64, "standard"),
        (true, 0.01, "blocked"),
        (true, 0.0001, "blocked, 128-bit blocks"),
        (false, 0.01, "datasketches"),
    ] {
        BLOCKED.store(blocked, Ordering::Relaxed);
        DATASKETCHES.store(layout == "datasketches", Ordering::Relaxed);
        RATE.store(rate.to_bits(), Ordering::Relaxed);
        for (name, t) in tests {
            if (blocked && standard_only.contains(name))
                || (!blocked && blocked_only.contains(name))
                || (rate < 0.01 && !block128.contains(name))
            {
                continue;
            }
            let ok = std::panic::catch_unwind(t).is_ok();
            println!("test {name} [{layout}] ... {}", if ok { "ok" } else { "FAILED" });
            failed += !ok as usize;
            ran += 1;
        }
    }
    println!("{} passed, {} failed", ran - failed, failed);
    if failed > 0 {
        std::process::exit(1);
    }
}
