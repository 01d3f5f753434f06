//! The C API as a C caller uses it: NULL where NULL is allowed, NULL where it
//! is not, wrong sizes, and messages that must fit the caller's buffer.
//! (The logic behind each call is tested beside it; this is the boundary.)

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::ptr::{null, null_mut};

use bloomfilter_shared::hooks::ffi::*;

fn errbuf() -> [std::ffi::c_char; BFS_ERRBUF_LEN] {
    [0; BFS_ERRBUF_LEN]
}

fn msg(err: &[std::ffi::c_char]) -> String {
    // SAFETY: the library always NUL-terminates what it writes; the buffer
    // starts zeroed.
    unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned()
}

/// A directory of the test's own (tests run in parallel threads).
fn tmp_dir(test: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("bfs-ffi-{}-{test}", std::process::id()))
}

fn tmp(test: &str, name: &str) -> CString {
    let dir = tmp_dir(test);
    std::fs::create_dir_all(&dir).unwrap();
    CString::new(dir.join(name).as_os_str().as_bytes()).unwrap()
}

/// A new anonymous filter (NULL path, NULL options: mode 0600, seed 0).
fn anon() -> *mut BfsFilter {
    let mut h = null_mut();
    let mut err = errbuf();
    // SAFETY: valid out and err pointers; NULL path and options are allowed.
    let st = unsafe { bfs_new(null(), 1000, 0.01, null(), &mut h, err.as_mut_ptr()) };
    assert_eq!(st, BFS_OK, "{}", msg(&err));
    assert!(!h.is_null());
    h
}

#[test]
fn a_whole_life_through_the_c_api() {
    let h = anon();
    let item = b"alice";
    let mut was_new = 9u8;
    // SAFETY: every pointer below is valid for what it is passed for.
    unsafe {
        assert_eq!(bfs_add(h, item.as_ptr(), item.len(), &mut was_new, null_mut()), BFS_OK);
        assert_eq!(was_new, 1);
        // was_new and err may be NULL.
        assert_eq!(bfs_add(h, item.as_ptr(), item.len(), null_mut(), null_mut()), BFS_OK);
        assert_eq!(bfs_contains(h, item.as_ptr(), item.len()), 1);
        // An empty item may come with a NULL pointer.
        assert_eq!(bfs_add(h, null(), 0, &mut was_new, null_mut()), BFS_OK);
        assert_eq!(bfs_contains(h, null(), 0), 1);

        let items = [
            BfsSlice {
                ptr: b"x".as_ptr(),
                len: 1,
            },
            BfsSlice {
                ptr: b"alice".as_ptr(),
                len: 5,
            },
        ];
        let mut res = [9u8; 2];
        let mut n = 9u64;
        assert_eq!(
            bfs_add_many(h, items.as_ptr(), 2, res.as_mut_ptr(), &mut n, null_mut()),
            BFS_OK
        );
        assert_eq!((res, n), ([1, 0], 1));
        // results and new_count may be NULL; so may items when n is 0.
        assert_eq!(
            bfs_add_many(h, items.as_ptr(), 2, null_mut(), null_mut(), null_mut()),
            BFS_OK
        );
        assert_eq!(bfs_add_many(h, null(), 0, null_mut(), &mut n, null_mut()), BFS_OK);
        assert_eq!(n, 0);
        assert_eq!(bfs_contains_many(h, items.as_ptr(), 2, res.as_mut_ptr()), 2);
        assert_eq!(bfs_contains_many(h, items.as_ptr(), 2, null_mut()), 2);
        assert_eq!(bfs_contains_many(h, null(), 0, null_mut()), 0);

        let mut info: BfsInfo = std::mem::zeroed();
        bfs_info(h, &mut info);
        assert_eq!((info.bits, info.hashes, info.capacity), (16384, 7, 1000));
        assert_eq!((info.memfd, info.frozen, info.readonly), (-1, 0, 0));
        bfs_info(h, null_mut()); // no output: nothing happens
        assert!(bfs_bits_set(h) > 0);
        assert_eq!(bfs_count(h), 3);
        assert!(bfs_ops(h) >= 4);
        assert!(bfs_path(h).is_null(), "an anonymous filter has no path");
        assert_eq!(bfs_sync(h, null_mut()), BFS_OK);

        let size = bfs_serialized_size(h);
        let mut buf = vec![0u8; size as usize];
        let mut err = errbuf();
        assert_eq!(bfs_serialize(h, buf.as_mut_ptr(), buf.len(), err.as_mut_ptr()), BFS_OK);
        assert_eq!(
            bfs_serialize(h, buf.as_mut_ptr(), buf.len() - 1, err.as_mut_ptr()),
            BFS_ERR_ARG
        );
        assert!(msg(&err).contains("wrong size"), "{}", msg(&err));
        assert_eq!(bfs_serialize(h, null_mut(), buf.len(), null_mut()), BFS_ERR_ARG);

        let mut copy = null_mut();
        assert_eq!(
            bfs_deserialize(buf.as_ptr(), buf.len(), null(), null(), &mut copy, err.as_mut_ptr()),
            BFS_OK
        );
        assert_eq!(bfs_is_compatible(h, copy), 1);
        assert_eq!(bfs_contains(copy, item.as_ptr(), item.len()), 1);
        assert_eq!(bfs_merge(h, copy, null_mut()), BFS_OK);
        assert_eq!(bfs_intersect(h, copy, null_mut()), BFS_OK);
        assert_eq!(bfs_invert(copy, null_mut()), BFS_OK);
        assert_eq!(bfs_clear(copy, null_mut()), BFS_OK);
        assert_eq!(bfs_bits_set(copy), 0);
        assert_eq!(bfs_freeze(copy, null_mut()), BFS_OK);
        assert_eq!(bfs_clear(copy, err.as_mut_ptr()), BFS_ERR_FROZEN);
        assert_eq!(bfs_merge(copy, h, err.as_mut_ptr()), BFS_ERR_FROZEN);

        let mut other = null_mut();
        let opts = crate::plain_options(0, 7);
        assert_eq!(bfs_new(null(), 1000, 0.01, &opts, &mut other, null_mut()), BFS_OK);
        assert_eq!(bfs_is_compatible(h, other), 0);
        assert_eq!(bfs_merge(h, other, err.as_mut_ptr()), BFS_ERR_MISMATCH);
        assert!(msg(&err).contains("seed mismatch"), "{}", msg(&err));

        bfs_free(copy);
        bfs_free(other);
        bfs_free(h);
        bfs_free(null_mut()); // NULL is fine
    }
}

#[test]
fn null_handles_are_refused_or_answer_zero() {
    let h = anon();
    let mut err = errbuf();
    let item = b"x";
    let null_h: *mut BfsFilter = null_mut();
    // SAFETY: NULL handles are what is being tested; other pointers are valid.
    unsafe {
        assert_eq!(
            bfs_add(null_h, item.as_ptr(), 1, null_mut(), err.as_mut_ptr()),
            BFS_ERR_ARG
        );
        assert_eq!(msg(&err), "null handle");
        assert_eq!(
            bfs_add_many(null_h, null(), 0, null_mut(), null_mut(), null_mut()),
            BFS_ERR_ARG
        );
        assert_eq!(bfs_contains(null_h, item.as_ptr(), 1), 0);
        assert_eq!(bfs_contains_many(null_h, null(), 0, null_mut()), 0);
        assert_eq!(bfs_merge(null_h, h, null_mut()), BFS_ERR_ARG);
        assert_eq!(bfs_merge(h, null_h, null_mut()), BFS_ERR_ARG);
        assert_eq!(bfs_intersect(h, null_h, null_mut()), BFS_ERR_ARG);
        assert_eq!(bfs_invert(null_h, null_mut()), BFS_ERR_ARG);
        assert_eq!(bfs_clear(null_h, null_mut()), BFS_ERR_ARG);
        assert_eq!(bfs_freeze(null_h, null_mut()), BFS_ERR_ARG);
        assert_eq!(bfs_sync(null_h, null_mut()), BFS_ERR_ARG);
        assert_eq!(bfs_is_compatible(null_h, h), 0);
        assert_eq!(bfs_is_compatible(h, null_h), 0);
        let mut info: BfsInfo = std::mem::zeroed();
        info.bits = 12345;
        bfs_info(null_h, &mut info);
        assert_eq!(info.bits, 12345, "outputs are written only on success");
        assert_eq!(bfs_bits_set(null_h), 0);
        assert_eq!(bfs_count(null_h), 0);
        assert_eq!(bfs_ops(null_h), 0);
        assert!(bfs_path(null_h).is_null());
        assert_eq!(bfs_serialized_size(null_h), 0);
        let mut b = [0u8; 8];
        assert_eq!(bfs_serialize(null_h, b.as_mut_ptr(), 8, null_mut()), BFS_ERR_ARG);
        bfs_free(h);
    }
}

#[test]
fn constructors_refuse_what_they_must() {
    let mut err = errbuf();
    let mut h = null_mut();
    // SAFETY: pointers valid or NULL as each case says.
    unsafe {
        // No place to put the handle.
        assert_eq!(
            bfs_new(null(), 1000, 0.01, null(), null_mut(), err.as_mut_ptr()),
            BFS_ERR_ARG
        );
        assert_eq!(msg(&err), "null output pointer");
        assert_eq!(bfs_new(null(), 0, 0.01, null(), &mut h, err.as_mut_ptr()), BFS_ERR_ARG);
        assert!(h.is_null(), "outputs are written only on success");
        let bad_mode = BfsOptions {
            mode: 0o170000,
            ..crate::plain_options(0, 0)
        };
        let p = tmp("constructors", "mode.bf");
        assert_eq!(
            bfs_new(p.as_ptr(), 10, 0.1, &bad_mode, &mut h, err.as_mut_ptr()),
            BFS_ERR_ARG
        );
        assert!(msg(&err).contains("not a file mode"), "{}", msg(&err));
        let _ = std::fs::remove_dir(tmp_dir("constructors"));
        assert_eq!(bfs_new_readonly(null(), &mut h, err.as_mut_ptr()), BFS_ERR_ARG);
        assert_eq!(msg(&err), "path is required");
        assert_eq!(bfs_unlink_path(null(), null_mut(), err.as_mut_ptr()), BFS_ERR_ARG);
        assert_eq!(bfs_new_from_fd(-1, &mut h, err.as_mut_ptr()), BFS_ERR_IO);
        assert!(msg(&err).contains("dup fd -1"), "{}", msg(&err));
        let garbage = [0u8; 100];
        assert_eq!(
            bfs_deserialize(garbage.as_ptr(), 100, null(), null(), &mut h, err.as_mut_ptr()),
            BFS_ERR_FORMAT
        );
        assert_eq!(
            bfs_deserialize(null(), 0, null(), null(), &mut h, null_mut()),
            BFS_ERR_FORMAT
        );

        // memfd: a NULL name is a default one.
        assert_eq!(
            bfs_new_memfd(null(), 100, 0.01, null(), &mut h, err.as_mut_ptr()),
            BFS_OK
        );
        let mut info: BfsInfo = std::mem::zeroed();
        bfs_info(h, &mut info);
        assert!(info.memfd >= 0);
        bfs_free(h);
        // A name is only a label: any bytes, UTF-8 or not.
        let latin1 = CString::new(vec![b'n', 0xe9]).unwrap();
        assert_eq!(
            bfs_new_memfd(latin1.as_ptr(), 100, 0.01, null(), &mut h, err.as_mut_ptr()),
            BFS_OK
        );
        bfs_free(h);
    }
}

#[test]
fn files_through_the_c_api() {
    let p = tmp("files", "file.bf");
    let _ = std::fs::remove_file(p.to_str().unwrap());
    let mut err = errbuf();
    let mut h = null_mut();
    // SAFETY: valid pointers throughout.
    unsafe {
        assert_eq!(bfs_new(p.as_ptr(), 100, 0.01, null(), &mut h, err.as_mut_ptr()), BFS_OK);
        assert_eq!(CStr::from_ptr(bfs_path(h)), p.as_c_str());
        assert_eq!(bfs_add(h, b"f".as_ptr(), 1, null_mut(), null_mut()), BFS_OK);
        assert_eq!(bfs_sync(h, null_mut()), BFS_OK);
        assert_eq!(bfs_new_readonly(p.as_ptr(), &mut h, err.as_mut_ptr()), BFS_ERR_ARG);
        assert!(msg(&err).contains("not frozen"), "{}", msg(&err));
        assert_eq!(bfs_freeze(h, null_mut()), BFS_OK);
        bfs_free(h);
        assert_eq!(bfs_new_readonly(p.as_ptr(), &mut h, err.as_mut_ptr()), BFS_OK);
        assert_eq!(
            bfs_add(h, b"g".as_ptr(), 1, null_mut(), err.as_mut_ptr()),
            BFS_ERR_READONLY
        );
        assert_eq!(bfs_try_add(h, b"g".as_ptr(), 1), -1);
        assert_eq!(bfs_contains(h, b"g".as_ptr(), 1), 0);
        assert_eq!(bfs_contains(h, b"f".as_ptr(), 1), 1);
        bfs_free(h);

        // deserialize to a new file; an existing path is refused.
        let h = anon();
        let mut buf = vec![0u8; bfs_serialized_size(h) as usize];
        assert_eq!(bfs_serialize(h, buf.as_mut_ptr(), buf.len(), null_mut()), BFS_OK);
        let q = tmp("files", "deser.bf");
        let _ = std::fs::remove_file(q.to_str().unwrap());
        let mut d = null_mut();
        let opts = BfsOptions {
            mode: 0o640,
            ..crate::plain_options(0, 0)
        };
        assert_eq!(
            bfs_deserialize(buf.as_ptr(), buf.len(), q.as_ptr(), &opts, &mut d, err.as_mut_ptr()),
            BFS_OK
        );
        assert_eq!(
            bfs_deserialize(buf.as_ptr(), buf.len(), q.as_ptr(), &opts, &mut d, err.as_mut_ptr()),
            BFS_ERR_ARG
        );
        assert!(msg(&err).contains("file exists"), "{}", msg(&err));
        bfs_free(d);
        bfs_free(h);

        // Idempotent: 1 when a file went, 0 when there was none.
        let mut removed = 7u8;
        assert_eq!(bfs_unlink_path(p.as_ptr(), &mut removed, err.as_mut_ptr()), BFS_OK);
        assert_eq!(removed, 1);
        assert_eq!(bfs_unlink_path(p.as_ptr(), &mut removed, err.as_mut_ptr()), BFS_OK);
        assert_eq!(removed, 0);
        let root = CString::new("/").unwrap();
        assert_eq!(
            bfs_unlink_path(root.as_ptr(), &mut removed, err.as_mut_ptr()),
            BFS_ERR_IO
        );
        assert!(msg(&err).starts_with("unlink /: "), "{}", msg(&err));
        assert_eq!(bfs_unlink_path(q.as_ptr(), null_mut(), null_mut()), BFS_OK);
    }
    let _ = std::fs::remove_dir(tmp_dir("files"));
}

/// A message longer than the buffer is cut on a character boundary and
/// NUL-terminated inside it.
#[test]
fn long_messages_fit_the_buffer() {
    // The message is "create PATH: ...": pad the directory name so that the
    // cut at BFS_ERRBUF_LEN - 1 bytes falls inside a two-byte character.
    let mut dir = format!("/nonexistent-{}", std::process::id());
    if (BFS_ERRBUF_LEN - 1 - "create ".len() - dir.len() - 1) % 2 == 0 {
        dir.push('x');
    }
    let long = format!("{dir}/{}.bf", "é".repeat(400));
    let p = CString::new(long).unwrap();
    let mut err = [0x7f as std::ffi::c_char; BFS_ERRBUF_LEN + 16];
    let mut h = null_mut();
    // SAFETY: err has more than BFS_ERRBUF_LEN bytes; the tail must stay untouched.
    let st = unsafe { bfs_new(p.as_ptr(), 100, 0.01, null(), &mut h, err.as_mut_ptr()) };
    assert_eq!(st, BFS_ERR_IO);
    let m = msg(&err);
    assert!(
        m.len() < BFS_ERRBUF_LEN && m.len() > BFS_ERRBUF_LEN - 8,
        "{} bytes",
        m.len()
    );
    assert!(!m.contains('\u{fffd}'), "cut inside a character");
    assert!(
        err[BFS_ERRBUF_LEN..].iter().all(|&c| c == 0x7f),
        "wrote past the buffer"
    );
}

/// Every process slot taken by a live owner (here: threads of this process,
/// each holding its own): the next writers go through the shared overflow
/// slot, one call at a time, and nothing is refused. Handles of one filter
/// in one thread share a slot, so handles alone never fill the table.
#[test]
fn writers_past_the_slot_table_share_the_overflow_slot() {
    let p = tmp("busy", "busy.bf");
    let _ = std::fs::remove_file(p.to_str().unwrap());
    let mut err = errbuf();
    const THREADS: usize = 1100;
    // SAFETY: valid pointers throughout; every handle is freed once.
    unsafe {
        // One thread, many handles: one slot between them.
        let mut handles = Vec::new();
        for i in 0..THREADS {
            let mut h = null_mut();
            assert_eq!(bfs_new(p.as_ptr(), 100, 0.01, null(), &mut h, err.as_mut_ptr()), BFS_OK);
            let item = format!("handle {i}");
            assert_eq!(
                bfs_add(h, item.as_ptr(), item.len(), null_mut(), err.as_mut_ptr()),
                BFS_OK
            );
            handles.push(h);
        }
        for h in handles {
            bfs_free(h);
        }
    }
    // Many threads, each with a handle that keeps its slot until all wrote.
    let barrier = std::sync::Barrier::new(THREADS + 1);
    std::thread::scope(|s| {
        for i in 0..THREADS {
            let (barrier, p) = (&barrier, &p);
            std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn_scoped(s, move || {
                    let mut err = errbuf();
                    let item = format!("thread {i}");
                    // SAFETY: valid pointers; the handle is freed once.
                    unsafe {
                        let mut h = null_mut();
                        assert_eq!(bfs_new(p.as_ptr(), 100, 0.01, null(), &mut h, err.as_mut_ptr()), BFS_OK);
                        let rc = bfs_add(h, item.as_ptr(), item.len(), null_mut(), err.as_mut_ptr());
                        assert_eq!(rc, BFS_OK, "thread {i}: {}", msg(&err));
                        barrier.wait(); // every thread holds its slot here
                        barrier.wait();
                        bfs_free(h);
                    }
                })
                .unwrap();
        }
        barrier.wait();
        // SAFETY: as above.
        unsafe {
            let mut h = null_mut();
            assert_eq!(bfs_new(p.as_ptr(), 100, 0.01, null(), &mut h, err.as_mut_ptr()), BFS_OK);
            for i in 0..THREADS {
                let item = format!("thread {i}");
                assert_eq!(bfs_contains(h, item.as_ptr(), item.len()), 1, "{item}");
            }
            // The table is full: this thread writes through the overflow slot.
            assert_eq!(bfs_clear(h, err.as_mut_ptr()), BFS_OK, "{}", msg(&err));
            assert_eq!(bfs_contains(h, b"thread 0".as_ptr(), 8), 0);
            bfs_free(h);
        }
        barrier.wait();
    });
    // SAFETY: a valid path.
    unsafe {
        assert_eq!(bfs_unlink_path(p.as_ptr(), null_mut(), null_mut()), BFS_OK);
    }
    let _ = std::fs::remove_dir(tmp_dir("busy"));
}

/// Options of a new plain blocked filter (mode 0600, seed 0).
fn blocked_options() -> BfsOptions {
    crate::plain_options(BFS_LAYOUT_BLOCKED, 0)
}

#[test]
fn layouts_through_the_c_api() {
    let mut err = errbuf();
    let item = b"item";
    // SAFETY: valid pointers throughout; every handle freed once.
    unsafe {
        let (mut b, mut s, mut copy, mut info) = (null_mut(), null_mut(), null_mut(), std::mem::zeroed::<BfsInfo>());
        let blocked = blocked_options();
        assert_eq!(bfs_new(null(), 1000, 0.01, &blocked, &mut b, err.as_mut_ptr()), BFS_OK);
        assert_eq!(bfs_new(null(), 1000, 0.01, null(), &mut s, err.as_mut_ptr()), BFS_OK);
        bfs_info(b, &mut info);
        assert_eq!(info.layout, BFS_LAYOUT_BLOCKED);
        bfs_info(s, &mut info);
        assert_eq!(info.layout, BFS_LAYOUT_STANDARD);
        let mut new = 9u8;
        assert_eq!(
            bfs_add(b, item.as_ptr(), item.len(), &mut new, err.as_mut_ptr()),
            BFS_OK
        );
        assert_eq!(new, 1);
        assert_eq!(bfs_is_compatible(b, s), 0);
        assert_eq!(bfs_merge(s, b, err.as_mut_ptr()), BFS_ERR_MISMATCH);
        assert!(msg(&err).starts_with("layout mismatch"), "{}", msg(&err));

        let mut buf = vec![0u8; bfs_serialized_size(b) as usize];
        assert_eq!(bfs_serialize(b, buf.as_mut_ptr(), buf.len(), err.as_mut_ptr()), BFS_OK);
        let standard = BfsOptions {
            layout: BFS_LAYOUT_STANDARD,
            ..blocked
        };
        assert_eq!(
            bfs_deserialize(buf.as_ptr(), buf.len(), null(), &standard, &mut copy, err.as_mut_ptr()),
            BFS_ERR_MISMATCH
        );
        assert!(copy.is_null(), "outputs are written only on success");
        assert_eq!(
            bfs_deserialize(buf.as_ptr(), buf.len(), null(), &blocked, &mut copy, err.as_mut_ptr()),
            BFS_OK
        );
        assert_eq!(bfs_contains(copy, item.as_ptr(), item.len()), 1);
        assert_eq!(bfs_fpp_for_bits_set(copy, 0), 0.0);

        let bad = BfsOptions { layout: 4, ..blocked };
        let mut h = null_mut();
        assert_eq!(bfs_new(null(), 1000, 0.01, &bad, &mut h, err.as_mut_ptr()), BFS_ERR_ARG);
        assert_eq!(msg(&err), "unknown layout 4");
        assert!(h.is_null());
        bfs_free(copy);
        bfs_free(b);
        bfs_free(s);
    }
}

#[test]
fn windows_through_the_c_api() {
    let mut err = errbuf();
    let item = b"item";
    // SAFETY: valid pointers throughout; every handle freed once.
    unsafe {
        let mut info = std::mem::zeroed::<BfsInfo>();
        let manual = BfsOptions {
            generations: 3,
            ..crate::plain_options(0, 0)
        };
        let mut h = null_mut();
        assert_eq!(bfs_new(null(), 1000, 0.01, &manual, &mut h, err.as_mut_ptr()), BFS_OK);
        bfs_info(h, &mut info);
        assert_eq!(
            (
                info.generations,
                info.window_ns,
                info.generation,
                info.generation_start_ns
            ),
            (3, 0, 0, 0)
        );
        let mut new = 9u8;
        assert_eq!(
            bfs_add(h, item.as_ptr(), item.len(), &mut new, err.as_mut_ptr()),
            BFS_OK
        );
        assert_eq!(new, 1);
        for k in 1..=3u64 {
            assert_eq!(
                bfs_contains(h, item.as_ptr(), item.len()),
                1,
                "after {} rotations",
                k - 1
            );
            assert_eq!(bfs_rotate(h, err.as_mut_ptr()), BFS_OK);
            bfs_info(h, &mut info);
            assert_eq!(info.generation, k);
        }
        assert_eq!(
            bfs_contains(h, item.as_ptr(), item.len()),
            0,
            "forgotten at the 3rd rotation"
        );
        // Windowed bytes: g * (m / 8 + 8) + 88 bytes, back as a windowed
        // filter anonymous or in a memfd, with the same generation.
        assert!(bfs_add(h, b"late".as_ptr(), 4, &mut new, err.as_mut_ptr()) == BFS_OK && new == 1);
        let mut buf = vec![0u8; bfs_serialized_size(h) as usize];
        bfs_info(h, &mut info);
        assert_eq!(buf.len() as u64, 3 * (info.bits / 8 + 8) + 88);
        assert_eq!(bfs_serialize(h, buf.as_mut_ptr(), buf.len(), err.as_mut_ptr()), BFS_OK);
        assert_eq!(
            bfs_serialize(h, buf.as_mut_ptr(), buf.len() - 1, err.as_mut_ptr()),
            BFS_ERR_ARG,
            "a buffer of the wrong size"
        );
        let name = CString::new("copy").unwrap();
        for to_memfd in [false, true] {
            let mut d = null_mut();
            let st = if to_memfd {
                bfs_deserialize_memfd(
                    buf.as_ptr(),
                    buf.len(),
                    name.as_ptr(),
                    &manual,
                    &mut d,
                    err.as_mut_ptr(),
                )
            } else {
                bfs_deserialize(buf.as_ptr(), buf.len(), null(), null(), &mut d, err.as_mut_ptr())
            };
            assert_eq!(st, BFS_OK, "{}", msg(&err));
            let mut di = std::mem::zeroed::<BfsInfo>();
            bfs_info(d, &mut di);
            assert_eq!((di.generations, di.window_ns, di.generation), (3, 0, 3));
            assert_eq!(di.memfd >= 0, to_memfd);
            assert_eq!(bfs_contains(d, b"late".as_ptr(), 4), 1);
            assert_eq!(bfs_contains(d, item.as_ptr(), item.len()), 0);
            bfs_free(d);
        }
        let other = BfsOptions {
            generations: 4,
            ..manual
        };
        let mut d = null_mut();
        assert_eq!(
            bfs_deserialize(buf.as_ptr(), buf.len(), null(), &other, &mut d, err.as_mut_ptr()),
            BFS_ERR_MISMATCH
        );
        assert_eq!(
            msg(&err),
            "window mismatch (the bytes have manual steps, 3 generations, not manual steps, 4 generations)"
        );
        assert!(d.is_null(), "no handle on failure");
        bfs_free(h);

        let timed = BfsOptions { window: 2.0, ..manual };
        let mut t = null_mut();
        assert_eq!(bfs_new(null(), 1000, 0.01, &timed, &mut t, err.as_mut_ptr()), BFS_OK);
        bfs_info(t, &mut info);
        assert_eq!((info.generations, info.window_ns), (3, 2_000_000_000));
        assert!(
            info.generation_start_ns > 1_600_000_000_000_000_000,
            "{}",
            info.generation_start_ns
        );
        // No number of generations: 4 for a new filter.
        let mut d = null_mut();
        let default = BfsOptions {
            generations: BFS_GENERATIONS_DEFAULT,
            ..timed
        };
        assert_eq!(bfs_new(null(), 1000, 0.01, &default, &mut d, err.as_mut_ptr()), BFS_OK);
        bfs_info(d, &mut info);
        // 2 s as given, though the steps use it rounded up to whole ns
        // that divide by g - 1 = 3 (2_000_000_001).
        assert_eq!((info.generations, info.window_ns), (4, 2_000_000_000));
        bfs_free(d);
        let mut plain = null_mut();
        assert_eq!(
            bfs_new(null(), 1000, 0.01, null(), &mut plain, err.as_mut_ptr()),
            BFS_OK
        );
        assert_eq!(bfs_rotate(plain, err.as_mut_ptr()), BFS_ERR_ARG);
        assert_eq!(msg(&err), "rotate needs a windowed filter");
        bfs_info(plain, &mut info);
        assert_eq!((info.generations, info.window_ns), (0, 0));
        bfs_free(t);
        bfs_free(plain);

        for (bad, says) in [
            (
                BfsOptions {
                    generations: u32::MAX,
                    ..timed
                },
                "generations must be an integer from 2 to 16 (got 4294967295)",
            ),
            (
                BfsOptions {
                    generations: 17,
                    ..timed
                },
                "generations must be an integer from 2 to 16 (got 17)",
            ),
            (
                BfsOptions { window: -1.0, ..timed },
                "window must be more than 0 seconds (got -1)",
            ),
            (
                BfsOptions {
                    window: f64::NAN,
                    ..timed
                },
                "window must be a finite number of seconds (got NaN)",
            ),
        ] {
            let mut x = null_mut();
            assert_eq!(bfs_new(null(), 1000, 0.01, &bad, &mut x, err.as_mut_ptr()), BFS_ERR_ARG);
            assert_eq!(msg(&err), says);
            assert!(x.is_null());
        }
        let mut x = null_mut();
        assert_eq!(
            bfs_deserialize(buf.as_ptr(), buf.len(), null(), &timed, &mut x, err.as_mut_ptr()),
            BFS_ERR_MISMATCH
        );
        assert_eq!(
            msg(&err),
            "window mismatch (the bytes have manual steps, 3 generations, not window 2s, 3 generations)"
        );
        assert!(x.is_null());
    }
}

/// `bfs_try_add` answers as `bfs_add` would, for every layout, window or
/// none, a handle's first write included, and -1 (adding nothing) where
/// `bfs_add` fails: a NULL handle, a frozen filter.
#[test]
fn try_add_answers_as_add_does_and_leaves_errors_to_add() {
    let mut err = errbuf();
    let blocked = blocked_options();
    // SAFETY: valid pointers throughout; every handle freed once.
    unsafe {
        let (mut b, mut s, mut w, mut b128) = (null_mut(), null_mut(), null_mut(), null_mut());
        assert_eq!(bfs_new(null(), 1000, 0.01, &blocked, &mut b, err.as_mut_ptr()), BFS_OK);
        assert_eq!(
            bfs_new(null(), 1000, 0.0001, &blocked, &mut b128, err.as_mut_ptr()),
            BFS_OK
        );
        assert_eq!(bfs_new(null(), 1000, 0.01, null(), &mut s, err.as_mut_ptr()), BFS_OK);
        let windowed = BfsOptions {
            generations: 4,
            ..blocked
        };
        assert_eq!(bfs_new(null(), 1000, 0.01, &windowed, &mut w, err.as_mut_ptr()), BFS_OK);
        for h in [b, b128, s, w] {
            for i in 0..200u32 {
                let item = format!("item {i}");
                assert_eq!(bfs_try_add(h, item.as_ptr(), item.len()), 1, "{item} is new");
                assert_eq!(bfs_try_add(h, item.as_ptr(), item.len()), 0, "{item} is present");
                let mut new = 9u8;
                assert_eq!(bfs_add(h, item.as_ptr(), item.len(), &mut new, null_mut()), BFS_OK);
                assert_eq!(new, 0, "{item} as bfs_add sees it");
            }
            assert_eq!(bfs_ops(h), 3 * 200, "each call counted once");
        }
        assert_eq!(bfs_try_add(null_mut(), b"a".as_ptr(), 1), -1);
        // Frozen: -1, nothing added; bfs_add gives the error.
        for h in [b, w] {
            assert_eq!(bfs_freeze(h, null_mut()), BFS_OK);
            let ops = bfs_ops(h);
            assert_eq!(bfs_try_add(h, b"after".as_ptr(), 5), -1);
            assert_eq!(bfs_contains(h, b"after".as_ptr(), 5), 0, "-1 added nothing");
            assert_eq!(bfs_try_add(h, b"item 1".as_ptr(), 6), -1, "not even for a present item");
            assert_eq!(
                bfs_add(h, b"after".as_ptr(), 5, null_mut(), err.as_mut_ptr()),
                BFS_ERR_FROZEN
            );
            assert_eq!(bfs_ops(h), ops, "a refused call is not counted");
        }
        for h in [b, b128, s, w] {
            bfs_free(h);
        }
    }
}
