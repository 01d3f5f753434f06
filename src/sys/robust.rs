//! Robust, process-shared pthread mutexes (glibc's), as the slot table
//! keeps them in the shared mapping: their attributes, the check that a
//! mutex read from a file is of the kind this libc makes, and lock, trylock
//! and unlock behind small functions that say what the kernel reported.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, Ordering};

/// What a lock or `trylock` of a robust mutex found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Try {
    /// We hold it now; it was free.
    Free,
    /// We hold it now; its owner had died holding it (the kernel said so).
    OwnerDied,
    /// A live thread holds it (running or stopped).
    Held,
    /// Not a mutex we initialised (a corrupt or foreign slot table).
    Broken,
}

/// The byte offset of glibc's `__kind` in a `pthread_mutex_t` (the same on
/// every 64-bit glibc target), and the value `init_slots` leaves there.
const KIND_OFF: usize = 16;
/// glibc's kind bits for a robust mutex and for a process-shared one: a
/// libc or kernel without robust futexes must not pass for one that has them.
const KIND_ROBUST: i32 = 16;
const KIND_PSHARED: i32 = 128;

/// Attributes of a robust, process-shared mutex; None where this libc
/// refuses either (then no slot mutex is ever initialised or trusted).
fn robust_attr() -> Option<libc::pthread_mutexattr_t> {
    // SAFETY: a zeroed attr is initialised by pthread_mutexattr_init before
    // any other use.
    unsafe {
        let mut a: libc::pthread_mutexattr_t = std::mem::zeroed();
        let ok = libc::pthread_mutexattr_init(&mut a) == 0
            && libc::pthread_mutexattr_setpshared(&mut a, libc::PTHREAD_PROCESS_SHARED) == 0
            && libc::pthread_mutexattr_setrobust(&mut a, libc::PTHREAD_MUTEX_ROBUST) == 0;
        ok.then_some(a)
    }
}

/// The `__kind` word of a robust, process-shared mutex on this libc, or
/// None where such mutexes are not available.
fn expected_kind() -> Option<i32> {
    static KIND: std::sync::OnceLock<Option<i32>> = std::sync::OnceLock::new();
    *KIND.get_or_init(|| {
        let a = robust_attr()?;
        // SAFETY: a private, zeroed mutex initialised with valid attributes;
        // the read is within its 40 bytes.
        let k = unsafe {
            let mut m: libc::pthread_mutex_t = std::mem::zeroed();
            if libc::pthread_mutex_init(&mut m, &a) != 0 {
                return None;
            }
            let k = std::ptr::read((&m as *const libc::pthread_mutex_t as *const u8).add(KIND_OFF) as *const i32);
            libc::pthread_mutex_destroy(&mut m);
            k
        };
        (k & KIND_ROBUST != 0 && k & KIND_PSHARED != 0).then_some(k)
    })
}

/// Whether this system has robust, process-shared mutexes (glibc on a
/// kernel with robust futexes): the lock protocol needs them.
pub fn robust_mutexes_available() -> bool {
    expected_kind().is_some()
}

/// A robust, process-shared pthread mutex that lives in a shared mapping.
#[repr(transparent)]
pub struct RobustMutex(UnsafeCell<libc::pthread_mutex_t>);

// SAFETY: the mutex is only ever used through pthread calls, which are
// thread- and process-safe for a PTHREAD_PROCESS_SHARED mutex.
unsafe impl Sync for RobustMutex {}

impl RobustMutex {
    fn raw(&self) -> *mut libc::pthread_mutex_t {
        self.0.get()
    }

    /// Initialise the mutexes at `ms` as robust and process-shared. Without
    /// such mutexes (`robust_mutexes_available` false) they stay as they
    /// are, zeroed, which `well_formed` refuses.
    ///
    /// # Safety
    /// Every pointer is to a zeroed, writable `RobustMutex` that no other
    /// thread or process uses.
    pub unsafe fn init_all(ms: impl Iterator<Item = *mut RobustMutex>) {
        let Some(a) = robust_attr() else { return };
        for m in ms {
            // SAFETY: valid and unshared (the caller's promise).
            unsafe { libc::pthread_mutex_init((*m).raw(), &a) };
        }
    }

    /// Whether the mutex's kind is the one `init_all` writes. The bytes
    /// come from a file another user may write; glibc is handed only
    /// mutexes of the kind it expects.
    pub fn well_formed(&self) -> bool {
        // SAFETY: the kind word is inside the mutex; after initialisation
        // nothing writes it, and an atomic load is fine on shared memory.
        let kind = unsafe { &*((self.raw() as *const u8).add(KIND_OFF) as *const AtomicU32) };
        Some(kind.load(Ordering::Relaxed) as i32) == expected_kind()
    }

    /// Try to take the mutex without waiting.
    pub fn try_lock(&self) -> Try {
        if !self.well_formed() {
            return Try::Broken;
        }
        // SAFETY: a robust, process-shared mutex (checked above) inside our
        // mapping, which outlives this call.
        self.taken(unsafe { libc::pthread_mutex_trylock(self.raw()) })
    }

    /// Take the mutex, waiting for its holder.
    pub fn lock(&self) -> Try {
        if !self.well_formed() {
            return Try::Broken;
        }
        // SAFETY: as in try_lock. (A blocking lock never returns EBUSY.)
        self.taken(unsafe { libc::pthread_mutex_lock(self.raw()) })
    }

    /// What a lock or trylock of the mutex returning `rc` left us with.
    fn taken(&self, rc: libc::c_int) -> Try {
        match rc {
            0 => Try::Free,
            libc::EBUSY => Try::Held,
            libc::EOWNERDEAD => {
                // The dead owner's state is repaired by our caller (a new
                // generation); the mutex itself is usable again.
                // SAFETY: we hold it (EOWNERDEAD hands it to us).
                unsafe { libc::pthread_mutex_consistent(self.raw()) };
                Try::OwnerDied
            }
            _ => Try::Broken, // ENOTRECOVERABLE, EINVAL: never usable
        }
    }

    /// Give up the mutex.
    ///
    /// # Safety
    /// This thread holds it.
    pub unsafe fn unlock(&self) {
        // SAFETY: the caller's promise.
        unsafe { libc::pthread_mutex_unlock(self.raw()) };
    }
}
