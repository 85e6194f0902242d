//! `f32` to the `f64` of its shortest decimal spelling, cheaply enough for the hot path.
//!
//! `0.1f32 as f64` is `0.10000000149011612`; what the user wrote, and what Rust prints for the
//! `f32`, is `0.1`. A log must carry the latter, so an `f32` becomes the `f64` nearest to the
//! shortest decimal that reads back as the same `f32` (the closest such decimal when several
//! have that length): exactly `format!("{v}").parse::<f64>()`, without formatting or parsing.
//!
//! The search is exact integer arithmetic in `u128`: for a decimal exponent `k`, the integers
//! `n` next to `v / 10^k` are tested against the interval of reals that round to `v`; the
//! largest `k` that has one gives the shortest spelling (binary search: a `k` that works means
//! every smaller one works too). The result is `n * 10^k` rounded once, which `f64`
//! arithmetic does exactly when `n < 2^53` and `|k| <= 22`. Values whose arithmetic would
//! not fit (below about `1e-21` or above about `1e22` with few digits) take the slow,
//! obviously right path: format and parse, on the stack.

/// The `f64` of `v`'s shortest round-trip decimal; NaN, infinities and zeros widen as they are.
/// An exact tie between two shortest decimals goes to the even one, as numpy's
/// `str(float32)` does (Rust's `Display` rounds such a tie up: `2^-12` is `0.00024414063`
/// there and `0.00024414062` here and in numpy).
pub fn f32_shortest(v: f32) -> f64 {
    if !v.is_finite() || v == 0.0 {
        return v as f64;
    }
    match fast(v.abs()) {
        Some(f) => f.copysign(v as f64),
        None => slow(v),
    }
}

static POW10_F64: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

fn pow10(e: u32) -> Option<u128> {
    10u128.checked_pow(e)
}

/// The rational bounds of the search for one `f32`, all as `c * 2^t` with integer `c`.
struct Bounds {
    /// `4m`: the value itself.
    x: u128,
    /// `4m - 2` (or `4m - 1` at a power of two, where the gap below is half the gap above).
    lo: u128,
    /// `4m + 2`.
    hi: u128,
    t: i32,
    /// Whether the bounds themselves round to the value (ties to even: `m` even).
    inclusive: bool,
}

impl Bounds {
    /// The integer `n` with `n * 10^k` closest to the value among those inside the interval
    /// (`None`: no such `n`, or the arithmetic would not fit).
    fn digits_at(&self, k: i32) -> Option<Option<u128>> {
        if (-11..=0).contains(&k) && (-59..0).contains(&self.t) {
            return Some(self.digits_at_word(k));
        }
        if (-19..=0).contains(&k) && (-99..0).contains(&self.t) {
            return Some(self.digits_at_small(k));
        }
        // Compare `n * 10^k` with `c * 2^t` as `n * den` against `c * scale`.
        let (up, down) = (self.t.max(0) as u32, (-self.t).max(0) as u32);
        if up >= 127 || down >= 127 {
            return None;
        }
        let scale = pow10(k.min(0).unsigned_abs())?.checked_mul(1u128 << up)?;
        let den = pow10(k.max(0) as u32)?.checked_mul(1u128 << down)?;
        let num = |c: u128| c.checked_mul(scale);
        let (x, lo, hi) = (num(self.x)?, num(self.lo)?, num(self.hi)?);
        let below = x / den;
        let inside = |n: u128| -> Option<bool> {
            let d = n.checked_mul(den)?;
            Some(if self.inclusive {
                lo <= d && d <= hi
            } else {
                lo < d && d < hi
            })
        };
        let (a, b) = (inside(below)?, inside(below + 1)?);
        let twice = x.checked_mul(2)?;
        let mid = (2 * below + 1).checked_mul(den)?;
        Some(pick(below, a, b, twice, mid))
    }

    /// [`Bounds::digits_at`] for the common case (values below 2^26 and digits down to
    /// `10^-19`): `den` is a power of two and `10^-k` fits a `u64`, so there is no division and
    /// no product can overflow (`2^26 * 10^19 < 2^90`, and `n * 2^-t` is about `x * 10^-k`).
    #[inline]
    fn digits_at_small(&self, k: i32) -> Option<u128> {
        let scale = u128::from(POW10_U64[k.unsigned_abs() as usize]);
        let shift = (-self.t) as u32;
        let (x, lo, hi) = (self.x * scale, self.lo * scale, self.hi * scale);
        let below = x >> shift;
        let inside = |n: u128| {
            let d = n << shift;
            if self.inclusive {
                lo <= d && d <= hi
            } else {
                lo < d && d < hi
            }
        };
        let (a, b) = (inside(below), inside(below + 1));
        pick(below, a, b, x << 1, (2 * below + 1) << shift)
    }
}

impl Bounds {
    /// [`Bounds::digits_at_small`] in one machine word, for values from about `2^-38` and
    /// digits down to `10^-11`: `2^26 * 10^11 < 2^63`, and with shifts below 60 neither
    /// `n << shift` nor `(2n + 1) << shift` passes `2^64`.
    #[inline]
    fn digits_at_word(&self, k: i32) -> Option<u128> {
        let scale = POW10_U64[k.unsigned_abs() as usize];
        let shift = (-self.t) as u32;
        let (x, lo, hi) = (
            self.x as u64 * scale,
            self.lo as u64 * scale,
            self.hi as u64 * scale,
        );
        let below = x >> shift;
        let inside = |n: u64| {
            let d = n << shift;
            if self.inclusive {
                lo <= d && d <= hi
            } else {
                lo < d && d < hi
            }
        };
        let (a, b) = (inside(below), inside(below + 1));
        // `2x < 2^64` and `(2 * below + 1) << shift` is about the same.
        pick_word(below, a, b, x << 1, (2 * below + 1) << shift)
    }
}

/// [`pick`] in one machine word.
#[inline]
fn pick_word(below: u64, a: bool, b: bool, twice: u64, mid: u64) -> Option<u128> {
    let n = match (a, b) {
        (false, false) => return None,
        (true, false) => below,
        (false, true) => below + 1,
        (true, true) if twice < mid || (twice == mid && below.is_multiple_of(2)) => below,
        (true, true) => below + 1,
    };
    Some(n.into())
}

/// Of `below` and `below + 1`, the one inside the interval; the closer one to the value when
/// both are (`twice`: twice the scaled value; `mid`: twice their midpoint), ties to even.
#[inline]
fn pick(below: u128, a: bool, b: bool, twice: u128, mid: u128) -> Option<u128> {
    match (a, b) {
        (false, false) => None,
        (true, false) => Some(below),
        (false, true) => Some(below + 1),
        (true, true) => Some(
            if twice < mid || (twice == mid && below.is_multiple_of(2)) {
                below
            } else {
                below + 1
            },
        ),
    }
}

static POW10_U64: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

fn fast(v: f32) -> Option<f64> {
    let bits = v.to_bits();
    let biased = (bits >> 23) as i32;
    let frac = bits & 0x7f_ffff;
    let (m, q) = if biased == 0 {
        (frac, -149)
    } else {
        (frac | 0x80_0000, biased - 150)
    };
    let m = u128::from(m);
    let interval = Bounds {
        x: 4 * m,
        lo: if frac == 0 && biased > 1 {
            4 * m - 1
        } else {
            4 * m - 2
        },
        hi: 4 * m + 2,
        t: q - 2,
        inclusive: m.is_multiple_of(2),
    };
    // floor(log2 v), then floor(log10 v) within one: the exact one is `e` or `e + 1`.
    let log2 = 127 - m.leading_zeros() as i32 + q;
    let e = (log2 * 78_913) >> 18;
    // At `k = e - 8` there are at least nine significant digits, which always suffice; at
    // `k = e + 1` at most one. Short spellings (the values people configure) are tried first.
    let (mut lo, mut hi) = (e - 8, e + 1);
    let mut found = None;
    for k in [e + 1, e] {
        if let Some(n) = interval.digits_at(k)? {
            found = Some((k, n));
            break;
        }
        hi = k - 1;
    }
    if found.is_none() {
        while lo < hi {
            let mid = (lo + hi + 1) / 2;
            match interval.digits_at(mid)? {
                Some(n) => {
                    lo = mid;
                    found = Some((mid, n));
                }
                None => hi = mid - 1,
            }
        }
    }
    let (lo, n) = match found {
        Some(f) => f,
        None => (lo, interval.digits_at(lo)??),
    };
    if n >= 1 << 53 || lo.unsigned_abs() > 22 {
        return None;
    }
    let p = POW10_F64[lo.unsigned_abs() as usize];
    // `n < 2^53`: exact as an `f64`, and from a `u64` one instruction.
    let n = n as u64 as f64;
    Some(if lo >= 0 { n * p } else { n / p })
}

/// Rust's own shortest spelling, parsed back; no allocation.
#[cold]
fn slow(v: f32) -> f64 {
    use std::fmt::Write;
    struct Buf {
        bytes: [u8; 48],
        len: usize,
    }
    impl Write for Buf {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            let end = self.len + s.len();
            let slot = self.bytes.get_mut(self.len..end).ok_or(std::fmt::Error)?;
            slot.copy_from_slice(s.as_bytes());
            self.len = end;
            Ok(())
        }
    }
    let mut buf = Buf {
        bytes: [0; 48],
        len: 0,
    };
    // `{:e}` keeps it short (`1e-40`, not forty zeros); the digits are the shortest ones.
    if write!(buf, "{v:e}").is_err() {
        return v as f64;
    }
    std::str::from_utf8(&buf.bytes[..buf.len])
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(v as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(v: f32) -> f64 {
        format!("{v}").parse().unwrap()
    }

    /// The significant digits of a shortest spelling.
    fn digits(f: f64) -> String {
        let s = format!("{f:e}");
        let mantissa = s.split('e').next().unwrap();
        mantissa.chars().filter(char::is_ascii_digit).collect()
    }

    fn check(v: f32) {
        let got = f32_shortest(v);
        let want = reference(v);
        if got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()) {
            return;
        }
        // An exact tie between two shortest spellings: Rust rounds it up, we to even, as
        // Python's float repr and numpy's `str(float32)` do. `v` is then exactly the midpoint:
        // its full expansion has one more digit, a 5.
        let (g, w, exact) = (digits(got), digits(want), digits(v as f64));
        assert!(
            g.len() == w.len()
                && exact.len() == g.len() + 1
                && exact.ends_with('5')
                && (g.as_bytes()[g.len() - 1] - b'0').is_multiple_of(2)
                && got as f32 == v,
            "{v:e} ({:#010x}): got {got:e}, want {want:e}",
            v.to_bits()
        );
    }

    #[test]
    fn common_values() {
        for (v, want) in [
            (0.1f32, 0.1f64),
            (0.9, 0.9),
            (1e-4, 1e-4),
            (2.5e-5, 2.5e-5),
            (0.0005, 0.0005),
            (1.0, 1.0),
            (16.0, 16.0),
            (0.9243, 0.9243),
            (1e-8, 1e-8),
            (3.4028235e38, 3.4028235e38),
            (1e-45, 1e-45),
            (-0.1, -0.1),
            (16777216.0, 16777216.0),
            (16777218.0, 16777218.0),
        ] {
            assert_eq!(f32_shortest(v).to_bits(), want.to_bits(), "{v:e}");
        }
        assert!(f32_shortest(f32::NAN).is_nan());
        assert_eq!(f32_shortest(f32::INFINITY), f64::INFINITY);
        assert_eq!(f32_shortest(-0.0).to_bits(), (-0.0f64).to_bits());
    }

    /// Against `format!` + `parse` over every exponent: powers of two and their neighbours
    /// (where the interval is lopsided), and a pseudo-random sample of all bit patterns.
    #[test]
    fn matches_format_and_parse() {
        for biased in 0..255u32 {
            for frac in [0, 1, 2, 3, 0x40_0000, 0x7f_fffe, 0x7f_ffff] {
                check(f32::from_bits(biased << 23 | frac));
            }
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..400_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = f32::from_bits(x as u32);
            if v.is_finite() {
                check(v);
            }
        }
        // Short decimals, the values people log.
        for n in 1..20_000u32 {
            for e in [-12, -8, -5, -4, -3, -2, -1, 0, 3, 9] {
                check((n as f64 * 10f64.powi(e)) as f32);
            }
        }
    }
}
