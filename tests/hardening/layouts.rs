//! The layouts come from one table (`math::scheme::layout_table!`): the C
//! API hands it out as it is, and a layout added as a module and a row
//! (the test build's `toy`, src/probe/toy.rs) is a layout of every path —
//! named and numbered, created, added to, asked, serialized, reopened from
//! its file and its bytes, addressed remotely — with no other file touched.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::ptr::{null, null_mut};

use bloomfilter_shared::hooks::ffi::*;
use bloomfilter_shared::{Filter, Layout, Options, Scheme};

fn errbuf() -> [std::ffi::c_char; BFS_ERRBUF_LEN] {
    [0; BFS_ERRBUF_LEN]
}

fn msg(err: &[std::ffi::c_char]) -> String {
    // SAFETY: the library always NUL-terminates what it writes; the buffer
    // starts zeroed.
    unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned()
}

/// The C API's table, as (name, code) in its order.
fn c_table() -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for i in 0.. {
        let (mut name, mut code) = (null(), 0u32);
        // SAFETY: valid out pointers.
        if unsafe { bfs_layout_at(i, &mut name, &mut code) } == 0 {
            assert!(name.is_null() && code == 0, "nothing written past the last");
            break;
        }
        // SAFETY: a static NUL-terminated name.
        out.push((unsafe { CStr::from_ptr(name) }.to_str().unwrap().to_owned(), code));
    }
    out
}

fn options(layout: u32) -> BfsOptions {
    crate::plain_options(layout, 7)
}

#[test]
fn the_c_api_hands_out_the_table() {
    let t = c_table();
    let want = [
        ("standard", BFS_LAYOUT_STANDARD),
        ("blocked", BFS_LAYOUT_BLOCKED),
        ("datasketches", BFS_LAYOUT_DATASKETCHES),
    ];
    assert_eq!(t.len(), Layout::ALL.len());
    for (i, (name, code)) in want.iter().enumerate() {
        assert_eq!(
            (t[i].0.as_str(), t[i].1),
            (*name, *code),
            "the header's constants are the table's"
        );
    }
    for (i, l) in Layout::ALL.iter().enumerate() {
        assert_eq!((t[i].0.as_str(), t[i].1), (l.name(), l.code()));
    }
    // NULL outputs are allowed.
    // SAFETY: NULL is allowed for both.
    unsafe {
        assert_eq!(bfs_layout_at(0, null_mut(), null_mut()), 1);
        assert_eq!(bfs_layout_at(u32::MAX, null_mut(), null_mut()), 0);
    }
}

#[test]
fn a_toy_layout_is_a_module_and_a_row() {
    let toy = Layout::Toy.code();
    assert!(c_table().contains(&("toy".to_owned(), toy)));

    // The crate's API: created, added to, asked; its own bits (not the
    // standard layout's, which it is sized as); serialized and read back.
    let opts = |layout| Options {
        mode: 0o600,
        seed: 7,
        layout: Some(layout),
        ..Options::default()
    };
    let f = Filter::new_anonymous(1000, 0.01, opts(Layout::Toy)).unwrap();
    let s = Filter::new_anonymous(1000, 0.01, opts(Layout::Standard)).unwrap();
    assert_eq!(f.layout(), Layout::Toy);
    assert_eq!(f.geometry().scheme, Scheme::Toy);
    assert_eq!((f.geometry().m, f.geometry().k), (s.geometry().m, s.geometry().k));
    let items: Vec<Vec<u8>> = (0..500u32).map(|i| format!("item-{i}").into_bytes()).collect();
    for it in &items {
        assert!(f.add(it).unwrap(), "a new item in a filter far from full");
        s.add(it).unwrap();
    }
    for it in &items {
        assert!(!f.add(it).unwrap() && f.contains(it));
    }
    let absent = (0..2000u32)
        .filter(|i| f.contains(format!("absent-{i}").as_bytes()))
        .count();
    assert!(
        absent < 100,
        "{absent} of 2000 absent items reported present at 1% expected"
    );
    let bytes = f.serialize().unwrap();
    let bits = 56..56 + (f.geometry().m / 8) as usize;
    assert_ne!(
        bytes[bits.clone()],
        s.serialize().unwrap()[bits.clone()],
        "the toy sets its own bits"
    );
    assert_eq!(u32::from_le_bytes(bytes[12..16].try_into().unwrap()), Scheme::Toy.id());
    let back = Filter::deserialize(&bytes, None, 0o600).unwrap();
    assert_eq!(back.layout(), Layout::Toy);
    assert!(items.iter().all(|it| back.contains(it)));
    assert_eq!(back.serialize().unwrap(), bytes);

    // The C API: a file of it, reopened; its bytes, read back; the layout
    // checked against another's.
    let dir = std::env::temp_dir().join(format!("bfs-layouts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = CString::new(dir.join("toy.bf").as_os_str().as_bytes()).unwrap();
    let mut err = errbuf();
    // SAFETY: valid pointers throughout; every handle freed once.
    unsafe {
        let (mut h, mut again, mut copy) = (null_mut(), null_mut(), null_mut());
        let mut info = std::mem::zeroed::<BfsInfo>();
        let o = options(toy);
        assert_eq!(
            bfs_new(path.as_ptr(), 1000, 0.01, &o, &mut h, err.as_mut_ptr()),
            BFS_OK,
            "{}",
            msg(&err)
        );
        for it in &items {
            let mut new = 9u8;
            assert_eq!(bfs_add(h, it.as_ptr(), it.len(), &mut new, err.as_mut_ptr()), BFS_OK);
            assert_eq!(new, 1);
        }
        bfs_info(h, &mut info);
        assert_eq!(info.layout, toy);
        let mut buf = vec![0u8; bfs_serialized_size(h) as usize];
        assert_eq!(bfs_serialize(h, buf.as_mut_ptr(), buf.len(), err.as_mut_ptr()), BFS_OK);
        assert_eq!(buf, bytes, "the same filter through either API");
        bfs_free(h);

        let default = options(BFS_LAYOUT_DEFAULT);
        assert_eq!(
            bfs_new(path.as_ptr(), 1000, 0.01, &default, &mut again, err.as_mut_ptr()),
            BFS_OK
        );
        bfs_info(again, &mut info);
        assert_eq!(info.layout, toy, "a reopened file keeps its layout");
        assert!(items.iter().all(|it| bfs_contains(again, it.as_ptr(), it.len()) == 1));
        let standard = options(BFS_LAYOUT_STANDARD);
        let mut other = null_mut();
        assert_eq!(
            bfs_new(path.as_ptr(), 1000, 0.01, &standard, &mut other, err.as_mut_ptr()),
            BFS_ERR_MISMATCH
        );
        assert!(other.is_null());
        bfs_free(again);

        assert_eq!(
            bfs_deserialize(buf.as_ptr(), buf.len(), null(), &o, &mut copy, err.as_mut_ptr()),
            BFS_OK
        );
        assert!(items.iter().all(|it| bfs_contains(copy, it.as_ptr(), it.len()) == 1));
        bfs_free(copy);
        assert_eq!(
            bfs_deserialize(buf.as_ptr(), buf.len(), null(), &standard, &mut copy, err.as_mut_ptr()),
            BFS_ERR_MISMATCH
        );
        assert_eq!(bfs_unlink_path(path.as_ptr(), null_mut(), null_mut()), BFS_OK);
    }
    let _ = std::fs::remove_dir(&dir);

    // Remotely: the offsets of its items are the bits its local filter set
    // (the probe places them; offset 0 is the most significant bit of byte
    // 0, where the local array keeps bit 7).
    let name = CString::new("toy").unwrap();
    // SAFETY: valid pointers throughout.
    unsafe {
        let mut g = std::mem::zeroed::<BfsRemoteGeometry>();
        assert_eq!(
            bfs_remote_geometry(name.as_ptr(), 1000, 0.01, &mut g, err.as_mut_ptr()),
            BFS_OK
        );
        assert_eq!((g.bits, g.hashes), (f.geometry().m, f.geometry().k));
        let r = BfsRemote {
            layout: name.as_ptr(),
            seed: 7,
            bits: g.bits,
            hashes: g.hashes,
            span_bits: g.span_bits,
            piece_bits: g.bits,
            stage: 0,
        };
        let slices: Vec<BfsSlice> = items
            .iter()
            .map(|it| BfsSlice {
                ptr: it.as_ptr(),
                len: it.len(),
            })
            .collect();
        let mut off = vec![0u64; items.len() * g.hashes as usize];
        assert_eq!(
            bfs_remote_offsets(
                &r,
                slices.as_ptr(),
                slices.len(),
                off.as_mut_ptr(),
                null_mut(),
                err.as_mut_ptr()
            ),
            BFS_OK,
            "{}",
            msg(&err)
        );
        let bits = &bytes[bits];
        let mut remote = vec![0u8; bits.len()];
        for &o in &off {
            remote[(o / 8) as usize] |= 0x80 >> (o % 8);
        }
        // Bit `i` of the local array is offset `i ^ 7`: the same byte.
        assert_eq!(remote, bits, "the remote copy sets exactly the local bits");
    }
}
