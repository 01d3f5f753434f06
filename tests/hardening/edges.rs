//! Edges of the Rust API that the Perl layer never reaches (it checks the
//! same things first) or reaches only through files: refusals that name what
//! is wrong, descriptors of every access mode, large filters, messages.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use bloomfilter_shared::hooks::{format, region};
use bloomfilter_shared::{Error, ErrorKind, Filter, Geometry, GeometryError, Options};

/// A directory of the test's own (tests run in parallel threads).
fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("bfs-edges-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn opts() -> Options {
    Options {
        mode: 0o600,
        seed: 0,
        layout: None,
        window: None,
        size: None,
        grow: None,
    }
}

#[test]
fn messages_say_what_is_wrong() {
    let e = Error::io("open x", std::io::Error::from_raw_os_error(libc::ENOENT));
    assert_eq!(e.to_string(), "open x: No such file or directory (os error 2)");
    assert_eq!(e.kind, ErrorKind::Io);
    for (g, want) in [
        (GeometryError::Capacity, "capacity"),
        (GeometryError::FpRate, "fp_rate"),
        (GeometryError::TooLarge, "2^38"),
    ] {
        assert!(g.to_string().contains(want), "{g}");
    }
    let g = Geometry::for_capacity(1000, 0.01).unwrap();
    assert_eq!(g.bytes(), 2048);
}

#[test]
fn bad_modes_and_paths_are_refused() {
    let e = Filter::open_file(
        dir("modes").join("m.bf"),
        10,
        0.1,
        Options {
            mode: 0o10000,
            seed: 0,
            layout: None,
            window: None,
            size: None,
            grow: None,
        },
    )
    .err()
    .unwrap();
    assert_eq!(e.kind, ErrorKind::Arg);
    assert!(e.msg.contains("not a file mode"), "{}", e.msg);
    assert_eq!(
        Filter::open_file("", 10, 0.1, opts()).err().unwrap().msg,
        "path is empty"
    );
    let bytes = Filter::new_anonymous(10, 0.1, opts()).unwrap().serialize().unwrap();
    let e = Filter::deserialize(&bytes, None, 0o10000).err().unwrap();
    assert!(e.msg.contains("not a file mode"), "{}", e.msg);
    let e = Filter::deserialize(&bytes, Some(Path::new("")), 0o600).err().unwrap();
    assert_eq!(e.msg, "path is empty");
    let e = Filter::open_file("a\0b", 10, 0.1, opts()).err().unwrap();
    assert!(e.msg.contains("NUL"), "{}", e.msg);
    // memfd names are limited by the kernel (249 bytes): a longer label is cut.
    let f = Filter::new_memfd("n".repeat(300), 10, 0.1, opts()).unwrap();
    let link = std::fs::read_link(format!("/proc/self/fd/{}", f.memfd())).unwrap();
    assert_eq!(link.to_str().unwrap(), format!("/memfd:{} (deleted)", "n".repeat(249)));
    let _ = std::fs::remove_dir_all(dir("modes"));
}

#[test]
fn symlinks_are_refused_by_rust_callers_too() {
    let d = dir("symlinks");
    let target = d.join("target.bf");
    Filter::open_file(&target, 100, 0.01, opts()).unwrap();
    let link = d.join("link.bf");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let e = Filter::open_file(&link, 100, 0.01, opts()).err().unwrap();
    assert!(e.msg.contains("symbolic link"), "{}", e.msg);
    let e = Filter::open_readonly(&link).err().unwrap();
    assert!(e.msg.contains("symbolic link"), "{}", e.msg);
    let e = Filter::open_readonly(d.join("missing.bf")).err().unwrap();
    assert!(e.msg.contains("No such file"), "{}", e.msg);
    let _ = std::fs::remove_dir_all(d);
}

/// Descriptors: read-write of a live filter is writable; read-only of a
/// live filter gives a query-only handle that sees later adds; any
/// descriptor of a frozen filter gives a read-only handle.
#[test]
fn descriptors_of_every_access_mode() {
    let p = dir("fds").join("fd.bf");
    let _ = std::fs::remove_file(&p);
    let f = Filter::open_file(&p, 100, 0.01, opts()).unwrap();
    f.add(b"a").unwrap();
    let ro = std::fs::File::open(&p).unwrap();
    let q = Filter::from_fd(ro.as_raw_fd()).unwrap();
    assert!(q.readonly() && !q.frozen() && q.contains(b"a"));
    assert_eq!(q.add(b"q").unwrap_err().kind, ErrorKind::ReadOnly);
    assert!(!f.contains(b"q"));
    f.add(b"later").unwrap();
    assert!(
        q.contains(b"later"),
        "a read-only handle of a live filter sees later adds"
    );
    let rw = std::fs::OpenOptions::new().read(true).write(true).open(&p).unwrap();
    let g = Filter::from_fd(rw.as_raw_fd()).unwrap();
    assert!(!g.readonly() && g.contains(b"a"));
    g.sync().unwrap();
    f.freeze().unwrap();
    for file in [&ro, &rw] {
        let h = Filter::from_fd(file.as_raw_fd()).unwrap();
        assert!(h.readonly() && h.frozen() && h.contains(b"a"));
        assert_eq!(h.add(b"b").unwrap_err().kind, ErrorKind::ReadOnly);
        assert!(h.path().is_none());
    }
    let r = Filter::open_readonly(&p).unwrap();
    assert!(r.readonly() && r.contains(b"a"));
    assert_eq!(r.estimated_fpp(), f.estimated_fpp());
    assert!(r.estimated_fpp() > 0.0 && r.estimated_fpp() < 1e-9);
    let _ = std::fs::remove_dir_all(dir("fds"));
}

/// A filter whose bit array starts on a 2 MiB boundary (and is offered to
/// transparent huge pages).
#[test]
fn large_filters_are_laid_out_for_huge_pages() {
    let f = Filter::new_anonymous(3_000_000, 0.01, opts()).unwrap();
    assert_eq!(f.geometry().m, 1 << 25);
    let l = format::layout(f.geometry().m);
    assert_eq!(l.bits_off, format::HUGE_PAGE);
    assert_eq!(f.mmap_size(), l.total);
    assert!(f.add(b"big").unwrap() && f.contains(b"big"));
    let r = region::create_anonymous(&region::new_header(f.geometry(), 0)).unwrap();
    assert_eq!((r.len() as u64, r.is_empty()), (l.total, false));
    assert_eq!(r.memfd(), -1);
}

#[test]
fn unlink_reports_what_failed() {
    // Nothing to remove is not an error; a real failure is.
    assert_eq!(region::unlink(b"/nonexistent-dir/x.bf"), Ok(false));
    let e = region::unlink(b"/").err().unwrap();
    assert!(e.msg.starts_with("unlink /: "), "{}", e.msg);
}
