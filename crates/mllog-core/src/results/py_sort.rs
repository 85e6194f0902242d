//! Python's `list.sort` (CPython 3.11) where the order it leaves matters: among figures that
//! hold a NaN, which no comparison orders, the result depends on the algorithm, and the RCP
//! checker sorts an RCP file's figures (and its records by batch size) that way before it drops
//! the fastest and slowest runs.
//!
//! A list shorter than 64 items is one run for CPython's timsort: the run it finds at the start
//! (strictly descending, then reversed, or not descending), then binary insertion of the rest,
//! every decision taken with `<` alone. Longer lists are merged by timsort's galloping, which
//! is not reproduced: without a NaN any stable sort gives Python's order, and [`py_sort_by`]
//! says when it cannot.

/// Sorts `v` as CPython's `list.sort` with the comparison `lt` (`a < b`): stable, and for lists
/// shorter than 64 the very order CPython leaves when `lt` is no total order (NaN). Returns
/// `false`, leaving `v` sorted by `total` instead, when the list is longer and `lt` does not
/// order every pair.
pub(crate) fn py_sort_by<T>(
    v: &mut [T],
    lt: impl Fn(&T, &T) -> bool,
    total: impl Fn(&T, &T) -> std::cmp::Ordering,
) -> bool {
    if v.len() >= 64 {
        let ordered = v.iter().all(|a| {
            v.iter()
                .all(|b| lt(a, b) || lt(b, a) || total(a, b).is_eq())
        });
        v.sort_by(total);
        return ordered;
    }
    let n = v.len();
    if n < 2 {
        return true;
    }
    // count_run
    let mut run = 2;
    if lt(&v[1], &v[0]) {
        while run < n && lt(&v[run], &v[run - 1]) {
            run += 1;
        }
        v[..run].reverse();
    } else {
        while run < n && !lt(&v[run], &v[run - 1]) {
            run += 1;
        }
    }
    // binarysort
    for start in run..n {
        let (mut l, mut r) = (0, start);
        while l < r {
            let p = l + ((r - l) >> 1);
            if lt(&v[start], &v[p]) {
                r = p;
            } else {
                l = p + 1;
            }
        }
        v[l..=start].rotate_right(1);
    }
    true
}

/// [`py_sort_by`] of figures with `<`.
pub(crate) fn py_sort_f64(v: &mut [f64]) -> bool {
    py_sort_by(v, |a, b| a < b, |a, b| a.total_cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_nan_it_is_a_stable_sort() {
        let mut v = vec![(3, 'a'), (1, 'b'), (3, 'c'), (2, 'd'), (1, 'e')];
        assert!(py_sort_by(&mut v, |a, b| a.0 < b.0, |a, b| a.0.cmp(&b.0)));
        assert_eq!(v, [(1, 'b'), (1, 'e'), (2, 'd'), (3, 'a'), (3, 'c')]);
        let mut d = vec![5.0, 4.0, 3.0, 9.0, 1.0];
        py_sort_f64(&mut d);
        assert_eq!(d, [1.0, 3.0, 4.0, 5.0, 9.0]);
    }

    #[test]
    fn nan_stays_where_cpython_leaves_it() {
        // Each list with `sorted(list)` as CPython 3.11 gives it.
        let nan = f64::NAN;
        let cases: [(&[f64], &str); 4] = [
            (&[3.0, nan, 1.0, 2.0], "[3.0, NaN, 1.0, 2.0]"),
            (&[nan, 3.0, 1.0, 2.0], "[NaN, 1.0, 2.0, 3.0]"),
            (
                &[5.0, 4.0, nan, 3.0, 2.0, 1.0, 0.5],
                "[0.5, 1.0, 2.0, 3.0, 4.0, 5.0, NaN]",
            ),
            (
                &[2.0, 1.0, nan, 7.0, 0.0, nan, 3.0, -1.0],
                "[-1.0, 1.0, 2.0, NaN, 0.0, 7.0, NaN, 3.0]",
            ),
        ];
        for (list, sorted) in cases {
            let mut v = list.to_vec();
            assert!(py_sort_f64(&mut v));
            assert_eq!(format!("{v:?}"), sorted);
        }
    }

    #[test]
    fn a_long_list_with_nan_is_said() {
        let mut v: Vec<f64> = (0..70).map(f64::from).collect();
        assert!(py_sort_f64(&mut v.clone()));
        v[3] = f64::NAN;
        assert!(!py_sort_f64(&mut v));
    }
}
