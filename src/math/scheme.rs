//! The layouts: what a user asks for (`Layout`) and what a header stores
//! (`Scheme`, the "hash scheme" field), each layout one row of
//! `layout_table!` with every fact the crate and the C API need of it: its
//! name, its C API code (`BFS_LAYOUT_*`), its sizing, its module in `probe`
//! and its schemes (each with its stored id, block width, shape check and
//! probe type). The enums, their names and numbers (here), a geometry's
//! sizing and checks (`geometry`), `Probing` and `with_probe!` (`probe`) are
//! all made from the table, so a layout is its probe module and its row.
//! Pure.

/// The layouts, one row each, the default first. Calls `$then!` with
/// `$args` and the rows; a row is
///
/// ```text
/// when X, Layout "name" code C sizing F, mod M {
///     Scheme = ID, block B, shape S, probe P, doc "...";   // one or more
/// }
/// ```
///
/// `Layout` and `Scheme` name the variants; "name" is what users write (the
/// `layout` option, `--layout`, the C API's `bfs_layout_at`); `C` the C
/// API's code (a `BFS_LAYOUT_*` constant, never reused); `F` the sizing,
/// a `fn(capacity, fp_rate) -> Result<Geometry, GeometryError>` (a path or
/// a closure) in `math::geometry`'s scope; `M` the module of `probe` that holds the probe types
/// (declared from here); `ID` the number stored in headers and serialized
/// bytes (never reused); `B` the bits of a block that holds all of an
/// item's bits, 0 for k probes over the whole array (the estimators and the
/// remote span follow from it); `S` the stored geometry's shape check,
/// `fn(&Geometry) -> bool` in scope in `math::geometry`; `P` the `Probe`
/// type in `M`. `when X` builds the row where `#[cfg(X)]` holds (`all()`:
/// always), and so everything made of it.
macro_rules! layout_table {
    ($($then:ident)::+ ! $args:tt) => {
        $($then)::+! { $args
            when all(), Standard "standard" code 1 sizing Geometry::for_capacity, mod standard {
                Standard = 1, block 0, shape spread_shape, probe Standard,
                    doc "`bloom.h`'s layout (scheme 1).";
            }
            when all(), Blocked "blocked" code 2 sizing blocked_geometry, mod blocked {
                Word64 = 2, block 64, shape block_shape, probe Word64,
                    doc "Blocked, one 64-bit word per item (scheme 2).";
                Block128 = 3, block 128, shape block_shape, probe Block128,
                    doc "Blocked, one 128-bit block per item (scheme 3).";
            }
            when all(), DataSketches "datasketches" code 3 sizing Geometry::datasketches, mod datasketches {
                DataSketches = 4, block 0, shape datasketches_shape, probe DataSketches,
                    doc "Apache DataSketches' Bloom filter (scheme 4; `math::datasketches`).";
            }
            // A layout the crate's tests add to show that a row and a module
            // are all a layout takes (probe/toy.rs): in test builds only.
            when feature = "test-hooks", Toy "toy" code 250
                sizing |c, r| Geometry::for_capacity(c, r).map(|g| Geometry { scheme: Scheme::Toy, ..g }), mod toy {
                Toy = 250, block 0, shape spread_shape, probe Toy,
                    doc "A layout of the tests only (probe/toy.rs).";
            }
        }
    };
}
pub(crate) use layout_table;

/// The enums and their numbers, from the table.
macro_rules! layout_enums {
    (
        ()
        $(
            when $when:meta, $layout:ident $name:literal code $code:literal sizing $sizing:expr, mod $module:ident {
                $($scheme:ident = $id:literal, block $block:literal, shape $shape:ident, probe $probe:ident,
                    doc $doc:literal;)+
            }
        )+
    ) => {
        /// How a filter's bits are laid out; stored in the header's and the
        /// serialized bytes' "hash scheme" field.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Scheme {
            $($(
                #[cfg($when)]
                #[doc = $doc]
                $scheme,
            )+)+
        }

        /// The layout a user asks for: the blocked layout's width is chosen by
        /// sizing.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Layout {
            $(#[cfg($when)] $layout,)+
        }

        impl Layout {
            /// Every layout of this build, the default first.
            pub const ALL: &'static [Layout] = &[$(#[cfg($when)] Layout::$layout,)+];

            pub fn name(self) -> &'static str {
                match self {
                    $(#[cfg($when)] Layout::$layout => $name,)+
                }
            }

            /// `name`, NUL-terminated (for the C API).
            pub fn name_nul(self) -> &'static str {
                match self {
                    $(#[cfg($when)] Layout::$layout => concat!($name, "\0"),)+
                }
            }

            pub fn from_name(s: &str) -> Option<Layout> {
                Layout::ALL.iter().copied().find(|l| l.name() == s)
            }

            /// The C API's code (`BFS_LAYOUT_*`).
            pub const fn code(self) -> u32 {
                match self {
                    $(#[cfg($when)] Layout::$layout => $code,)+
                }
            }

            pub fn from_code(code: u32) -> Option<Layout> {
                Layout::ALL.iter().copied().find(|l| l.code() == code)
            }

            /// The schemes a filter of this layout may store.
            pub fn schemes(self) -> &'static [Scheme] {
                match self {
                    $(#[cfg($when)] Layout::$layout => &[$(Scheme::$scheme),+],)+
                }
            }
        }

        impl Scheme {
            /// The number stored in headers and serialized bytes.
            pub fn id(self) -> u32 {
                match self {
                    $($(#[cfg($when)] Scheme::$scheme => $id,)+)+
                }
            }

            pub fn from_id(id: u32) -> Option<Scheme> {
                match id {
                    $($(#[cfg($when)] $id => Some(Scheme::$scheme),)+)+
                    _ => None,
                }
            }

            pub fn layout(self) -> Layout {
                match self {
                    $($(#[cfg($when)] Scheme::$scheme => Layout::$layout,)+)+
                }
            }

            /// Bits per block: all of an item's bits are in one aligned
            /// block of this many; 0 for a layout whose k probes fall over
            /// the whole array (standard, DataSketches).
            pub fn block_bits(self) -> u64 {
                match self {
                    $($(#[cfg($when)] Scheme::$scheme => $block,)+)+
                }
            }
        }
    };
}
layout_table!(layout_enums!());

/// Every layout's name, comma-separated, in the table's order: what a
/// message about an unknown layout lists.
pub fn layout_names() -> String {
    Layout::ALL.iter().map(|l| l.name()).collect::<Vec<_>>().join(", ")
}

/// Most bits per item in a blocked layout (one multiplier each).
pub const BLOCKED_MAX_K: u32 = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheme_ids_round_trip() {
        for s in [Scheme::Standard, Scheme::Word64, Scheme::Block128, Scheme::DataSketches] {
            assert_eq!(Scheme::from_id(s.id()), Some(s));
        }
        for id in [0, 5, 9, u32::MAX] {
            assert_eq!(Scheme::from_id(id), None);
        }
        assert_eq!(Scheme::Word64.layout().name(), "blocked");
        assert_eq!(Scheme::Block128.layout(), Layout::Blocked);
        assert_eq!(Layout::from_name("standard"), Some(Layout::Standard));
        assert_eq!(Layout::from_name("Blocked"), None);
        assert_eq!(Layout::from_name("datasketches"), Some(Layout::DataSketches));
        assert_eq!(Scheme::DataSketches.layout().name(), "datasketches");
    }

    /// The table's numbers are each one layout's: names, codes and ids
    /// never shared, every scheme of a layout leading back to it, the
    /// default first.
    #[test]
    fn the_table_names_and_numbers_each_layout_once() {
        assert_eq!(Layout::ALL[0], Layout::Standard);
        let mut names = std::collections::HashSet::new();
        let mut codes = std::collections::HashSet::new();
        let mut ids = std::collections::HashSet::new();
        for &l in Layout::ALL {
            assert!(names.insert(l.name()), "{l:?}");
            assert!(codes.insert(l.code()) && l.code() != 0, "{l:?}");
            assert_eq!(Layout::from_name(l.name()), Some(l));
            assert_eq!(Layout::from_code(l.code()), Some(l));
            assert_eq!(l.name_nul(), format!("{}\0", l.name()));
            for &s in l.schemes() {
                assert!(ids.insert(s.id()), "{s:?}");
                assert_eq!(s.layout(), l);
            }
        }
        assert_eq!(Layout::from_code(0), None);
        assert_eq!(layout_names().split(", ").count(), Layout::ALL.len());
    }
}
