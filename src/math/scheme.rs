//! The layouts by name: what a user asks for (`Layout`) and what a header
//! stores (`Scheme`, the "hash scheme" field), with their numbers and block
//! widths. Pure.

/// How a filter's bits are laid out; stored in the header's and the
/// serialized bytes' "hash scheme" field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// `bloom.h`'s layout (scheme 1).
    Standard,
    /// Blocked, one 64-bit word per item (scheme 2).
    Word64,
    /// Blocked, one 128-bit block per item (scheme 3).
    Block128,
    /// Apache DataSketches' Bloom filter (scheme 4; `math::datasketches`).
    DataSketches,
}

/// The layout a user asks for: the blocked layout's width is chosen by
/// sizing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Standard,
    Blocked,
    DataSketches,
}

impl Layout {
    pub fn name(self) -> &'static str {
        match self {
            Layout::Standard => "standard",
            Layout::Blocked => "blocked",
            Layout::DataSketches => "datasketches",
        }
    }

    pub fn from_name(s: &str) -> Option<Layout> {
        match s {
            "standard" => Some(Layout::Standard),
            "blocked" => Some(Layout::Blocked),
            "datasketches" => Some(Layout::DataSketches),
            _ => None,
        }
    }
}

impl Scheme {
    /// The number stored in headers and serialized bytes.
    pub fn id(self) -> u32 {
        match self {
            Scheme::Standard => 1,
            Scheme::Word64 => 2,
            Scheme::Block128 => 3,
            Scheme::DataSketches => 4,
        }
    }

    pub fn from_id(id: u32) -> Option<Scheme> {
        match id {
            1 => Some(Scheme::Standard),
            2 => Some(Scheme::Word64),
            3 => Some(Scheme::Block128),
            4 => Some(Scheme::DataSketches),
            _ => None,
        }
    }

    pub fn layout(self) -> Layout {
        match self {
            Scheme::Standard => Layout::Standard,
            Scheme::DataSketches => Layout::DataSketches,
            _ => Layout::Blocked,
        }
    }

    /// Bits per block (0 for the standard and DataSketches layouts, which
    /// have none).
    pub fn block_bits(self) -> u64 {
        match self {
            Scheme::Standard | Scheme::DataSketches => 0,
            Scheme::Word64 => 64,
            Scheme::Block128 => 128,
        }
    }
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
}
