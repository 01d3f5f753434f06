//! The keeper against the kernel: words taken and given back by threads
//! of one process, and by forked processes that are killed, stopped or exit
//! holding them.

use super::*;
use std::time::Instant;

/// The key of every take in these tests: one holder per word and process.
const KEY: u64 = 7;

/// An anonymous shared mapping with its shadow, 8 KiB of words.
fn map() -> ShadowMap {
    ShadowMap::new(None, 8192).expect("mmap")
}

/// Fork a child that runs `f` (given a pipe end to report on), then waits
/// to be killed. Returns its pid once it wrote its one byte.
fn child(f: impl FnOnce()) -> libc::pid_t {
    let mut fds = [0; 2];
    // SAFETY: a two-int array for pipe(2).
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the child only takes words, writes a byte and waits; it
    // never returns into the test harness (_exit).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        f();
        // SAFETY: writing one byte from a local to our pipe.
        unsafe {
            libc::write(fds[1], b"x".as_ptr() as *const libc::c_void, 1);
            loop {
                libc::pause();
            }
        }
    }
    let mut b = [0u8; 1];
    // SAFETY: reading one byte into a local; then closing our fds.
    unsafe {
        assert_eq!(
            libc::read(fds[0], b.as_mut_ptr() as *mut libc::c_void, 1),
            1,
            "child failed"
        );
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    pid
}

/// SIGKILL `pid` and reap it.
fn kill(pid: libc::pid_t) {
    // SAFETY: our own child.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, ptr::null_mut(), 0);
    }
}

/// In a child: take `w` or exit 1 (the parent then sees no byte).
fn take_or_die(w: &AtomicU32) {
    // SAFETY: the word lies in a ShadowMap that outlives the child.
    if unsafe { try_lock(w, KEY) } != Try::Free {
        // SAFETY: leaving the child without unwinding into the harness.
        unsafe { libc::_exit(1) };
    }
}

#[test]
fn states_cover_every_value() {
    assert_eq!(state(0), State::Free);
    assert_eq!(state(WAITERS), State::Free);
    assert_eq!(state(42), State::Held(42));
    assert_eq!(state(42 | WAITERS), State::Held(42));
    assert_eq!(state(OWNER_DIED), State::Died);
    assert_eq!(state(u32::MAX), State::Died);
    // A TID no thread can have (at or past PID_MAX_LIMIT) is nobody's.
    assert_eq!(state(TID_LIMIT - 1), State::Held(TID_LIMIT - 1));
    assert_eq!(state(TID_LIMIT), State::Died);
    assert_eq!(state(0x3fff_fff0 | WAITERS), State::Died);
}

#[test]
fn a_word_naming_an_impossible_thread_is_taken_over() {
    let m = map();
    let w = m.word(0);
    w.store(0x3fff_fff0, Ordering::Relaxed);
    // SAFETY: the word lies in a ShadowMap that outlives the take.
    assert_eq!(unsafe { try_lock(w, KEY) }, Try::OwnerDied);
    assert_eq!(state(w.load(Ordering::Relaxed)), State::Held(holder_tid().unwrap()));
    // SAFETY: as above.
    unsafe { unlock(w, KEY) };
    assert_eq!(w.load(Ordering::Relaxed), 0);
}

#[test]
fn a_wait_for_a_holder_that_keeps_the_word_ends_at_its_limit() {
    let m = map();
    let w = m.word(0);
    // A plausible TID that is not this process's keeper: held, for ever.
    w.store(1, Ordering::Relaxed);
    let t = Instant::now();
    // SAFETY: the word lies in a ShadowMap that outlives the wait.
    assert_eq!(unsafe { lock(w, KEY, Duration::from_millis(100)) }, Try::Held);
    // At least the limit; the upper side is only a hang's (a busy host).
    assert!(t.elapsed() >= Duration::from_millis(100));
    assert_eq!(w.load(Ordering::Relaxed) & TID_MASK, 1, "the word is left as it was");
}

#[test]
fn a_word_is_taken_once_and_given_back() {
    let m = map();
    let w = m.word(4096);
    // SAFETY: the words lie in `m`, which outlives every hold below.
    unsafe {
        assert_eq!(try_lock(w, KEY), Try::Free);
        let tid = holder_tid().unwrap();
        assert_ne!(tid, gettid(), "the keeper's TID, not the caller's");
        assert_eq!(state(w.load(Ordering::Relaxed)), State::Held(tid));
        assert_eq!(try_lock(w, KEY), Try::Held, "held by this process already");
        unlock(w, KEY);
        assert_eq!(w.load(Ordering::Relaxed), 0);
        // A word this process does not hold is never written.
        w.store(12345, Ordering::Relaxed);
        unlock(w, KEY);
        assert_eq!(w.load(Ordering::Relaxed), 12345);
        w.store(0, Ordering::Relaxed);
        assert_eq!(try_lock(w, KEY), Try::Free);
        unlock(w, KEY);
    }
}

#[test]
fn a_rewritten_word_is_never_linked_twice() {
    let m = map();
    let (a, b) = (m.word(64), m.word(128));
    // SAFETY: as above.
    unsafe {
        assert_eq!(try_lock(a, KEY), Try::Free);
        assert_eq!(try_lock(b, KEY), Try::Free);
        // Another user marks our word as an owner's death: we still hold
        // it, and do not take it again.
        a.store(OWNER_DIED, Ordering::Relaxed);
        assert_eq!(try_lock(a, KEY), Try::Held);
        // Given back: the entry comes off the list, and the word, which no
        // longer names our keeper, is left as the other user wrote it.
        unlock(a, KEY);
        unlock(b, KEY);
        assert_eq!((a.load(Ordering::Relaxed), b.load(Ordering::Relaxed)), (OWNER_DIED, 0));
        assert_eq!(try_lock(a, KEY), Try::OwnerDied, "taken over, linked once again");
        assert_eq!(try_lock(b, KEY), Try::Free);
        unlock(a, KEY);
        unlock(b, KEY);
        assert_eq!((a.load(Ordering::Relaxed), b.load(Ordering::Relaxed)), (0, 0));
    }
}

#[test]
fn a_give_back_under_another_key_leaves_the_word_held() {
    let m = map();
    let w = m.word(192);
    // SAFETY: as above.
    unsafe {
        assert_eq!(try_lock(w, 1), Try::Free);
        unlock(w, 2);
        assert_eq!(state(w.load(Ordering::Relaxed)), State::Held(holder_tid().unwrap()));
        unlock(w, 1);
        assert_eq!(w.load(Ordering::Relaxed), 0);
    }
}

#[test]
fn a_leased_word_is_given_back_to_a_waiter_between_uses() {
    let m = map();
    let w = m.word(320);
    // SAFETY: as above; every take is given back before `m` goes.
    unsafe {
        assert_eq!(try_lock(w, 1), Try::Free);
        let l = lease(w, 1);
        assert!(!l.revoked(), "a fresh lease is entered, in use");
        // Another thread of the process waits for the word while a use is
        // under way: the keeper keeps it until the use ends.
        std::thread::scope(|s| {
            let t = s.spawn(|| {
                let r = lock(w, 2, Duration::from_secs(3600));
                unlock(w, 2);
                r
            });
            std::thread::sleep(SLICE * 3);
            assert!(!l.revoked(), "revoked during a use");
            assert!(!t.is_finished(), "the waiter took a word in use");
            l.leave();
            assert_eq!(t.join().unwrap(), Try::Free);
        });
        assert!(l.revoked(), "given back to the waiter");
        assert!(!l.enter(), "a revoked lease is not used");
        unlock(w, 1); // its holder lost it: nothing changes
        assert_eq!(w.load(Ordering::Relaxed) & TID_MASK, 0);
        // Leased under a key the word is not held by: revoked at once.
        assert!(lease(w, 3).revoked());
    }
}

#[test]
fn threads_of_one_process_take_turns() {
    let m = map();
    let w = m.word(256);
    // SAFETY: as above; each thread locks the word once and the holder
    // gives it back.
    unsafe { assert_eq!(try_lock(w, KEY), Try::Free) };
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            // SAFETY: as above.
            assert_eq!(unsafe { try_lock(w, KEY) }, Try::Held, "another thread holds it");
            let t = Instant::now();
            // SAFETY: as above; this thread does not hold it.
            assert_eq!(unsafe { lock(w, KEY, Duration::from_secs(3600)) }, Try::Free);
            let waited = t.elapsed();
            // SAFETY: as above.
            unsafe { unlock(w, KEY) };
            waited
        });
        std::thread::sleep(Duration::from_millis(100));
        // SAFETY: this thread took it above.
        unsafe { unlock(w, KEY) };
        let waited = waiter.join().unwrap();
        assert!(waited >= Duration::from_millis(50), "lock waited only {waited:?}");
    });
    assert_eq!(w.load(Ordering::Relaxed), 0);
}

#[test]
fn a_killed_holder_is_reported_dead_and_taken_over() {
    let m = map();
    let (a, b, c) = (m.word(4096), m.word(4160), m.word(4224));
    let pid = child(|| {
        take_or_die(a);
        take_or_die(b);
        take_or_die(c);
        // Given back: the kernel must not find it on the list.
        // SAFETY: as in take_or_die.
        unsafe { unlock(b, KEY) };
    });
    let State::Held(t) = state(a.load(Ordering::Relaxed)) else {
        panic!("the child's word is not held: {:#x}", a.load(Ordering::Relaxed))
    };
    assert_ne!(Some(t), holder_tid());
    // SAFETY: the words lie in `m`, which outlives every hold below.
    unsafe {
        assert_eq!(try_lock(a, KEY), Try::Held, "a live holder");
        kill(pid);
        assert_eq!(state(a.load(Ordering::Relaxed)), State::Died);
        assert_eq!(state(c.load(Ordering::Relaxed)), State::Died);
        assert_eq!(b.load(Ordering::Relaxed), 0, "a word given back stays free");
        assert_eq!(try_lock(a, KEY), Try::OwnerDied);
        assert_eq!(state(a.load(Ordering::Relaxed)), State::Held(holder_tid().unwrap()));
        assert_eq!(try_lock(b, KEY), Try::Free);
        assert_eq!(try_lock(c, KEY), Try::OwnerDied);
        for w in [a, b, c] {
            unlock(w, KEY);
            assert_eq!(w.load(Ordering::Relaxed), 0);
        }
    }
}

#[test]
fn a_holder_that_exits_is_reported_dead() {
    let m = map();
    let w = m.word(512);
    // SAFETY: the child takes the word and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        take_or_die(w);
        // SAFETY: leaving the child without unwinding into the harness.
        unsafe { libc::_exit(7) };
    }
    let mut st = 0;
    // SAFETY: our own child.
    unsafe {
        libc::waitpid(pid, &mut st, 0);
    }
    assert!(
        libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 7,
        "child status {st:#x}"
    );
    assert_eq!(state(w.load(Ordering::Relaxed)), State::Died);
    // SAFETY: as above.
    unsafe {
        assert_eq!(try_lock(w, KEY), Try::OwnerDied);
        unlock(w, KEY);
    }
}

#[test]
fn a_stopped_holder_is_alive_and_its_death_wakes_a_waiter() {
    let m = map();
    let w = m.word(1024);
    let pid = child(|| take_or_die(w));
    // SAFETY: our own child.
    unsafe {
        libc::kill(pid, libc::SIGSTOP);
        let mut st = 0;
        libc::waitpid(pid, &mut st, libc::WUNTRACED);
        assert!(libc::WIFSTOPPED(st));
    }
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(200) {
        // SAFETY: as above.
        assert_eq!(unsafe { try_lock(w, KEY) }, Try::Held, "a stopped holder is alive");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let t = Instant::now();
            // SAFETY: as above.
            let r = unsafe { lock(w, KEY, Duration::from_secs(3600)) };
            (r, t.elapsed())
        });
        std::thread::sleep(Duration::from_millis(100));
        kill(pid);
        let (r, waited) = waiter.join().unwrap();
        assert_eq!(r, Try::OwnerDied);
        assert!(waited >= Duration::from_millis(50), "did not wait: {waited:?}");
    });
    // SAFETY: the waiter took it for this process.
    unsafe { unlock(w, KEY) };
    assert_eq!(w.load(Ordering::Relaxed), 0);
}

#[test]
fn many_words_taken_and_some_given_back_die_right() {
    let m = ShadowMap::new(None, SHADOW).expect("mmap");
    const N: usize = 1000;
    let words: Vec<&AtomicU32> = (0..N).map(|i| m.word(i * 64)).collect();
    let kept = |i: usize| i % 3 != 1;
    let pid = child(|| {
        for w in &words {
            take_or_die(w);
        }
        for (i, w) in words.iter().enumerate() {
            if !kept(i) {
                // SAFETY: as in take_or_die.
                unsafe { unlock(w, KEY) };
            }
        }
    });
    kill(pid);
    for (i, w) in words.iter().enumerate() {
        let want = if kept(i) { State::Died } else { State::Free };
        assert_eq!(state(w.load(Ordering::Relaxed)), want, "word {i}");
    }
}

#[test]
fn a_holder_that_execs_drops_its_words() {
    let m = map();
    let w = m.word(2048);
    let prog = std::ffi::CString::new("/bin/true").unwrap();
    let argv = [prog.as_ptr(), ptr::null()];
    // SAFETY: the child takes the word, then execs (or leaves with _exit).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        take_or_die(w);
        // SAFETY: a NUL-terminated path and argument vector.
        unsafe {
            libc::execv(prog.as_ptr(), argv.as_ptr());
            libc::_exit(9);
        }
    }
    let mut st = 0;
    // SAFETY: our own child.
    unsafe { libc::waitpid(pid, &mut st, 0) };
    assert!(
        libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
        "child status {st:#x}"
    );
    assert_eq!(state(w.load(Ordering::Relaxed)), State::Died);
}

#[test]
fn the_keeper_blocks_every_signal() {
    let m = map();
    // SAFETY: as in the tests above.
    unsafe {
        assert_eq!(try_lock(m.word(0), KEY), Try::Free);
        unlock(m.word(0), KEY);
    }
    let tid = holder_tid().unwrap();
    let Ok(status) = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")) else {
        return; // no /proc here: nothing to read the mask from
    };
    let blk = status
        .lines()
        .find_map(|l| l.strip_prefix("SigBlk:"))
        .map(|h| u64::from_str_radix(h.trim(), 16).unwrap())
        .expect("SigBlk line");
    for sig in [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGUSR1,
        libc::SIGCHLD,
        libc::SIGALRM,
        libc::SIGPIPE,
    ] {
        assert_ne!(blk & (1 << (sig - 1)), 0, "signal {sig} not blocked: SigBlk {blk:#x}");
    }
}
