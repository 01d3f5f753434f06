//! What a filter is and holds: its geometry, seed, state and counts.

use super::*;

impl Filter {
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    /// Whether nothing can change the filter through this handle: a
    /// read-only mapping, or a frozen filter (the freezing handle too).
    pub fn readonly(&self) -> bool {
        self.region.readonly || self.region.frozen()
    }
    pub fn frozen(&self) -> bool {
        self.region.frozen()
    }
    pub fn memfd(&self) -> i32 {
        self.region.memfd()
    }
    /// The bytes the filter maps: its mapping, and a grown filter's later
    /// stages as published (§6 grown filters).
    pub fn mmap_size(&self) -> u64 {
        self.region.len() as u64 + self.later_stage_bytes()
    }
    pub fn path(&self) -> Option<&std::ffi::CStr> {
        self.region.path()
    }
    pub fn sync(&self) -> Result<()> {
        self.sync_stages()?;
        self.region.sync()
    }

    /// Number of set bits (loads only); of the current generation for a
    /// windowed filter, as the clock has it: 0 once a step is due, though
    /// no write has taken it yet (the step would make a clean generation
    /// current).
    pub fn bits_set(&self) -> u64 {
        match &self.kind {
            Kind::Plain => bits_in(self.words_slice()),
            Kind::Windowed(win) => self.window_bits_set(win),
            Kind::Grown(s) => self.grown_bits_set(s),
        }
    }

    /// Whether `contains` is false for every item: no bit set; for a
    /// windowed filter, none in a generation visible now (those the clock
    /// expired count as empty, written over or not).
    pub fn is_empty(&self) -> bool {
        match &self.kind {
            Kind::Windowed(win) => self.window_is_empty(win),
            Kind::Plain | Kind::Grown(_) => self.bits_set() == 0,
        }
    }

    /// Estimated number of distinct items added.
    pub fn count(&self) -> u64 {
        match &self.kind {
            Kind::Grown(s) => self.grown_count(s),
            Kind::Plain | Kind::Windowed(_) => self.geometry.count_from_bits_set(self.bits_set()),
        }
    }

    /// The chance a random absent item is reported present now.
    pub fn estimated_fpp(&self) -> f64 {
        match &self.kind {
            Kind::Grown(s) => self.grown_fpp(s),
            Kind::Plain | Kind::Windowed(_) => self.geometry.fpp_from_bits_set(self.bits_set()),
        }
    }

    /// The chance a random absent item is reported present with `set` bits
    /// set (an answer of `bits_set`); a grown filter's depends on how its
    /// bits fall in its stages, so it is `estimated_fpp`, whatever `set`.
    pub fn fpp_from_bits_set(&self, set: u64) -> f64 {
        match &self.kind {
            Kind::Grown(s) => self.grown_fpp(s),
            Kind::Plain | Kind::Windowed(_) => self.geometry.fpp_from_bits_set(set),
        }
    }

    /// The layout the filter was created with.
    pub fn layout(&self) -> Layout {
        self.geometry.layout()
    }

    /// Write calls (add, add_many, merge, intersect, invert, clear, freeze)
    /// over all processes.
    pub fn ops(&self) -> u64 {
        self.shared().total_ops()
    }

    /// Visit the bit words in order (serialization).
    pub fn for_each_word(&self, mut f: impl FnMut(u64)) {
        for w in self.words_slice() {
            f(w.load(Ordering::Relaxed));
        }
    }
}
