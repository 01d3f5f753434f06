//! A filter as bytes and back: its portable bytes (`shm::serial`), and a
//! new filter from them or from a remote copy's bit array.

use crate::error::{Error, ErrorKind, Result};
use crate::filter::{Filter, GrowOptions, Kind, Target, WindowOptions};
use crate::math::geometry::Geometry;
use crate::math::scheme::{Layout, Scheme};
use crate::math::window::Window;
use crate::probe::cas128_available;
use crate::shm::{format, region, serial};
use crate::sys::clock::now_ns;
use crate::sys::memory::human;

/// A filter made from bytes may need at most this many times their length
/// in memory, unless the caller says otherwise (`max_bytes`)...
pub const CEILING_FACTOR: u64 = 64;
/// ... and at least this much: an empty DataSketches image declares its
/// size in 24 bytes, and a small filter's control area alone is larger
/// than its bytes.
pub const CEILING_FLOOR: u64 = 16 << 20;

/// The most memory a filter made from `input` bytes may need: `max_bytes`
/// when given (lower or higher), else `CEILING_FACTOR` times the input,
/// at least `CEILING_FLOOR` (doc/DESIGN.md, §5 Ceiling).
pub fn ceiling(input: usize, max_bytes: Option<u64>) -> u64 {
    max_bytes.unwrap_or_else(|| (input as u64).saturating_mul(CEILING_FACTOR).max(CEILING_FLOOR))
}

/// Refuse bytes whose filter needs more than `ceiling` allows, before
/// anything is allocated; the message names both figures.
pub(crate) fn within_ceiling(need: u64, input: usize, max_bytes: Option<u64>) -> Result<()> {
    let most = ceiling(input, max_bytes);
    if need <= most {
        return Ok(());
    }
    let asked = format!("the bytes ask for a filter of {need} bytes ({})", human(need));
    let msg = match max_bytes {
        Some(_) => format!("{asked}, more than max_bytes allows ({most} bytes); nothing was created"),
        None => format!(
            "{asked}, more than the {most} bytes ({}) that {input} bytes of input may ask for \
             ({CEILING_FACTOR} times their length, at least {}): pass max_bytes to allow more; \
             nothing was created",
            human(most),
            human(CEILING_FLOOR)
        ),
    };
    Err(Error::new(ErrorKind::Arg, msg))
}

impl Filter {
    /// The length of the filter's portable bytes: `serial::serialized_len`,
    /// or `serial::windowed_len` for a windowed filter.
    pub fn serialized_size(&self) -> u64 {
        let m = self.geometry.m;
        match &self.kind {
            Kind::Plain => serial::serialized_len(m),
            Kind::Windowed(win) => serial::windowed_len(m, win.w.generations()),
            Kind::Grown(s) => self.grown_serialized_size(s, self.stages()),
        }
    }

    /// The filter's portable bytes (see `serial`). Fails only for a
    /// windowed filter that keeps stepping while it is copied (see
    /// `copy_window`).
    pub fn serialize(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.serialized_size() as usize];
        self.serialize_into(&mut out)?;
        Ok(out)
    }

    /// Write the portable bytes into `out`, exactly `serialized_size`
    /// bytes long.
    pub fn serialize_into(&self, out: &mut [u8]) -> Result<()> {
        match &self.kind {
            Kind::Grown(s) => self.grown_serialize_into(s, out),
            _ if out.len() as u64 != self.serialized_size() => Err(Error::arg("serialize buffer has the wrong size")),
            Kind::Plain => {
                serial::write(&self.geometry, self.seed, |f| self.for_each_word(f), out);
                Ok(())
            }
            Kind::Windowed(win) => self.window_serialize_into(win, out),
        }
    }

    /// A new filter from portable bytes: anonymous, or a new file at `path`
    /// (created with `mode`; an existing path is refused).
    pub fn deserialize(bytes: &[u8], path: Option<&std::path::Path>, mode: u32) -> Result<Filter> {
        Filter::deserialize_as(bytes, path, mode, None)
    }

    /// `deserialize`, refusing bytes of another layout than `layout` (when
    /// given) with a "layout mismatch" error.
    pub fn deserialize_as(
        bytes: &[u8],
        path: Option<&std::path::Path>,
        mode: u32,
        layout: Option<Layout>,
    ) -> Result<Filter> {
        if mode & !0o7777 != 0 {
            return Err(Error::arg(format!("mode {mode:#o} is not a file mode")));
        }
        let to = match path {
            Some(p) => Target::File(p, mode),
            None => Target::Anonymous,
        };
        Filter::deserialize_to(bytes, to, layout, None)
    }

    /// A new filter from portable bytes at `to`. An explicit `layout` or
    /// `window` that differs from the bytes' is refused ("layout mismatch",
    /// "window mismatch"). Windowed bytes give a windowed filter with the
    /// same window, epoch, generations, current start and `last` words, so
    /// that its items are seen and forgotten at the same instants as on
    /// the source. Plain bytes with a `window` give a new windowed filter
    /// (epoch now) whose current generation holds their bits, added now.
    pub fn deserialize_to(
        bytes: &[u8],
        to: Target<'_>,
        layout: Option<Layout>,
        window: Option<WindowOptions>,
    ) -> Result<Filter> {
        Filter::deserialize_limited(bytes, to, layout, window, None)
    }

    /// `deserialize_to`, the filter's memory at most `max_bytes` (None:
    /// the default ceiling, `ceiling`).
    pub fn deserialize_limited(
        bytes: &[u8],
        to: Target<'_>,
        layout: Option<Layout>,
        window: Option<WindowOptions>,
        max_bytes: Option<u64>,
    ) -> Result<Filter> {
        let img = serial::parse(bytes).map_err(|e| Error::format(e.to_string()))?;
        if img.grown.is_some() && window.is_some() {
            return Err(Error::arg(
                "grow and window do not go together: the bytes are of a filter that grows",
            ));
        }
        if let Some(l) = layout {
            if l != img.geometry.layout() {
                return Err(Error::new(
                    ErrorKind::Mismatch,
                    format!(
                        "layout mismatch (the bytes are of a {} filter, not {})",
                        img.geometry.layout().name(),
                        l.name()
                    ),
                ));
            }
        }
        let asked = match window {
            None => None,
            Some(wo) => {
                // Generations not given: the bytes' own, or the default.
                let g = img
                    .window
                    .as_ref()
                    .map_or(Window::DEFAULT_GENERATIONS, |st| st.window.generations());
                Some(Window::new(wo.window_ns, wo.generations_or(g), 0).map_err(Error::arg)?)
            }
        };
        if let (Some(st), Some(a)) = (&img.window, asked) {
            if st.window.generations() != a.generations() || st.window.window_ns() != a.window_ns() {
                return Err(Error::new(
                    ErrorKind::Mismatch,
                    format!("window mismatch (the bytes have {}, not {a})", st.window),
                ));
            }
        }
        if img.geometry.scheme == Scheme::Block128 && !cas128_available() {
            return Err(Error::format(
                "the bytes' 128-bit blocks need a 16-byte compare-and-swap, which this machine lacks",
            ));
        }
        if let Target::File(_, mode) = to {
            if mode & !0o7777 != 0 {
                return Err(Error::arg(format!("mode {mode:#o} is not a file mode")));
            }
        }
        let mut h = region::new_header(img.geometry, img.seed);
        if let Some(st) = &img.grown {
            h.growth = Some(st.growth);
            // Every stage carried is reserved: up to the end of the last.
            let need = format::stage_ranges(&h, st.fills.len() as u32)
                .and_then(|r| r.last().map(|&(off, len)| off.saturating_add(len)))
                .unwrap_or(u64::MAX);
            within_ceiling(need, bytes.len(), max_bytes)?;
            return Filter::with_grown(h, to, &img);
        }
        let state = match (&img.window, asked) {
            (Some(st), _) => Some(st.clone()),
            (None, None) => None,
            (None, Some(a)) => {
                // A window starting now, its current generation holding
                // the bits as if they were added now: seen for a window.
                let w = Window::new(a.window_ns(), a.generations(), now_ns()).map_err(Error::arg)?;
                let mut last = vec![0; w.generations() as usize];
                last[0] = Window::raised_last(0, 0);
                Some(serial::WindowState {
                    window: w,
                    current: 0,
                    last,
                })
            }
        };
        h.window = state.as_ref().map(|st| st.window);
        within_ceiling(h.layout().total, bytes.len(), max_bytes)?;
        Filter::with_state(h, to, state.as_ref(), &|put| {
            for (i, w) in img.words().enumerate() {
                put(i, w);
            }
        })
    }

    /// Refuse an explicit growth that differs from the bytes' (checked
    /// before anything is made): `want` must be the growth they carry.
    pub fn check_bytes_growth(bytes: &[u8], want: Option<GrowOptions>) -> Result<()> {
        let Some(go) = want else { return Ok(()) };
        let Ok(img) = serial::parse(bytes) else {
            return Ok(()); // bad bytes: deserialize says why
        };
        let have = img.grown.map(|st| st.growth);
        if go.matches(have) {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::Mismatch,
            format!(
                "growth mismatch (the bytes are of a filter that {}, not one that grows by {})",
                have.map_or_else(|| "does not grow".to_string(), |g| format!("grows by {}", g.factor())),
                go.factor
            ),
        ))
    }

    /// A new local filter (anonymous, or a new file at `path`) whose bit
    /// array is `bits`, the byte string a remote copy holds: `m / 8` bytes in
    /// the local byte order (which is also the remote one, see the module
    /// documentation).
    pub fn from_bit_bytes(
        capacity: u64,
        fp_rate: f64,
        seed: u64,
        layout: Layout,
        bits: &[u8],
        path: Option<&std::path::Path>,
        mode: u32,
    ) -> Result<Filter> {
        let g = Geometry::for_layout(capacity, fp_rate, layout).map_err(|e| Error::arg(e.to_string()))?;
        if bits.len() as u64 != g.m / 8 {
            return Err(Error::format(format!(
                "{} bytes of bits for a filter of {} bits (need {})",
                bits.len(),
                g.m,
                g.m / 8
            )));
        }
        if mode & !0o7777 != 0 {
            return Err(Error::arg(format!("mode {mode:#o} is not a file mode")));
        }
        let h = region::new_header(g, seed);
        Filter::with_bits(h, path, mode, &|put| {
            for (i, w) in bits.chunks_exact(8).enumerate() {
                put(i, u64::from_le_bytes(w.try_into().expect("chunks of 8")));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::Options;
    use crate::math::rng::xorshift;

    /// Property: for random item sets, geometries and seeds,
    /// `deserialize(serialize(f))` is a filter with the same geometry, seed
    /// and bits, which finds every item and serializes to the same bytes; the
    /// bytes do not depend on the order the items were added in.
    #[test]
    fn round_trip_of_random_filters() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let rates = [0.5, 0.3, 0.1, 0.01, 0.001];
        for round in 0..120 {
            let capacity = 1 + next() % 3000;
            let rate = rates[(next() % rates.len() as u64) as usize];
            let seed = match round % 4 {
                0 => 0,
                1 => u64::MAX,
                _ => next(),
            };
            let n = (next() % (2 * capacity)) as usize;
            let items: Vec<Vec<u8>> = (0..n)
                .map(|_| {
                    let len = (next() % 40) as usize;
                    (0..len).map(|_| next() as u8).collect()
                })
                .collect();
            let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
            let opts = Options {
                mode: 0o600,
                seed,
                layout: None,
                window: None,
                size: None,
                grow: None,
            };

            let f = Filter::new_anonymous(capacity, rate, opts).unwrap();
            f.add_many(&refs, None).unwrap();
            let bytes = f.serialize().unwrap();
            assert_eq!(bytes.len() as u64, serial::serialized_len(f.geometry().m));

            let d = Filter::deserialize(&bytes, None, 0o600).unwrap();
            assert_eq!(d.geometry(), f.geometry(), "round {round}");
            assert_eq!(d.seed(), seed, "round {round}");
            assert_eq!(d.bits_set(), f.bits_set(), "round {round}");
            assert_eq!(
                d.contains_many(&refs, None),
                n as u64,
                "round {round}: a false negative"
            );
            assert_eq!(d.serialize().unwrap(), bytes, "round {round}");

            let g = Filter::new_anonymous(capacity, rate, opts).unwrap();
            for item in refs.iter().rev() {
                g.add(item).unwrap();
            }
            assert_eq!(g.serialize().unwrap(), bytes, "round {round}: order changed the bytes");
        }
    }

    #[test]
    fn deserialized_filter_is_writable_and_independent() {
        let f = Filter::new_anonymous(
            100,
            0.01,
            Options {
                mode: 0o600,
                seed: 3,
                layout: None,
                window: None,
                size: None,
                grow: None,
            },
        )
        .unwrap();
        f.add(b"a").unwrap();
        let d = Filter::deserialize(&f.serialize().unwrap(), None, 0o600).unwrap();
        assert!(!d.add(b"a").unwrap());
        assert!(d.add(b"b").unwrap());
        assert!(!f.contains(b"b"));
        assert!(d.merge(&f).is_ok(), "same geometry and seed: compatible");
    }

    #[test]
    fn the_ceiling_is_64_times_the_input_at_least_16_mib_or_max_bytes() {
        assert_eq!(ceiling(0, None), 16 << 20);
        assert_eq!(ceiling(24, None), 16 << 20);
        assert_eq!(ceiling(256 << 10, None), 16 << 20);
        assert_eq!(ceiling((256 << 10) + 1, None), (16 << 20) + 64);
        assert_eq!(ceiling(1 << 30, None), 64 << 30);
        assert_eq!(ceiling(usize::MAX, None), u64::MAX);
        assert_eq!(ceiling(1 << 30, Some(1000)), 1000, "max_bytes caps lower");
        assert_eq!(ceiling(24, Some(1 << 40)), 1 << 40, "and allows more");
        assert!(within_ceiling(16 << 20, 24, None).is_ok());
        let e = within_ceiling((16 << 20) + 1, 24, None).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Arg);
        assert!(
            e.msg.starts_with(
                "the bytes ask for a filter of 16777217 bytes (16 MiB), more than the 16777216 bytes \
                 (16 MiB) that 24 bytes of input may ask for (64 times their length, at least 16 MiB): \
                 pass max_bytes to allow more"
            ),
            "{}",
            e.msg
        );
        let e = within_ceiling(1001, 24, Some(1000)).unwrap_err();
        assert!(
            e.msg
                .contains("more than max_bytes allows (1000 bytes); nothing was created"),
            "{}",
            e.msg
        );
    }

    /// Every kind of bytes is held to the ceiling: plain, windowed (and
    /// plain bytes made windowed, whose filter holds more arrays than the
    /// bytes), grown (every stage carried counts).
    #[test]
    fn deserialize_holds_every_kind_of_bytes_to_the_ceiling() {
        let plain = Filter::new_anonymous(100, 0.01, Options::default()).unwrap();
        let b = plain.serialize().unwrap();
        let total = plain.region.header.layout().total;
        assert!(Filter::deserialize_limited(&b, Target::Anonymous, None, None, Some(total)).is_ok());
        let e = Filter::deserialize_limited(&b, Target::Anonymous, None, None, Some(total - 1))
            .err()
            .unwrap();
        assert!(e.msg.contains(&format!("a filter of {total} bytes")), "{}", e.msg);
        let w = WindowOptions::from_secs(0.0, Some(16)).unwrap();
        let e = Filter::deserialize_limited(&b, Target::Anonymous, None, Some(w), Some(total))
            .err()
            .unwrap();
        assert!(e.msg.contains("more than max_bytes allows"), "{}", e.msg);
        let go = GrowOptions::new(2, None).unwrap();
        let g = Filter::new_anonymous(
            100,
            0.01,
            Options {
                grow: Some(go),
                ..Options::default()
            },
        )
        .unwrap();
        for i in 0..1000u32 {
            g.add(&i.to_le_bytes()).unwrap();
        }
        assert!(g.stages() > 1);
        let gb = g.serialize().unwrap();
        let e = Filter::deserialize_limited(&gb, Target::Anonymous, None, None, Some(total))
            .err()
            .unwrap();
        assert!(e.msg.contains("more than max_bytes allows"), "{}", e.msg);
        let d = Filter::deserialize_limited(&gb, Target::Anonymous, None, None, None).unwrap();
        assert_eq!(d.stages(), g.stages());
    }

    #[test]
    fn deserialize_refuses_bad_bytes_and_modes() {
        let f = Filter::new_anonymous(100, 0.01, Options::default()).unwrap();
        let b = f.serialize().unwrap();
        let e = Filter::deserialize(&b[..b.len() - 1], None, 0o600).err().unwrap();
        assert_eq!(e.kind, ErrorKind::Format);
        assert!(e.msg.starts_with("truncated input"), "{}", e.msg);
        let e = Filter::deserialize(&b, None, 0o10000).err().unwrap();
        assert_eq!(e.kind, ErrorKind::Arg);
    }
}
